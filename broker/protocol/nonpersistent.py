"""PRODUCER and SUBSCRIBE on non-persistent topics (`broker.nonpersistent`): the wire side.

What must hold: nothing is attached when the request was abandoned meanwhile (`wanted()` turned
false: the client closed the producer or the connection).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.nonpersistent.topic import NonPersistentProducer, NonPersistentTopic
from broker.protocol import schemas as schemas_wire
from broker.topics import access_modes
from common.errors import NotOnNonPersistent
from common.topic_names import TopicName
from ledger.position import LATEST
from proto import pulsar_api_pb2 as pb
from wire.pulsar import encode_producer_success

if TYPE_CHECKING:
    from broker.protocol.connection import ServerConnection


async def attach_producer(conn: ServerConnection, cmd: pb.CommandProducer, name: TopicName, *,
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
    on_queued = conn.producer_waits(cmd, producer_name, topic.last_sequence_id(producer_name))
    admitted = await access_modes.admit(topic, producer, cmd.producer_access_mode,  # type: ignore[arg-type]
                                        conn.client_epoch(cmd), on_queued, wanted)
    if admitted is None:
        return
    producer.schema_version = schema_version
    conn.producers[cmd.producer_id] = producer
    conn.write(encode_producer_success(cmd.request_id, producer_name, topic.last_sequence_id(producer_name),
                                       topic_epoch=admitted.epoch, schema_version=schema_version))


async def topic_for(conn: ServerConnection, cmd: pb.CommandSubscribe, name: TopicName) -> NonPersistentTopic:
    """SUBSCRIBE on a non-persistent topic: the live topic (read_compacted refused, as Pulsar does)."""
    if cmd.read_compacted:
        raise NotOnNonPersistent("readCompacted only valid on persistent topics", topic=str(name))
    return await conn.front.non_persistent.get(name)
