"""Kafka record batches <-> Strata's stored entries: one log, both protocols.

A Kafka producer's record batch is stored as ONE entry in Pulsar's batch format, so the official
Pulsar client reads it unchanged, and a Kafka consumer reads every entry (Pulsar- or Kafka-made)
back as one record batch whose offsets are the entry's message indexes (`ledger`'s offsets: the
entry's first offset, then one per batch member).

The mapping, record by record:
- key -> `partition_key`: the UTF-8 text when the key is valid UTF-8, else its base64 with
  `partition_key_b64_encoded` (Pulsar's own convention for byte keys). A null key -> no key.
- value -> payload; a null value (a tombstone) -> an empty payload with `null_value` set.
- timestamp -> `event_time`. The entry's `publish_time` is the batch's max timestamp (Kafka's
  CreateTime; the broker's clock for LogAppendTime or a batch without one), so by-time lookups,
  TTL and time retention see the record times, as in Kafka.
- headers -> properties, in order, duplicates kept. Property values are strings: a header value
  that is not valid UTF-8 is stored as its base64 text and its name listed in the property
  `__kafka_b64_headers` (a JSON list); a null header value is stored as "" and listed in
  `__kafka_null_headers`. Reading back reverses both, so bytes come back exactly; a Pulsar
  consumer sees the base64 text and the lists.
- the batch's producer id, epoch and base sequence (idempotent producers only) go in the entry's
  outer properties `kafka.pid`, `kafka.epoch`, `kafka.seq` (what the producer state is rebuilt
  from); the outer `producer_name` is `kafka-<pid>`, or `kafka-<client id>` for a batch without
  a producer id, and `sequence_id` the base sequence (0 without one).

Pulsar -> Kafka: a Pulsar message's key is its partition_key (base64-decoded when flagged), its
timestamp its event_time if set, else the entry's publish time; its properties become headers.

What must hold: `entry_to_batch(batch_to_entry(b))` gives back every record's key, value, headers
and timestamp exactly; the stored entry parses with `entries.entry.parse_entry` and
`entries.batch.decode_payload` like any client's batch.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct

from google.protobuf.message import DecodeError

from broker.kafka.idempotence import EPOCH_PROPERTY, PID_PROPERTY, SEQ_PROPERTY
from common.errors import MalformedPayload
from entries.batch import BatchMessage, build_batch, decode_payload, decompress
from entries.entry import build_entry, parse_entry
from proto import pulsar_api_pb2 as pb
from wire.kafka.records import Record, RecordBatch, encode_batch_of, record_bytes

_U32 = struct.Struct(">I")

B64_HEADERS = "__kafka_b64_headers"
NULL_HEADERS = "__kafka_null_headers"
_LOG_APPEND_TIME = 1
_CLIENT_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def _text(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _message(rec: Record, timestamp_ms: int) -> BatchMessage:
    properties: dict[str, str] = {}
    b64: list[str] = []
    nulls: list[str] = []
    pairs: list[tuple[str, str]] = []
    for name, value in rec.headers:
        if value is None:
            nulls.append(name)
            pairs.append((name, ""))
            continue
        text = _text(value)
        if text is None:
            b64.append(name)
            text = base64.b64encode(value).decode("ascii")
        pairs.append((name, text))
    for name, text in pairs:     # a dict keeps one value per name; duplicates keep the last
        properties[name] = text
    if b64:
        properties[B64_HEADERS] = json.dumps(b64)
    if nulls:
        properties[NULL_HEADERS] = json.dumps(nulls)
    msg = BatchMessage(payload=rec.value if rec.value is not None else b"", properties=properties,
                       event_time_ms=timestamp_ms, null_value=rec.value is None)
    if rec.key is not None:
        key_text = _text(rec.key)
        if key_text is None:
            msg.partition_key = base64.b64encode(rec.key).decode("ascii")
            msg.partition_key_b64_encoded = True
        else:
            msg.partition_key = key_text
    return msg


def producer_name_for(batch: RecordBatch, client_id: str | None) -> str:
    if batch.producer_id >= 0:
        return f"kafka-{batch.producer_id}"
    return "kafka-" + (_CLIENT_ID_CHARS.sub("_", client_id)[:64] if client_id else "anonymous")


def publish_time_for(batch: RecordBatch, now_ms: int) -> int:
    """The entry's publish time: the batch's max timestamp (CreateTime), else the broker's clock."""
    if batch.timestamp_type == _LOG_APPEND_TIME or batch.max_timestamp <= 0:
        return now_ms
    return batch.max_timestamp


def batch_to_entry(batch: RecordBatch, *, client_id: str | None, now_ms: int) -> tuple[bytes, int, int]:
    """(entry bytes, messages, publish time) of one Kafka record batch, stored as one Pulsar batch."""
    log_append = batch.timestamp_type == _LOG_APPEND_TIME
    messages = [_message(rec, now_ms if log_append else batch.base_timestamp + rec.timestamp_delta)
                for rec in batch.records]
    publish_ms = publish_time_for(batch, now_ms)
    seq = batch.base_sequence if batch.producer_id >= 0 and batch.base_sequence >= 0 else 0
    md, payload = build_batch(messages, producer_name=producer_name_for(batch, client_id), sequence_id=seq,
                              publish_time_ms=publish_ms)
    if batch.producer_id >= 0:
        md.properties.add(key=PID_PROPERTY, value=str(batch.producer_id))
        md.properties.add(key=EPOCH_PROPERTY, value=str(batch.producer_epoch))
        md.properties.add(key=SEQ_PROPERTY, value=str(batch.base_sequence))
        md.highest_sequence_id = seq + len(messages) - 1
    return build_entry(md, payload), len(messages), publish_ms


