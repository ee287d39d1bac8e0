"""Fetch (1): stored entries read back as Kafka record batches, with Kafka's long poll.

Each partition is read straight from its managed ledger at the entry holding the fetch offset
(`ledger`'s offsets: O(log n) over ledgers and then entries); each entry becomes one record batch
whose base offset is the entry's first offset (`broker.kafka.convert`). A fetch offset inside an
entry returns the whole entry: clients skip the records before their offset. No cursor is moved
(Kafka consumers keep their own positions; part 2 maps groups onto subscriptions).

Limits: `partition_max_bytes` per partition and `max_bytes` per response, except that the first
batch of a response is always whole (KIP-74), so a record larger than the limits still gets
through. Offsets: below the log start or past the log end is OFFSET_OUT_OF_RANGE; at the end
(the high watermark) nothing is returned. The high watermark and the last stable offset are the
log end (no transactions: every stored entry is committed), so read_committed clients (librdkafka,
kafkajs) see everything at once.

Long poll: with fewer than `min_bytes` found, the fetch waits (at most `max_wait_ms`, capped by
`kafka_fetch_wait_ms_max`) for an append to any of its partitions (`broker.kafka.appends`) and
reads again. Sessions (KIP-227) are not kept: every answer says session 0, which clients accept and
answer with full fetches.

What must hold: offsets returned are strictly increasing per partition and never past the log
end; a response holds whole batches only.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.kafka import errors as kerrors
from broker.kafka.convert import entry_to_batch
from broker.kafka.topics import partition_topic, pulsar_name
from broker.security.authorization import Action
from common.errors import InvalidTopicName, MalformedFrame, MalformedPayload, StrataError
from common.ratelimited_log import RateLimitedLog
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from broker.topics.topic import PersistentTopic
    from wire.kafka.codec import Request

log = logging.getLogger(__name__)
_noisy = RateLimitedLog(log, interval_s=10.0)
READ_ENTRIES_MAX = 500          # entries read per partition per round


@dataclass
class _Part:
    topic_name: str
    index: int
    offset: int                        # the next offset to return
    max_bytes: int
    error: int = ErrorCode.NONE
    topic: PersistentTopic | None = None
    batches: list[bytes] = field(default_factory=list)
    size: int = 0
    messages: int = 0                  # messages in `batches`
    why: str = ""                      # what the error came from (logged)

    def answer(self) -> dict:
        ml = self.topic.ml if self.topic is not None else None
        hw = ml.end_offset if ml is not None else -1
        start = ml.log_start_offset if ml is not None else -1
        return {"partition_index": self.index, "error_code": self.error, "high_watermark": hw,
                "last_stable_offset": hw, "log_start_offset": start, "aborted_transactions": [],
                "preferred_read_replica": -1, "records": self.batches or b""}


async def handle(conn: KafkaConnection, req: Request) -> object:
    body = req.body
    config = conn.front.ctx.config
    parts: list[_Part] = []
    for topic in body.get("topics") or []:
        name = topic.get("topic") or ""
        for p in topic.get("partitions") or []:
            part = _Part(name, int(p.get("partition", 0)), int(p.get("fetch_offset", 0)),
                         max(0, int(p.get("partition_max_bytes", 1 << 20))))
            await _resolve(conn, part)
            parts.append(part)
    wait_s = max(0, min(int(body.get("max_wait_ms", 0)), config.kafka_fetch_wait_ms_max)) / 1000
    max_bytes = int(body.get("max_bytes", 0x7FFFFFFF) or 0x7FFFFFFF)
    return _serve(conn, parts, wait_s, int(body.get("min_bytes", 1)), max_bytes)


async def _resolve(conn: KafkaConnection, part: _Part) -> None:
    front = conn.front
    try:
        base = pulsar_name(part.topic_name, conn.default_namespace)
        layout = await front.catalog.layout(base)
        if layout is None or not 0 <= part.index < layout[0]:
            part.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return
        name = partition_topic(base, layout[1], part.index)
        if not await front.authorization.allowed(conn.role, Action.CONSUME, name):
            part.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            return
        part.topic = await front.service.get_topic(name)
    except InvalidTopicName:
        part.error = ErrorCode.INVALID_TOPIC_EXCEPTION
    except StrataError as exc:
        part.error = kerrors.code_of(exc)
        part.why = f": {exc!r}"


async def _serve(conn: KafkaConnection, parts: list[_Part], wait_s: float, min_bytes: int, max_bytes: int) -> dict:
    clock = conn.front.ctx.clock
    deadline = clock.monotonic_s() + wait_s
    while True:
        total = await _read_round(conn, parts, max_bytes)
        if total >= min_bytes or any(p.error != ErrorCode.NONE for p in parts):
            break
        remaining = deadline - clock.monotonic_s()
        live = [p for p in parts if p.topic is not None]
        if remaining <= 0 or not live:
            break
        mls = [p.topic.ml for p in live if p.topic is not None]
        woken = await conn.front.appends.wait(mls, remaining, ready=functools.partial(_has_more, live))
        if not woken:
            break
    conn.front.stats.fetched(conn, parts)
    for p in parts:
        if p.error != ErrorCode.NONE:       # the client retries; say why, once a while per partition
            _noisy.info((p.topic_name, p.index, p.error), "kafka fetch of %s[%d] at offset %d answered %s%s",
                        p.topic_name, p.index, p.offset, ErrorCode(p.error).name, p.why)
    topics: dict[str, list[dict]] = {}
    for p in parts:
        topics.setdefault(p.topic_name, []).append(p.answer())
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": 0,
            "responses": [{"topic": name, "partitions": answers} for name, answers in topics.items()]}


def _has_more(parts: list[_Part]) -> bool:
    return any(p.topic is not None and p.topic.ml.end_offset > p.offset for p in parts)


async def _read_round(conn: KafkaConnection, parts: list[_Part], max_bytes: int) -> int:
    """Read what each partition has now (within the limits); the bytes found so far in all."""
    total = sum(p.size for p in parts)
    for part in parts:
        if part.error != ErrorCode.NONE or part.topic is None:
            continue
        budget = min(part.max_bytes - part.size, max_bytes - total)
        first_of_response = total == 0
        if budget <= 0 and not first_of_response:
            continue
        try:
            total += await _read_partition(part, budget, first_of_response)
        except StrataError as exc:
            part.error = kerrors.code_of(exc)
            part.why = f": {exc!r}"
    return total


async def _read_partition(part: _Part, budget: int, whole_first: bool) -> int:
    topic = part.topic
    assert topic is not None
    ml = topic.ml
    start, end = ml.log_start_offset, ml.end_offset
    if part.offset < start or part.offset > end:
        part.error = ErrorCode.OFFSET_OUT_OF_RANGE
        part.why = f": the log holds [{start}, {end})"
        return 0
    if part.offset == end:
        return 0
    position = ml.entry_for_offset(part.offset)
    count, planned = 0, 0
    pos = position
    while count < READ_ENTRIES_MAX and pos <= ml.last_confirmed:
        size = ml.entry_meta(pos).size_bytes
        if count and planned + size > budget:
            break
        if not count and size > budget and not whole_first:
            return 0
        planned += size
        count += 1
        pos = ml.next_position(pos)
    if count == 0:
        return 0
    entries = await ml.read(position, count, max_bytes=max(budget, 1))
    added = 0
    for entry in entries:
        base = ml.offset_of(entry.position)
        try:
            batch = entry_to_batch(entry.data, base)
        except (MalformedFrame, MalformedPayload) as exc:
            log.warning("kafka fetch: %s entry %s does not convert (skipped): %s", topic.name, entry.position, exc)
            part.offset = base + ml.entry_meta(entry.position).messages
            continue
        if (part.batches or added) and added + len(batch) > budget:
            break
        messages = ml.entry_meta(entry.position).messages
        part.batches.append(batch)
        part.size += len(batch)
        part.messages += messages
        added += len(batch)
        part.offset = base + messages
    return added
