"""Every subscription type's rules, with the official client against a real standalone."""

from __future__ import annotations

import collections

import pulsar
import pytest

from broker.dispatch_single_active import ring_pick
from broker.murmur3 import key_slot
from tests.acceptance.conftest import assert_no_more, receive_all

Exclusive = pulsar.ConsumerType.Exclusive
Failover = pulsar.ConsumerType.Failover
Shared = pulsar.ConsumerType.Shared
KeyShared = pulsar.ConsumerType.KeyShared


def _send(producer: pulsar.Producer, count: int, prefix: str = "m", **kwargs) -> list[bytes]:
    payloads = [f"{prefix}{i}".encode() for i in range(count)]
    for payload in payloads:
        producer.send(payload, **kwargs)
    return payloads


def test_exclusive_refuses_a_second_consumer(client: pulsar.Client, topic: str) -> None:
    first = client.subscribe(topic, "sub", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    producer.send(b"still-works")
    assert first.receive(10_000).data() == b"still-works"
    first.close()
    second = client.subscribe(topic, "sub", consumer_type=Exclusive)  # free again after close
    second.close()


def _failover_pair(client: pulsar.Client, topic: str, names: tuple[str, str]):
    """Subscribe two Failover consumers; return (active, standby) as Pulsar's hash ring picks."""
    consumers = {name: client.subscribe(topic, "sub", consumer_type=Failover, consumer_name=name)
                 for name in names}
    ordered = sorted(names)
    chosen = ordered[ring_pick(topic, ordered)]
    other = next(n for n in names if n != chosen)
    return consumers[chosen], consumers[other]


def test_failover_switches_active_and_unacked_go_to_next(client: pulsar.Client, topic: str) -> None:
    active, standby = _failover_pair(client, topic, ("a-first", "b-second"))
    producer = client.create_producer(topic)
    payloads = _send(producer, 10)
    got = receive_all(active, 10, ack=False)
    assert [m.data() for m in got] == payloads
    assert_no_more(standby)
    for msg in got[:3]:
        active.acknowledge(msg)
    active.close()
    rest = receive_all(standby, 7)
    assert [m.data() for m in rest] == payloads[3:]
    assert_no_more(standby)


def test_failover_non_partitioned_newcomer_takes_over_only_when_the_ring_says_so(
        client: pulsar.Client, topic: str) -> None:
    """Pulsar 3.x rule: a joining consumer does not displace the active one unless it owns the
    topic's point on the consistent-hash ring; the active consumer never changes needlessly."""
    first = client.subscribe(topic, "sub", consumer_type=Failover, consumer_name="c0")
    producer = client.create_producer(topic)
    producer.send(b"before")
    first.acknowledge(first.receive(10_000))
    names, consumers = ["c0"], {"c0": first}
    for i in range(1, 4):
        name = f"c{i}"
        consumers[name] = client.subscribe(topic, "sub", consumer_type=Failover, consumer_name=name)
        names.append(name)
        ordered = sorted(names)
        expected = ordered[ring_pick(topic, ordered)]
        producer.send(name.encode())
        while True:   # a switch may replay what the old active had not acked yet (at-least-once)
            msg = consumers[expected].receive(10_000)
            consumers[expected].acknowledge(msg)
            if msg.data() == name.encode():
                break
        for other in names:
            if other != expected:
                assert_no_more(consumers[other], 200)


def test_shared_round_robin_and_closing_consumer_unacked_go_to_others(client: pulsar.Client, topic: str) -> None:
    c1 = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=10)
    c2 = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=10)
    producer = client.create_producer(topic)
    payloads = _send(producer, 20)
    got1 = receive_all(c1, 10, ack=False)
    got2 = receive_all(c2, 10)
    assert sorted(m.data() for m in got1 + got2) == sorted(payloads)
    for msg in got1[:5]:
        c1.acknowledge(msg)
    c1.close()
    again = receive_all(c2, 5)
    assert sorted(m.data() for m in again) == sorted(m.data() for m in got1[5:])
    assert_no_more(c2)


def test_shared_spreads_over_consumers(client: pulsar.Client, topic: str) -> None:
    consumers = [client.subscribe(topic, "sub", consumer_type=Shared) for _ in range(3)]
    producer = client.create_producer(topic)
    _send(producer, 30)
    counts = []
    for consumer in consumers:
        n = 0
        try:
            while True:
                consumer.acknowledge(consumer.receive(1000))
                n += 1
        except pulsar.Timeout:
            pass
        counts.append(n)
    assert sum(counts) == 30
    assert all(n >= 5 for n in counts), counts


def test_shared_nack_redelivers_with_redelivery_count(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared, negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic)
    producer.send(b"nacked")
    first = consumer.receive(10_000)
    assert first.redelivery_count() == 0
    consumer.negative_acknowledge(first)
    second = consumer.receive(10_000)
    assert second.data() == b"nacked"
    assert second.redelivery_count() == 1
    consumer.acknowledge(second)


