"""How the schema registry stores a topic's schemas in the metadata store, and Pulsar's type names.

Layout: one key per version, `/schemas/<tenant>/<ns>/<topic>/<version, 10 digits>`, the topic
being the base name (every partition of a partitioned topic shares its schemas, as in Pulsar).
Each value is JSON `{"type": "AVRO", "data_b64": ..., "props": {...}, "timestamp_ms": t,
"deleted": false}`. Versions count up from 0 and are never reused while the key prefix exists:
deleting a schema appends a version with `deleted: true` (Pulsar's soft delete), and only the
versions after the last deleted one are "live" (compatibility is checked against those); a forced
delete removes every key, and the count starts again at 0.

This module is shared by the broker (`broker.schemas.registry`, which writes) and the Spark
source (`analytics.topic_schema`, which reads), so it holds no I/O.

What must hold: a version key is written once (create, never put); `live()` is the suffix of the
versions after the last deleted one, oldest first.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

SCHEMAS_ROOT = "/schemas"
VERSION_DIGITS = 10

# Pulsar's SchemaType names by the protocol's Schema.Type number (PulsarApi.proto); BYTES (-1 in
# Java) has no protocol number: a BYTES producer sends no schema.
TYPE_NAMES: dict[int, str] = {
    0: "NONE", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN", 6: "INT8", 7: "INT16",
    8: "INT32", 9: "INT64", 10: "FLOAT", 11: "DOUBLE", 12: "DATE", 13: "TIME", 14: "TIMESTAMP",
    15: "KEY_VALUE", 16: "INSTANT", 17: "LOCAL_DATE", 18: "LOCAL_TIME", 19: "LOCAL_DATE_TIME",
    20: "PROTOBUF_NATIVE",
}
TYPE_NUMBERS: dict[str, int] = {name: number for number, name in TYPE_NAMES.items()}
REST_ONLY_TYPES = ("BYTES",)          # accepted by the admin API, stored like a primitive
STRUCT_TYPES = ("AVRO", "JSON")       # record definitions checked by Avro's resolution rules


def topic_prefix(base_path: str) -> str:
    """The key prefix of a topic's versions; `base_path` is `TopicName.base.path` (t/ns/topic)."""
    return f"{SCHEMAS_ROOT}/{base_path}"


def version_path(base_path: str, version: int) -> str:
    return f"{topic_prefix(base_path)}/{version:0{VERSION_DIGITS}d}"


def version_bytes(version: int) -> bytes:
    """Pulsar's LongSchemaVersion on the wire: 8 bytes, big-endian."""
    return version.to_bytes(8, "big", signed=True)


def version_of_bytes(raw: bytes) -> int | None:
    """The version a client names (8 bytes big-endian); None for anything else (empty: latest)."""
    return int.from_bytes(raw, "big", signed=True) if len(raw) == 8 else None


@dataclass(frozen=True)
class SchemaData:
    """A schema as a client or the admin API gives it: Pulsar's type name, its definition bytes
    (an Avro record as JSON for AVRO/JSON, empty or "null" for primitives) and properties."""

    type: str
    data: bytes
    props: dict[str, str] = field(default_factory=dict)

    def same_as(self, other: SchemaData) -> bool:
        """Pulsar's SchemaHash equality: type, definition and properties."""
        return self.type == other.type and self.data == other.data and self.props == other.props


@dataclass(frozen=True)
class StoredSchema:
    """One stored version."""

    version: int
    schema: SchemaData
    timestamp_ms: int
    deleted: bool = False      # a soft-delete marker: no schema from here until the next version

    def to_json(self) -> bytes:
        return json.dumps({"type": self.schema.type, "data_b64": base64.b64encode(self.schema.data).decode(),
                           "props": self.schema.props, "timestamp_ms": self.timestamp_ms,
                           "deleted": self.deleted}).encode()

    @classmethod
    def from_json(cls, version: int, raw: bytes) -> StoredSchema:
        doc = json.loads(raw)
        return cls(version, SchemaData(str(doc["type"]), base64.b64decode(doc["data_b64"]),
                                       {str(k): str(v) for k, v in (doc.get("props") or {}).items()}),
                   int(doc["timestamp_ms"]), bool(doc.get("deleted", False)))


def parse_listing(prefix: str, listing: list[tuple[str, bytes]]) -> list[StoredSchema]:
    """Every stored version under `prefix` from a `list_prefix` answer, oldest first."""
    out = []
    for path, raw in listing:
        tail = path[len(prefix) + 1:]
        if path.startswith(prefix + "/") and tail.isdigit() and len(tail) == VERSION_DIGITS:
            out.append(StoredSchema.from_json(int(tail), raw))
    return sorted(out, key=lambda s: s.version)


def live(versions: list[StoredSchema]) -> list[StoredSchema]:
    """The versions after the last deleted marker (Pulsar's trimDeletedSchemaAndGetList)."""
    for i in range(len(versions) - 1, -1, -1):
        if versions[i].deleted:
            return versions[i + 1:]
    return list(versions)
