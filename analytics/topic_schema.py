"""The `value` column from the topic's own schema: a query that gives no `valueSchema` over one
topic with an AVRO or JSON schema in the registry (`common.schema_records`) gets `value` typed
by that schema, as Pulsar's Spark connector does.

    found = topic_value_schema(options)   # None: no registered record schema (or valueSchema given)
    found.struct_json                     # the Spark StructType of the latest version, as JSON
    decoder = AvroValueDecoder(found)     # AVRO payloads; JSON ones go through analytics.value

Avro → Spark types: boolean, int, long, float, double, string, bytes (binary), enum (string),
fixed (binary), array, map (string keys), record (struct); `["null", T]` is a nullable T. A
schema with another union cannot be mapped: the query is refused with BadSourceOption (give
`valueSchema` instead).

Avro payloads carry no schema and the stored rows keep no version, so each payload is read with
the topic's live versions as writer, newest first, the first that consumes exactly its bytes
winning, resolved to the latest version (Avro's rules, by fastavro); a payload none reads is a
null `value`, the raw bytes staying in `payload`.

When the cluster enforces authorization, the lookup asks the broker first
(analytics.authorization): a role that may not consume the topic gets SourceAccessDenied, not
its schema.

What must hold: `value` has exactly the struct type `struct_json` names, one entry per row.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from analytics.access import ClusterAccess
from analytics.authorization import TopicGate
from analytics.options import topics_of
from common.errors import BadSourceOption
from common.schema_records import STRUCT_TYPES, live, parse_listing, topic_prefix
from common.topic_names import parse_topic

_SCHEMA_VERSIONS_READ_MAX = 1001     # the registry keeps at most 1000 versions per topic
_PRIMITIVE_SPARK = {"boolean": "boolean", "int": "integer", "long": "long", "float": "float",
                    "double": "double", "string": "string", "bytes": "binary"}


@dataclass(frozen=True)
class TopicValueSchema:
    kind: str                         # "AVRO" or "JSON"
    struct_json: str                  # Spark StructType of the latest version, as JSON
    definitions: tuple[str, ...]      # the live versions' Avro definitions, newest first


def topic_value_schema(topics: tuple[str, ...], pattern: str, value_schema: str,
                       access: ClusterAccess) -> TopicValueSchema | None:
    """The schema `value` is decoded with when the query gives none: one topic's AVRO/JSON schema."""
    if value_schema or pattern or len(topics) != 1 or not access.metadata_url:
        return None
    from metadata import open_store

    name = parse_topic(topics[0])
    prefix = topic_prefix(name.base.path)
    store = open_store(access.metadata_url)
    try:
        TopicGate.of_store(store, access).require(topics)     # the schema is the topic's too
        listing = store.list_prefix(prefix, limit=_SCHEMA_VERSIONS_READ_MAX)
    finally:
        store.close()
    versions = live(parse_listing(prefix, [(path, found.value) for path, found in listing]))
    if not versions or versions[-1].schema.type not in STRUCT_TYPES:
        return None
    latest = versions[-1].schema
    definitions = tuple(v.schema.data.decode() for v in reversed(versions) if v.schema.type == latest.type)
    return TopicValueSchema(latest.type, json.dumps(struct_of(json.loads(definitions[0]))), definitions)


def struct_of(record: Any) -> dict:
    """The Spark StructType (as its JSON dict) of an Avro record schema."""
    if not isinstance(record, dict) or record.get("type") not in ("record", "error"):
        raise BadSourceOption("the topic's schema is not an Avro record; give valueSchema")
    return {"type": "struct", "fields": [_field(f) for f in record["fields"]]}


def _field(f: dict) -> dict:
    spark_type, nullable = _type_of(f["type"])
    return {"name": f["name"], "type": spark_type, "nullable": nullable, "metadata": {}}


def _type_of(node: Any) -> tuple[Any, bool]:
    """(Spark type JSON, nullable) of an Avro type."""
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        if len(branches) != 1:
            raise BadSourceOption("the topic's schema has a union Spark cannot type; give valueSchema",
                                  union=json.dumps(node)[:200])
        return _type_of(branches[0])[0], True
    kind = node.get("type") if isinstance(node, dict) else node
    if isinstance(kind, (dict, list)):
        return _type_of(kind)
    if kind in _PRIMITIVE_SPARK:
        return _PRIMITIVE_SPARK[kind], False
    if kind == "enum":
        return "string", False
    if kind == "fixed":
        return "binary", False
    if kind == "array":
        item, item_null = _type_of(node["items"])
        return {"type": "array", "elementType": item, "containsNull": item_null}, False
    if kind == "map":
        value, value_null = _type_of(node["values"])
        return {"type": "map", "keyType": "string", "valueType": value, "valueContainsNull": value_null}, False
    if kind in ("record", "error"):
        return struct_of(node), False
    raise BadSourceOption("the topic's schema has a type Spark cannot map; give valueSchema", type=str(kind)[:100])


class AvroValueDecoder:
    """Adds `value` to batches of Avro payloads (see the module docstring for the writer choice)."""

    def __init__(self, found: TopicValueSchema) -> None:
        import fastavro
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        self._fastavro = fastavro
        self.arrow_type = pa.struct(list(to_arrow_schema(StructType.fromJson(json.loads(found.struct_json)))))
        self.reader = fastavro.parse_schema(json.loads(found.definitions[0]))
        self.writers = [fastavro.parse_schema(json.loads(d)) for d in found.definitions]

    def add_value(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        values = pa.array([self._one(p) for p in batch.column("payload").to_pylist()], type=self.arrow_type)
        return pa.RecordBatch.from_arrays([*batch.columns, values],
                                          schema=batch.schema.append(pa.field("value", self.arrow_type)))

    def _one(self, payload: bytes | None) -> dict | None:
        if payload is None:
            return None
        for writer in self.writers:
            buffer = io.BytesIO(payload)
            try:
                row = self._fastavro.schemaless_reader(buffer, writer, self.reader)
            except Exception:          # fastavro raises many kinds of error on foreign bytes
                continue
            if buffer.tell() == len(payload) and isinstance(row, dict):
                return row
        return None


def of_options(options: dict[str, str]) -> TopicValueSchema | None:
    """`topic_value_schema` from a query's raw options (the driver's `schema()`, before parsing)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    topics, pattern = topics_of(opts)    # the same checks and errors as the reader's own parse
    return topic_value_schema(topics, pattern, opts.get("valueschema", ""), ClusterAccess.from_options(opts))
