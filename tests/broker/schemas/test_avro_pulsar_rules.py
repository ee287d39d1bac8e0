"""Strata's Avro verdicts against the ones derived by hand from Avro Java 1.11 (what Pulsar ships),
case by case: `Resolver.resolve(writer, reader)` (after `Schema.applyAliases`), turned into a
grammar by `ResolvingGrammarGenerator`, refused when `Symbol.hasErrors` finds an error symbol. That
is what Pulsar's `ValidateCanRead`/`ValidateCanBeRead`/`ValidateMutualRead` call for AVRO and JSON.

Each row: (writer, reader, can the reader read the writer's data, the Avro rule it comes from).
Where Avro's other checker, `SchemaCompatibility`, would answer otherwise, the rule says so
("SC: ..."): record names, enum symbols and union branch choice are where the two part.

The same rows then go through `compatibility.check_new`: BACKWARD (the new schema is the reader)
and FORWARD (the new schema is the writer) accept exactly when the row says the reader reads; the
rename case is also checked under FULL, the default, and its transitive forms.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulsar.schema import Integer, Record, String

from broker.schemas import avro, compatibility
from broker.schemas.compatibility import Strategy
from common.errors import IncompatibleSchema
from common.schema_records import SchemaData, StoredSchema


def rec(name: str, *fields: tuple[Any, ...], **extra: Any) -> dict:
    """A record; a field is (name, type) or (name, type, {more keys: default, aliases})."""
    out = [{"name": f[0], "type": f[1], **(f[2] if len(f) > 2 else {})} for f in fields]
    return {"type": "record", "name": name, "fields": out, **extra}


def enum(name: str, *symbols: str, **extra: Any) -> dict:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(name: str, size: int, **extra: Any) -> dict:
    return {"type": "fixed", "name": name, "size": size, **extra}


def arr(items: Any) -> dict:
    return {"type": "array", "items": items}


def amap(values: Any) -> dict:
    return {"type": "map", "values": values}


def client_record(**fields: Any) -> dict:
    """The Avro schema Pulsar's Python client sends for a `Record` class named User."""
    cls: Any = type("User", (Record,), fields)
    return dict(cls.schema())


# Pulsar's Python client: `required_default=True` is a nullable field with default null
USER = client_record(name=String(), age=Integer())
USER_EMAIL_DEFAULT = client_record(name=String(), age=Integer(), email=String(required_default=True))
USER_EMAIL_REQUIRED = client_record(name=String(), age=Integer(), email=String(required=True))
NODE = rec("Node", ("v", "int"), ("next", ["null", "Node"]))
NODE2_WIDER = rec("Node2", ("v", "long"), ("next", ["null", "Node2"]))

