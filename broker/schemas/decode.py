"""A message payload rendered for people: decoded by its topic's schema into a JSON-safe value.

    shown = render(payload, schema, bytes_max=65536)   # schema: the version the message names, or None
    shown.to_json()   # {"encoding": "avro", "value": {...}, "truncated": false}

Encodings, by the schema's type:
- AVRO: fastavro's schemaless reader with the parsed definition ("avro"); bytes and fixed values
  as base64 text, decimals as text, dates and times as ISO text, NaN and infinities as text;
- JSON: `json.loads` ("json"); a payload that is not JSON is shown as text, with an error;
- STRING: UTF-8 ("string");
- PROTOBUF_NATIVE: the definition's base64 FileDescriptorSet built into a descriptor pool, the
  root message (`rootMessageTypeName`) parsed and rendered by `MessageToDict` ("protobuf");
- KEY_VALUE with INLINE encoding: `[4-byte length][key][4-byte length][value]`, each part by its
  own schema ("key_value": `{"key": <shown>, "value": <shown>}`; SEPARATED: the value part only);
- anything else (no schema, BYTES, the primitive numbers, PROTOBUF): "text" when the bytes are
  valid UTF-8, else "hex".

What must hold: `render` never raises on any payload: one that does not match its schema is shown
as text or hex with `error` saying why. A payload longer than `bytes_max` is not decoded (a cut
Avro or Protobuf value cannot be): its first `bytes_max` bytes are shown as text or hex with
`truncated` true. Parsed schemas are cached by their definition, at most SCHEMAS_CACHED_MAX.
"""

from __future__ import annotations

import base64
import codecs
import datetime
import decimal
import functools
import io
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from broker.schemas.validation import key_value_parts
from common.schema_records import SchemaData

SCHEMAS_CACHED_MAX = 256         # parsed Avro definitions and protobuf message classes kept
_KV_LENGTH_BYTES = 4
_NESTING_MAX = 64                # a JSON-safe rendering stops descending here (a value never nests deeper)


@dataclass(frozen=True)
class Shown:
    """A payload as the console shows it."""

    encoding: str          # avro | json | string | protobuf | key_value | text | hex
    value: Any             # a JSON value (avro, json, protobuf, key_value) or text
    truncated: bool = False
    error: str | None = None    # why the schema could not decode it (then text or hex)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"encoding": self.encoding, "value": self.value, "truncated": self.truncated}
        if self.error is not None:
            out["error"] = self.error
        return out

    def searchable(self) -> str:
        """The text a `contains` filter looks in."""
        return self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)


def raw(payload: bytes, *, truncated: bool = False, error: str | None = None) -> Shown:
    """Text when the bytes are UTF-8, else hex. A cut may split a UTF-8 sequence: the cut tail is dropped."""
    try:
        if truncated:     # a cut sequence at the end is left out; an invalid one anywhere is not text
            return Shown("text", codecs.getincrementaldecoder("utf-8")().decode(payload, final=False), True, error)
        return Shown("text", payload.decode("utf-8"), truncated, error)
    except UnicodeDecodeError:
        return Shown("hex", payload.hex(), truncated, error)


def render(payload: bytes, schema: SchemaData | None, *, bytes_max: int | None = None) -> Shown:
    """`payload` decoded by `schema` (None: no schema); cut to `bytes_max` bytes (None: whole)."""
    if bytes_max is not None and len(payload) > bytes_max:
        return raw(payload[:bytes_max], truncated=True)
    if schema is None:
        return raw(payload)
    decoder = _DECODERS.get(schema.type)
    if decoder is None:
        return raw(payload)
    try:
        return decoder(payload, schema)
    except Exception as exc:   # any mismatch (each library raises its own types): shown raw, never raised
        return raw(payload, error=f"does not decode as {schema.type}: {type(exc).__name__}: {exc}"[:500])


# --- the decoders -------------------------------------------------------------------------------------

def _avro(payload: bytes, schema: SchemaData) -> Shown:
    parsed = _avro_schema(schema.data)
    stream = io.BytesIO(payload)
    import fastavro  # loaded with the first Avro value shown, not with the broker
    value = fastavro.schemaless_reader(stream, parsed, None)
    if stream.tell() != len(payload):
        raise ValueError(f"{len(payload) - stream.tell()} bytes left after the value")
    return Shown("avro", json_safe(value))


def _json(payload: bytes, schema: SchemaData) -> Shown:
    text = payload.decode("utf-8")
    try:
        return Shown("json", json_safe(json.loads(text)))
    except ValueError as exc:
        return Shown("text", text, error=f"not JSON: {exc}")


def _string(payload: bytes, schema: SchemaData) -> Shown:
    return Shown("string", payload.decode("utf-8"))


def _protobuf_native(payload: bytes, schema: SchemaData) -> Shown:
    message = _protobuf_class(schema.data)()
    message.ParseFromString(payload)
    return Shown("protobuf", json_safe(json_format.MessageToDict(message, preserving_proto_field_name=True)))


def _key_value(payload: bytes, schema: SchemaData) -> Shown:
    key_schema, value_schema = key_value_parts(schema)
    if schema.props.get("kv.encoding.type", "INLINE").upper() == "SEPARATED":
        return Shown("key_value", {"value": render(payload, value_schema).to_json()})
    key, offset = _kv_part(payload, 0)
    value, offset = _kv_part(payload, offset)
    if offset != len(payload):
        raise ValueError("bytes after the value part")
    return Shown("key_value", {"key": render(key, key_schema).to_json(),
                               "value": render(value, value_schema).to_json()})


def _kv_part(payload: bytes, offset: int) -> tuple[bytes, int]:
    if offset + _KV_LENGTH_BYTES > len(payload):
        raise ValueError("truncated length of a key/value part")
    length = int.from_bytes(payload[offset:offset + _KV_LENGTH_BYTES], "big", signed=True)
    start = offset + _KV_LENGTH_BYTES
    if length < 0:
        return b"", start
    if start + length > len(payload):
        raise ValueError("a key/value part runs past the end")
    return payload[start:start + length], start + length


_DECODERS: dict[str, Callable[[bytes, SchemaData], Shown]] = {
    "AVRO": _avro, "JSON": _json, "STRING": _string, "PROTOBUF_NATIVE": _protobuf_native, "KEY_VALUE": _key_value,
}


# --- parsed schemas, cached -------------------------------------------------------------------------

@functools.lru_cache(maxsize=SCHEMAS_CACHED_MAX)
def _avro_schema(definition: bytes) -> Any:
    import fastavro
    return fastavro.parse_schema(json.loads(definition))


@functools.lru_cache(maxsize=SCHEMAS_CACHED_MAX)
def _protobuf_class(definition: bytes) -> Any:
    """The root message's class of a PROTOBUF_NATIVE definition (`broker.schemas.validation`)."""
    doc = json.loads(definition)
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(doc["fileDescriptorSet"]))
    pool = descriptor_pool.DescriptorPool()
    pending = list(files.file)
    added: set[str] = set()
    while pending:             # a file's dependencies go into the pool before it
        ready = [f for f in pending if all(d in added for d in f.dependency)] or pending[:1]
        for f in ready:
            pool.Add(f)
            added.add(f.name)
            pending.remove(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(doc["rootMessageTypeName"]))


# --- JSON-safe values ---------------------------------------------------------------------------------

def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` with every leaf JSON can carry: bytes as base64, decimals and UUIDs as text, dates
    and times as ISO text, NaN and infinities as text, tuples as lists, keys as text."""
    if depth > _NESTING_MAX:
        return str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (datetime.date, datetime.time)):   # datetime is a date
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return str(value)

