"""Produce (0): Kafka record batches appended to Strata topics, one entry per batch.

For each partition of the request, in order (the connection admits one request at a time):
1. the partition is resolved (`broker.kafka.topics`) and must be served here: another owner, or
   none yet, is NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and retries there);
2. the role must be allowed to produce (TOPIC_AUTHORIZATION_FAILED);
3. every batch is decoded and checked first (magic 2, CRC-32C, codec, records; a batch over
   `broker_max_message_bytes` is MESSAGE_TOO_LARGE), so a partition's batches are all appended or
   none is;
4. a batch with a producer id >= 0 is checked by Kafka's idempotence rules
   (`broker.kafka.idempotence`): a duplicate of one of the last 5 is answered with its original
   offset and not stored again; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch is
   INVALID_PRODUCER_EPOCH. A batch without a producer id is plain at-least-once;
5. each batch becomes one stored entry (`broker.kafka.convert`) submitted to the managed ledger.
The response waits until every entry is durable (acks 1 and -1 alike: an entry is acknowledged
by the ledger's ack quorum) and carries each partition's base offset. acks=0 gets no response.
The wait is bounded by the request's `timeout_ms` (at most TIMEOUT_MS_MAX): past it the partition
is answered REQUEST_TIMED_OUT while its appends go on, and the client retries (an idempotent
producer's retry is answered with the original offsets, a plain one may be stored twice: Kafka's
at-least-once).

What must hold: nothing is appended for a partition whose batches failed a check; offsets in the
answer are the stored entries' first offsets; Pulsar consumers are woken after the appends are
durable (as for a Pulsar producer's receipt).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.kafka import errors as kerrors
from broker.kafka.convert import batch_to_entry
from broker.kafka.idempotence import Verdict
from broker.kafka.topic_configs import max_message_bytes_of
from broker.kafka.topics import partition_topic, pulsar_name
from broker.security.authorization import Action
from common.errors import InvalidTopicName, StrataError
from wire.kafka.errors import ErrorCode, KafkaCodecError
from wire.kafka.records import RecordBatch, decode_batches

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from broker.topics.topic import PersistentTopic
    from wire.kafka.codec import Request

log = logging.getLogger(__name__)
SEQ_MOD = 2**31
DEFAULT_TIMEOUT_MS = 30_000       # a request's timeout_ms when it gives none (Kafka's request.timeout.ms)
TIMEOUT_MS_MAX = 300_000          # the longest a Produce waits for durability, whatever it asks


@dataclass
class _Partition:
    """One partition's part of a Produce: what was appended or why not."""

    index: int
    error: int = ErrorCode.NONE
    message: str | None = None
    appends: list[asyncio.Future] = field(default_factory=list)   # durable positions, in batch order
    base_offset: int | None = None    # known at once for a duplicate
    topic: PersistentTopic | None = None


def last_sequence(batch: RecordBatch) -> int:
    return (batch.base_sequence + batch.last_offset_delta) % SEQ_MOD


