"""Every subscription type's rules, with the official client against a real standalone."""

from __future__ import annotations

import itertools
import time

import pulsar
import pytest

from admin_client import request_json
from broker.topics.dispatch.key_selector import key_slot
from entries.batch import BatchMessage, build_batch
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.acceptance.test_admin import http
from tests.support.pulsar_failover import pulsar_failover_active
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T
from wire.pulsar import encode_send

RAW_WAIT_S = 20.0

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
    """Subscribe two Failover consumers; return (active, standby) as Pulsar's hash ring picks
    (tests.support.pulsar_failover, an oracle independent of the broker's code)."""
    consumers = {name: client.subscribe(topic, "sub", consumer_type=Failover, consumer_name=name)
                 for name in names}
    chosen = pulsar_failover_active(topic, list(names))
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
        expected = pulsar_failover_active(topic, names)
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


def _check_key_order(received: list[tuple[str, str, int]]) -> None:
    """Per consumer and per key, every delivery — redeliveries included — comes in send order.

    `received` holds (consumer, key, number) in the order each consumer handed them out. No test
    here nacks, so a consumer never gets a message of a key before an older one of that key, nor
    the same message twice: a redelivery after another consumer closed goes to the new owner
    ahead of that key's later messages (PIP-379)."""
    last: dict[tuple[str, str], int] = {}
    for consumer, key, number in received:
        previous = last.get((consumer, key))
        assert previous is None or number > previous, \
            f"{consumer} got {key}:{number} after {key}:{previous}"
        last[(consumer, key)] = number


DRAIN_DEADLINE_S = 120.0


