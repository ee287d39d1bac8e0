"""A Kafka consumer group through broker failures, on a real two-broker cluster.

Under a steady stream from an idempotent acks=all confluent-kafka producer, a group of three
confluent-kafka members (manual synchronous commits after each batch) reads a topic whose
partitions live on both brokers, while the test, one fault at a time:
  1. kill -9 the broker that owns partition 0, and starts it again;
  2. kill -9 the broker that coordinates the group, and starts it again;
  3. SIGTERM each broker in turn (each started again after it stopped);
  4. unloads the namespace's bundles (partitions and the group's coordinator move).
After each fault, with the broker still down, the group must commit again (its coordinator found
again, its members rejoined) and consume from every partition again within RECOVERY_BOUND_S; the
time it took is printed (the target is the lease, 3 s here, plus 5 s). Then the broker is started
again and the same must hold.

At the end: every acknowledged record was consumed by the group (no loss: it resumed from its
committed offsets, never past them), each is stored exactly once at contiguous offsets (no
duplicate in storage: idempotence across owners), and the group's committed offsets reached the
end of every partition. Records the group read twice (at-least-once after a member died before
committing) are counted and printed, not failed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cluster.helpers import http, lookup
from tests.kafka.conftest import CLUSTER_ENV, checked_cluster, wait_kafka_port
from tests.kafka.helpers import NAMESPACE, pulsar_topic
from tests.kafka.stream_check import NumberedStream, assert_exactly_once, read_partitions
from tests.kafka.test_cluster_clients import PARTITIONS, spread_topic
from tests.support.cluster_proc import BrokerProcess, LocalCluster
from tests.support.waiting import wait_until

MEMBERS = 3
PACE_S = 0.004
RECOVERY_BOUND_S = 45.0          # generous on a loaded 2-core machine; the measured time is printed
DRAIN_BOUND_S = 90.0
SESSION_MS = 6000


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with checked_cluster(tmp_path_factory.mktemp("kafka-group-faults") / "c", CLUSTER_ENV) as c:
        yield c


@dataclass
class GroupLog:
    lock: threading.Lock = field(default_factory=threading.Lock)
    consumed: list[tuple[float, int, int, int]] = field(default_factory=list)   # (time, partition, offset, n)
    commits: list[float] = field(default_factory=list)                           # successful commit times
    commit_errors: list[str] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)

    def seen(self) -> set[int]:
        with self.lock:
            return {n for _t, _p, _o, n in self.consumed}

    def progressed_since(self, t0: float) -> bool:
        """A commit succeeded, and every partition was consumed from, after t0."""
        with self.lock:
            return (any(t > t0 for t in self.commits)
                    and {p for t, p, _o, _n in self.consumed if t > t0} == set(range(PARTITIONS)))


class Member(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str, log: GroupLog, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stats: str | None = None
        self.bootstrap, self.topic, self.group, self.log, self.stop_event = bootstrap, topic, group, log, stop

    def _error(self, err) -> None:
        if err.fatal():
            self.log.fatal.append(str(err))

    def _stats(self, doc: str) -> None:
        self.stats = doc                         # librdkafka's own view, for a failure message

    def fetch_view(self) -> str:
        """From this member's last librdkafka statistics: per assigned partition, the broker it
        fetches from, its fetch state and offsets (a stalled fetch shows where it is stuck)."""
        try:
            doc = json.loads(self.stats)
        except (TypeError, ValueError):
            return "no statistics"
        parts = doc.get("topics", {}).get(self.topic, {}).get("partitions", {})
        keys = ("leader", "broker", "fetch_state", "next_offset", "app_offset", "committed_offset", "hi_offset",
                "fetchq_cnt")
        return "; ".join(f"p{p}: " + " ".join(f"{k}={v.get(k)}" for k in keys)
                         for p, v in sorted(parts.items()) if p != "-1" and v.get("fetch_state") != "none")

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 1000,
                             "socket.timeout.ms": 10_000, "error_cb": self._error,
                             "statistics.interval.ms": 2000, "stats_cb": self._stats})
        consumer.subscribe([self.topic])
        try:
            while not self.stop_event.is_set():
                msgs = consumer.consume(num_messages=500, timeout=0.5)
                now = time.monotonic()
                got = [(now, m.partition(), m.offset(), seq_of_msg(m)) for m in msgs if m.error() is None]
                with self.log.lock:
                    self.log.consumed.extend(got)
                if got:
                    try:
                        consumer.commit(asynchronous=False)
                        with self.log.lock:
                            self.log.commits.append(time.monotonic())
                    except KafkaException as exc:       # a rebalance or a coordinator moving: retried next batch
                        self.log.commit_errors.append(str(exc))
        finally:
            consumer.close()


def _group_view(cluster: LocalCluster, topic: str, group: str) -> str:
    """What the cluster says of the group now (for a failure message): each partition's committed
    offset, low and high watermark, owner, and the members' assignments; a stall (committed below
    the high watermark) and a skip (committed past records never consumed) read differently."""
    probe = Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": group,
                      "enable.auto.commit": False})     # never subscribes: it does not join the group
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    out = []
    try:
        committed = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        for tp in committed:
            p = tp.partition
            low, high = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out.append(f"p{p}: committed {tp.offset}, watermarks [{low}, {high}), "
                       f"owner {partition_owner(cluster, topic, p).name}")
        described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
        members = [(m.member_id[-6:], sorted(tp.partition for tp in m.assignment.topic_partitions))
                   for m in described.members]
        out.append(f"group {described.state} at {described.coordinator.port}, members {members}")
    except Exception as exc:        # a view, not a check: say why it is partial
        out.append(f"(group view failed: {exc!r})")
    finally:
        probe.close()
    return "; ".join(out)


def seq_of_msg(msg) -> int:
    return int(msg.key()[1:])                  # stream_check's keys: k<n>


class Producing(threading.Thread):
    def __init__(self, stream: NumberedStream) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.stop_event = threading.Event()
        self.n = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.stream._produce(self.n)
            self.n += 1
            self.stream.producer.poll(0)
            time.sleep(PACE_S)


def by_kafka_port(cluster: LocalCluster, port: int) -> BrokerProcess:
    return next(b for b in cluster.brokers if b.kafka_bootstrap.endswith(f":{port}"))


def coordinator(cluster: LocalCluster, group: str) -> BrokerProcess:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
    return by_kafka_port(cluster, described.coordinator.port)


def partition_owner(cluster: LocalCluster, topic: str, partition: int) -> BrokerProcess:
    url = lookup(cluster.brokers[0].admin_url, pulsar_topic(topic, partition))["brokerUrl"]
    return next(b for b in cluster.brokers if b.service_url == url)


def test_group_through_kills_stops_and_unloads(kafka_cluster: LocalCluster) -> None:
    cluster = kafka_cluster
    topic, _owners = spread_topic(cluster)
    group = f"faults-{topic}"
    stream = NumberedStream(cluster.kafka_bootstrap, topic, PARTITIONS, message_timeout_ms=120_000)
    producing = Producing(stream)
    log = GroupLog()
    stop = threading.Event()
    members = [Member(cluster.kafka_bootstrap, topic, group, log, stop) for _ in range(MEMBERS)]
    producing.start()
    for m in members:
        m.start()
    recoveries: list[str] = []
    try:
        wait_until(lambda: log.progressed_since(0.0), RECOVERY_BOUND_S, what="the group consuming and committing")

        def fault(what: str, act, heal=None) -> None:
            """`act`, then time until the group commits and reads every partition again (with the
            broker still down); then `heal` and the same again."""
            t0 = time.monotonic()
            act()
            wait_until(lambda: log.progressed_since(t0), RECOVERY_BOUND_S, what=f"the group going on after {what}")
            recoveries.append(f"{what}: {time.monotonic() - t0:.1f} s")
            if heal is not None:
                t1 = time.monotonic()
                heal()
                wait_until(lambda: log.progressed_since(t1), RECOVERY_BOUND_S,
                           what=f"the group going on after healing {what}")

        def restart(broker: BrokerProcess) -> None:
            broker.launch()
            wait_kafka_port(broker.kafka_bootstrap, broker.name, broker.log_path)

        def unload() -> None:
            done = http("PUT", f"{cluster.brokers[0].admin_url}/admin/v2/namespaces/{NAMESPACE}/unload", follow=True)
            assert done.status == 204, (done.status, done.body)

        victim = partition_owner(cluster, topic, 0)
        fault(f"kill -9 of {victim.name} (owner of partition 0)", victim.kill9, lambda: restart(victim))
        coord = coordinator(cluster, group)
        fault(f"kill -9 of {coord.name} (the group's coordinator)", coord.kill9, lambda: restart(coord))
        for broker in cluster.brokers:
            fault(f"SIGTERM of {broker.name}", broker.stop, lambda b=broker: restart(b))
        fault("namespace unload", unload)
    finally:
        producing.stop_event.set()
        producing.join(10)
    stream.finish(flush_bound_s=120)
    acked = set(stream.delivered)
    try:
        try:
            wait_until(lambda: acked <= log.seen(), DRAIN_BOUND_S,
                       what=f"the group consuming all {len(acked)} acknowledged records")
        except AssertionError:
            missing = sorted(acked - log.seen())
            by_partition = {p: [n for n in missing if n % PARTITIONS == p] for p in range(PARTITIONS)}
            last = {p: max((o for _t, q, o, _n in log.consumed if q == p), default=None) for p in range(PARTITIONS)}
            where = {n: stream.delivered.get(n) for n in missing[:5]}    # (partition, offset) acknowledged
            raise AssertionError(f"{len(missing)} acknowledged records never consumed by the group, per partition "
                                 f"{ {p: (len(ns), ns[:5]) for p, ns in by_partition.items()} }; acknowledged at "
                                 f"{where}; recoveries {recoveries}; last consumed offset per partition "
                                 f"{last}; {_group_view(cluster, topic, group)}; the members' fetches: "
                                 f"{[m.fetch_view() for m in members]}") from None
        # the last commits land: the committed offsets reach every partition's end
        ends = {p: max((off for (part, off) in stream.delivered.values() if part == p), default=-1) + 1
                for p in range(PARTITIONS)}
        probe = Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": group,
                          "enable.auto.commit": False})
        try:
            def committed_at_end() -> bool:
                got = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
                return all(tp.offset >= ends[tp.partition] for tp in got)
            wait_until(committed_at_end, DRAIN_BOUND_S, what=f"committed offsets at the ends {ends}")
        finally:
            probe.close()
    finally:
        stop.set()
        for m in members:
            m.join(30)
    assert not log.fatal, f"a member reported a fatal error: {log.fatal}"
    stored = read_partitions(cluster.kafka_bootstrap, topic, PARTITIONS, stream.expected())
    assert_exactly_once(stream, stored)
    with log.lock:
        numbers = [n for _t, _p, _o, n in log.consumed]
    twice = len(numbers) - len(set(numbers))
    print(f"{len(acked)} records acknowledged and consumed; read twice by the group: {twice}; "
          f"commit errors (retried): {len(log.commit_errors)}; recovery after each fault: {recoveries}")