Y, N = True, False
ROWS: list[tuple[Any, Any, bool, str]] = [
    # primitives and promotions: Resolver.Promote.isValid
    ("int", "int", Y, "same primitive: DoNothing"),
    ("int", "long", Y, "promotion int -> long"),
    ("int", "float", Y, "promotion int -> float"),
    ("int", "double", Y, "promotion int -> double"),
    ("long", "float", Y, "promotion long -> float"),
    ("long", "double", Y, "promotion long -> double"),
    ("float", "double", Y, "promotion float -> double"),
    ("string", "bytes", Y, "promotion string -> bytes"),
    ("bytes", "string", Y, "promotion bytes -> string"),
    ("long", "int", N, "no demotion: Promote invalid -> ErrorAction"),
    ("double", "float", N, "no demotion: Promote invalid"),
    ("float", "long", N, "float does not promote to long"),
    ("string", "int", N, "different primitives: INCOMPATIBLE_SCHEMA_TYPES"),
    ("int", "null", N, "null reads only null"),
    ("int", "boolean", N, "boolean reads only boolean"),
    ({"type": "int", "logicalType": "date"}, "long", Y, "logical types ignored: int -> long"),
    ({"type": "long", "logicalType": "timestamp-millis"}, "int", N, "logical types ignored: long -/-> int"),
    # records: RecordAdjust never compares record names
    (rec("A", ("x", "int")), rec("B", ("x", "int")), Y, "record renamed: names not compared (SC: refused)"),
    (rec("A", ("x", "int"), namespace="one"), rec("B", ("x", "int"), namespace="two"), Y,
     "record renamed across namespaces: names not compared"),
    (rec("A", ("x", "int")), rec("A", ("x", "int"), ("y", "int", {"default": 0})), Y,
     "reader field the writer lacks, with a default"),
    (rec("A", ("x", "int")), rec("A", ("x", "int"), ("y", "int")), N,
     "reader field the writer lacks, no default: MISSING_REQUIRED_FIELD"),
    (rec("A", ("x", "int"), ("y", "int")), rec("A", ("x", "int")), Y, "writer field the reader lacks: Skip"),
    (rec("A", ("x", "int"), ("y", "string")), rec("A", ("y", "string"), ("x", "long")), Y,
     "fields matched by name, order free"),
    (rec("A", ("x", "int")), rec("A", ("x", "string")), N, "a field's type does not resolve"),
    (rec("A", ("x", "int")), rec("A", ("x", "int"), ("y", ["null", "int"], {"default": None})), Y,
     "a default of null is a default"),
    (USER, USER_EMAIL_DEFAULT, Y, "Python client required_default=True: nullable with default null"),
    (USER, USER_EMAIL_REQUIRED, N, "Python client required=True: no default, writer lacks it"),
    (USER_EMAIL_REQUIRED, USER, Y, "the writer's extra field is skipped"),
    (rec("A", ("in", rec("I", ("v", "int")))), rec("B", ("in", rec("J", ("v", "long")))), Y,
     "nested records renamed: names not compared, int -> long inside"),
    (rec("A", ("in", rec("I", ("v", "long")))), rec("A", ("in", rec("I", ("v", "int")))), N,
     "nested record field does not resolve"),
    (rec("A", ("in", rec("I", ("v", "int")))), rec("A", ("in", rec("I", ("v", "int"), ("w", "int")))), N,
     "nested record lacks a required field"),
    (rec("A", ("x", "int")), {"type": "error", "name": "A", "fields": [{"name": "x", "type": "int"}]}, Y,
     "error is a record type"),
    # aliases: Schema.applyAliases renames the writer by the reader's aliases
    (rec("A", ("a", "int")), rec("A", ("b", "int", {"aliases": ["a"]})), Y, "field alias, same record name"),
    (rec("A", ("a", "int")), rec("B", ("b", "int", {"aliases": ["a"]})), N,
     "field alias ignored when the record is renamed without a record alias (aliases keyed by record name)"),
    (rec("A", ("a", "int")), rec("B", ("b", "int", {"aliases": ["a"]}), aliases=["A"]), Y,
     "record alias then field alias"),
    (rec("A", ("a", "int"), namespace="ns"), rec("B", ("b", "int", {"aliases": ["a"]}), namespace="ns", aliases=["A"]),
     Y, "an alias without a dot is in the type's namespace"),
    (rec("A", ("a", "int"), namespace="one"),
     rec("B", ("b", "int", {"aliases": ["a"]}), namespace="two", aliases=["A"]),
     N, "so the same alias from another namespace misses"),
    # enums: EnumAdjust compares short names; symbols are never an error symbol
    (enum("E", "A"), enum("E", "A", "B"), Y, "reader enum with more symbols"),
    (enum("E", "A", "B"), enum("E", "A"), Y,
     "writer symbol missing in reader: an explicit enum action, not an error symbol (SC: refused)"),
    (enum("E", "A", "B"), enum("E", "A", default="A"), Y, "writer symbol missing, reader default"),
    (enum("E", "A"), enum("F", "A"), N, "enum renamed: NAMES_DONT_MATCH"),
    (enum("E", "A", namespace="one"), enum("E", "A", namespace="two"), Y, "enum: short names compared"),
    (enum("E", "A"), enum("F", "A", aliases=["E"]), Y, "enum renamed with a reader alias"),
    # fixed: short name and size
    (fixed("F", 4), fixed("F", 4), Y, "fixed: same name and size"),
    (fixed("F", 8), fixed("F", 4), N, "fixed: SIZES_DONT_MATCH"),
    (fixed("F", 4), fixed("G", 4), N, "fixed renamed: NAMES_DONT_MATCH"),
    (fixed("F", 4, namespace="one"), fixed("F", 4, namespace="two"), Y, "fixed: short names compared"),
    (fixed("F", 4), fixed("G", 4, aliases=["F"]), Y, "fixed renamed with a reader alias"),
    (fixed("F", 4), "bytes", N, "fixed does not promote to bytes"),
    # arrays and maps: Container by items / values
    (arr("int"), arr("long"), Y, "array items int -> long"),
    (arr("long"), arr("int"), N, "array items long -/-> int"),
    (amap("int"), amap("long"), Y, "map values int -> long"),
    (amap("long"), amap("int"), N, "map values long -/-> int"),
    (arr("int"), amap("int"), N, "array is not a map"),
    (amap(rec("A", ("x", "int"))), amap(rec("B", ("x", "long"))), Y, "map of renamed records"),
    # unions, writer side: WriterUnion resolves every branch against the reader
    (["null", "int"], ["null", "long"], Y, "writer union: every branch resolves"),
    (["null", "int", "string"], ["null", "int"], N, "writer union: the string branch has no reader branch"),
    (["null", "int"], "int", N, "writer union: the null branch does not resolve into int"),
    (["int"], "int", Y, "singleton writer union"),
    (["int", "string"], ["string", "int"], Y, "branches matched by type, not position"),
    (["null", enum("E", "A", "B", namespace="one")], ["null", enum("E", "A", "B", namespace="two")], Y,
     "equivalent unions (short names, same symbols): unionEquiv, no branch choice"),
    (["null", enum("E", "A", "B", namespace="one")], ["null", enum("E", "A", "B", "C", namespace="two")], N,
     "not equivalent: an enum branch is chosen by full name only, none matches (SC: compatible)"),
    # unions, reader side: ReaderUnion.firstMatchingBranch
    ("int", ["null", "int"], Y, "reader union: same type branch"),
    ("int", ["null", "string"], N, "reader union: no branch: NO_MATCHING_BRANCH"),
    ("int", ["null", "long"], Y, "reader union: promotion branch"),
    ("string", ["null", "bytes"], Y, "reader union: string -> bytes branch"),
    (rec("A", ("x", "int")), ["null", rec("B", ("x", "int"))], Y,
     "reader union: record chosen by structure, names not needed"),
    (rec("A", ("x", "int")), ["null", rec("B", ("y", "int"))], N,
     "reader union: no record matches structurally (missing required field)"),
    (rec("A", ("x", "int")), [rec("B", ("x", "string")), rec("A", ("x", "long"))], Y,
     "reader union: the branch with the writer's full name wins"),
    (rec("A", ("x", "int")), [rec("A", ("x", "string")), rec("B", ("x", "long"))], N,
     "reader union: full-name match taken at once even if it cannot read (SC: compatible via B)"),
    (rec("A", ("x", arr("int"))), [rec("B", ("x", arr("string"))), rec("C", ("x", arr("long")))], N,
     "reader union: first shallow structural match, errors inside arrays not looked at (SC: compatible via C)"),
    (rec("A", ("x", arr("int")), namespace="one"),
     [rec("C", ("x", arr("long")), namespace="two"), rec("A", ("x", arr("string")), namespace="two")], N,
     "reader union: among structural matches the writer's short name is preferred"),
    (rec("A", ("x", "int"), namespace="one"),
     [rec("C", ("x", "long"), namespace="two"), rec("A", ("x", "string"), namespace="two")], Y,
     "reader union: a branch whose field fails at once is no structural match"),
    (enum("E", "A", namespace="one"), ["null", enum("E", "A", namespace="two")], N,
     "reader union: an enum branch needs the writer's full name"),
    (arr("int"), [arr("string"), arr("int")], N, "reader union: the first array branch is taken, whatever its items"),
    # recursion
    (NODE, NODE, Y, "recursive record reads itself"),
    (NODE, NODE2_WIDER, Y, "recursive record renamed and widened"),
    (NODE2_WIDER, NODE, N, "recursive record narrowed: long -/-> int"),
]