def _drain(consumers: dict[str, pulsar.Consumer], out: list[tuple[str, str, int]], idle_rounds: int = 3,
           deadline_s: float = DRAIN_DEADLINE_S) -> None:
    """Receive and ack from every consumer until all are idle for `idle_rounds` rounds."""
    deadline = time.monotonic() + deadline_s
    idle = 0
    while idle < idle_rounds:
        assert time.monotonic() < deadline, f"consumers still busy after {deadline_s}s"
        got_any = False
        for name, consumer in consumers.items():
            try:
                while time.monotonic() < deadline:
                    msg = consumer.receive(100)
                    consumer.acknowledge(msg)
                    out.append((name, msg.partition_key(), int(msg.data())))
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
        received.append(("c1", msg.partition_key(), int(msg.data())))
    c2 = client.subscribe(topic, "sub", consumer_type=KeyShared, receiver_queue_size=20)
    send(100)
    c1.close()  # its unacked messages go to the others, before later ones of the same key
    c3 = client.subscribe(topic, "sub", consumer_type=KeyShared, receiver_queue_size=20)
    send(100)
    _drain({"c2": c2, "c3": c3}, received)
    _check_key_order(received)
    assert {n for _, _, n in received} == set(range(300))
    acked = [n for name, _, n in received if name != "c1"]
    assert sorted(acked) == list(range(300)), "every message acked exactly once"


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
    request_json("PUT", f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://')[1]}/partitions", 2)
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


# --- raw-protocol checks ------------------------------------------------------------------------

class RawSession:
    """One raw Pulsar-protocol connection (tests.support.raw_client) that keeps what it reads."""

    def __init__(self, port: int) -> None:
        self.raw = RawClient(port, timeout_s=RAW_WAIT_S)
        self.raw.connect()
        self.seen: list[pb.BaseCommand] = []
        self._request_ids = itertools.count(100)

    def close(self) -> None:
        self.raw.close()

    def _read(self, until: float) -> pb.BaseCommand | None:
        self.raw.sock.settimeout(max(0.01, min(0.5, until - time.monotonic())))
        try:
            cmd = self.raw.next_command()
        except TimeoutError:
            return None
        if cmd.type == T.PING:
            self.raw.send(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong()))
            return None
        self.seen.append(cmd)
        return cmd

    def wait_for(self, predicate, timeout_s: float = RAW_WAIT_S) -> pb.BaseCommand:
        for cmd in self.seen:
            if predicate(cmd):
                self.seen.remove(cmd)
                return cmd
        until = time.monotonic() + timeout_s
        while time.monotonic() < until:
            cmd = self._read(until)
            if cmd is not None and predicate(cmd):
                self.seen.remove(cmd)
                return cmd
        raise AssertionError(f"nothing matched within {timeout_s}s; seen {[c.type for c in self.seen]}")

    def collect(self, duration_s: float) -> None:
        """Read for `duration_s` (what arrives lands in `seen`)."""
        until = time.monotonic() + duration_s
        while time.monotonic() < until:
            self._read(until)

    def take(self, cmd_type: int, consumer_id: int | None = None) -> list[pb.BaseCommand]:
        """Remove and return the commands of one type seen so far (for one consumer)."""
        def field(cmd):
            return cmd.message if cmd_type == T.MESSAGE else cmd.active_consumer_change
        out = [c for c in self.seen if c.type == cmd_type
               and (consumer_id is None or field(c).consumer_id == consumer_id)]
        self.seen = [c for c in self.seen if c not in out]
        return out

    def request(self, cmd: pb.BaseCommand, body: str) -> pb.BaseCommand:
        request_id = next(self._request_ids)
        getattr(cmd, body).request_id = request_id
        self.raw.send(cmd)
        reply = self.wait_for(lambda c: c.type in (T.SUCCESS, T.ERROR, T.PRODUCER_SUCCESS)
                              and getattr(c, {T.SUCCESS: "success", T.ERROR: "error",
                                              T.PRODUCER_SUCCESS: "producer_success"}[c.type]).request_id
                              == request_id)
        assert reply.type != T.ERROR, reply
        return reply

    def subscribe(self, topic: str, sub_type: int, consumer_id: int, name: str) -> None:
        cmd = pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="sub", subType=sub_type, consumer_id=consumer_id,
            request_id=0, consumer_name=name))
        self.request(cmd, "subscribe")

    def flow(self, consumer_id: int, permits: int) -> None:
        self.raw.send(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=consumer_id,
                                                                       messagePermits=permits)))

    def close_consumer(self, consumer_id: int) -> None:
        self.request(pb.BaseCommand(type=T.CLOSE_CONSUMER, close_consumer=pb.CommandCloseConsumer(
            consumer_id=consumer_id, request_id=0)), "close_consumer")

    def produce_batches(self, topic: str, batches: int, batch_size: int) -> None:
        self.request(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
            topic=topic, producer_id=1, request_id=0)), "producer")
        for i in range(batches):
            members = [BatchMessage(f"b{i}-{j}".encode()) for j in range(batch_size)]
            md, payload = build_batch(members, producer_name="raw-batches", sequence_id=i * batch_size,
                                      publish_time_ms=int(time.time() * 1000))
            self.raw.send_bytes(encode_send(1, i * batch_size, batch_size, md, payload))
            first = i * batch_size
            self.wait_for(lambda c, first=first: c.type == T.SEND_RECEIPT and c.send_receipt.sequence_id == first)


def test_permits_are_counted_in_messages_not_entries(standalone, topic: str) -> None:
    """FLOW 10 against 4-message batches: three entries (12 messages, the last one overdraws),
    then nothing until the permits are positive again."""
    consumer = RawSession(standalone.port)
    producer = RawSession(standalone.port)
    try:
        consumer.subscribe(topic, pb.CommandSubscribe.Shared, 1, "raw")
        producer.produce_batches(topic, 6, 4)
        consumer.flow(1, 10)
        consumer.collect(1.0)
        assert len(consumer.take(T.MESSAGE, 1)) == 3
        consumer.flow(1, 2)              # -2 + 2 = 0 permits: still nothing
        consumer.collect(1.0)
        assert consumer.take(T.MESSAGE, 1) == []
        consumer.flow(1, 1)
        consumer.wait_for(lambda c: c.type == T.MESSAGE)
        consumer.collect(0.5)
        assert consumer.take(T.MESSAGE, 1) == []
    finally:
        consumer.close()
        producer.close()


