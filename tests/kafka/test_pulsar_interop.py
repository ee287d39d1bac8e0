"""Kafka clients and the official Pulsar client on the same topics (issue: "What a Kafka producer
writes, the official pulsar-client reads with the same key, properties, event time and payload, and
the other way round"): record key = partition_key, headers = properties, record timestamp = event
time. Header values here are UTF-8 (Pulsar properties are strings); non-UTF-8 header values are
covered Kafka-to-Kafka in every client's round trip.
"""

from __future__ import annotations

import pulsar
import pytest

from tests.kafka.helpers import Rec, assert_same_records, create_partitioned, now_ms, pulsar_topic, unique_topic
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
