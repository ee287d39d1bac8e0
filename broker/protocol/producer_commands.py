"""PRODUCER and CLOSE_PRODUCER: attaching a client's producer to a topic, and letting it go.

PRODUCER runs as a request (`ServerConnection._request`): authorization first, then the topic
(loaded, or the live non-persistent one), its schema, the initial
subscription, the producer's name, the backlog quota, the access mode (`broker.topics.access_modes`),
and PRODUCER_SUCCESS (a non-persistent topic's producer: `attach_non_persistent`, which fans out
instead of storing). A PRODUCER repeated for a live producer gets the same answer. SEND itself is
routed inline by the connection (the hot path).

What must hold: a producer is registered on the connection only once admitted; one whose request
was abandoned meanwhile (CLOSE_PRODUCER during creation, connection closed) is never attached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.nonpersistent.topic import NonPersistentProducer
from broker.protocol import schemas as schemas_wire
from broker.protocol.state import ConnState
from broker.retention import backlog_quota
from broker.topics import access_modes
from broker.topics.producer import Producer
from common.topic_names import TopicName, parse_topic
from ledger.position import LATEST
from proto import pulsar_api_pb2 as pb
from wire.pulsar import encode_producer_success, encode_success

if TYPE_CHECKING:
    from broker.protocol.connection import ServerConnection


async def producer(conn: ServerConnection, cmd: pb.CommandProducer) -> None:
    """PRODUCER: the topic loaded, the producer checked and admitted, then PRODUCER_SUCCESS."""
    existing = conn.producers.get(cmd.producer_id)
    if existing is not None and not existing.closed:   # the client asked again: same answer
        topic_epoch = existing.topic.access.epoch
        conn.write(encode_producer_success(cmd.request_id, existing.name,
                                           existing.topic.last_sequence_id(existing.name),
                                           topic_epoch=topic_epoch,
                                           schema_version=existing.schema_version))
        return
    if existing is not None:  # closed by the broker (topic unloaded or deleted): start afresh
        conn.producers.pop(cmd.producer_id, None)
        conn.forget_producer(existing)
    key = ("p", cmd.producer_id)
    conn.creating.add(key)
    try:
        name = parse_topic(cmd.topic)
        await conn.front.authorization.check_producer(conn.role, name, cmd.initial_subscription_name)   # first
        if not name.persistent:   # in-memory fan-out, nothing stored
            await attach_non_persistent(conn, cmd, name, wanted=lambda: not (
                key in conn.cancelled or conn.state is ConnState.CLOSED))
            return
        topic = await conn.front.service.get_or_create(name)    # autoTopicCreation
        schema_version = await schemas_wire.producer_schema_version(conn.front, topic, cmd)
        if cmd.initial_subscription_name:
            if cmd.initial_subscription_name not in topic.subscriptions:   # autoSubscriptionCreation
                await conn.front.service.auto_create.check_subscription(name, initial=True)
            await topic.subscription(cmd.initial_subscription_name, durable=True, start=LATEST)
        producer_name = cmd.producer_name or await conn.front.service.next_producer_name()
        producer = Producer(conn, topic, cmd.producer_id, producer_name,
                            conn.config.broker_pending_sends_max, conn.config.broker_max_message_bytes)
        await backlog_quota.refuse_producer(conn.front.ctx, topic)
        admitted = await access_modes.admit(
            topic, producer, cmd.producer_access_mode, client_epoch(cmd),
            producer_waits(conn, cmd, producer_name, topic.last_sequence_id(producer_name)),
            wanted=lambda: not (key in conn.cancelled or conn.state is ConnState.CLOSED))
        if admitted is None:
            return
        producer.schema_version = schema_version
        conn.producers[cmd.producer_id] = producer
    finally:
        conn.creating.discard(key)
        conn.cancelled.discard(key)
    conn.write(encode_producer_success(cmd.request_id, producer_name,
                                       topic.last_sequence_id(producer_name), topic_epoch=admitted.epoch,
                                       schema_version=schema_version))

def client_epoch(cmd: pb.CommandProducer) -> int | None:
    """The topic epoch an exclusive producer shows when it reconnects (None: none)."""
    return cmd.topic_epoch if cmd.HasField("topic_epoch") else None

def producer_waits(conn: ServerConnection, cmd: pb.CommandProducer, producer_name: str,
                   last_sequence_id: int) -> Callable[[], None]:
    """What tells a WaitForExclusive producer that it is queued: PRODUCER_SUCCESS with
    producer_ready=false (the client then waits without a timeout)."""
    return lambda: conn.write(encode_producer_success(cmd.request_id, producer_name, last_sequence_id,
                                                      producer_ready=False))

def close_producer(conn: ServerConnection, cmd: pb.CommandCloseProducer) -> None:
    producer = conn.producers.pop(cmd.producer_id, None)
    if producer is not None:
        producer.topic.remove_producer(producer)
        conn.forget_producer(producer)
    elif ("p", cmd.producer_id) in conn.creating:
        conn.cancelled.add(("p", cmd.producer_id))
    conn.write(encode_success(cmd.request_id))


async def attach_non_persistent(conn: ServerConnection, cmd: pb.CommandProducer, name: TopicName, *,
                          wanted: Callable[[], bool]) -> None:
    """PRODUCER on a non-persistent topic: the schema checked (registered if new and allowed), the
    producer admitted under its access mode, and PRODUCER_SUCCESS with the schema version and
    the topic epoch; nothing attached if `wanted()` turned false meanwhile (the client closed the
    producer or the connection)."""
    topic = await conn.front.non_persistent.get(name)
    schema_version = await schemas_wire.producer_schema_version(conn.front, topic, cmd)
    if cmd.initial_subscription_name:
        await topic.subscription(cmd.initial_subscription_name, durable=True, start=LATEST)
    producer_name = cmd.producer_name or await conn.front.service.next_producer_name()
    producer = NonPersistentProducer(conn, topic, cmd.producer_id, producer_name,
                                     conn.config.broker_pending_sends_max, conn.config.broker_max_message_bytes)
    if not wanted():
        return
    on_queued = producer_waits(conn, cmd, producer_name, topic.last_sequence_id(producer_name))
    admitted = await access_modes.admit(topic, producer, cmd.producer_access_mode,  # type: ignore[arg-type]
                                        client_epoch(cmd), on_queued, wanted)
    if admitted is None:
        return
    producer.schema_version = schema_version
    conn.producers[cmd.producer_id] = producer
    conn.write(encode_producer_success(cmd.request_id, producer_name, topic.last_sequence_id(producer_name),
                                       topic_epoch=admitted.epoch, schema_version=schema_version))