def test_failover_sends_active_consumer_change_and_hands_over_on_close(standalone, topic: str) -> None:
    session = RawSession(standalone.port)
    try:
        def active_notice(consumer_id: int) -> bool:
            notice = session.wait_for(lambda c: c.type == T.ACTIVE_CONSUMER_CHANGE
                                      and c.active_consumer_change.consumer_id == consumer_id)
            return notice.active_consumer_change.is_active

        session.subscribe(topic, pb.CommandSubscribe.Failover, 1, "a")
        assert active_notice(1) is True                  # alone: active
        session.subscribe(topic, pb.CommandSubscribe.Failover, 2, "b")
        chosen = pulsar_failover_active(topic, ["a", "b"])
        if chosen == "a":
            assert active_notice(2) is False             # the newcomer stands by
        else:
            assert active_notice(1) is False             # the ring moves the topic to b
            assert active_notice(2) is True
        active_id, standby_id = (1, 2) if chosen == "a" else (2, 1)
        session.close_consumer(active_id)
        assert active_notice(standby_id) is True         # the standby takes over
    finally:
        session.close()


# --- Key_Shared: a consumer that never acks -----------------------------------------------------

def test_key_shared_auto_split_consumer_that_never_acks_does_not_stall_other_keys(
        client: pulsar.Client, topic: str) -> None:
    """`lazy` takes its receiver queue (10) and then neither receives nor acks: its keys wait,
    every other key keeps flowing to `busy`, in order, also for messages produced later."""
    lazy = client.subscribe(topic, "sub", consumer_type=KeyShared, consumer_name="lazy", receiver_queue_size=10)
    busy = client.subscribe(topic, "sub", consumer_type=KeyShared, consumer_name="busy")
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"key-{i}" for i in range(50)]
    for round_ in range(10):
        for key in keys:
            producer.send(f"{round_}".encode(), partition_key=key)
    got: list[tuple[str, str, int]] = []
    _drain({"busy": busy}, got, idle_rounds=5)
    busy_keys = {key for _, key, _ in got}
    assert 0 < len(busy_keys) < len(keys)
    for key in busy_keys:       # each of busy's keys arrived whole and in order
        assert [n for _, k, n in got if k == key] == list(range(10)), key
    for round_ in range(10, 13):  # later messages of busy's keys still flow
        for key in keys:
            producer.send(f"{round_}".encode(), partition_key=key)
    _drain({"busy": busy}, got, idle_rounds=5)
    for key in busy_keys:
        assert [n for _, k, n in got if k == key] == list(range(13)), key
    assert len(got) == 13 * len(busy_keys)
    lazy.close()                # now busy owns everything: lazy's keys arrive, in order
    _drain({"busy": busy}, got, idle_rounds=5)
    for key in keys:
        assert [n for _, k, n in got if k == key] == list(range(13)), key


# --- the unacked limit (Pulsar's maxUnackedMessagesPerConsumer) -----------------------------------

UNACKED_MAX = 20


