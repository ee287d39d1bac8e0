"""Kafka's topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

Topics a Kafka client creates are Pulsar *partitioned* topics, even with one partition, so
CreatePartitions can grow them; their partitions are listed at once (`policies.register_partitions`,
as the admin API's create does) and their storage is made on first use. Configs given at creation
become topic policies (`broker.kafka.topic_configs`). Deleting is the admin API's forced delete:
every partition on the broker that serves it (`broker.cluster.peers`), attached clients told to
go (Kafka deletes with clients connected), then the partition count, topic policies and schemas.

Per topic, in Kafka's order of checks: the name (INVALID_TOPIC_EXCEPTION), authorization
(TOPIC_AUTHORIZATION_FAILED), the request's values (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_REQUEST for manual replica assignments, INVALID_CONFIG), then what exists
(TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION). `validate_only` stops after the checks. A
name twice in one request is INVALID_REQUEST for each (Kafka's rule).

Authorization is what the admin REST API asks for the same operation: creating, deleting and
growing a topic take the tenant's admin (or a superuser), `AuthorizationService.is_tenant_admin`;
with authorization off everything is allowed.

Replication factor: Strata keeps copies on bookies, `ledger_write_quorum` of them for every entry,
whatever the client asks; so -1 (the default) and any value >= 1 are accepted and the answer
reports the write quorum. 0 and values below -1 are INVALID_REPLICATION_FACTOR, as Kafka.

What must hold: a topic is answered TOPIC_ALREADY_EXISTS whether it exists partitioned or not;
nothing is written for a topic with an error or under validate_only; the Kafka catalog forgets
every topic changed here before the answer, so this broker's next Metadata sees the change.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING

from broker.cluster import peers
from broker.kafka import topic_configs as tc
from broker.kafka.errors import code_of
from broker.kafka.metadata import topic_id
from broker.kafka.topics import pulsar_name
from broker.records import policies
from broker.retention import backlog_quota as bq
from broker.schemas import registry as schema_registry
from common.errors import AlreadyExists, InvalidTopicName, NamespaceNotFound, NotAllowed, StrataError
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from common.topic_names import TopicName
    from wire.kafka.codec import Request

log = logging.getLogger(__name__)
NO_TOPIC_ID = bytes(16)


class TopicRefused(Exception):
    """One topic of a request fails with this Kafka error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def base_of(conn: KafkaConnection, name: str) -> TopicName:
    try:
        return pulsar_name(name, conn.default_namespace)
    except InvalidTopicName as exc:
        raise TopicRefused(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None


async def _require_admin(conn: KafkaConnection, base: TopicName) -> None:
    if not await conn.front.authorization.is_tenant_admin(conn.role, base.tenant):
        raise TopicRefused(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           f"not authorized to administer topics of tenant {base.tenant}")


async def layout_now(conn: KafkaConnection, base: TopicName) -> tuple[int, bool] | None:
    """The topic's (partitions, partitioned) read now (not from the catalog's memory)."""
    conn.front.catalog.forget(base)
    try:
        return await conn.front.catalog.layout(base)
    except NamespaceNotFound:
        return None


def _duplicates(names: list[str]) -> set[str]:
    return {n for n, count in collections.Counter(names).items() if count > 1}


def failed(out: dict, exc: BaseException) -> dict:
    if isinstance(exc, TopicRefused):
        out["error_code"], out["error_message"] = exc.code, str(exc)
    else:
        log.info("kafka admin: %s: %s", out.get("name"), exc)
        out["error_code"], out["error_message"] = code_of(exc), str(exc)
    return out


# --- CreateTopics ----------------------------------------------------------------------------------

def _partitions_asked(asked: int, config_default: int, partitions_max: int) -> int:
    count = config_default if asked == -1 else asked
    if not 1 <= count <= partitions_max:
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS,
                           f"number of partitions must be -1 (the default) or 1..{partitions_max}, not {asked}")
    return count


