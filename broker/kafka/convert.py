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
A marker entry (never a message) becomes a control batch, which Kafka consumers skip past. A
chunked Pulsar message is not reassembled: each chunk is a record of its own.

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
from common.varint import encode_varint
from entries.batch import decode_payload, decompress
from entries.entry import build_entry, parse_entry
from proto import pulsar_api_pb2 as pb
from wire.kafka.records import Record, RecordBatch, encode_batch_of, record_bytes

_U32 = struct.Struct(">I")
_CONTROL_COMMIT = struct.pack(">hh", 0, 1)      # control record key: version 0, type COMMIT

B64_HEADERS = "__kafka_b64_headers"
NULL_HEADERS = "__kafka_null_headers"
_LOG_APPEND_TIME = 1
_CLIENT_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def _text(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _field_bytes(tag: bytes, raw: bytes) -> bytes:
    return tag + encode_varint(len(raw)) + raw


def _member_metadata(rec: Record, timestamp_ms: int) -> tuple[bytes, str | None, bool]:
    """(SingleMessageMetadata bytes, partition key, key is base64) of one record, encoded by hand
    (fields in number order, as protobuf writes them): the produce path's per-record cost."""
    parts: list[bytes] = []
    b64: list[str] | None = None
    nulls: list[str] | None = None
    seen: dict[str, int] = {}
    for name, value in rec.headers:
        if value is None:
            nulls = (nulls or []) + [name]
            text = b""
        else:
            try:
                value.decode("utf-8")
                text = value
            except UnicodeDecodeError:
                b64 = (b64 or []) + [name]
                text = base64.b64encode(value)
        kv = _field_bytes(b"\x0a", name.encode()) + _field_bytes(b"\x12", text)
        if name in seen:             # one value per name (a Pulsar client's map): the last one wins
            parts[seen[name]] = b""
        seen[name] = len(parts)
        parts.append(_field_bytes(b"\x0a", kv))
    for listed, names in ((B64_HEADERS, b64), (NULL_HEADERS, nulls)):
        if names:
            kv = _field_bytes(b"\x0a", listed.encode()) + _field_bytes(b"\x12", json.dumps(names).encode())
            parts.append(_field_bytes(b"\x0a", kv))
    key_text: str | None = None
    key_b64 = False
    if rec.key is not None:
        try:
            key_text = rec.key.decode("utf-8")
            parts.append(_field_bytes(b"\x12", rec.key))
        except UnicodeDecodeError:
            encoded = base64.b64encode(rec.key)
            key_text, key_b64 = encoded.decode("ascii"), True
            parts.append(_field_bytes(b"\x12", encoded))
    value = rec.value
    parts.append(b"\x18" + encode_varint(len(value) if value is not None else 0))
    parts.append(b"\x28" + encode_varint(max(0, timestamp_ms)))
    if key_b64:
        parts.append(b"\x30\x01")
    if value is None:
        parts.append(b"\x48\x01")
    return b"".join(parts), key_text, key_b64


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
    """(entry bytes, messages, publish time) of one Kafka record batch, stored as one Pulsar batch
    (uncompressed), laid out as the official client lays out its batches."""
    log_append = batch.timestamp_type == _LOG_APPEND_TIME
    base_ts = batch.base_timestamp
    parts: list[bytes] = []
    first_key: tuple[str | None, bool] | None = None
    for rec in batch.records:
        smm, key_text, key_b64 = _member_metadata(rec, now_ms if log_append else base_ts + rec.timestamp_delta)
        if first_key is None:
            first_key = (key_text, key_b64)
        parts += (_U32.pack(len(smm)), smm, rec.value or b"")
    publish_ms = publish_time_for(batch, now_ms)
    seq = batch.base_sequence if batch.producer_id >= 0 and batch.base_sequence >= 0 else 0
    messages = len(batch.records)
    md = pb.MessageMetadata(producer_name=producer_name_for(batch, client_id), sequence_id=seq,
                            publish_time=publish_ms, num_messages_in_batch=messages)
    if first_key is not None and first_key[0] is not None:   # Key_Shared routes a batch by its first key
        md.partition_key = first_key[0]
        if first_key[1]:
            md.partition_key_b64_encoded = True
    if batch.producer_id >= 0:
        md.properties.add(key=PID_PROPERTY, value=str(batch.producer_id))
        md.properties.add(key=EPOCH_PROPERTY, value=str(batch.producer_epoch))
        md.properties.add(key=SEQ_PROPERTY, value=str(batch.base_sequence))
        md.highest_sequence_id = seq + messages - 1
    return build_entry(md, b"".join(parts)), messages, publish_ms


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


def entry_to_batch(entry: bytes, base_offset: int) -> bytes:
    """The record batch a Kafka consumer gets for one stored entry whose first message has offset
    `base_offset` (MalformedFrame/MalformedPayload when the entry does not parse).

    The hot path of a Kafka fetch: batch members are read straight off the payload (their
    SingleMessageMetadata parsed by protobuf's C runtime) and encoded as records, with no
    intermediate objects per message."""
    info = parse_entry(entry)
    md = info.metadata
    publish_ms = md.publish_time
    if md.HasField("marker_type"):       # never a message: a control batch, which clients skip past
        return encode_batch_of(record_bytes(0, 0, _CONTROL_COMMIT, None, []), 1, base_offset=base_offset,
                               base_timestamp=publish_ms, max_timestamp=publish_ms, last_offset_delta=0,
                               transactional=True, control=True)
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
