"""Is a schema well formed? Checked before anything is stored or compared (Pulsar's
SchemaDataValidator), so a malformed definition is refused with a clear reason, never stored.

- an unknown type name → UnknownSchemaType (admin 400);
- AVRO, JSON: the definition must parse as an Avro schema (`broker.schemas.avro`);
- KEY_VALUE: `[4-byte big-endian length][key schema][4-byte length][value schema]` (Pulsar's
  KeyValueSchemaInfo encoding), each part valid for the type its properties name
  (`key.schema.type`, `value.schema.type`; BYTES when absent);
- PROTOBUF_NATIVE: JSON `{"fileDescriptorSet": base64, "rootMessageTypeName": ...,
  "rootFileDescriptorName": ...}` whose descriptor set parses and names that file;
- primitives, PROTOBUF, BYTES: anything (Pulsar stores their definitions as given).
Every failure but the type is InvalidSchemaData (admin 422; on the binary protocol
IncompatibleSchema with the reason). A definition over SCHEMA_DATA_BYTES_MAX is refused too.
"""

from __future__ import annotations

import base64
import binascii
import json

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from broker.schemas import avro
from common.errors import InvalidSchemaData, UnknownSchemaType
from common.schema_records import REST_ONLY_TYPES, STRUCT_TYPES, TYPE_NUMBERS, SchemaData

SCHEMA_DATA_BYTES_MAX = 1024 * 1024      # one definition; the registry keeps it in the metadata store
KNOWN_TYPES = frozenset(TYPE_NUMBERS) | frozenset(REST_ONLY_TYPES)
_KV_LENGTH_BYTES = 4


def check_type(name: str) -> str:
    """`name` if Pulsar defines that schema type; UnknownSchemaType otherwise."""
    if name not in KNOWN_TYPES or name == "NONE":
        raise UnknownSchemaType(f"Invalid schema type {name!r}: expected one of "
                                f"{', '.join(sorted(KNOWN_TYPES - {'NONE'}))}")
    return name


def validate(schema: SchemaData) -> None:
    """Raise UnknownSchemaType / InvalidSchemaData unless `schema` is well formed."""
    check_type(schema.type)
    if len(schema.data) > SCHEMA_DATA_BYTES_MAX:
        raise InvalidSchemaData("Invalid schema definition: too large",
                                bytes=len(schema.data), bytes_max=SCHEMA_DATA_BYTES_MAX)
    if schema.type in STRUCT_TYPES:
        avro.parse(schema.data)
    elif schema.type == "KEY_VALUE":
        for part in key_value_parts(schema):
            validate(part)
    elif schema.type == "PROTOBUF_NATIVE":
        _check_protobuf_native(schema.data)


def _kv_part(data: bytes, offset: int) -> tuple[bytes, int]:
    if offset + _KV_LENGTH_BYTES > len(data):
        raise InvalidSchemaData("Invalid KeyValue schema: truncated length")
    length = int.from_bytes(data[offset:offset + _KV_LENGTH_BYTES], "big", signed=True)
    start = offset + _KV_LENGTH_BYTES
    if length < 0:                       # Pulsar writes -1 for an absent part
        return b"", start
    if start + length > len(data):
        raise InvalidSchemaData("Invalid KeyValue schema: a part runs past the end", length=length)
    return data[start:start + length], start + length


def key_value_parts(schema: SchemaData) -> tuple[SchemaData, SchemaData]:
    """The key and value schemas of a KEY_VALUE schema (InvalidSchemaData if malformed)."""
    key, offset = _kv_part(schema.data, 0)
    value, offset = _kv_part(schema.data, offset)
    if offset != len(schema.data):
        raise InvalidSchemaData("Invalid KeyValue schema: bytes after the value schema")
    parts = []
    for what, data in (("key", key), ("value", value)):
        kind = schema.props.get(f"{what}.schema.type", "BYTES")
        try:
            props = json.loads(schema.props.get(f"{what}.schema.properties", "{}") or "{}")
        except ValueError:
            raise InvalidSchemaData(f"Invalid KeyValue schema: {what}.schema.properties is not JSON") from None
        parts.append(SchemaData(kind, data, {str(k): str(v) for k, v in dict(props).items()}))
    return parts[0], parts[1]


def _check_protobuf_native(data: bytes) -> None:
    try:
        doc = json.loads(data)
        files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(doc["fileDescriptorSet"]))
        root_file, root_message = doc["rootFileDescriptorName"], doc["rootMessageTypeName"]
    except (ValueError, TypeError, KeyError, binascii.Error, DecodeError) as exc:
        raise InvalidSchemaData(f"Invalid Protobuf-native schema: {type(exc).__name__} {exc}") from None
    if not any(f.name == root_file for f in files.file):
        raise InvalidSchemaData("Invalid Protobuf-native schema: rootFileDescriptorName is not in the set",
                                root=root_file)
    if not isinstance(root_message, str) or not root_message:
        raise InvalidSchemaData("Invalid Protobuf-native schema: rootMessageTypeName is empty")