def _replication_checked(asked: int) -> None:
    if asked == 0 or asked < -1:
        raise TopicRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"replication factor must be -1 or at least 1, not {asked} (Strata keeps "
                           "the namespace's bookie write quorum of copies whatever is asked)")


def _configs_checked(topic: dict, conn: KafkaConnection) -> dict[str, str]:
    try:
        return tc.checked({c["name"]: c.get("value") for c in topic.get("configs") or []},
                          conn.front.ctx.config)
    except tc.ConfigRefused as exc:
        raise TopicRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None


async def check_policies(conn: KafkaConnection, base: TopicName, fields: dict[str, object]) -> None:
    """A retention at or under a backlog quota in force is refused, as the admin API refuses it."""
    retention = fields.get(policies.RETENTION_KEY)
    if isinstance(retention, dict):
        try:
            await bq.refuse_retention_under_quotas(conn.front.service.astore, base.tenant, base.namespace,
                                                   base, retention)
        except NotAllowed as exc:
            raise TopicRefused(ErrorCode.POLICY_VIOLATION, str(exc)) from None


async def _create_one(conn: KafkaConnection, topic: dict, validate_only: bool, out: dict) -> None:
    front = conn.front
    config = front.ctx.config
    base = base_of(conn, out["name"])
    await _require_admin(conn, base)
    count = _partitions_asked(topic.get("num_partitions", -1), config.kafka_default_partitions,
                              config.broker_partitions_max)
    _replication_checked(topic.get("replication_factor", -1))
    if topic.get("assignments"):
        raise TopicRefused(ErrorCode.INVALID_REQUEST, "manual replica assignment is not supported: "
                           "Strata places copies on bookies itself")
    explicit = _configs_checked(topic, conn)
    try:
        ns_policies = await policies.existing_namespace_policies(front.service.astore, base.tenant, base.namespace)
    except NamespaceNotFound:
        raise TopicRefused(ErrorCode.INVALID_TOPIC_EXCEPTION,
                           f"namespace {base.tenant}/{base.namespace} does not exist") from None
    explicit = tc.created_defaults(explicit, ns_policies, config)
    fields = {k: v for k, v in tc.to_policies(explicit, ns_policies, config).items() if v is not None}
    if await layout_now(conn, base) is not None:
        raise TopicRefused(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {out['name']!r} already exists")
    await check_policies(conn, base, fields)
    if not validate_only:
        try:
            await policies.create_partitioned(front.service.astore, base, count, config.broker_partitions_max)
        except AlreadyExists:
            raise TopicRefused(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {out['name']!r} already exists") from None
        await policies.register_partitions(front.service.astore, base, 0, count, front.ctx.clock.wall_ms())
        if fields:
            await policies.set_topic_policies(front.service.astore, base, fields)
        front.catalog.forget(base)
    out.update(topic_id=topic_id(base), num_partitions=count, replication_factor=config.ledger_write_quorum,
               configs=[{"name": e.name, "value": e.value, "read_only": e.read_only, "config_source": e.source,
                         "is_sensitive": False} for e in tc.describe(fields, ns_policies, config, None)])


async def create_topics(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    topics = body.get("topics") or []
    twice = _duplicates([t.get("name") or "" for t in topics])
    results = []
    for topic in topics:
        out: dict = {"name": topic.get("name") or "", "topic_id": NO_TOPIC_ID, "error_code": ErrorCode.NONE,
                     "error_message": None, "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if out["name"] in twice:
                raise TopicRefused(ErrorCode.INVALID_REQUEST, "the topic is named more than once in the request")
            await _create_one(conn, topic, bool(body.get("validate_only", False)), out)
        except (TopicRefused, StrataError) as exc:
            failed(out, exc)
        results.append(out)
    return {"throttle_time_ms": 0, "topics": results}


# --- DeleteTopics ----------------------------------------------------------------------------------

async def _delete_one(conn: KafkaConnection, out: dict) -> None:
    front = conn.front
    base = base_of(conn, out["name"])
    await _require_admin(conn, base)
    layout = await layout_now(conn, base)
    if layout is None:
        raise TopicRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {out['name']!r} does not exist")
    out["topic_id"] = topic_id(base)
    count, partitioned = layout
    try:
        if partitioned:
            await peers.delete_partitioned_topic(front.service, base, count, force=True)
        else:   # a topic made by a Pulsar client or the admin API: Kafka partition 0
            await peers.delete_partition(front.service, base, force=True)
            await policies.delete_topic_policies(front.service.astore, base)
            await schema_registry.forget_topic(front.service.astore, front.ctx.clock, base)
    finally:
        front.catalog.forget(base)


async def delete_topics(conn: KafkaConnection, req: Request) -> dict:
    """v0-5 name topics (`topic_names`); v6 `topics[{name, topic_id}]`, where a topic given only
    by id is UNKNOWN_TOPIC_ID (clients send names; ids are not looked up)."""
    body = req.body
    if req.api_version >= 6:
        asked = [(t.get("name"), t.get("topic_id") or NO_TOPIC_ID) for t in body.get("topics") or []]
    else:
        asked = [(name, NO_TOPIC_ID) for name in body.get("topic_names") or []]
    responses = []
    for name, tid in asked:
        out: dict = {"name": name, "topic_id": tid, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if name is None:
                raise TopicRefused(ErrorCode.UNKNOWN_TOPIC_ID, "topics are deleted by name here")
            await _delete_one(conn, out)
        except (TopicRefused, StrataError) as exc:
            failed(out, exc)
        responses.append(out)
    return {"throttle_time_ms": 0, "responses": responses}


# --- CreatePartitions ------------------------------------------------------------------------------

async def _grow_one(conn: KafkaConnection, topic: dict, validate_only: bool, name: str) -> None:
    front = conn.front
    config = front.ctx.config
    base = base_of(conn, name)
    await _require_admin(conn, base)
    if topic.get("assignments"):
        raise TopicRefused(ErrorCode.INVALID_REQUEST, "manual replica assignment is not supported")
    count = int(topic.get("count", 0))
    layout = await layout_now(conn, base)
    if layout is None:
        raise TopicRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    current, partitioned = layout
    if not partitioned:
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS, "a non-partitioned topic cannot grow")
    if count <= current:
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS,
                           f"topic currently has {current} partitions, which is not fewer than the requested {count}")
    if count > config.broker_partitions_max:
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS,
                           f"at most {config.broker_partitions_max} partitions, not {count}")
    if validate_only:
        return
    try:
        old = await policies.update_partitioned(front.service.astore, base, count, config.broker_partitions_max)
    except AlreadyExists as exc:       # grown meanwhile by someone else
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS,
                           f"topic now has {exc.details.get('current')} partitions, not fewer than {count}") from None
    finally:
        front.catalog.forget(base)
    await policies.register_partitions(front.service.astore, base, old, count, front.ctx.clock.wall_ms())


async def create_partitions(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    topics = body.get("topics") or []
    twice = _duplicates([t.get("name") or "" for t in topics])
    results = []
    for topic in topics:
        out: dict = {"name": topic.get("name") or "", "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if out["name"] in twice:
                raise TopicRefused(ErrorCode.INVALID_REQUEST, "the topic is named more than once in the request")
            await _grow_one(conn, topic, bool(body.get("validate_only", False)), out["name"])
        except (TopicRefused, StrataError) as exc:
            failed(out, exc)
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


# --- what the produce path asks --------------------------------------------------------------------

async def max_message_bytes(conn: KafkaConnection, base: TopicName) -> int:
    """The largest record batch the Kafka topic `base` takes: its `max.message.bytes` (topic policy
    `maxMessageSize`), else `broker_max_message_bytes`. One metadata read: callers may remember it."""
    front = conn.front
    return tc.max_message_bytes_of(await policies.topic_policies(front.service.astore, base), front.ctx.config)
