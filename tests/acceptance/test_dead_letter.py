"""Dead-letter and retry-letter topics with the official client on a real standalone.

Both are client-side moves (docs/protocol.md §8.6); the broker's part is: redelivery counts that
increment (so the client knows when to give up), PRODUCER with `initial_subscription_name`
creating that subscription before the first message (so nothing sent to the DLQ is lost before
anyone subscribes), delayed delivery on the retry topic, and plain acks of the originals.
The Python client has no retry API, so the retry test does what a Java client's
`reconsumeLater` does: republish to `<topic>-<sub>-RETRY` with a delay and properties, then ack.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pulsar

from tests.acceptance.conftest import assert_no_more, receive_all

Shared = pulsar.ConsumerType.Shared
NACK_DELAY_MS = 200


def _id_text(msg: pulsar.Message) -> str:
    mid = msg.message_id()
    return f"({mid.ledger_id()},{mid.entry_id()},{mid.partition()},{mid.batch_index()})"


def test_dead_letter_after_max_redeliveries_with_initial_subscription(client: pulsar.Client, topic: str) -> None:
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2, initial_subscription_name="dlq-sub")
    consumer = client.subscribe(topic, "sub", consumer_type=Shared, dead_letter_policy=policy,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"poison-{i}".encode(), properties={"n": str(i)}, partition_key=f"key-{i}")
    counts: dict[bytes, list[int]] = {}
    origin: dict[bytes, str] = {}
    deadline = time.monotonic() + 20
    while sum(len(c) for c in counts.values()) < 9 and time.monotonic() < deadline:
        msg = consumer.receive(10_000)
        counts.setdefault(msg.data(), []).append(msg.redelivery_count())
        origin[msg.data()] = _id_text(msg)
        consumer.negative_acknowledge(msg)
    assert counts == {f"poison-{i}".encode(): [0, 1, 2] for i in range(3)}   # counts 0..max
    # The client moved them to <topic>-<sub>-DLQ; the initial subscription was there before.
    dlq = client.subscribe(f"{topic}-sub-DLQ", "dlq-sub", consumer_type=Shared)
    moved = {m.data(): m for m in receive_all(dlq, 3)}
    assert set(moved) == set(counts)
    for payload, msg in moved.items():
        props = msg.properties()
        assert props["REAL_TOPIC"] == topic
        assert props["ORIGIN_MESSAGE_ID"] == origin[payload]
        assert props["n"] == payload.decode().split("-")[1]
        assert msg.partition_key() == f"key-{props['n']}"
    assert_no_more(dlq)
    assert_no_more(consumer, 1_000)   # the originals were acked, never redelivered again
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=Shared)
    assert_no_more(again, 1_000)


def test_dead_letter_to_a_named_topic(client: pulsar.Client, topic: str) -> None:
    target = f"{topic}-graveyard"
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=target,
                                             initial_subscription_name="keep")
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared,
                                dead_letter_policy=policy, negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
    producer = client.create_producer(topic)
    producer.send(b"bad", partition_key="k")
    for expected in (0, 1):
        msg = consumer.receive(10_000)
        assert msg.redelivery_count() == expected
        consumer.negative_acknowledge(msg)
    graveyard = client.subscribe(target, "keep", consumer_type=Shared)
    msg = graveyard.receive(10_000)
    assert msg.data() == b"bad" and msg.properties()["REAL_TOPIC"] == topic
    graveyard.acknowledge(msg)
    _close_all(consumer, graveyard, producer)


def test_retry_letter_topic_delivers_later_from_the_retry_topic(client: pulsar.Client, topic: str) -> None:
    """What a retry-capable client does: consume, republish to the retry topic with a delay and the
    retry properties, ack the original; the consumer subscribed to both gets it back later."""
    retry_topic = f"{topic}-sub-RETRY"
    consumer = client.subscribe([topic, retry_topic], "sub", consumer_type=Shared)
    retry_producer = client.create_producer(retry_topic)
    producer = client.create_producer(topic)
    producer.send(b"try-me", properties={"app": "x"})
    first = consumer.receive(10_000)
    assert first.data() == b"try-me" and first.topic_name() == topic
    delay_ms = 1_500
    sent_at = time.time() * 1000
    props = dict(first.properties())
    props.update({"RECONSUMETIMES": "1", "DELAY_TIME": str(delay_ms), "REAL_TOPIC": topic,
                  "ORIGIN_MESSAGE_ID": _id_text(first)})
    retry_producer.send(first.data(), properties=props, deliver_after=timedelta(milliseconds=delay_ms))
    consumer.acknowledge(first)
    retried = consumer.receive(10_000)
    arrived_at = time.time() * 1000
    assert retried.data() == b"try-me"
    assert retried.topic_name() == retry_topic
    assert arrived_at - sent_at >= delay_ms, "retry delivered before its delay"
    assert retried.properties()["RECONSUMETIMES"] == "1" and retried.properties()["app"] == "x"
    consumer.acknowledge(retried)
    assert_no_more(consumer, 1_000)   # the original was acked: it does not come back
    _close_all(consumer, retry_producer, producer)


def _close_all(*handles) -> None:
    """Close consumers (and their internal dead-letter producers) before the client closes: the
    C++ client (pulsar-client 3.13.0) has crashed with SIGSEGV in Client.close() when a consumer
    with a dead-letter policy was still open after moving a message."""
    for handle in handles:
        handle.close()
