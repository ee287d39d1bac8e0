"""Schema compatibility strategies, with Pulsar's names and meaning (SchemaCompatibilityStrategy).

    check_new(live_versions, new, strategy)          # IncompatibleSchema, or returns
    check_consumer(live_versions, consumer, strategy)

- ALWAYS_COMPATIBLE: any schema is accepted, of any type.
- ALWAYS_INCOMPATIBLE: no schema but an identical one (the same type, definition and properties).
- BACKWARD: the new schema reads data written with the latest (reader = new, writer = latest).
- FORWARD: the latest reads data written with the new one (reader = latest, writer = new).
- FULL: both. `*_TRANSITIVE`: the same against every live version, not only the latest.
Pulsar's default, at broker level, is FULL (`schemaCompatibilityStrategy=FULL` in broker.conf);
a namespace's UNDEFINED means "the broker's".

A changed type is incompatible (except under ALWAYS_COMPATIBLE). AVRO and JSON definitions are
checked with Avro's resolution rules (`broker.schemas.avro`); KEY_VALUE checks its key and value
schemas each by its own type; PROTOBUF_NATIVE may not change its root message (Pulsar's
ProtobufNativeSchemaCompatibilityCheck: "Protobuf root message isn't allow change!"); every
other type (primitives, PROTOBUF) is compatible with itself whatever the definition, as Pulsar's
default check.

A consumer's schema (Pulsar's `checkConsumerCompatibility`): under BACKWARD, FORWARD,
FORWARD_TRANSITIVE and FULL it must read the latest version (BACKWARD against it); under the
other strategies it is checked against every live version with the topic's strategy.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence

from broker.schemas import avro, validation
from common.errors import IncompatibleSchema
from common.schema_records import STRUCT_TYPES, SchemaData, StoredSchema


class Strategy(enum.Enum):
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")


DEFAULT_STRATEGY = Strategy.FULL
UNDEFINED = "UNDEFINED"     # a namespace policy's "not set": the broker's default applies
# the namespace's older `schema_auto_update_compatibility_strategy` (Pulsar's fromAutoUpdatePolicy)
AUTO_UPDATE_TO_STRATEGY = {
    "AutoUpdateDisabled": Strategy.ALWAYS_INCOMPATIBLE, "Backward": Strategy.BACKWARD,
    "Forward": Strategy.FORWARD, "Full": Strategy.FULL, "AlwaysCompatible": Strategy.ALWAYS_COMPATIBLE,
    "BackwardTransitive": Strategy.BACKWARD_TRANSITIVE, "ForwardTransitive": Strategy.FORWARD_TRANSITIVE,
    "FullTransitive": Strategy.FULL_TRANSITIVE,
}


def _directions(strategy: Strategy) -> tuple[bool, bool]:
    """(new must read old, old must read new)."""
    base = strategy.value.removesuffix("_TRANSITIVE")
    return base in ("BACKWARD", "FULL"), base in ("FORWARD", "FULL")


def _pair_problem(existing: SchemaData, new: SchemaData, strategy: Strategy) -> str | None:
    """Why `new` may not follow `existing` under `strategy` (not ALWAYS_COMPATIBLE); None if it may."""
    if existing.type != new.type:
        return f"Incompatible schema: exists schema type {existing.type}, new schema type {new.type}"
    if existing.same_as(new):
        return None
    if strategy is Strategy.ALWAYS_INCOMPATIBLE:
        return "Schema compatibility strategy is ALWAYS_INCOMPATIBLE"
    if new.type in STRUCT_TYPES:
        return _struct_problem(existing.data, new.data, strategy)
    if new.type == "KEY_VALUE":
        return _key_value_problem(existing, new, strategy)
    if new.type == "PROTOBUF_NATIVE":
        if _protobuf_root(existing.data) != _protobuf_root(new.data):
            return "Protobuf root message isn't allow change!"
    return None


def _protobuf_root(data: bytes) -> object:
    """The root message's full name of a PROTOBUF_NATIVE definition (validated before: JSON)."""
    try:
        return json.loads(data).get("rootMessageTypeName")
    except (ValueError, AttributeError):
        return None


def _struct_problem(existing: bytes, new: bytes, strategy: Strategy) -> str | None:
    old_schema, new_schema = avro.parse(existing), avro.parse(new)
    new_reads_old, old_reads_new = _directions(strategy)
    if new_reads_old:
        problem = avro.read_problem(reader=new_schema, writer=old_schema)
        if problem is not None:
            return f"{strategy.value}: the new schema cannot read data written with the existing one: {problem}"
    if old_reads_new:
        problem = avro.read_problem(reader=old_schema, writer=new_schema)
        if problem is not None:
            return f"{strategy.value}: the existing schema cannot read data written with the new one: {problem}"
    return None


def _key_value_problem(existing: SchemaData, new: SchemaData, strategy: Strategy) -> str | None:
    for old_part, new_part, what in zip(validation.key_value_parts(existing),
                                        validation.key_value_parts(new), ("key", "value"), strict=True):
        problem = _pair_problem(old_part, new_part, strategy)
        if problem is not None:
            return f"KeyValue {what}: {problem}"
    return None


def check_new(live: Sequence[StoredSchema], new: SchemaData, strategy: Strategy) -> None:
    """May `new` become the topic's next version? IncompatibleSchema if not. `live` is oldest first."""
    if strategy is Strategy.ALWAYS_COMPATIBLE or not live:
        return
    against = live if strategy.transitive else live[-1:]
    for stored in reversed(against):
        problem = _pair_problem(stored.schema, new, strategy)
        if problem is not None:
            raise IncompatibleSchema(problem, version=stored.version)


def check_consumer(live: Sequence[StoredSchema], schema: SchemaData, strategy: Strategy) -> None:
    """May a consumer with `schema` read the topic? IncompatibleSchema if not (or if the topic has
    no schema to check against: Pulsar's "Topic does not have schema to check")."""
    if strategy is Strategy.ALWAYS_COMPATIBLE:
        return
    if not live:
        raise IncompatibleSchema("Topic does not have schema to check")
    if strategy in (Strategy.BACKWARD, Strategy.FORWARD, Strategy.FORWARD_TRANSITIVE, Strategy.FULL):
        check_new(live[-1:], schema, Strategy.BACKWARD)
    else:
        check_new(live, schema, strategy)
