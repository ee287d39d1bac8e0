"""Every compatibility strategy's accept/refuse table over Avro schema pairs, Avro's resolution
rules (case by case in test_avro_pulsar_rules.py), KeyValue / primitive / Protobuf-native handling,
and malformed input.

The evolution steps used in the table, from V1 = User{name: string, age: int}:
- ADD_DEFAULT: a new field with a default  → both directions read: every strategy but
  ALWAYS_INCOMPATIBLE accepts it;
- ADD_REQUIRED: a new field without default → the new schema cannot read old data (BACKWARD
  refuses), the old one can read new data (FORWARD accepts);
- REMOVE_REQUIRED: drop `age` (no default) → BACKWARD accepts, FORWARD refuses;
- TYPE_CHANGE: `age` int → string        → every direction refuses.
The transitive forms are told apart by a history in which only the older version conflicts.
"""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2

from broker.schemas import avro, compatibility, validation
from broker.schemas.compatibility import Strategy
from common.errors import IncompatibleSchema, InvalidSchemaData, UnknownSchemaType
from common.schema_records import SchemaData, StoredSchema


def record(*fields: dict, name: str = "User") -> SchemaData:
    return SchemaData("AVRO", json.dumps({"type": "record", "name": name, "fields": list(fields)}).encode())


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
V1 = record(NAME, AGE)
ADD_DEFAULT = record(NAME, AGE, {"name": "email", "type": "string", "default": ""})
ADD_REQUIRED = record(NAME, AGE, {"name": "email", "type": "string"})
REMOVE_REQUIRED = record(NAME)
TYPE_CHANGE = record(NAME, {"name": "age", "type": "string"})

A, R = True, False     # accepted, refused
TABLE = {   # strategy: (ADD_DEFAULT, ADD_REQUIRED, REMOVE_REQUIRED, TYPE_CHANGE)
    Strategy.ALWAYS_COMPATIBLE: (A, A, A, A),
    Strategy.ALWAYS_INCOMPATIBLE: (R, R, R, R),
    Strategy.BACKWARD: (A, R, A, R),
    Strategy.FORWARD: (A, A, R, R),
    Strategy.FULL: (A, R, R, R),
    Strategy.BACKWARD_TRANSITIVE: (A, R, A, R),
    Strategy.FORWARD_TRANSITIVE: (A, A, R, R),
    Strategy.FULL_TRANSITIVE: (A, R, R, R),
}


def stored(*schemas: SchemaData) -> list[StoredSchema]:
    return [StoredSchema(i, s, 0) for i, s in enumerate(schemas)]


def accepted(history: list[StoredSchema], new: SchemaData, strategy: Strategy) -> bool:
    try:
        compatibility.check_new(history, new, strategy)
    except IncompatibleSchema:
        return False
    return True


@pytest.mark.parametrize("strategy", list(Strategy))
def test_each_strategy_accepts_and_refuses_as_pulsar(strategy: Strategy) -> None:
    steps = (ADD_DEFAULT, ADD_REQUIRED, REMOVE_REQUIRED, TYPE_CHANGE)
    got = tuple(accepted(stored(V1), new, strategy) for new in steps)
    assert got == TABLE[strategy]


@pytest.mark.parametrize("strategy", list(Strategy))
def test_an_identical_schema_is_always_accepted_and_a_first_schema_too(strategy: Strategy) -> None:
    assert accepted(stored(V1), V1, strategy) or strategy is Strategy.ALWAYS_INCOMPATIBLE
    assert accepted([], TYPE_CHANGE, strategy)


@pytest.mark.parametrize("strategy", [s for s in Strategy if s.value.startswith(("BACKWARD", "FORWARD", "FULL"))])
def test_transitive_forms_check_every_version_not_only_the_latest(strategy: Strategy) -> None:
    # v0 age:int, v1 without age (default-less removal), new: age:string with a default.
    # Against v1 alone the new schema is fine both ways; against v0 the types clash.
    v0 = record(NAME, AGE)
    v1 = record(NAME)
    new = record(NAME, {"name": "age", "type": "string", "default": "?"})
    assert accepted(stored(v0, v1), new, strategy) is not strategy.transitive


def test_a_changed_type_is_refused_unless_always_compatible() -> None:
    json_v1 = SchemaData("JSON", V1.data)
    for strategy in Strategy:
        assert accepted(stored(V1), json_v1, strategy) is (strategy is Strategy.ALWAYS_COMPATIBLE)
    with pytest.raises(IncompatibleSchema, match="exists schema type AVRO, new schema type JSON"):
        compatibility.check_new(stored(V1), json_v1, Strategy.FULL)


