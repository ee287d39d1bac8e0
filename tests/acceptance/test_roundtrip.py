"""Produce and consume with the official client against a real standalone."""

from __future__ import annotations

import pulsar

from tests.acceptance.conftest import assert_no_more, receive_all


def test_round_trip_keeps_payload_key_properties_event_time(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    producer = client.create_producer(topic)
    sent_ids = []
    for i in range(20):
        sent_ids.append(producer.send(f"payload-{i}".encode() * (i + 1), partition_key=f"key-{i}",
                                      properties={"index": str(i), "kind": "round-trip"},
                                      event_timestamp=1_600_000_000_000 + i))
    received = receive_all(consumer, 20)
    for i, msg in enumerate(received):
        assert msg.data() == f"payload-{i}".encode() * (i + 1)
        assert msg.partition_key() == f"key-{i}"
        assert msg.properties() == {"index": str(i), "kind": "round-trip"}
        assert msg.event_timestamp() == 1_600_000_000_000 + i
        assert msg.publish_timestamp() > 0
        assert msg.topic_name() == topic
        assert str(msg.message_id()) == str(sent_ids[i])
    assert_no_more(consumer)


def _batched_round_trip(client: pulsar.Client, topic: str, compression: pulsar.CompressionType) -> None:
    count = 10_000
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive,
                                receiver_queue_size=2000)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=1000,
                                      batching_max_publish_delay_ms=5, compression_type=compression,
                                      block_if_queue_full=True, max_pending_messages=5000)
    for i in range(count):
        producer.send_async(f"message-{i:05d}".encode(), None)
    producer.flush()
    seen = []
    for _ in range(count):
        msg = consumer.receive(10_000)
        seen.append(msg.data())
        consumer.acknowledge(msg)
    assert seen == [f"message-{i:05d}".encode() for i in range(count)]
    assert_no_more(consumer)


def test_ten_thousand_batched_lz4_arrive_once_in_order(client: pulsar.Client, topic: str) -> None:
    _batched_round_trip(client, topic, pulsar.CompressionType.LZ4)


def test_ten_thousand_batched_zstd_arrive_once_in_order(client: pulsar.Client, topic: str) -> None:
    _batched_round_trip(client, topic, pulsar.CompressionType.ZSTD)


def test_short_topic_name_expands_to_public_default(client: pulsar.Client, topic: str) -> None:
    local = topic.rsplit("/", 1)[1]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(local)
    producer.send(b"short")
    assert consumer.receive(10_000).data() == b"short"


def test_unacked_messages_are_redelivered_after_consumer_closes(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    first = receive_all(consumer, 10, ack=False)
    for msg in first[:4]:
        consumer.acknowledge(msg)
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    redelivered = sorted(m.data() for m in receive_all(again, 6))
    assert redelivered == sorted(f"m{i}".encode() for i in range(4, 10))
    assert_no_more(again)
