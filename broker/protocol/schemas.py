"""The schema registry on the binary protocol: GET_SCHEMA, GET_OR_CREATE_SCHEMA, and the schema a
PRODUCER or SUBSCRIBE carries (Pulsar's ServerCnx and AbstractTopic schema handling).

- PRODUCER without a schema (the official client's BytesSchema sends none; a schema of type None
  counts as none): an empty version; refused with IncompatibleSchema if the topic has a schema
  and the namespace sets `schemaValidationEnforced`. With a schema: its version on the topic,
  registered if new and allowed (`isAllowAutoUpdateSchema`, the compatibility strategy); the
  version goes back in PRODUCER_SUCCESS as 8 bytes big-endian.
- SUBSCRIBE with a schema: on an idle topic without a schema (no producer, no consumer, nothing
  ever stored) the consumer's schema is registered, as Pulsar's addSchemaIfIdleOrCheckCompatible;
  otherwise it must be compatible (`compatibility.check_consumer`).
- GET_SCHEMA: the named version (8 bytes) or the latest; TopicNotFound "no schema" when there is
  none (the client's answer for a topic without a schema, or a deleted one).
- GET_OR_CREATE_SCHEMA: `put_if_absent` on the topic, which must load here.
Refusals change nothing. Every check runs once per producer or consumer creation, never per
message: SEND is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from broker.schemas import compatibility, validation
from broker.schemas.policy import policy_of
from broker.schemas.registry import SchemaRegistry
from broker.security.authorization import Action
from common.errors import IncompatibleSchema, PulsarServerError, StrataError, UnknownSchemaType
from common.schema_records import TYPE_NAMES, TYPE_NUMBERS, SchemaData, StoredSchema, version_bytes, version_of_bytes
from common.topic_names import parse_topic
from proto import pulsar_api_pb2 as pb
from wire.pulsar import encode_get_or_create_schema_response, encode_get_schema_response

if TYPE_CHECKING:
    from broker.protocol.connection import ServerConnection
    from broker.protocol.frontend import FrontEnd
    from common.topic_names import TopicName

class TopicState(Protocol):
    """What the checks read of a loaded topic (persistent or not)."""

    name: TopicName
    producers: dict
    subscriptions: dict
    msg_in_counter: int


NO_SCHEMA_ENFORCED = ("Producers cannot connect or send message without a schema to topics with a schema "
                      "if SchemaValidationEnforced is enabled")


def schema_of_proto(schema: pb.Schema) -> SchemaData | None:
    """A protocol Schema as the registry's SchemaData; None for "no schema" (type None)."""
    name = TYPE_NAMES.get(schema.type)
    if name is None:
        raise UnknownSchemaType(f"Invalid schema type {schema.type}")
    if name == "NONE":
        return None
    props = {}
    for item in schema.properties:
        kv = cast(pb.KeyValue, item)
        props[kv.key] = kv.value
    return SchemaData(name, bytes(schema.schema_data), props)


def proto_of(schema_name: str, stored: StoredSchema) -> pb.Schema:
    kind = TYPE_NUMBERS.get(stored.schema.type, 0)     # BYTES (admin only) has no number: None
    out = pb.Schema(name=schema_name, schema_data=stored.schema.data, type=kind)  # type: ignore[arg-type]
    for key, value in sorted(stored.schema.props.items()):
        out.properties.add(key=key, value=value)
    return out


def _registry(front: FrontEnd) -> SchemaRegistry:
    return SchemaRegistry(front.ctx.astore, front.ctx.clock)


async def producer_schema_version(front: FrontEnd, topic: TopicState, cmd: pb.CommandProducer) -> bytes:
    """The schema version for a new producer (b"" without a schema); IncompatibleSchema if refused."""
    schema = schema_of_proto(cmd.schema) if cmd.HasField("schema") else None
    registry = _registry(front)
    if schema is None:
        if await registry.get(topic.name) is None:       # the usual case: one read, no policy lookup
            return b""
        if (await policy_of(front.ctx.astore, topic.name)).validation_enforced:
            raise IncompatibleSchema(NO_SCHEMA_ENFORCED, topic=str(topic.name))
        return b""
    policy = await policy_of(front.ctx.astore, topic.name)
    version = await registry.put_if_absent(topic.name, schema, policy.strategy, auto_update=policy.auto_update)
    return version_bytes(version)


def _idle(topic: TopicState) -> bool:
    return (not topic.producers and topic.msg_in_counter == 0
            and not any(sub.consumers for sub in topic.subscriptions.values()))


async def check_consumer(front: FrontEnd, topic: TopicState, cmd: pb.CommandSubscribe) -> None:
    """May this SUBSCRIBE's consumer attach, given its schema? IncompatibleSchema if not."""
    schema = schema_of_proto(cmd.schema) if cmd.HasField("schema") else None
    if schema is None:
        return
    validation.validate(schema)
    registry = _registry(front)
    policy = await policy_of(front.ctx.astore, topic.name)
    live = await registry.live(topic.name)
    if not live and _idle(topic):
        await registry.put_if_absent(topic.name, schema, policy.strategy, auto_update=policy.auto_update)
        return
    compatibility.check_consumer(live, schema, policy.strategy)


def _schema_id(topic: str) -> str:
    """Pulsar's schema name: `tenant/ns/topic` of the base topic."""
    return parse_topic(topic).base.path


async def get_schema(conn: ServerConnection, cmd: pb.CommandGetSchema) -> None:
    """Answer GET_SCHEMA (always with GET_SCHEMA_RESPONSE, errors included)."""
    try:
        name = parse_topic(cmd.topic)
        await conn.front.authorization.check(conn.role, Action.LOOKUP, name)   # before any read
        version = None
        if cmd.HasField("schema_version") and cmd.schema_version:
            version = version_of_bytes(cmd.schema_version)
            if version is None:
                raise UnknownSchemaType("a schema version is 8 bytes", got=len(cmd.schema_version))
        stored = await _registry(conn.front).get(name, version)
    except StrataError as exc:
        code = exc.server_error if exc.server_error is not None else PulsarServerError.UnknownError
        conn.write(encode_get_schema_response(cmd.request_id, code, str(exc)))
        return
    if stored is None:
        conn.write(encode_get_schema_response(cmd.request_id, PulsarServerError.TopicNotFound,
                                              f"Topic not found or no-schema {cmd.topic}"))
        return
    conn.write(encode_get_schema_response(cmd.request_id, schema=proto_of(_schema_id(cmd.topic), stored),
                                          schema_version=version_bytes(stored.version)))


async def get_or_create_schema(conn: ServerConnection, cmd: pb.CommandGetOrCreateSchema) -> None:
    """Answer GET_OR_CREATE_SCHEMA (always with its own response, errors included)."""
    try:
        name = parse_topic(cmd.topic)
        await conn.front.authorization.check(conn.role, Action.PRODUCE, name)   # before the topic loads
        topic: TopicState = (await conn.front.service.get_topic(name) if name.persistent
                             else await conn.front.non_persistent.get(name))   # must be live here
        schema = schema_of_proto(cmd.schema)
        version = b""
        if schema is not None:
            policy = await policy_of(conn.front.ctx.astore, topic.name)
            version = version_bytes(await _registry(conn.front).put_if_absent(
                topic.name, schema, policy.strategy, auto_update=policy.auto_update))
    except StrataError as exc:
        code = exc.server_error if exc.server_error is not None else PulsarServerError.UnknownError
        conn.write(encode_get_or_create_schema_response(cmd.request_id, server_error=code, message=str(exc)))
        return
    conn.write(encode_get_or_create_schema_response(cmd.request_id, version))