def test_primitives_are_compatible_with_themselves_only() -> None:
    string, other = SchemaData("STRING", b""), SchemaData("STRING", b"", {"k": "v"})
    assert accepted(stored(string), other, Strategy.FULL)
    assert not accepted(stored(string), SchemaData("INT64", b""), Strategy.FULL)
    assert not accepted(stored(string), other, Strategy.ALWAYS_INCOMPATIBLE)


def kv(key: SchemaData, value: SchemaData) -> SchemaData:
    data = len(key.data).to_bytes(4, "big") + key.data + len(value.data).to_bytes(4, "big") + value.data
    return SchemaData("KEY_VALUE", data, {"key.schema.type": key.type, "value.schema.type": value.type,
                                          "kv.encoding.type": "INLINE"})


def test_key_value_checks_key_and_value_each_by_its_type() -> None:
    validation.validate(kv(SchemaData("STRING", b""), V1))
    history = stored(kv(SchemaData("STRING", b""), V1))
    assert accepted(history, kv(SchemaData("STRING", b""), ADD_DEFAULT), Strategy.FULL)
    assert not accepted(history, kv(SchemaData("STRING", b""), ADD_REQUIRED), Strategy.FULL)
    assert not accepted(history, kv(SchemaData("INT32", b""), V1), Strategy.FULL)
    with pytest.raises(InvalidSchemaData, match="KeyValue"):
        validation.validate(SchemaData("KEY_VALUE", b"\x00\x00\x00\x09ab"))


def test_protobuf_native_is_validated_and_accepted() -> None:
    fds = descriptor_pb2.FileDescriptorSet(file=[descriptor_pb2.FileDescriptorProto(
        name="user.proto", message_type=[descriptor_pb2.DescriptorProto(name="User")])])
    doc = {"fileDescriptorSet": base64.b64encode(fds.SerializeToString()).decode(),
           "rootMessageTypeName": "User", "rootFileDescriptorName": "user.proto"}
    good = SchemaData("PROTOBUF_NATIVE", json.dumps(doc).encode())
    validation.validate(good)
    assert accepted(stored(good), SchemaData("PROTOBUF_NATIVE", json.dumps({**doc, "x": 1}).encode()), Strategy.FULL)
    other_root = SchemaData("PROTOBUF_NATIVE", json.dumps({**doc, "rootMessageTypeName": "Order"}).encode())
    for strategy in Strategy:                     # Pulsar: "Protobuf root message isn't allow change!"
        assert accepted(stored(good), other_root, strategy) == (strategy is Strategy.ALWAYS_COMPATIBLE), strategy
    with pytest.raises(InvalidSchemaData, match="Protobuf-native"):
        validation.validate(SchemaData("PROTOBUF_NATIVE", b'{"fileDescriptorSet": "!!"}'))


@pytest.mark.parametrize("definition", [b"{not json", b'{"type": "record", "name": "X"}',
                                        b'{"type": "recordz", "name": "X", "fields": []}',
                                        b'{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}'])
def test_a_malformed_definition_is_refused_clearly(definition: bytes) -> None:
    with pytest.raises(InvalidSchemaData, match="Invalid schema definition"):
        validation.validate(SchemaData("AVRO", definition))
    with pytest.raises(InvalidSchemaData):
        validation.validate(SchemaData("JSON", definition))


@pytest.mark.parametrize("name", ["FOO", "NONE", "avro", ""])
def test_an_unknown_type_is_refused_clearly(name: str) -> None:
    with pytest.raises(UnknownSchemaType, match="Invalid schema type"):
        validation.validate(SchemaData(name, b""))


def p(schema: object) -> avro.Parsed:
    return avro.parse(json.dumps(schema).encode())


def test_recursive_records_are_checked_without_looping() -> None:
    node = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                          {"name": "next", "type": ["null", "Node"]}]}
    wider = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "long"},
                                                           {"name": "next", "type": ["null", "Node"]}]}
    assert avro.read_problem(p(node), p(node)) is None
    assert avro.read_problem(p(wider), p(node)) is None
    assert avro.read_problem(p(node), p(wider)) is not None


@pytest.mark.parametrize("strategy", list(Strategy))
def test_consumer_checks(strategy: Strategy) -> None:
    # a consumer reading with ADD_REQUIRED cannot read V1 data under any checking strategy
    refused = strategy is not Strategy.ALWAYS_COMPATIBLE
    with_default_ok = strategy is not Strategy.ALWAYS_INCOMPATIBLE
    try:
        compatibility.check_consumer(stored(V1), ADD_REQUIRED, strategy)
        assert not refused
    except IncompatibleSchema:
        assert refused
    try:
        compatibility.check_consumer(stored(V1), ADD_DEFAULT, strategy)
        assert with_default_ok
    except IncompatibleSchema:
        assert not with_default_ok
    if strategy is not Strategy.ALWAYS_COMPATIBLE:
        with pytest.raises(IncompatibleSchema, match="does not have schema"):
            compatibility.check_consumer([], V1, strategy)
