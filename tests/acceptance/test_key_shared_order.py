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


def first_deliveries_in_key_order(rec: Recorder) -> None:
    """Per consumer and key, the first deliveries come in publish order (a redelivery, which
    repeats an earlier message, is the only reordering)."""
    bad = []
    for name, views in rec.got.items():
        seen: set[int] = set()
        last: dict[str, int] = {}
        for key, n, _, _ in views:
            if n in seen:
                continue
            seen.add(n)
            if n < last.get(key, -1):
                bad.append((name, key, last[key], n))
            last[key] = n
    assert not bad, f"{len(bad)} out-of-order first deliveries, first: {bad[:5]}"


def test_a_consumer_closing_with_unacked_messages_keeps_per_key_order(standalone, topic: str) -> None:
    """a and b share the backlog; a closes with messages in its receiver queue. The broker gives
    them to b before anything newer of their keys, so b's stream of every key is in order (a
    message a processed whose ack was still on its way may come again, at b, in its place).
    Unbatched: a batch given back holds other keys' messages older than what b already has."""
    client = make_client(service_url=standalone.service_url)
    try:
        sent = _publish(client, topic, 20_000, batched=False)
        rec = Recorder()
        a = client.subscribe(topic, "ks", consumer_type=KeyShared, consumer_name="a",
                             message_listener=rec.listener("a"), initial_position=pulsar.InitialPosition.Earliest)
        client.subscribe(topic, "ks", consumer_type=KeyShared, consumer_name="b",
                         message_listener=rec.listener("b"), initial_position=pulsar.InitialPosition.Earliest)
        rec.wait_for(3_000)
        a.close()
        closed_at = rec.total()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with rec.lock:
                if set(rec.acked) >= {n for _, n in sent}:
                    break
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        client.close()
    assert closed_at < len(sent) // 2, "a closed while the backlog was being dispatched"
    for name, views in rec.got.items():
        numbers = [n for _, n, _, _ in views]
        assert len(numbers) == len(set(numbers)), f"{name} got a message twice"
    a_keys = {key for key, _, _, _ in rec.got["a"]}
    assert any(key in a_keys for key, _, _, _ in rec.got["b"]), "a's keys went on at b"
    for name, views in rec.got.items():      # strictly in order, per consumer and key
        last: dict[str, int] = {}
        for key, n, _, _ in views:
            assert n > last.get(key, -1), f"{name}: {n} of {key} after {last[key]}"
            last[key] = n
    counts: dict[int, int] = defaultdict(int)
    for n in rec.acked:
        counts[n] += 1
    assert set(counts) == {n for _, n in sent}, "every message delivered and acked"
    twice = [n for n, c in counts.items() if c > 1]
    a_got = {n for _, n, _, _ in rec.got["a"]}
    assert set(twice) <= a_got and all(counts[n] == 2 for n in twice), \
        "only messages a had (acks on their way when it closed) come twice, once at each consumer"


def test_negative_acks_while_a_consumer_joins_keep_first_deliveries_in_key_order(standalone, topic: str) -> None:
    """Every 50th message is nacked on its first delivery; b joins during the backlog. A nacked
    message comes back (redelivery count 1) to whoever owns its key then; first deliveries of
    every key stay in publish order at each consumer and every message is acked exactly once."""
    client = make_client(service_url=standalone.service_url)
    rec = Recorder()

    def nacking(name: str):
        def on_message(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
            n = int(msg.data())
            with rec.lock:
                rec.got[name].append((msg.partition_key(), n, msg.message_id(), msg.redelivery_count()))
            if n % 50 == 7 and msg.redelivery_count() == 0:
                consumer.negative_acknowledge(msg)
                return
            with rec.lock:
                rec.acked.append(n)
            consumer.acknowledge(msg)
        return on_message
    try:
        sent = _publish(client, topic, 10_000, batched=False)
        client.subscribe(topic, "ks", consumer_type=KeyShared, consumer_name="a", message_listener=nacking("a"),
                         initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=100)
        rec.wait_for(200)
        client.subscribe(topic, "ks", consumer_type=KeyShared, consumer_name="b", message_listener=nacking("b"),
                         initial_position=pulsar.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=100)
        rec.wait_for(len(sent))
        time.sleep(0.5)
    finally:
        client.close()
    assert rec.got["b"], "b got messages"
    first_deliveries_in_key_order(rec)
    assert sorted(rec.acked) == [n for _, n in sent], "every message acked exactly once"
    redelivered = {n for views in rec.got.values() for _, n, _, count in views if count > 0}
    assert redelivered == {n for _, n in sent if n % 50 == 7}