def _headers(properties: dict[str, str]) -> list[tuple[str, bytes | None]]:
    if not properties:
        return []
    b64 = _name_list(properties.get(B64_HEADERS))
    nulls = _name_list(properties.get(NULL_HEADERS))
    out: list[tuple[str, bytes | None]] = []
    for name, text in properties.items():
        if name in (B64_HEADERS, NULL_HEADERS):
            continue
        if name in nulls:
            out.append((name, None))
        elif name in b64:
            try:
                out.append((name, base64.b64decode(text, validate=True)))
            except (binascii.Error, ValueError):
                out.append((name, text.encode()))
        else:
            out.append((name, text.encode()))
    return out


def _name_list(raw: str | None) -> frozenset[str]:
    if not raw:
        return frozenset()
    try:
        names = json.loads(raw)
    except ValueError:
        return frozenset()
    return frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()


def _key(msg: BatchMessage) -> bytes | None:
    if msg.partition_key is None:
        return None
    if msg.partition_key_b64_encoded:
        try:
            return base64.b64decode(msg.partition_key, validate=True)
        except (binascii.Error, ValueError):
            pass
    return msg.partition_key.encode()


def entry_to_batch(entry: bytes, base_offset: int) -> bytes:
    """The record batch a Kafka consumer gets for one stored entry whose first message has offset
    `base_offset` (MalformedFrame/MalformedPayload when the entry does not parse).

    The hot path of a Kafka fetch: batch members are read straight off the payload (their
    SingleMessageMetadata parsed by protobuf's C runtime) and encoded as records, with no
    intermediate objects per message."""
    info = parse_entry(entry)
    md = info.metadata
    publish_ms = md.publish_time
    if not md.HasField("num_messages_in_batch"):
        members = [_outer_member(md, decode_payload(md, info.payload(entry))[0].payload)]
    else:
        raw = decompress(info.payload(entry), md.compression, md.uncompressed_size)
        members = _members(raw, md.num_messages_in_batch)
    times = [smm.event_time if smm.event_time else publish_ms for smm, _ in members]
    base_ts = min(times)
    blob = b"".join(record_bytes(i, times[i] - base_ts, _smm_key(smm), None if smm.null_value else payload,
                                 _smm_headers(smm))
                    for i, (smm, payload) in enumerate(members))
    pid, epoch, seq = _producer_fields(md)
    return encode_batch_of(blob, len(members), base_offset=base_offset, base_timestamp=base_ts,
                           max_timestamp=max(times), last_offset_delta=len(members) - 1, producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq)


def _members(raw: bytes, count: int) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """(metadata, payload) of each batch member; MalformedPayload if the batch lies."""
    out = []
    pos, size = 0, len(raw)
    parse = pb.SingleMessageMetadata.FromString
    try:
        for index in range(count):
            smm_size = _U32.unpack_from(raw, pos)[0]
            start = pos + 4
            if smm_size > size - start:
                raise MalformedPayload("member metadata exceeds batch", index=index)
            smm = parse(raw[start:start + smm_size])
            begin = start + smm_size
            pos = begin + smm.payload_size
            if smm.payload_size < 0 or pos > size:
                raise MalformedPayload("member payload exceeds batch", index=index)
            out.append((smm, raw[begin:pos]))
    except (struct.error, DecodeError, ValueError, RuntimeError) as exc:
        raise MalformedPayload("batch member does not parse", reason=str(exc)) from None
    return out


def _outer_member(md: pb.MessageMetadata, payload: bytes) -> tuple[pb.SingleMessageMetadata, bytes]:
    """A non-batched message's fields, in a batch member's shape."""
    smm = pb.SingleMessageMetadata(payload_size=len(payload), null_value=md.null_value)
    smm.properties.extend(md.properties)
    if md.HasField("partition_key"):
        smm.partition_key = md.partition_key
        smm.partition_key_b64_encoded = md.partition_key_b64_encoded
    if md.HasField("event_time"):
        smm.event_time = md.event_time
    return smm, payload


def _smm_key(smm: pb.SingleMessageMetadata) -> bytes | None:
    if not smm.HasField("partition_key"):
        return None
    if smm.partition_key_b64_encoded:
        try:
            return base64.b64decode(smm.partition_key, validate=True)
        except (binascii.Error, ValueError):
            pass
    return smm.partition_key.encode()


def _smm_headers(smm: pb.SingleMessageMetadata) -> list[tuple[bytes, bytes | None]]:
    properties = smm.properties
    if not properties:
        return []
    if len(properties) == 1 and properties[0].key not in (B64_HEADERS, NULL_HEADERS):
        kv = properties[0]
        return [(kv.key.encode(), kv.value.encode())]
    return [(name.encode(), value) for name, value in _headers({kv.key: kv.value for kv in properties})]


def _producer_fields(md: pb.MessageMetadata) -> tuple[int, int, int]:
    fields = {kv.key: kv.value for kv in md.properties if kv.key in (PID_PROPERTY, EPOCH_PROPERTY, SEQ_PROPERTY)}
    try:
        return int(fields[PID_PROPERTY]), int(fields[EPOCH_PROPERTY]), int(fields[SEQ_PROPERTY])
    except (KeyError, ValueError):
        return -1, -1, -1
