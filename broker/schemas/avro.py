"""Avro schemas: parsing (fastavro) and Avro's schema-resolution rules, "can a reader with schema R
read data written with schema W" (the Avro specification's "Schema Resolution"; Java Avro's
`SchemaCompatibility.checkReaderWriterCompatibility`, which Pulsar's Avro and JSON checks use).

    parsed = parse(definition_bytes)                 # InvalidSchemaData if it is not Avro
    problem = read_problem(reader=parsed_new, writer=parsed_old)   # None: compatible

Rules, reader R against writer W:
- the same primitive; or a promotion: int → long, float, double; long → float, double;
  float → double; string ↔ bytes;
- records: the same (unqualified) name or a reader alias of W's; each reader field is found in W
  (by name or alias) and reads it, or has a default; fields only W has are skipped;
- enums: the same name; every symbol of W is one of R's, unless R has a default symbol;
- fixed: the same name and size; arrays: the items; maps: the values;
- W a union: R reads every branch of it; R a union (W not): some branch of R reads W.
Recursive types end: a pair of named types already under check counts as compatible.

Pulsar's Python `JsonSchema` sends an Avro record too (`Record.schema()`), so JSON uses these rules.

fastavro is imported by the first `parse`: a broker whose topics use no Avro or JSON schema never
loads it.
"""

from __future__ import annotations

import json
from typing import Any

from common.errors import InvalidSchemaData

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_COMPLEX = ("record", "error", "enum", "fixed", "array", "map")
_PROMOTIONS = {("long", "int"), ("float", "int"), ("double", "int"), ("float", "long"),
               ("double", "long"), ("double", "float"), ("string", "bytes"), ("bytes", "string")}


class Parsed:
    """A parsed schema and its named types (full name → definition), so references resolve."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.named: dict[str, dict] = {}
        self._collect(schema)

    def _collect(self, node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                self._collect(branch)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in ("record", "error", "enum", "fixed") and "name" in node:
                self.named[node["name"]] = node
            for f in node.get("fields", ()) if kind in ("record", "error") else ():
                self._collect(f["type"])
            if kind == "array":
                self._collect(node["items"])
            elif kind == "map":
                self._collect(node["values"])
            elif isinstance(kind, (dict, list)):
                self._collect(kind)

    def resolve(self, node: Any) -> Any:
        """A node with a named reference replaced by its definition, and a primitive (logical
        types included) as its bare name: `{"type": "long", "logicalType": ...}` → "long"."""
        while isinstance(node, dict) and not isinstance(node.get("type"), str):
            node = node["type"]                      # {"type": {...}} or {"type": [...]}
        if isinstance(node, dict) and node["type"] not in _COMPLEX:
            node = node["type"]                      # a primitive or a named reference, wrapped
        return self.named.get(node, node) if isinstance(node, str) else node


def parse(definition: bytes) -> Parsed:
    """The schema of an AVRO or JSON schema definition; InvalidSchemaData if it is not Avro."""
    try:
        doc = json.loads(definition.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidSchemaData(f"Invalid schema definition: not JSON ({exc})") from None
    _check_fields(doc)
    import fastavro
    from fastavro.schema import SchemaParseException, UnknownType
    try:
        parsed = fastavro.parse_schema(doc, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchemaData(f"Invalid schema definition: not an Avro schema ({exc})") from None
    return Parsed(parsed)


def _check_fields(node: Any) -> None:
    """What fastavro lets pass but Avro refuses: a record without a `fields` list, or a field
    without a name or type."""
    if isinstance(node, list):
        for branch in node:
            _check_fields(branch)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") in ("record", "error"):
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise InvalidSchemaData(f"Invalid schema definition: record {node.get('name')!r} has no fields list")
        for f in fields:
            if not isinstance(f, dict) or "name" not in f or "type" not in f:
                raise InvalidSchemaData(f"Invalid schema definition: a field of {node.get('name')!r} "
                                        "lacks a name or a type")
            _check_fields(f["type"])
    for key in ("type", "items", "values"):
        if isinstance(node.get(key), (dict, list)):
            _check_fields(node[key])


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _kind(node: Any) -> str:
    return node if isinstance(node, str) else ("union" if isinstance(node, list) else node["type"])


def read_problem(reader: Parsed, writer: Parsed) -> str | None:
    """Why a reader with `reader` cannot read data written with `writer`; None if it can."""
    return _Check(reader, writer).problem(reader.schema, writer.schema, "")


class _Check:
    def __init__(self, reader: Parsed, writer: Parsed) -> None:
        self.reader, self.writer = reader, writer
        self.in_progress: set[tuple[str, str]] = set()   # named pairs being checked (recursion)

    def problem(self, r_node: Any, w_node: Any, where: str) -> str | None:
        r, w = self.reader.resolve(r_node), self.writer.resolve(w_node)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            for branch in w:
                found = self.problem(r, branch, where)
                if found is not None:
                    return found
            return None
        if rk == "union":
            if any(self.problem(branch, w, where) is None for branch in r):
                return None
            return f"{where or 'schema'}: no branch of the reader's union reads the writer's {wk}"
        if rk in PRIMITIVES or wk in PRIMITIVES:
            if rk == wk or (rk, wk) in _PROMOTIONS:
                return None
            return f"{where or 'schema'}: the reader's {rk} cannot read the writer's {wk}"
        if rk != wk and not ({rk, wk} <= {"record", "error"}):
            return f"{where or 'schema'}: the reader's {rk} cannot read the writer's {wk}"
        return self._complex(rk, r, w, where)

    def _complex(self, kind: str, r: dict, w: dict, where: str) -> str | None:
        if kind == "array":
            return self.problem(r["items"], w["items"], where + "[]")
        if kind == "map":
            return self.problem(r["values"], w["values"], where + "{}")
        aliases = {_short(a) for a in r.get("aliases", ())}
        if _short(r["name"]) != _short(w["name"]) and _short(w["name"]) not in aliases:
            return f"{where or 'schema'}: name {_short(r['name'])!r} does not match the writer's {_short(w['name'])!r}"
        if kind == "fixed":
            return None if r["size"] == w["size"] else f"{where or 'schema'}: fixed size {r['size']} != {w['size']}"
        if kind == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                return f"{where or 'schema'}: the reader's enum lacks the writer's symbols {missing}"
            return None
        pair = (r["name"], w["name"])
        if pair in self.in_progress:
            return None
        self.in_progress.add(pair)
        try:
            return self._record(r, w, where)
        finally:
            self.in_progress.discard(pair)

    def _record(self, r: dict, w: dict, where: str) -> str | None:
        written = {f["name"]: f for f in w["fields"]}
        for f in r["fields"]:
            names = [f["name"], *f.get("aliases", ())]
            source = next((written[n] for n in names if n in written), None)
            here = f"{where}.{f['name']}" if where else f["name"]
            if source is None:
                if "default" not in f:
                    return f"{here}: a field the writer lacks, without a default"
                continue
            found = self.problem(f["type"], source["type"], here)
            if found is not None:
                return found
        return None