def _check_key_order(received: list[tuple[str, int]]) -> None:
    """Per key, the first delivery of each message comes in send order."""
    seen: dict[str, list[int]] = collections.defaultdict(list)
    firsts: set[tuple[str, int]] = set()
    for key, number in received:
        if (key, number) not in firsts:
            firsts.add((key, number))
            seen[key].append(number)
    for key, numbers in seen.items():
        assert numbers == sorted(numbers), f"key {key} out of order: {numbers}"


def _drain(consumers: list[pulsar.Consumer], out: list[tuple[str, int]], idle_rounds: int = 3) -> None:
    idle = 0
    while idle < idle_rounds:
        got_any = False
        for consumer in consumers:
            try:
                while True:
                    msg = consumer.receive(100)
                    consumer.acknowledge(msg)
                    out.append((msg.partition_key(), int(msg.data())))
                    got_any = True
            except pulsar.Timeout:
                pass
        idle = 0 if got_any else idle + 1


def test_key_shared_keeps_per_key_order_while_consumers_join_and_leave(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    c1 = client.subscribe(topic, "sub", consumer_type=KeyShared, receiver_queue_size=20)
    received: list[tuple[str, int]] = []
    number = 0

    def send(n: int) -> None:
        nonlocal number
        for _ in range(n):
            producer.send(str(number).encode(), partition_key=f"key-{number % 10}")
            number += 1

    send(100)
    for _ in range(20):  # c1 takes some but does not ack them
        msg = c1.receive(10_000)
        received.append((msg.partition_key(), int(msg.data())))
    c2 = client.subscribe(topic, "sub", consumer_type=KeyShared, receiver_queue_size=20)
    send(100)
    c1.close()  # its unacked messages go to the others, before later ones of the same key
    c3 = client.subscribe(topic, "sub", consumer_type=KeyShared, receiver_queue_size=20)
    send(100)
    _drain([c2, c3], received)
    _check_key_order(received)
    assert {n for _, n in received} == set(range(300))


def _keys_in(lo: int, hi: int, count: int) -> list[str]:
    keys, i = [], 0
    while len(keys) < count:
        key = f"k{i}"
        if lo <= key_slot(key.encode()) <= hi:
            keys.append(key)
        i += 1
    return keys


def test_key_shared_sticky_routes_by_range_and_slow_consumer_does_not_stall_others(
        client: pulsar.Client, topic: str) -> None:
    low = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)])
    high = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)])
    slow = client.subscribe(topic, "sub", consumer_type=KeyShared, key_shared_policy=low, receiver_queue_size=1)
    fast = client.subscribe(topic, "sub", consumer_type=KeyShared, key_shared_policy=high)
    producer = client.create_producer(topic)
    low_keys, high_keys = _keys_in(0, 32767, 5), _keys_in(32768, 65535, 5)
    for i in range(50):
        producer.send(f"low-{i}".encode(), partition_key=low_keys[i % 5])
    for i in range(50):
        producer.send(f"high-{i}".encode(), partition_key=high_keys[i % 5])
    got = receive_all(fast, 50)
    assert [m.data() for m in got] == [f"high-{i}".encode() for i in range(50)]
    assert_no_more(fast)
    slow_got = receive_all(slow, 50)
    assert [m.data() for m in slow_got] == [f"low-{i}".encode() for i in range(50)]


def test_key_shared_sticky_overlap_is_refused(client: pulsar.Client, topic: str) -> None:
    first = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 1000)])
    overlapping = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(500, 2000)])
    client.subscribe(topic, "sub", consumer_type=KeyShared, key_shared_policy=first)
    with pytest.raises(pulsar.ConsumerAssignError):
        client.subscribe(topic, "sub", consumer_type=KeyShared, key_shared_policy=overlapping)


def test_cumulative_ack_on_exclusive(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Exclusive)
    producer = client.create_producer(topic)
    _send(producer, 10)
    got = receive_all(consumer, 10, ack=False)
    consumer.acknowledge_cumulative(got[6])
    consumer.close()
    consumer = client.subscribe(topic, "sub", consumer_type=Exclusive)
    assert [m.data() for m in receive_all(consumer, 3)] == [b"m7", b"m8", b"m9"]
    assert_no_more(consumer)


def test_failover_on_partitioned_topic_spreads_partitions_by_pulsar_rule(standalone, client: pulsar.Client,
                                                                         topic: str) -> None:
    import json
    import urllib.request
    request = urllib.request.Request(f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://')[1]}/partitions",
                                     data=json.dumps(2).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=20).close()
    a = client.subscribe(topic, "sub", consumer_type=Failover, consumer_name="a")
    b = client.subscribe(topic, "sub", consumer_type=Failover, consumer_name="b")
    producer = client.create_producer(topic, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    _send(producer, 20)
    partitions = {}
    for name, consumer in (("a", a), ("b", b)):
        got = receive_all(consumer, 10)
        partitions[name] = {m.message_id().partition() for m in got}
    # sorted consumers [a, b]: partition 0 -> a, partition 1 -> b
    assert partitions == {"a": {0}, "b": {1}}
