"""Avro schemas: parsing (fastavro) and "can a reader with schema R read data written with schema W",
decided as Pulsar decides it for AVRO and JSON schemas.

    parsed = parse(definition_bytes)                 # InvalidSchemaData if it is not Avro
    problem = read_problem(reader=parsed_new, writer=parsed_old)   # None: compatible

Pulsar's check (`AvroSchemaBasedCompatibilityCheck`) runs Avro Java's `SchemaValidatorBuilder`
strategies, whose `canRead` builds a `ResolvingGrammarGenerator` grammar from `Resolver.resolve(W,
R)` and refuses if the grammar holds an error symbol (Avro 1.11, which Pulsar 3.x and 4.0 ship).
That is not Avro's `SchemaCompatibility` (the schema registries' checker); the rules, R against W:
- W's named types are first renamed by R's aliases (`Schema.applyAliases`): a type of W whose full
  name is an alias of a type of R takes that type's name; a field of W takes the name of the R
  field that lists it as an alias, but only inside a record W and R name alike (after renaming);
- W a union: R reads every branch of it (none needed if the two unions are equivalent: the same
  branches with the same short names, fields, symbols and sizes);
- the same kind: primitives read; arrays and maps by their items and values; records are NOT
  compared by name: each R field found in W (by name) must read it, an R field W lacks needs a
  default, W's other fields are skipped; enums and fixed must have the same short name, fixed the
  same size; enum symbols are never checked (the grammar's enum step is an explicit action, which
  the error scan skips: a W symbol R lacks fails when a message carries it, not at the check);
- R a union (W not): one branch is chosen and must read W: the first branch of W's kind whose full
  name is W's (named kinds) or the first of W's kind (the others); for a record with no such
  name, the first branch that matches W field by field (no missing required field, no field whose
  own resolution fails at once), preferring one with W's short name; then the first branch W
  promotes to; no branch: refused. An enum or fixed branch must have W's full name;
- otherwise a promotion: int → long, float, double; long → float, double; float → double;
  string ↔ bytes. Logical types are ignored (their underlying types resolve).
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
_NAMED = ("record", "enum", "fixed")
# (reader, writer) pairs Avro promotes (Resolver.Promote.isValid)
_PROMOTIONS = {("long", "int"), ("float", "int"), ("double", "int"), ("float", "long"),
               ("double", "long"), ("double", "float"), ("string", "bytes"), ("bytes", "string")}


class Parsed:
    """A parsed schema, its named types (full name → definition) so references resolve, and its
    aliases, which rename a writer's types and fields when this schema reads."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.named: dict[str, dict] = {}
        self.aliases: dict[str, str] = {}                    # alias full name → type's full name
        self.field_aliases: dict[str, dict[str, str]] = {}   # record (or alias) → {alias: field}
        self._collect(schema)

    def _collect(self, node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                self._collect(branch)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in ("record", "error", "enum", "fixed") and "name" in node:
                self.named[node["name"]] = node
                self._collect_aliases(node)
            for f in node.get("fields", ()) if kind in ("record", "error") else ():
                self._collect(f["type"])
            if kind == "array":
                self._collect(node["items"])
            elif kind == "map":
                self._collect(node["values"])
            elif isinstance(kind, (dict, list)):
                self._collect(kind)

    def _collect_aliases(self, node: dict) -> None:
        """Java's `Schema.getAliases`: an alias without a dot is in the type's namespace."""
        own = [_qualify(a, node["name"]) for a in node.get("aliases", ())]
        for alias in own:
            self.aliases[alias] = node["name"]
        renames = {a: f["name"] for f in node.get("fields", ()) for a in f.get("aliases", ())}
        if renames:
            for name in (node["name"], *own):
                self.field_aliases.setdefault(name, {}).update(renames)

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


def _qualify(alias: str, full_name: str) -> str:
    namespace = full_name.rpartition(".")[0]
    return alias if "." in alias or not namespace else f"{namespace}.{alias}"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _kind(node: Any) -> str:
    """A resolved node's kind; "error" is a record (Java's Type.RECORD)."""
    kind = node if isinstance(node, str) else ("union" if isinstance(node, list) else node["type"])
    return "record" if kind == "error" else kind


def read_problem(reader: Parsed, writer: Parsed) -> str | None:
    """Why a reader with `reader` cannot read data written with `writer`; None if it can."""
    return _Resolution(reader, writer).problem(reader.schema, writer.schema, "")


class _Resolution:
    """One reader/writer pair, resolved as Avro Java's `Resolver` and the grammar built from it."""

    def __init__(self, reader: Parsed, writer: Parsed) -> None:
        self.reader, self.writer = reader, writer
        self.in_progress: set[tuple[str, str]] = set()   # (reader, writer) records under check

    def _name(self, w: dict) -> str:
        """A writer's named type's full name after the reader's aliases rename it."""
        return self.reader.aliases.get(w["name"], w["name"])

    def _nodes(self, r_node: Any, w_node: Any) -> tuple[Any, Any, str, str]:
        r, w = self.reader.resolve(r_node), self.writer.resolve(w_node)
        return r, w, _kind(r), _kind(w)

    def problem(self, r_node: Any, w_node: Any, where: str) -> str | None:
        """Why R cannot read W here (the first error symbol of the grammar); None if it can."""
        r, w, rk, wk = self._nodes(r_node, w_node)
        at = where or "schema"
        if wk == "union":
            if self._union_equiv(r, w, {}):
                return None
            return next((p for b in w if (p := self.problem(r, b, where)) is not None), None)
        if rk == wk:
            return self._same_kind(rk, r, w, where)
        if rk == "union":
            branch = self._branch(r, w)
            if branch is None:
                return f"{at}: no branch of the reader's union matches the writer's {self._label(w, wk)}"
            return self.problem(branch, w, where)
        if (rk, wk) in _PROMOTIONS:
            return None
        return f"{at}: the reader's {self._label(r, rk, reader=True)} cannot read the writer's {self._label(w, wk)}"

    def _label(self, node: Any, kind: str, reader: bool = False) -> str:
        if kind not in _NAMED:
            return kind
        return f"{kind} {_short(node['name'] if reader else self._name(node))!r}"

    def _same_kind(self, kind: str, r: Any, w: Any, where: str) -> str | None:
        at = where or "schema"
        if kind in PRIMITIVES:
            return None
        if kind == "array":
            return self.problem(r["items"], w["items"], where + "[]")
        if kind == "map":
            return self.problem(r["values"], w["values"], where + "{}")
        if kind == "record":
            return self._record(r, w, where)
        if _short(self._name(w)) != _short(r["name"]):
            return f"{at}: {kind} name {_short(r['name'])!r} does not match the writer's {_short(self._name(w))!r}"
        if kind == "fixed" and r["size"] != w["size"]:
            return f"{at}: fixed size {r['size']} != {w['size']}"
        return None

    def _fields(self, r: dict, w: dict) -> tuple[list[tuple[dict, dict]], list[dict]]:
        """R's fields W has, each with W's field, and R's fields W lacks (by name, after aliases)."""
        renames = self.reader.field_aliases.get(self._name(w), {})
        written = {renames.get(f["name"], f["name"]): f for f in w["fields"]}
        pairs = [(f, written[f["name"]]) for f in r["fields"] if f["name"] in written]
        return pairs, [f for f in r["fields"] if f["name"] not in written]

    def _record(self, r: dict, w: dict, where: str) -> str | None:
        pair = (r["name"], w["name"])
        if pair in self.in_progress:
            return None
        self.in_progress.add(pair)
        try:
            pairs, lacking = self._fields(r, w)
            for rf, wf in pairs:
                found = self.problem(rf["type"], wf["type"], f"{where}.{rf['name']}" if where else rf["name"])
                if found is not None:
                    return found
            required = [f["name"] for f in lacking if "default" not in f]
            if required:
                here = f"{where}.{required[0]}" if where else required[0]
                return f"{here}: a field the writer lacks, without a default"
            return None
        finally:
            self.in_progress.discard(pair)

    def _branch(self, union: list, w: Any) -> Any:
        """The reader's union branch that reads W (Resolver.ReaderUnion.firstMatchingBranch)."""
        wk = _kind(w)
        structural = None
        for node in union:
            b = self.reader.resolve(node)
            if _kind(b) != wk:
                continue
            if wk not in _NAMED or self._name(w) == b["name"]:
                return b
            if wk == "record" and not self._match_error(b, w):
                if structural is None or _short(self._name(w)) == _short(b["name"]):
                    structural = b
        if structural is not None:
            return structural
        promoted = (self.reader.resolve(n) for n in union)
        return next((b for b in promoted if (_kind(b), wk) in _PROMOTIONS), None)

    def _match_error(self, r: dict, w: dict) -> bool:
        """Does record W fail to match record R at once: a required field W lacks, or a field of
        both whose own resolution is an error before looking inside it (Resolver's hasMatchError)."""
        pair = (r["name"], w["name"])
        if pair in self.in_progress:
            return False
        self.in_progress.add(pair)
        try:
            pairs, lacking = self._fields(r, w)
            return (any("default" not in f for f in lacking)
                    or any(self._action_error(rf["type"], wf["type"]) for rf, wf in pairs))
        finally:
            self.in_progress.discard(pair)

    def _action_error(self, r_node: Any, w_node: Any) -> bool:
        """Is Resolver's action for this pair itself an ErrorAction (not one nested inside it)?"""
        r, w, rk, wk = self._nodes(r_node, w_node)
        if wk == "union":
            return False
        if rk == wk and rk in ("enum", "fixed"):
            return _short(self._name(w)) != _short(r["name"]) or (rk == "fixed" and r["size"] != w["size"])
        if rk == wk == "record":
            in_progress = (r["name"], w["name"]) in self.in_progress
            return not in_progress and any("default" not in f for f in self._fields(r, w)[1])
        if rk == wk:
            return False
        if rk == "union":
            return self._branch(r, w) is None
        return (rk, wk) not in _PROMOTIONS

    def _union_equiv(self, r: Any, w: Any, seen: dict[tuple[str, str], bool]) -> bool:
        """Resolver.unionEquiv: the same shape, short names, field names, symbols and sizes."""
        r, w = self.reader.resolve(r), self.writer.resolve(w)
        kind = _kind(w)
        if kind != _kind(r):
            return False
        if kind in _NAMED and _short(self._name(w)) != _short(r["name"]):
            return False
        if kind == "array":
            return self._union_equiv(r["items"], w["items"], seen)
        if kind == "map":
            return self._union_equiv(r["values"], w["values"], seen)
        if kind == "fixed":
            return bool(r["size"] == w["size"])
        if kind == "enum":
            return bool(r["symbols"] == w["symbols"])
        if kind == "union":
            return len(r) == len(w) and all(self._union_equiv(a, b, seen) for a, b in zip(r, w, strict=True))
        if kind == "record":
            pair = (r["name"], w["name"])
            if pair not in seen:
                seen[pair] = True                    # optimistic while its fields are compared
                renames = self.reader.field_aliases.get(self._name(w), {})
                rf, wf = r["fields"], w["fields"]
                seen[pair] = len(rf) == len(wf) and all(
                    a["name"] == renames.get(b["name"], b["name"]) and self._union_equiv(a["type"], b["type"], seen)
                    for a, b in zip(rf, wf, strict=True))
            return seen[pair]
        return True
