"""Metadata (3) and DescribeCluster (60): brokers, topics, partitions and their leaders.

The leader of Kafka partition i is the owner of Pulsar partition i's bundle, found the way a
Pulsar lookup finds it (`Ownership.resolve`: assigned now when nobody owns it; when it is assigned
to another broker, that broker takes it before it is named: `_confirmed`). Brokers are every
live registered broker that serves Kafka, with its address on the listener the client came
through (PLAINTEXT clients get PLAINTEXT addresses), under its stable node id
(`broker.kafka.listeners.node_id`). One copy per partition as Kafka sees it: replicas and ISR
are the leader (bookies keep the copies; a Kafka client has no use for them), leader epoch -1
(no fencing by epoch, as KoP).

Topics: null (v1+) or empty (v0) = every topic of the default namespace; a missing topic is
created (a partitioned topic of `kafka_default_partitions`) when the request allows it and
`kafka_auto_create_topics` is on and the namespace's autoTopicCreation allows (Pulsar's policy,
`broker.limits.lifecycle`; its topicType is not used: a Kafka topic is always partitioned), else
UNKNOWN_TOPIC_OR_PARTITION; a name Kafka refuses gets
INVALID_TOPIC_EXCEPTION; a topic the role may not look up TOPIC_AUTHORIZATION_FAILED.

What must hold: every leader id in the answer is in its broker list (or -1 with
LEADER_NOT_AVAILABLE), so a client never looks for a broker it was not told about.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from broker.cluster.ownership import LookupKind
from broker.cluster.peers import peer_call
from broker.kafka import listeners as kl
from broker.kafka import topic_configs as tc
from broker.kafka.topics import kafka_name, partition_topic, pulsar_name
from broker.limits.lifecycle import AUTO_TOPIC_CREATION, creatable
from broker.records import policies
from broker.security.authorization import Action
from common.errors import AlreadyExists, InvalidTopicName, NamespaceNotFound, StrataError
from common.topic_names import TopicName
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from wire.kafka.codec import Request

log = logging.getLogger(__name__)
INT32_MIN = -(2**31)                # authorized operations: "not provided"
CONFIRM_BOUND_S = 5.0               # a broker chosen for an unowned bundle takes it within this


def topic_id(name: TopicName) -> bytes:
    """A stable topic id (UUID bytes) for Metadata v10+: the same on every broker."""
    return uuid.uuid5(uuid.NAMESPACE_URL, str(name.base)).bytes


def brokers(conn: KafkaConnection) -> tuple[list[dict], dict[str, int]]:
    """(the broker list for this client's listener, service URL -> node id)."""
    front = conn.front
    wanted = conn.listener.name
    out: list[dict] = []
    ids: dict[str, int] = {}
    me = front.service.identity.service_url
    for info in front.registry.live().values():
        if info.service_url == me:
            continue
        address = kl.decode(info.report.get("kafkaListeners")).get(wanted)
        if address is not None:
            node = kl.node_id(info.service_url)
            ids[info.service_url] = node
            out.append({"node_id": node, "host": address[0], "port": address[1], "rack": None})
    own = kl.node_id(me)
    ids[me] = own
    out.insert(0, {"node_id": own, "host": conn.listener.host, "port": conn.listener.port, "rack": None})
    return out, ids


async def _leader(conn: KafkaConnection, name: TopicName, ids: dict[str, int]) -> int:
    """The node id leading `name`, -1 when nobody can (no owner, or an owner without Kafka)."""
    try:
        answer = await conn.front.ownership.resolve(name, authoritative=False)
    except StrataError as exc:
        log.debug("kafka metadata: no leader for %s: %s", name, exc)
        return -1
    if answer.kind is LookupKind.REDIRECT:
        return ids.get(await _confirmed(conn, name, answer.http_url) or "", -1)
    return ids.get(answer.native_url, -1)


async def _confirmed(conn: KafkaConnection, name: TopicName, http_url: str) -> str | None:
    """The bundle of `name` was just assigned to the broker at `http_url`, which does not hold it
    yet: ask it to take it (an authoritative lookup there, as a Pulsar client follows a redirect)
    and answer with the broker that then owns it; None when that fails within CONFIRM_BOUND_S.

    Why a Kafka leader must be an owner, not a choice: a broker that serves the partition first
    (a producer reaching another broker) wins it, the chosen one then refuses, and the client has
    seen the leader go A -> B -> A quickly. librdkafka (2.16) can then keep fetching from B while
    it records A as the leader: it takes B for a preferred read replica and never moves back,
    so that consumer stalls on the partition for good."""
    path = f"/lookup/v2/topic/persistent/{name.path}"
    try:
        status, body = await asyncio.wait_for(peer_call(http_url, "GET", path, config=conn.front.ctx.config),
                                              CONFIRM_BOUND_S)
    except TimeoutError:
        status, body = 0, "no answer"
    if status != 200 or not isinstance(body, dict) or not body.get("brokerUrl"):
        log.info("kafka metadata: %s assigned to %s, which did not take it: %s %s", name, http_url, status, body)
        return None
    return str(body["brokerUrl"])


async def _create(conn: KafkaConnection, base: TopicName, partitions: int) -> None:
    front = conn.front
    try:
        await policies.create_partitioned(front.service.astore, base, partitions,
                                          front.ctx.config.broker_partitions_max)
    except AlreadyExists:
        pass
    now_ms = front.ctx.clock.wall_ms()
    await policies.register_partitions(front.service.astore, base, 0, partitions, now_ms)
    ns_policies = await policies.namespace_policies(front.service.astore, base.tenant, base.namespace)
    config = front.ctx.config
    fields = {k: v for k, v in tc.to_policies(tc.created_defaults({}, ns_policies, config), ns_policies,
                                             config).items() if v is not None}
    if fields:
        await policies.set_topic_policies(front.service.astore, base, fields)
    front.catalog.forget(base)


async def _topic(conn: KafkaConnection, text: str, auto_create: bool, ids: dict[str, int], version: int) -> dict:
    front = conn.front
    config = front.ctx.config
    out: dict = {"error_code": ErrorCode.NONE, "name": text, "topic_id": bytes(16), "is_internal": False,
                 "partitions": [], "topic_authorized_operations": INT32_MIN}
    try:
        base = pulsar_name(text, conn.default_namespace)
    except InvalidTopicName:
        out["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
        return out
    if not await front.authorization.allowed(_role(conn), Action.LOOKUP, base):
        out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return out
    try:
        layout = await front.catalog.layout(base)
        if layout is None and auto_create and config.kafka_auto_create_topics and creatable(
                await front.service.limits.value(base, AUTO_TOPIC_CREATION)):
            if not await front.authorization.allowed(_role(conn), Action.PRODUCE, base):
                out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                return out
            await _create(conn, base, config.kafka_default_partitions)
            layout = await front.catalog.layout(base)
    except NamespaceNotFound:
        layout = None
    if layout is None:
        out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    count, partitioned = layout
    out["topic_id"] = topic_id(base)
    for i in range(count):
        leader = await _leader(conn, partition_topic(base, partitioned, i), ids)
        nodes = [leader] if leader >= 0 else []
        out["partitions"].append({
            "error_code": ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": i, "leader_id": leader, "leader_epoch": -1,
            "replica_nodes": nodes, "isr_nodes": nodes, "offline_replicas": []})
    return out


def _role(conn: KafkaConnection) -> str | None:
    return conn.identity.role if conn.identity is not None else None


async def _all_topics(conn: KafkaConnection) -> list[str]:
    tenant, namespace = conn.default_namespace.split("/", 1)
    try:
        found = await conn.front.catalog.kafka_topics(tenant, namespace)
    except NamespaceNotFound:
        return []
    return sorted(kafka_name(name, conn.default_namespace) for name in found)


async def handle(conn: KafkaConnection, req: Request) -> dict:
    body = req.body
    version = req.api_version
    listed, ids = brokers(conn)
    requested = body.get("topics")
    if requested is None or (version == 0 and not requested):
        names = await _all_topics(conn)
        auto = False
    else:
        names = [t.get("name") or "" for t in requested]
        auto = bool(body.get("allow_auto_topic_creation", True)) if version >= 4 else True
    topics = [await _topic(conn, name, auto, ids, version) for name in names]
    return {"throttle_time_ms": 0, "brokers": listed, "cluster_id": conn.front.cluster_id,
            "controller_id": listed[0]["node_id"], "topics": topics,
            "cluster_authorized_operations": INT32_MIN}


async def describe_cluster(conn: KafkaConnection, req: Request) -> dict:
    listed, _ids = brokers(conn)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "endpoint_type": 1, "cluster_id": conn.front.cluster_id, "controller_id": listed[0]["node_id"],
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": None}
                        for b in listed],
            "cluster_authorized_operations": INT32_MIN}