@pytest.fixture(scope="module")
def limited_standalone(tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("limited") / "data"
    env = {"STRATA_BROKER_CONSUMER_UNACKED_MESSAGES_MAX": str(UNACKED_MAX)}
    with StandaloneProcess.start(data_dir, env=env) as sa:
        yield sa


QUIET_MS = 1500     # "nothing more arrives": a negative check can only pass wrongly, not fail wrongly


def test_unacked_limit_blocks_a_consumer_until_acks_bring_it_to_half(limited_standalone, topic: str) -> None:
    client = make_client(limited_standalone.service_url)
    try:
        hoarder = client.subscribe(topic, "sub", consumer_type=Shared, consumer_name="hoarder")
        producer = client.create_producer(topic, batching_enabled=False)
        payloads = _send(producer, 100)
        held = receive_all(hoarder, UNACKED_MAX, timeout_ms=20_000, ack=False)
        assert_no_more(hoarder, QUIET_MS)                # blocked at the limit, permits or not
        assert _hoarder_stats(limited_standalone, topic, (True, UNACKED_MAX))
        for msg in held[:UNACKED_MAX // 2 - 1]:          # 11 unacked: above half, still blocked
            hoarder.acknowledge(msg)
        assert_no_more(hoarder, QUIET_MS)
        assert _hoarder_stats(limited_standalone, topic, (True, UNACKED_MAX // 2 + 1))
        hoarder.acknowledge(held[UNACKED_MAX // 2 - 1])  # 10 unacked: half, resumes
        more = receive_all(hoarder, UNACKED_MAX // 2, timeout_ms=20_000, ack=False)
        assert_no_more(hoarder, QUIET_MS)                # up to the limit again
        assert _hoarder_stats(limited_standalone, topic, (True, UNACKED_MAX))
        other = client.subscribe(topic, "sub", consumer_type=Shared, consumer_name="other")
        rest = receive_all(other, 100 - len(held) - len(more), timeout_ms=20_000)
        assert sorted(m.data() for m in held + more + rest) == sorted(payloads)
        for msg in held[UNACKED_MAX // 2:] + more:       # all acked: no longer blocked
            hoarder.acknowledge(msg)
        assert _hoarder_stats(limited_standalone, topic, (False, 0))
    finally:
        client.close()


def _hoarder_stats(sa: StandaloneProcess, topic: str, expected: tuple[bool, int],
                   deadline_s: float = 20.0) -> bool:
    """Poll the admin stats until the consumer "hoarder" shows (blockedConsumerOnUnackedMsgs,
    unackedMessages) == expected; acks travel asynchronously (the client groups them)."""
    url = f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats"
    seen = None
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        consumers = http("GET", url)[1]["subscriptions"]["sub"]["consumers"]
        seen = [(c["blockedConsumerOnUnackedMsgs"], c["unackedMessages"])
                for c in consumers if c["consumerName"] == "hoarder"]
        if seen == [expected]:
            return True
        time.sleep(0.1)
    raise AssertionError(f"hoarder stats {seen}, expected {expected}")


def test_unacked_limit_on_key_shared_stalls_only_the_blocked_consumers_keys(limited_standalone,
                                                                           topic: str) -> None:
    client = make_client(limited_standalone.service_url)
    try:
        low = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)])
        high = pulsar.ConsumerKeySharedPolicy(pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)])
        hoarder = client.subscribe(topic, "sub", consumer_type=KeyShared, key_shared_policy=low)
        busy = client.subscribe(topic, "sub", consumer_type=KeyShared, key_shared_policy=high)
        producer = client.create_producer(topic, batching_enabled=False)
        low_key, high_key = _keys_in(0, 32767, 1)[0], _keys_in(32768, 65535, 1)[0]
        for i in range(60):
            producer.send(f"{i}".encode(), partition_key=low_key)
            producer.send(f"{i}".encode(), partition_key=high_key)
        assert [int(m.data()) for m in receive_all(busy, 60)] == list(range(60))
        held = receive_all(hoarder, UNACKED_MAX, timeout_ms=20_000, ack=False)
        assert [int(m.data()) for m in held] == list(range(UNACKED_MAX))
        assert_no_more(hoarder, QUIET_MS)
        for msg in held:
            hoarder.acknowledge(msg)
        rest = receive_all(hoarder, UNACKED_MAX, timeout_ms=20_000)
        assert [int(m.data()) for m in rest] == list(range(UNACKED_MAX, 2 * UNACKED_MAX))
    finally:
        client.close()