def p(schema: Any) -> avro.Parsed:
    return avro.parse(json.dumps(schema).encode())


@pytest.mark.parametrize(("writer", "reader", "reads", "rule"), ROWS, ids=[r[3] for r in ROWS])
def test_can_read_as_avro_java(writer: Any, reader: Any, reads: bool, rule: str) -> None:
    problem = avro.read_problem(reader=p(reader), writer=p(writer))
    assert (problem is None) is reads, problem


def _accepted(history: list[Any], new: Any, strategy: Strategy, kind: str = "AVRO") -> bool:
    stored = [StoredSchema(i, SchemaData(kind, json.dumps(s).encode()), 0) for i, s in enumerate(history)]
    try:
        compatibility.check_new(stored, SchemaData(kind, json.dumps(new).encode()), strategy)
    except IncompatibleSchema:
        return False
    return True


@pytest.mark.parametrize(("writer", "reader", "reads", "rule"), ROWS, ids=[r[3] for r in ROWS])
def test_backward_and_forward_follow_the_row(writer: Any, reader: Any, reads: bool, rule: str) -> None:
    assert _accepted([writer], reader, Strategy.BACKWARD) is reads      # the new schema reads the old
    assert _accepted([reader], writer, Strategy.FORWARD) is reads       # the old schema reads the new


@pytest.mark.parametrize("kind", ["AVRO", "JSON"])
@pytest.mark.parametrize("strategy", [s for s in Strategy if s is not Strategy.ALWAYS_INCOMPATIBLE])
def test_a_renamed_record_is_accepted_under_every_checking_strategy(kind: str, strategy: Strategy) -> None:
    a = rec("A", ("name", ["null", "string"]), ("age", ["null", "int"]))
    b = rec("B", ("name", ["null", "string"]), ("age", ["null", "int"]))
    assert _accepted([a], b, strategy, kind)
    assert _accepted([b, a], b, strategy, kind)


def test_a_renamed_record_with_a_clashing_field_is_still_refused_under_full() -> None:
    a = rec("A", ("x", "int"))
    assert not _accepted([a], rec("B", ("x", "string")), Strategy.FULL)
    assert not _accepted([a], rec("B", ("x", "int"), ("y", "int")), Strategy.FULL)   # B cannot read A
    assert not _accepted([a], rec("B", ("x", "long")), Strategy.FULL)               # A cannot read B
    assert _accepted([a], rec("B", ("x", "long")), Strategy.BACKWARD)
