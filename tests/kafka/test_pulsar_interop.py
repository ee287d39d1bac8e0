"""Kafka clients and the official Pulsar client on the same topics (issue: "What a Kafka producer
writes, the official pulsar-client reads with the same key, properties, event time and payload, and
the other way round"): record key = partition_key, headers = properties, record timestamp = event
time. Pulsar keys and properties are strings: bytes that are not UTF-8 cross as base64 (keys; header
values, named in `__kafka_b64_headers`), null header values as "" named in `__kafka_null_headers`; a
Pulsar message without an event time reaches Kafka with its publish time.
"""

from __future__ import annotations

import base64

import pulsar
import pytest

from tests.kafka.helpers import (
    BINARY_HEADER,
    Rec,
    assert_same_records,
    create_partitioned,
    now_ms,
    pulsar_topic,
    unique_topic,
)
from tests.kafka.test_confluent import Confluent
from tests.kafka.test_kafka_python import KafkaPython

RECEIVE_TIMEOUT_MS = 10_000


def text_records(tag: str, count: int, partition: int = 0) -> list[Rec]:
    base = now_ms() - 30_000
    return [Rec(f"key-{tag}-{i}".encode(), f"payload-{tag}-{i}".encode() + bytes([0, 0xFF]),
                (("origin", b"kafka"), ("n", str(i).encode()), ("tag", tag.encode())), base + 10 * i, partition)
            for i in range(count)]


@pytest.mark.parametrize("producer_cls", [Confluent, KafkaPython], ids=["confluent", "kafka-python"])
def test_kafka_producer_to_pulsar_consumer(standalone, bootstrap: str, pulsar_client: pulsar.Client,
                                           producer_cls) -> None:
    topic = unique_topic("k2p")
    create_partitioned(standalone.admin_url, topic, 2)
    recs = text_records("k2p", 6, partition=1)
    consumer = pulsar_client.subscribe(pulsar_topic(topic, 1), "interop",
                                       initial_position=pulsar.InitialPosition.Earliest)
    try:
        producer_cls(bootstrap).produce(topic, recs, compression="lz4")
        for r in recs:
            msg = consumer.receive(RECEIVE_TIMEOUT_MS)
            consumer.acknowledge(msg)
            assert msg.data() == r.value
            assert r.key is not None and msg.partition_key() == r.key.decode()
            assert msg.properties() == {k: v.decode() for k, v in r.headers}
            assert msg.event_timestamp() == r.timestamp
    finally:
        consumer.close()


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
@pytest.mark.parametrize("consumer_cls", [Confluent, KafkaPython], ids=["confluent", "kafka-python"])
def test_pulsar_producer_to_kafka_consumer(standalone, bootstrap: str, pulsar_client: pulsar.Client,
                                           consumer_cls, batching: bool) -> None:
    """A non-partitioned topic is Kafka partition 0; a batched Pulsar entry still gives one offset per
    message (the issue's per-partition message index): 0, 1, 2, ... on a new topic."""
    topic = unique_topic("p2k")
    base = now_ms() - 20_000
    producer = pulsar_client.create_producer(pulsar_topic(topic), batching_enabled=batching,
                                             batching_max_publish_delay_ms=50)
    sent = []
    results: list[pulsar.Result] = []
    try:
        for i in range(8):
            props = {"origin": "pulsar", "n": str(i)}
            key = f"pkey-{i}"
            value = f"pulsar-{i}".encode() + bytes([0, 0xFE])
            producer.send_async(value, lambda res, _id: results.append(res), partition_key=key, properties=props,
                                event_timestamp=base + i)
            sent.append(Rec(key.encode(), value, tuple((k, v.encode()) for k, v in props.items()), base + i, 0))
        producer.flush()
        assert results == [pulsar.Result.Ok] * len(sent), results
    finally:
        producer.close()
    got = consumer_cls(bootstrap).consume(topic, 0, ("earliest", 0), expect=len(sent))
    got_sorted_headers = [Rec(r.key, r.value, tuple(sorted(r.headers)), r.timestamp, r.partition, r.offset)
                          for r in got]
    want = [Rec(r.key, r.value, tuple(sorted(r.headers)), r.timestamp, r.partition) for r in sent]
    assert_same_records(want, got_sorted_headers, f"Pulsar producer (batching={batching}) → {consumer_cls.name}")
    assert [r.offset for r in got] == list(range(len(sent)))


