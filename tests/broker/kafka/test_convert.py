"""Kafka record batches <-> stored entries (broker.kafka.convert): both ways, byte for byte.

What a Kafka producer stores must read back to a Kafka consumer exactly (keys, values, headers,
timestamps, producer fields) and to a Pulsar consumer as the documented mapping; what a Pulsar
producer stores (batched or not) must read back to a Kafka consumer with its key, properties and
event time.
"""

from __future__ import annotations

import base64
import json
import os
import random

import pytest

from broker.kafka import convert
from common.errors import MalformedFrame, MalformedPayload
from entries.batch import ZLIB, BatchMessage, build_batch, decode_payload
from entries.entry import build_entry, parse_entry
from proto import pulsar_api_pb2 as pb
from wire.kafka.records import Record, RecordBatch, decode_batches, encode_batch

SEED = int(os.environ.get("KAFKA_CONVERT_SEED", random.randrange(2**32)))


def _batch(records: list[Record], *, pid: int = -1, epoch: int = -1, seq: int = -1, base_ts: int = 1_700_000_000_000,
           log_append: bool = False) -> RecordBatch:
    raw = encode_batch(records, base_offset=0, base_timestamp=base_ts,
                       max_timestamp=base_ts + max(r.timestamp_delta for r in records), producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, timestamp_type=1 if log_append else 0)
    (batch,) = decode_batches(raw, strict=True)
    return batch


def _round_trip(batch: RecordBatch, base_offset: int = 0) -> RecordBatch:
    entry, messages, _publish = convert.batch_to_entry(batch, client_id="c", now_ms=5)
    assert messages == len(batch.records)
    (back,) = decode_batches(convert.entry_to_batch(entry, base_offset), strict=True)
    return back


def _random_bytes(rng: random.Random, utf8: bool) -> bytes:
    if utf8:
        return "".join(rng.choice("abcé€ 1") for _ in range(rng.randrange(0, 12))).encode()
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12))) + b"\xff"


def _random_record(rng: random.Random, i: int) -> Record:
    key = None if rng.random() < 0.2 else _random_bytes(rng, rng.random() < 0.7)
    value = None if rng.random() < 0.1 else _random_bytes(rng, rng.random() < 0.5)
    names = rng.sample(["a", "b", "trace-id", "é"], rng.randrange(0, 4))
    headers = [(n, None if rng.random() < 0.2 else _random_bytes(rng, rng.random() < 0.6)) for n in names]
    return Record(offset_delta=i, timestamp_delta=rng.randrange(0, 1000), key=key, value=value, headers=headers)


def test_kafka_records_round_trip_exactly():
    rng = random.Random(SEED)
    try:
        for _ in range(200):
            records = [_random_record(rng, i) for i in range(rng.randrange(1, 20))]
            back = _round_trip(_batch(records), base_offset=rng.randrange(0, 2**40))
            assert [(r.key, r.value, r.headers) for r in back.records] == \
                [(r.key, r.value, r.headers) for r in records]
            assert [back.base_timestamp + r.timestamp_delta for r in back.records] == \
                [1_700_000_000_000 + r.timestamp_delta for r in records]
            assert [r.offset_delta for r in back.records] == list(range(len(records)))
    except AssertionError:
        print(f"KAFKA_CONVERT_SEED={SEED}")
        raise


def test_a_kafka_batch_is_one_pulsar_batch_a_pulsar_consumer_reads():
    records = [Record(0, 0, b"k1", b"v1", [("h", b"text"), ("bin", b"\xff\x00"), ("none", None)]),
               Record(1, 7, b"\xfe\x01", None, [])]
    entry, messages, publish_ms = convert.batch_to_entry(_batch(records, pid=9, epoch=2, seq=40), client_id="app",
                                                         now_ms=5)
    info = parse_entry(entry)
    md = info.metadata
    assert (messages, md.num_messages_in_batch, publish_ms, md.publish_time) == (2, 2, 1_700_000_000_007,
                                                                                 1_700_000_000_007)
    assert md.producer_name == "kafka-9" and md.sequence_id == 40 and md.highest_sequence_id == 41
    assert {kv.key: kv.value for kv in md.properties} == {"kafka.pid": "9", "kafka.epoch": "2", "kafka.seq": "40"}
    first, second = decode_payload(md, info.payload(entry))
    assert (first.partition_key, first.payload, first.event_time_ms) == ("k1", b"v1", 1_700_000_000_000)
    assert first.properties["h"] == "text"
    assert base64.b64decode(first.properties["bin"]) == b"\xff\x00"
    assert json.loads(first.properties[convert.B64_HEADERS]) == ["bin"]
    assert first.properties["none"] == "" and json.loads(first.properties[convert.NULL_HEADERS]) == ["none"]
    assert second.partition_key_b64_encoded and base64.b64decode(second.partition_key) == b"\xfe\x01"
    assert second.null_value and second.payload == b"" and second.event_time_ms == 1_700_000_000_007


