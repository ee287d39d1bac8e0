"""broker.schemas.decode: payloads rendered by their schema (Avro, JSON, String, Protobuf-native,
KeyValue), never raising on a payload that does not match, and cut payloads shown raw."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json

import fastavro
from google.protobuf import descriptor_pb2, timestamp_pb2

from broker.schemas.decode import json_safe, raw, render
from common.schema_records import SchemaData

AVRO_DEFINITION = {
    "type": "record", "name": "Reading", "fields": [
        {"name": "sensor", "type": "string"}, {"name": "value", "type": ["null", "double"]},
        {"name": "raw", "type": "bytes"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}}]}
AVRO = SchemaData("AVRO", json.dumps(AVRO_DEFINITION).encode())


def avro_bytes(record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_DEFINITION), record)
    return out.getvalue()


def test_avro_is_decoded_to_json_safe_values() -> None:
    payload = avro_bytes({"sensor": "t1", "value": 1.5, "raw": b"\x00\x01", "price": decimal.Decimal("12.34"),
                          "day": datetime.date(2024, 5, 6)})
    shown = render(payload, AVRO)
    assert shown.to_json() == {"encoding": "avro", "truncated": False, "value": {
        "sensor": "t1", "value": 1.5, "raw": base64.b64encode(b"\x00\x01").decode(), "price": "12.34",
        "day": "2024-05-06"}}
    json.dumps(shown.to_json())


def test_a_payload_that_is_not_its_avro_schema_is_shown_raw_with_an_error() -> None:
    for payload in (b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"", avro_bytes(
            {"sensor": "x", "value": None, "raw": b"", "price": decimal.Decimal("0"), "day": 0}) + b"extra"):
        out = render(payload, AVRO).to_json()
        assert out["encoding"] in ("text", "hex") and "AVRO" in out["error"], out
    broken_schema = SchemaData("AVRO", b"{not json")
    assert "error" in render(b"abc", broken_schema).to_json()


def test_json_string_and_no_schema() -> None:
    json_schema = SchemaData("JSON", json.dumps(AVRO_DEFINITION).encode())
    assert render(b'{"a": [1, 2.5, null]}', json_schema).to_json() == {
        "encoding": "json", "value": {"a": [1, 2.5, None]}, "truncated": False}
    bad = render(b"{not json", json_schema).to_json()
    assert (bad["encoding"], bad["value"]) == ("text", "{not json") and "not JSON" in bad["error"]
    assert render("héllo".encode(), SchemaData("STRING", b"")).to_json() == {
        "encoding": "string", "value": "héllo", "truncated": False}
    not_utf8 = render(b"\xff\xfe", SchemaData("STRING", b"")).to_json()
    assert not_utf8["encoding"] == "hex" and not_utf8["value"] == "fffe" and "error" in not_utf8
    assert render(b"plain", None).to_json() == {"encoding": "text", "value": "plain", "truncated": False}
    assert render(b"\x00\xff", None).to_json() == {"encoding": "hex", "value": "00ff", "truncated": False}
    assert render(b"\x00\x00\x00\x05", SchemaData("INT32", b"")).encoding == "text"


def protobuf_schema() -> SchemaData:
    """A Protobuf-native definition as Pulsar's clients send it: a message using a Timestamp, so the
    set holds two files and one depends on the other (listed dependent first)."""
    ts_file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts_file)
    mine = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="demo", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    message = mine.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="count", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="at", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      type_name=".google.protobuf.Timestamp", label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    files = descriptor_pb2.FileDescriptorSet(file=[mine, ts_file])
    definition = {"fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
                  "rootMessageTypeName": "demo.Reading", "rootFileDescriptorName": "reading.proto"}
    return SchemaData("PROTOBUF_NATIVE", json.dumps(definition).encode())


def test_protobuf_native_is_decoded() -> None:
    schema = protobuf_schema()
    # sensor="t1" (field 1, len), count=7 (field 2, varint), at={seconds: 60} (field 3, len)
    payload = b"\x0a\x02t1" + b"\x10\x07" + b"\x1a\x02\x08\x3c"
    shown = render(payload, schema).to_json()
    assert shown == {"encoding": "protobuf", "truncated": False,
                     "value": {"sensor": "t1", "count": "7", "at": "1970-01-01T00:01:00Z"}}
    bad = render(b"\x0a\xff", schema).to_json()
    assert bad["encoding"] == "hex" and "PROTOBUF_NATIVE" in bad["error"]


def test_key_value_inline() -> None:
    def part(data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + data
    schema = SchemaData("KEY_VALUE", part(b"") + part(b""), {"key.schema.type": "STRING",
                                                           "value.schema.type": "JSON"})
    shown = render(part(b"k1") + part(b'{"v": 1}'), schema).to_json()
    assert shown["encoding"] == "key_value"
    assert shown["value"] == {"key": {"encoding": "string", "value": "k1", "truncated": False},
                              "value": {"encoding": "json", "value": {"v": 1}, "truncated": False}}
    assert "error" in render(b"\x00\x00", schema).to_json()


def test_a_payload_over_the_bound_is_cut_and_not_decoded() -> None:
    payload = avro_bytes({"sensor": "s" * 100, "value": None, "raw": b"", "price": decimal.Decimal("1"), "day": 1})
    cut = render(payload, AVRO, bytes_max=10).to_json()
    assert cut["truncated"] is True and "error" not in cut
    assert cut == raw(payload[:10], truncated=True).to_json()
    assert render(b"abcdef", None, bytes_max=3).to_json() == {"encoding": "text", "value": "abc", "truncated": True}
    assert render(b"abc", None, bytes_max=3).to_json()["truncated"] is False
    # a cut through a UTF-8 sequence drops the cut character rather than showing hex
    assert render("aé".encode(), None, bytes_max=2).to_json() == {"encoding": "text", "value": "a", "truncated": True}
    assert render(b"\x00\xff\x01", None, bytes_max=2).to_json() == {"encoding": "hex", "value": "00ff",
                                                                     "truncated": True}


def test_json_safe_leaves() -> None:
    assert json_safe({1: (float("nan"), float("inf"), b"\x01", datetime.datetime(2024, 1, 2, 3, 4, 5))}) == {
        "1": ["nan", "inf", "AQ==", "2024-01-02T03:04:05"]}