async def handle(conn: KafkaConnection, req: Request) -> object:
    body = req.body
    acks = body.get("acks", -1)
    answers: dict[str, list[_Partition]]
    if acks not in (0, 1, -1):
        answers = {t.get("name"): [_Partition(p.get("index", 0), ErrorCode.INVALID_REQUIRED_ACKS)
                                   for p in t.get("partition_data") or []] for t in body.get("topic_data") or []}
        return _response(answers)
    if body.get("transactional_id"):
        answers = {t.get("name"): [_Partition(p.get("index", 0), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                                   for p in t.get("partition_data") or []] for t in body.get("topic_data") or []}
        return _response(answers) if acks != 0 else None
    answers = {}
    for topic_data in body.get("topic_data") or []:
        name = topic_data.get("name") or ""
        answers[name] = [await _partition(conn, name, p) for p in topic_data.get("partition_data") or []]
    timeout_s = max(1, min(int(body.get("timeout_ms") or DEFAULT_TIMEOUT_MS), TIMEOUT_MS_MAX)) / 1000
    return _complete(conn, answers, answer=acks != 0, timeout_s=timeout_s)   # acks=0: never answered


async def _partition(conn: KafkaConnection, topic_name: str, data: dict) -> _Partition:
    out = _Partition(int(data.get("index", 0)))
    front = conn.front
    try:
        base = pulsar_name(topic_name, conn.default_namespace)
    except InvalidTopicName:
        out.error = ErrorCode.INVALID_TOPIC_EXCEPTION
        return out
    try:
        layout = await front.catalog.layout(base)
        if layout is None or not 0 <= out.index < layout[0]:
            out.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        name = partition_topic(base, layout[1], out.index)
        if not await front.authorization.allowed(conn.role, Action.PRODUCE, name):
            out.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            return out
        topic = await front.service.get_topic(name)
    except StrataError as exc:
        out.error = kerrors.code_of(exc)
        out.message = str(exc)
        return out
    out.topic = topic
    records = data.get("records")
    if not records:
        out.error = ErrorCode.INVALID_RECORD
        return out
    try:
        batches = decode_batches(records, strict=True)
    except KafkaCodecError as exc:
        out.error, out.message = exc.kafka_code, str(exc)
        return out
    try:
        limit = max_message_bytes_of(await front.catalog.topic_policies(base), front.ctx.config)
    except StrataError as exc:
        out.error, out.message = kerrors.code_of(exc), str(exc)
        return out
    if not batches:
        out.error = ErrorCode.INVALID_RECORD
        return out
    now_ms = front.ctx.clock.wall_ms()
    converted = [batch_to_entry(batch, client_id=conn.client_id, now_ms=now_ms) for batch in batches]
    if any(len(entry) > limit for entry, _, _ in converted):
        out.error = ErrorCode.MESSAGE_TOO_LARGE
        out.message = f"a record batch stores over the limit of {limit} bytes (max.message.bytes)"
        return out
    try:
        await _append(conn, topic, list(zip(batches, converted)), out)
    except StrataError as exc:      # the idempotence state refused it (a bound, a value out of range)
        out.error, out.message = kerrors.code_of(exc), str(exc)
    return out


async def _append(conn: KafkaConnection, topic: PersistentTopic,
                  batches: list[tuple[RecordBatch, tuple[bytes, int, int]]], out: _Partition) -> None:
    front = conn.front
    states = None
    if any(b.producer_id >= 0 for b, _ in batches):
        try:
            states = await front.producer_states.of(topic)
        except StrataError as exc:
            out.error, out.message = kerrors.code_of(exc), str(exc)
            return
    for batch, (entry, messages, publish_ms) in batches:
        if batch.producer_id >= 0 and states is not None:
            check = states.producers.check(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                           last_sequence(batch))
            if check.verdict is Verdict.DUPLICATE and check.mark is not None:
                if out.base_offset is None and not out.appends:
                    out.base_offset = check.mark.first_offset
                continue
            if check.verdict is Verdict.IN_FLIGHT and isinstance(check.token, asyncio.Future):
                out.appends.append(check.token)
                continue
            if check.verdict is Verdict.OUT_OF_ORDER:
                log.info("kafka producer %d (epoch %d) on %s: batch %d..%d out of order; earlier batches "
                         "are not stored here", batch.producer_id, batch.producer_epoch, topic.name,
                         batch.base_sequence, last_sequence(batch))
                out.error = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                return
            if check.verdict is Verdict.INVALID_EPOCH:
                out.error = ErrorCode.INVALID_PRODUCER_EPOCH
                return
        try:
            appended = topic.publish(entry, messages, publish_ms)
        except StrataError as exc:
            out.error, out.message = kerrors.code_of(exc), str(exc)
            return
        if batch.producer_id >= 0 and states is not None:
            states.accepted(batch, appended, last_sequence(batch), messages)
        out.appends.append(appended)
        front.stats.produced(topic, conn, messages, len(entry), batch.producer_id)


async def _complete(conn: KafkaConnection, answers: dict[str, list[_Partition]], answer: bool,
                    timeout_s: float) -> dict | None:
    deadline = conn.front.ctx.clock.monotonic_s() + timeout_s
    notify: set = set()
    for parts in answers.values():
        for part in parts:
            if not part.appends:
                continue
            try:
                remaining = max(0.0, deadline - conn.front.ctx.clock.monotonic_s())
                durable = asyncio.gather(*part.appends)
                positions = await asyncio.wait_for(asyncio.shield(durable), remaining)
            except TimeoutError:     # the appends go on; the client retries (idempotent: answered once)
                part.error, part.message = ErrorCode.REQUEST_TIMED_OUT, f"not durable within {timeout_s:.1f} s"
                durable.add_done_callback(functools.partial(_late, part.topic))
                continue
            except StrataError as exc:
                part.error, part.message = kerrors.code_of(exc), str(exc)
                continue
            except asyncio.CancelledError:
                raise
            topic = part.topic
            if topic is not None:
                notify.add(topic)
                if part.base_offset is None:
                    first = positions[0]
                    part.base_offset = first if isinstance(first, int) else topic.ml.offset_of(first)
    for topic in notify:
        topic.notify_appended()
    return _response(answers) if answer else None


def _late(topic: PersistentTopic | None, durable: asyncio.Future) -> None:
    """Appends that outlived their request's timeout: consumers are woken once they are durable
    (and a failure is consumed, never left unretrieved)."""
    if durable.cancelled() or durable.exception() is not None or topic is None:
        return
    topic.notify_appended()


def _response(answers: dict[str, list[_Partition]]) -> dict:
    return {"responses": [
        {"name": name, "partition_responses": [
            {"index": p.index, "error_code": p.error,
             "base_offset": p.base_offset if p.error == ErrorCode.NONE and p.base_offset is not None else -1,
             "log_append_time_ms": -1, "log_start_offset": _log_start(p), "record_errors": [],
             "error_message": p.message if p.error != ErrorCode.NONE else None}
            for p in parts]}
        for name, parts in answers.items()], "throttle_time_ms": 0}


def _log_start(part: _Partition) -> int:
    if part.topic is None or part.error != ErrorCode.NONE:
        return -1
    try:
        return int(part.topic.ml.log_start_offset)
    except StrataError:
        return -1