def test_producer_fields_come_back_and_plain_batches_carry_none():
    back = _round_trip(_batch([Record(0, 0, None, b"x", [])], pid=3, epoch=1, seq=99))
    assert (back.producer_id, back.producer_epoch, back.base_sequence) == (3, 1, 99)
    plain = _round_trip(_batch([Record(0, 0, None, b"x", [])], seq=0))   # aiokafka: pid -1, seq 0
    assert (plain.producer_id, plain.producer_epoch, plain.base_sequence) == (-1, -1, -1)
    entry, _, _ = convert.batch_to_entry(_batch([Record(0, 0, None, b"x", [])]), client_id="my app!", now_ms=1)
    assert parse_entry(entry).metadata.producer_name == "kafka-my_app_"


def test_log_append_time_takes_the_broker_clock():
    entry, _, publish_ms = convert.batch_to_entry(_batch([Record(0, 0, None, b"x", [])], log_append=True),
                                                  client_id=None, now_ms=123)
    assert publish_ms == 123
    (member,) = decode_payload(parse_entry(entry).metadata, parse_entry(entry).payload(entry))
    assert member.event_time_ms == 123


@pytest.mark.parametrize("compression", [pb.NONE, ZLIB])
def test_pulsar_messages_read_as_kafka_records(compression):
    msgs = [BatchMessage(b"one", {"a": "1"}, partition_key="k", event_time_ms=1_000),
            BatchMessage(b"two", {}, event_time_ms=None),
            BatchMessage(b"", {}, partition_key=base64.b64encode(b"\x00\xff").decode(), partition_key_b64_encoded=True,
                         null_value=True, event_time_ms=900)]
    md, payload = build_batch(msgs, producer_name="p", sequence_id=0, publish_time_ms=2_000, compression=compression)
    (batch,) = decode_batches(convert.entry_to_batch(build_entry(md, payload), 70), strict=True)
    assert batch.base_offset == 70 and batch.last_offset_delta == 2
    assert [(r.key, r.value, r.headers) for r in batch.records] == [
        (b"k", b"one", [("a", b"1")]), (None, b"two", []), (b"\x00\xff", None, [])]
    assert [batch.base_timestamp + r.timestamp_delta for r in batch.records] == [1_000, 2_000, 900]


def test_a_non_batched_pulsar_message_is_a_batch_of_one():
    md = pb.MessageMetadata(producer_name="p", sequence_id=4, publish_time=2_000, partition_key="key",
                            event_time=1_500)
    md.properties.add(key="x", value="y")
    (batch,) = decode_batches(convert.entry_to_batch(build_entry(md, b"payload"), 5), strict=True)
    (record,) = batch.records
    assert (batch.base_offset, record.key, record.value, record.headers) == (5, b"key", b"payload", [("x", b"y")])
    assert batch.base_timestamp == 1_500


def test_a_malformed_entry_is_a_typed_error():
    with pytest.raises(MalformedFrame):
        convert.entry_to_batch(b"not an entry", 0)
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=3)
    with pytest.raises(MalformedPayload):
        convert.entry_to_batch(build_entry(md, b"\x00\x00\x00\x02ab"), 0)


def test_a_snappy_pulsar_batch_reads_as_kafka_records():
    """The official client's SNAPPY batches (raw snappy blocks) decode for Kafka consumers too."""
    from entries.batch import SNAPPY
    md, payload = build_batch([BatchMessage(b"v" * 300, partition_key="k")], producer_name="p", sequence_id=0,
                              publish_time_ms=5, compression=SNAPPY)
    (batch,) = decode_batches(convert.entry_to_batch(build_entry(md, payload), 0), strict=True)
    assert [(r.key, r.value) for r in batch.records] == [(b"k", b"v" * 300)]


def test_a_marker_entry_is_a_control_batch_clients_skip():
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=9, marker_type=1)
    (batch,) = decode_batches(convert.entry_to_batch(build_entry(md, b""), 12), strict=True)
    assert batch.is_control and batch.base_offset == 12 and batch.last_offset_delta == 0
