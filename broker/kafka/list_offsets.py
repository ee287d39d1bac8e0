"""ListOffsets (2): earliest, latest and by-timestamp offsets of partitions.

- -2 (earliest): the log start offset, the first message still kept.
- -1 (latest): the log end offset (high watermark = last stable offset: no transactions).
- t >= 0: the first offset whose record timestamp is >= t. The entry index's running maximum of
  publish times (for Kafka-made entries: the batch's max timestamp) finds the first entry that can
  hold one (a bisect); that entry is read and its records searched; none -> offset -1 with
  timestamp -1, as Kafka answers. Pulsar-made messages count with their event time, else their
  publish time.
- Served up to v6: v7+ add the special timestamps -3 and below, which are not kept.
- v0 answers `old_style_offsets` (a list of one offset).

What must hold: a by-time answer is never a record with a smaller timestamp than asked (KoP's
off-by-one) and never past the log end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.kafka import errors as kerrors
from broker.kafka.topics import partition_topic, pulsar_name
from broker.security.authorization import Action
from common.errors import InvalidTopicName, MalformedFrame, MalformedPayload, StrataError
from entries.batch import decode_payload
from entries.entry import parse_entry
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from wire.kafka.codec import Request

LATEST, EARLIEST = -1, -2


async def handle(conn: KafkaConnection, req: Request) -> dict:
    topics = []
    for topic in req.body.get("topics") or []:
        name = topic.get("name") or ""
        answers = [await _partition(conn, req.api_version, name, p) for p in topic.get("partitions") or []]
        topics.append({"name": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}


async def _partition(conn: KafkaConnection, version: int, topic_name: str, p: dict) -> dict:
    index = int(p.get("partition_index", 0))
    wanted = int(p.get("timestamp", LATEST))
    out = {"partition_index": index, "error_code": ErrorCode.NONE, "old_style_offsets": [],
           "timestamp": -1, "offset": -1, "leader_epoch": -1}
    front = conn.front
    if wanted < EARLIEST:      # -3 and below need v7+, which is not served
        out["error_code"] = ErrorCode.UNSUPPORTED_VERSION
        return out
    try:
        base = pulsar_name(topic_name, conn.default_namespace)
        layout = await front.catalog.layout(base)
        if layout is None or not 0 <= index < layout[0]:
            out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        name = partition_topic(base, layout[1], index)
        if not await front.authorization.allowed(conn.role, Action.CONSUME, name):
            out["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            return out
        topic = await front.service.get_topic(name)
        offset, timestamp = await _find(topic.ml, wanted)
    except InvalidTopicName:
        out["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
        return out
    except StrataError as exc:
        out["error_code"] = kerrors.code_of(exc)
        return out
    out["offset"], out["timestamp"] = offset, timestamp
    if version == 0:
        out["old_style_offsets"] = [offset] if offset >= 0 else []
    return out


async def _find(ml, wanted: int) -> tuple[int, int]:
    if wanted == LATEST:
        return ml.end_offset, -1
    if wanted == EARLIEST:
        return ml.log_start_offset, -1
    if ml.end_offset == ml.log_start_offset:
        return -1, -1
    position = ml.position_for_publish_time(wanted)
    while position <= ml.last_confirmed:
        first = ml.offset_of(position)
        for i, ts in enumerate(await _record_times(ml, position)):
            if ts >= wanted:
                return first + i, ts
        position = ml.next_position(position)
    return -1, -1


async def _record_times(ml, position) -> list[int]:
    entries = await ml.read(position, 1)
    if not entries:
        return []
    data = entries[0].data
    try:
        info = parse_entry(data)
        messages = decode_payload(info.metadata, info.payload(data))
    except (MalformedFrame, MalformedPayload):
        return []
    publish = info.metadata.publish_time
    return [m.event_time_ms if m.event_time_ms is not None else publish for m in messages]

