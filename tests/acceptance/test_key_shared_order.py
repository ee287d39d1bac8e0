"""Key_Shared per-key order while consumers join (and leave) during a backlog's dispatch.

DESIGN promises Key_Shared order "per key, also while consumers join and leave". These tests
publish a backlog over a few dozen keys (batched and not), subscribe consumer a at Earliest, let
it start dispatching, then subscribe b (and, in one test, close one with unacked messages or
nack). Each consumer's listener acks every message. What must hold: within each consumer, the
messages of one key arrive in message-id (publish) order, and every message arrives exactly once
across the consumers (a consumer that closes with unacked messages gives them back; those are
then counted once, at whoever acks them).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pulsar
import pytest

from tests.acceptance.conftest import make_client

KeyShared = pulsar.ConsumerType.KeyShared
KEYS = 37
WAIT_S = 120.0


def _publish(client: pulsar.Client, topic: str, count: int, batched: bool) -> list[tuple[str, int]]:
    """Publish `count` messages "n" with key n % KEYS; returns (key, n) in publish order."""
    producer = client.create_producer(topic, batching_enabled=batched, batching_max_messages=100,
                                      batching_max_publish_delay_ms=5, block_if_queue_full=True)
    sent: list[tuple[str, int]] = []
    for n in range(count):
        key = f"key-{n % KEYS}"
        producer.send_async(str(n).encode(), None, partition_key=key)
        sent.append((key, n))
    producer.flush()
    producer.close()
    return sent


class Recorder:
    """Per consumer name, what its listener got: (key, n, message id, redelivery count)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: dict[str, list[tuple[str, int, pulsar.MessageId, int]]] = defaultdict(list)
        self.acked: list[int] = []

    def listener(self, name: str, ack: bool = True):
        def on_message(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
            with self.lock:
                self.got[name].append((msg.partition_key(), int(msg.data()), msg.message_id(),
                                       msg.redelivery_count()))
                if ack:
                    self.acked.append(int(msg.data()))
            if ack:
                consumer.acknowledge(msg)
        return on_message

    def total(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_for(self, count: int, timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while self.total() < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.total() >= count, f"acked {self.total()} of {count} within {timeout_s}s"


def check_key_order(rec: Recorder, sent: list[tuple[str, int]]) -> None:
    """Within each consumer each key's messages come in publish order (a message received again,
    redelivered, may repeat; it must not be followed by an older one of its key); every message
    acked exactly once."""
    bad = []
    for name, views in rec.got.items():
        last: dict[str, int] = {}
        for key, n, _, _ in views:
            if n < last.get(key, -1):
                bad.append((name, key, last[key], n))
            last[key] = max(n, last.get(key, -1))
    assert not bad, f"{len(bad)} out-of-order deliveries, first: {bad[:5]}"
    assert sorted(rec.acked) == [n for _, n in sent], "every message acked exactly once"


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_a_consumer_joining_during_the_backlog_keeps_per_key_order(standalone, topic: str, batched: bool) -> None:
    client = make_client(standalone.service_url)
    try:
        sent = _publish(client, topic, 20_000, batched)
        rec = Recorder()
        client.subscribe(topic, "ks", consumer_type=KeyShared, consumer_name="a",
                         message_listener=rec.listener("a"), initial_position=pulsar.InitialPosition.Earliest)
        rec.wait_for(200)
        client.subscribe(topic, "ks", consumer_type=KeyShared, consumer_name="b",
                         message_listener=rec.listener("b"), initial_position=pulsar.InitialPosition.Earliest)
        acked_at_join = rec.total()
        rec.wait_for(len(sent))
        assert acked_at_join < len(sent) // 2, "b joined while a's backlog was being dispatched"
        time.sleep(0.5)
    finally:
        client.close()
    assert rec.got["b"], "b got messages"
    check_key_order(rec, sent)
