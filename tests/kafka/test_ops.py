"""Kafka clients are visible to operators: topic stats, `strata top` and /metrics.

While a confluent-kafka producer and a consumer (assign(), no group) are connected, the
partition's stats list the producer among `publishers` with `"protocol": "kafka"` and the consumer
under `protocolConsumers`, their traffic counts in the topic's in and out counters, `strata top`'s
row counts them, and /metrics carries the Kafka requests per API and the produce/fetch traffic
with the label protocol="kafka"."""

from __future__ import annotations

import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from admin_client.client import AdminClient
from cli.top.model import topic_row
from tests.kafka.helpers import create_partitioned, pulsar_topic, unique_topic

WAIT_S = 20.0


def _stats(admin_url: str, topic: str) -> dict:
    path = pulsar_topic(topic, 0).replace("persistent://", "/admin/v2/persistent/") + "/stats"
    return AdminClient(admin_url).call("GET", path)


def test_kafka_clients_in_stats_top_and_metrics(standalone) -> None:
    topic = unique_topic("ops")
    create_partitioned(standalone.admin_url, topic, 1)
    producer = Producer({"bootstrap.servers": standalone.kafka_bootstrap, "client.id": "ops-producer",
                         "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, value=b"x" * 100, key=str(i).encode())
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({"bootstrap.servers": standalone.kafka_bootstrap, "group.id": "unused",
                         "client.id": "ops-consumer", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        deadline = time.monotonic() + WAIT_S
        while got < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got += 1
        assert got == 20
        stats = _stats(standalone.admin_url, topic)
        kafka_publishers = [p for p in stats["publishers"] if p.get("protocol") == "kafka"]
        assert len(kafka_publishers) == 1, stats["publishers"]
        publisher = kafka_publishers[0]
        assert publisher["msgInCounter"] == 20 and publisher["clientVersion"] == "ops-producer"
        assert publisher["producerName"].startswith("kafka-") and publisher["producerId"] >= 0
        (fetcher,) = stats["protocolConsumers"]
        assert fetcher["protocol"] == "kafka" and fetcher["msgOutCounter"] == 20
        assert fetcher["consumerName"] == "ops-consumer"
        assert stats["msgInCounter"] == 20 and stats["msgOutCounter"] >= 20
        row = topic_row(pulsar_topic(topic, 0), stats)
        assert (row.kafka_producers, row.kafka_consumers) == (1, 1) and row.consumers == 1
    finally:
        consumer.close()
    with urllib.request.urlopen(standalone.admin_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    lines = [line for line in text.splitlines() if 'protocol="kafka"' in line]
    produce = [line for line in lines if line.startswith("strata_protocol_requests_total") and 'api="Produce"' in line]
    assert produce and float(produce[0].rsplit(" ", 1)[1]) >= 1
    for family in ("strata_protocol_in_bytes_total", "strata_protocol_out_messages_total",
                   "strata_protocol_connections"):
        assert any(line.startswith(family) for line in lines), family