def test_kafka_bytes_that_are_not_text_reach_pulsar_encoded(standalone, bootstrap: str,
                                                            pulsar_client: pulsar.Client) -> None:
    """Pulsar keys and properties are strings: a non-UTF-8 key arrives as base64 text, a non-UTF-8
    header value as base64 with its name listed in `__kafka_b64_headers`, a null header value as ""
    listed in `__kafka_null_headers`; a null key is no key. Read back through Kafka, all are exact."""
    topic = unique_topic("k2p-bytes")
    create_partitioned(standalone.admin_url, topic, 1)
    base = now_ms() - 10_000
    recs = [Rec(b"\xff\xfekey", b"v0", (("h-bin", BINARY_HEADER), ("h-null", None), ("h-text", b"t")), base, 0),
            Rec(None, b"v1", (("h-empty", b""),), base + 1, 0)]
    consumer = pulsar_client.subscribe(pulsar_topic(topic, 0), "interop",
                                       initial_position=pulsar.InitialPosition.Earliest)
    try:
        kafka = Confluent(bootstrap)
        kafka.produce(topic, recs)
        first = consumer.receive(RECEIVE_TIMEOUT_MS)
        second = consumer.receive(RECEIVE_TIMEOUT_MS)
    finally:
        consumer.close()
    assert first.partition_key() == base64.b64encode(b"\xff\xfekey").decode()
    props = first.properties()
    assert props["h-text"] == "t" and props["h-null"] == ""
    assert base64.b64decode(props["h-bin"]) == BINARY_HEADER
    assert "h-bin" in props["__kafka_b64_headers"] and "h-text" not in props["__kafka_b64_headers"]
    assert "h-null" in props["__kafka_null_headers"] and "h-text" not in props["__kafka_null_headers"]
    assert first.event_timestamp() == base
    assert second.partition_key() == "" and second.properties() == {"h-empty": ""}
    assert_same_records(recs, kafka.consume(topic, 0, ("earliest", 0), expect=2), "Kafka → Kafka over the same topic")


def test_pulsar_messages_without_event_time_carry_their_publish_time(standalone, bootstrap: str,
                                                                     pulsar_client: pulsar.Client) -> None:
    """A batched Pulsar topic with every other message lacking an event time: a Kafka consumer sees the
    event time where there is one and the publish time elsewhere; reading from an offset inside the
    batch starts exactly there; offsets_for_times goes by those same timestamps."""
    topic = unique_topic("p2k-times")
    base = now_ms() - 60_000
    producer = pulsar_client.create_producer(pulsar_topic(topic), batching_enabled=True,
                                             batching_max_publish_delay_ms=100)
    try:
        for i in range(10):
            extra = {"event_timestamp": base + 100 * i} if i % 2 == 0 else {}
            producer.send_async(f"m{i}".encode(), None, partition_key=f"k{i}", **extra)
        producer.flush()
    finally:
        producer.close()
    reader = pulsar_client.create_reader(pulsar_topic(topic), pulsar.MessageId.earliest)
    try:
        published = [reader.read_next(RECEIVE_TIMEOUT_MS).publish_timestamp() for _ in range(10)]
    finally:
        reader.close()
    want = [base + 100 * i if i % 2 == 0 else published[i] for i in range(10)]
    client = KafkaPython(bootstrap)
    got = client.consume(topic, 0, ("offset", 5), expect=5)
    assert [(r.offset, r.value, r.timestamp) for r in got] == [(i, f"m{i}".encode(), want[i]) for i in range(5, 10)]
    assert client.offset_for_time(topic, 0, base + 250) == 1       # m1's publish time is later than base + 250
    assert client.offset_for_time(topic, 0, max(want) + 1) is None
