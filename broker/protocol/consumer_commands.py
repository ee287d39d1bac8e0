"""Consumer-side commands of a connection: SUBSCRIBE, FLOW, ACK, REDELIVER, SEEK, UNSUBSCRIBE,
CLOSE_CONSUMER, GET_LAST_MESSAGE_ID.

Each function takes the `ServerConnection` and the command body. An ACK the cursor refuses (state
over `cursor_state_bytes_max`, or fenced) is answered with an error ACK_RESPONSE when the client
asked for a receipt (`request_id`), and logged otherwise (at most every `_ACK_ERROR_LOG_INTERVAL_S`,
with the number of refusals in between). SUBSCRIBE creates the topic and
the subscription on first use (durable: at Latest or Earliest by `initialPosition`; a reader's
non-durable one at `start_message_id`, docs/protocol.md §8.9) and replies SUCCESS before any MESSAGE
or ACTIVE_CONSUMER_CHANGE for the new consumer; it is refused (ConsumerBusy) on the subscription of
a Kafka consumer group that has live members (`broker.topics.group_offsets.check_pulsar_attach`).
Commands naming an unknown consumer id are ignored, except those with a request id, which get
SUCCESS (close) or ConsumerNotFound.

What must hold: a consumer is in `conn.consumers` exactly while it is attached to its
subscription; `detach` is the one way out.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING

from broker.nonpersistent.topic import NonPersistentTopic
from broker.protocol import schemas as schemas_wire
from broker.security.authorization import Action
from broker.topics import group_offsets
from broker.topics.consumer import Consumer
from broker.topics.dispatch import compacted as compaction_reading
from broker.topics.entry_facts import entry_facts
from broker.topics.subscription import AckedId, KeySharedSpec, Subscription
from common.errors import ConsumerNotFound, CursorError, InvalidArgument, NotOnNonPersistent, StrataError
from common.invariant import present
from common.topic_names import TopicName, parse_topic
from ledger.position import EARLIEST, LATEST, Position
from proto import pulsar_api_pb2 as pb
from wire.pulsar import encode_ack_response, encode_error_for, encode_get_last_message_id_response, encode_success

if TYPE_CHECKING:
    from broker.protocol.connection import ServerConnection

log = logging.getLogger(__name__)

_labels = itertools.count()
_ACK_ERROR_LOG_INTERVAL_S = 10.0
LAST_ENTRY_READ_TIMEOUT_S = 5.0   # GET_LAST_MESSAGE_ID reads the last entry to give its batch index


class _AckErrorLog:
    """Refused acks without a receipt: logged, but not once per ACK (a consumer acks fast)."""

    last_s: float | None = None   # monotonic time of the last log line; None: never logged
    unlogged = 0                  # refusals since then


def _log_ack_error(conn: ServerConnection, cmd: pb.CommandAck, exc: StrataError) -> None:
    now_s = conn.front.ctx.clock.monotonic_s()
    _AckErrorLog.unlogged += 1
    if _AckErrorLog.last_s is not None and now_s - _AckErrorLog.last_s < _ACK_ERROR_LOG_INTERVAL_S:
        return
    log.warning("ACK from %s (consumer %d) refused, %d refusal(s) since the last report; the "
                "client asked for no receipt: %s", conn.peer, cmd.consumer_id,
                _AckErrorLog.unlogged, exc)
    _AckErrorLog.last_s, _AckErrorLog.unlogged = now_s, 0


U64 = 2**64


def wire_position(mid: pb.MessageIdData) -> Position:
    """A MessageIdData as a Position, reading the uint64 fields as signed (2^64-1 -> -1)."""
    ledger, entry = mid.ledgerId, mid.entryId
    if ledger >= 2**63:
        ledger -= U64
    if entry >= 2**63:
        entry -= U64
    return Position(ledger, entry)


def start_position(mid: pb.MessageIdData) -> Position:
    """SUBSCRIBE.start_message_id / SEEK.message_id: earliest and latest map to the markers."""
    position = wire_position(mid)
    if position.ledger_id < 0:
        return EARLIEST
    if position.ledger_id >= 2**63 - 1:
        return LATEST
    return position


def key_shared_spec(cmd: pb.CommandSubscribe) -> KeySharedSpec | None:
    """SUBSCRIBE's keySharedMeta in the core's words (None: not given)."""
    if not cmd.HasField("keySharedMeta"):
        return None
    meta = cmd.keySharedMeta
    sticky = meta.keySharedMode == pb.STICKY
    return KeySharedSpec(sticky=sticky, ranges=tuple((r.start, r.end) for r in meta.hashRanges) if sticky else (),
                         allow_out_of_order=meta.allowOutOfOrderDelivery)


def acked_ids(cmd: pb.CommandAck) -> list[AckedId]:
    """ACK's message ids in the core's words."""
    return [AckedId(wire_position(mid), mid.ack_set, mid.batch_size if mid.HasField("batch_size") else 0)
            for mid in cmd.message_id]


def _start_of(cmd: pb.CommandSubscribe):
    if not cmd.durable and cmd.HasField("start_message_id"):
        return start_position(cmd.start_message_id)
    return EARLIEST if cmd.initialPosition == pb.CommandSubscribe.Earliest else LATEST


async def subscribe(conn: ServerConnection, cmd: pb.CommandSubscribe) -> None:
    if cmd.consumer_id in conn.consumers:
        conn.write(encode_success(cmd.request_id))   # already attached: idempotent
        return
    key = ("c", cmd.consumer_id)
    conn.creating.add(key)
    try:
        name = parse_topic(cmd.topic)
        await conn.front.authorization.check(conn.role, Action.CONSUME, name, cmd.subscription)   # first
        topic = (await conn.front.service.get_or_create(name, create=cmd.force_topic_creation)  # autoTopicCreation
                 if name.persistent else await non_persistent_topic(conn, cmd, name))
        await schemas_wire.check_consumer(conn.front, topic, cmd)   # before the subscription exists
        if not isinstance(topic, NonPersistentTopic):   # subscribeRate: NotAllowed past it (rate_limits)
            topic.rates.check_subscribe(conn.peer.rpartition(":")[0], cmd.consumer_name, cmd.consumer_id)
        compacted = name.persistent and cmd.read_compacted     # broker.topics.dispatch.compacted
        compaction_reading.check_subscribe(cmd.subType, compacted)
        from_earliest = compacted and cmd.subscription not in topic.subscriptions and _start_of(cmd) == EARLIEST
        if name.persistent and cmd.durable and cmd.subscription not in topic.subscriptions:
            await conn.front.service.auto_create.check_subscription(name)   # autoSubscriptionCreation
        sub = await topic.subscription(cmd.subscription, durable=cmd.durable, start=_start_of(cmd))
        if name.persistent and group_offsets.group_of(sub) is not None:   # only a Kafka group's reads metadata
            await group_offsets.check_pulsar_attach(conn.front.ctx.astore, sub)
        if key in conn.cancelled or conn.consumers.get(cmd.consumer_id) is not None:
            return
        if not isinstance(topic, NonPersistentTopic):   # maxConsumers, ...PerSubscription: ConsumerBusy
            topic.check_consumer_room(sub, cmd.subType)
        consumer = Consumer(conn, cmd.consumer_id, cmd.consumer_name, cmd.subType,
                            cmd.priority_level, name.partition_index, f"{cmd.consumer_name}#{next(_labels)}")
        consumer.subscription = sub
        sub.add_consumer(consumer, key_shared_spec(cmd))
        compaction_reading.attach(sub, compacted, from_earliest)
        conn.consumers[cmd.consumer_id] = consumer
    finally:
        conn.creating.discard(key)
        conn.cancelled.discard(key)
    conn.write(encode_success(cmd.request_id))
    consumer.announce()


def _subscription_of(consumer: Consumer) -> Subscription:
    """The subscription of a consumer a command names: attached before it was registered."""
    return present(consumer.subscription, "a registered consumer is attached", consumer_id=consumer.consumer_id)


def detach(conn: ServerConnection, consumer: Consumer) -> None:
    conn.forget_consumer(consumer)
    if consumer.subscription is not None:
        consumer.subscription.remove_consumer(consumer)


def flow(conn: ServerConnection, cmd: pb.CommandFlow) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    if consumer is not None:
        _subscription_of(consumer).flow(consumer, cmd.messagePermits)


def ack(conn: ServerConnection, cmd: pb.CommandAck) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    has_request = cmd.HasField("request_id")
    try:
        if consumer is None:
            raise ConsumerNotFound("no such consumer on this connection", consumer_id=cmd.consumer_id)
        _subscription_of(consumer).ack(consumer, acked_ids(cmd), cumulative=cmd.ack_type == pb.CommandAck.Cumulative,
                                       corrupt=cmd.HasField("validation_error"))
    except StrataError as exc:
        if has_request:
            code = exc.server_error if exc.server_error is not None else 0
            conn.write(encode_ack_response(cmd.consumer_id, cmd.request_id, code, str(exc)))
            return
        if isinstance(exc, CursorError):
            _log_ack_error(conn, cmd, exc)
            return
        raise
    if has_request:
        conn.write(encode_ack_response(cmd.consumer_id, cmd.request_id))


def redeliver(conn: ServerConnection, cmd: pb.CommandRedeliverUnacknowledgedMessages) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    if consumer is not None:
        ids = cmd.message_ids
        _subscription_of(consumer).redeliver(consumer, [wire_position(mid) for mid in ids] if ids else None)


def close_consumer(conn: ServerConnection, cmd: pb.CommandCloseConsumer) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    if consumer is not None:
        detach(conn, consumer)
    elif ("c", cmd.consumer_id) in conn.creating:
        conn.cancelled.add(("c", cmd.consumer_id))
    conn.write(encode_success(cmd.request_id))


async def unsubscribe(conn: ServerConnection, cmd: pb.CommandUnsubscribe) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    if consumer is None:
        raise ConsumerNotFound("no such consumer on this connection", consumer_id=cmd.consumer_id)
    sub = _subscription_of(consumer)
    await sub.topic.unsubscribe(sub, consumer)
    conn.forget_consumer(consumer)
    conn.write(encode_success(cmd.request_id))


async def seek(conn: ServerConnection, cmd: pb.CommandSeek) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    if consumer is None:
        raise ConsumerNotFound("no such consumer on this connection", consumer_id=cmd.consumer_id)
    if cmd.HasField("message_publish_time"):
        # a publish time after the last message is not an error: it means "the end" (Pulsar)
        _subscription_of(consumer).seek(None, cmd.message_publish_time)
    else:
        position = start_position(cmd.message_id)
        last = _subscription_of(consumer).ml.last_confirmed
        if position not in (EARLIEST, LATEST) and position > last:
            # checked before anything moves: the consumers stay connected, nothing changes
            raise InvalidArgument("seek past the end of the topic: no such message",
                                  ledger_id=position.ledger_id, entry_id=position.entry_id,
                                  last_ledger_id=last.ledger_id, last_entry_id=last.entry_id)
        _subscription_of(consumer).seek(position, None)
    conn.write(encode_success(cmd.request_id))


def get_last_message_id(conn: ServerConnection, cmd: pb.CommandGetLastMessageId) -> None:
    consumer = conn.consumers.get(cmd.consumer_id)
    if consumer is None:
        conn.write(encode_error_for(cmd.request_id, ConsumerNotFound("no such consumer", consumer_id=cmd.consumer_id)))
        return
    sub = _subscription_of(consumer)
    try:
        last = sub.ml.last_confirmed
    except StrataError as exc:   # NotOnNonPersistent: a non-persistent topic stores nothing
        conn.write(encode_error_for(cmd.request_id, exc))
        return
    md = sub.cursor.mark_delete_position

    async def answer() -> None:
        # Pulsar answers a batch's last member (batch size - 1): a reader inside the last batch
        # would otherwise think it has read everything (has_message_available() false too early)
        batch_index = await _last_batch_index(sub, last)
        answered = last
        compacted = await compaction_reading.last_message_id(sub, last)   # read_compacted, nothing after the view
        if compacted is not None:
            answered, batch_index = compacted
        conn.write(encode_get_last_message_id_response(
            cmd.request_id, answered.ledger_id, answered.entry_id, partition=consumer.partition,
            batch_index=batch_index, mark_delete=(md.ledger_id, md.entry_id)))

    conn.spawn(answer())


async def _last_batch_index(sub: Subscription, last: Position) -> int | None:
    """The last member's index of the entry at `last` if it holds a batch; None if not, if the
    topic is empty, or if it cannot be read within LAST_ENTRY_READ_TIMEOUT_S (then the answer
    names the entry only, as before)."""
    if last.entry_id < 0:
        return None
    try:
        entries = await asyncio.wait_for(sub.ml.read(last, 1), LAST_ENTRY_READ_TIMEOUT_S)
        facts = entry_facts(entries[0].data) if entries else None
    except (StrataError, TimeoutError) as exc:
        log.info("last entry %s not read for GET_LAST_MESSAGE_ID: %s", last, exc)
        return None
    return facts.messages - 1 if facts is not None and facts.is_batch else None


async def non_persistent_topic(conn: ServerConnection, cmd: pb.CommandSubscribe, name: TopicName) -> NonPersistentTopic:
    """SUBSCRIBE on a non-persistent topic: the live topic (read_compacted refused, as Pulsar does)."""
    if cmd.read_compacted:
        raise NotOnNonPersistent("readCompacted only valid on persistent topics", topic=str(name))
    return await conn.front.non_persistent.get(name)
