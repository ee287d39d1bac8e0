"""The schema registry's protocol pieces, as pure bytes: Schema ↔ SchemaData (type None is "no
schema", an unknown type number does not parse), the version bytes (8, big-endian), and the
GET_SCHEMA / GET_OR_CREATE_SCHEMA responses as the client decodes them.
"""

from __future__ import annotations

import pytest

from broker.protocol import schemas as wire
from common.errors import MalformedFrame
from common.schema_records import SchemaData, StoredSchema, version_bytes, version_of_bytes
from proto import pulsar_api_pb2 as pb
from wire import pulsar as codec
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder


def decode_one(data: bytes) -> pb.BaseCommand:
    frames = FrameDecoder(1 << 20).feed(data)
    assert len(frames) == 1
    return frames[0].command


def test_schema_of_proto() -> None:
    schema = pb.Schema(name="t", schema_data=b"{}", type=pb.Schema.Json,
                       properties=[pb.KeyValue(key="a", value="1")])
    assert wire.schema_of_proto(schema) == SchemaData("JSON", b"{}", {"a": "1"})
    assert wire.schema_of_proto(pb.Schema(name="t", schema_data=b"", type=pb.Schema.Type.Value("None"))) is None


def test_an_unknown_type_number_does_not_parse() -> None:
    """proto2's closed enum: a type Pulsar does not define leaves the required `type` unset, so
    the frame is malformed (the broker closes the connection, docs/protocol.md §10) before any check."""
    schema = pb.Schema(name="t", schema_data=b"{}", type=pb.Schema.Avro).SerializeToString()
    odd = schema.replace(b"\x20\x04", b"\x20\x63")          # field 4 (type) = 99
    producer = pb.CommandProducer(topic="t", producer_id=1, request_id=1).SerializeToString()
    cmd = pb.BaseCommand(type=T.PRODUCER).SerializeToString()
    body = producer + b"\x3a" + bytes([len(odd)]) + odd
    frame = cmd + b"\x2a" + bytes([len(body)]) + body          # BaseCommand.producer is field 5
    with pytest.raises(MalformedFrame, match=r"required fields.*schema\.type"):
        codec.parse_command(frame)


def test_proto_of_stored_and_back() -> None:
    stored = StoredSchema(3, SchemaData("KEY_VALUE", b"\x00\x00\x00\x00\x00\x00\x00\x00", {"b": "2", "a": "1"}), 7)
    proto = wire.proto_of("public/default/t", stored)
    assert proto.name == "public/default/t" and proto.type == pb.Schema.KeyValue
    assert [(kv.key, kv.value) for kv in proto.properties] == [("a", "1"), ("b", "2")]
    assert wire.schema_of_proto(proto) == stored.schema


def test_version_bytes() -> None:
    assert version_bytes(0) == b"\x00" * 8 and version_bytes(258) == b"\x00" * 6 + b"\x01\x02"
    assert version_of_bytes(version_bytes(12345)) == 12345
    assert version_of_bytes(b"") is None and version_of_bytes(b"\x01") is None


def test_get_schema_response_with_a_schema_and_without() -> None:
    schema = pb.Schema(name="n", schema_data=b"{}", type=pb.Schema.Avro)
    cmd = decode_one(codec.encode_get_schema_response(5, schema=schema, schema_version=version_bytes(2)))
    r = cmd.getSchemaResponse
    assert cmd.type == T.GET_SCHEMA_RESPONSE and r.request_id == 5 and not r.HasField("error_code")
    assert r.schema == schema and r.schema_version == version_bytes(2)
    r = decode_one(codec.encode_get_schema_response(6, pb.TopicNotFound, "no schema")).getSchemaResponse
    assert r.error_code == pb.TopicNotFound and r.error_message == "no schema" and not r.HasField("schema")


def test_get_or_create_schema_response() -> None:
    cmd = decode_one(codec.encode_get_or_create_schema_response(7, version_bytes(1)))
    assert cmd.type == T.GET_OR_CREATE_SCHEMA_RESPONSE
    assert cmd.getOrCreateSchemaResponse.schema_version == version_bytes(1)
    assert not cmd.getOrCreateSchemaResponse.HasField("error_code")
    r = decode_one(codec.encode_get_or_create_schema_response(
        8, server_error=pb.IncompatibleSchema, message="nope")).getOrCreateSchemaResponse
    assert (r.error_code, r.error_message, r.HasField("schema_version")) == (pb.IncompatibleSchema, "nope", False)
