"""Kafka producers across crashes (kill -9) and restarts.

1. Two-broker cluster: an idempotent confluent-kafka producer sends a numbered stream to a topic
   spread over both brokers; the broker owning partition 0 is killed with SIGKILL mid-stream and
   started again (its bundles are taken over once its lease lapses, lease 3 s). Every record must
   then be stored exactly once per partition, in order, at contiguous offsets equal to the
   acknowledged ones (stream_check), librdkafka must report nothing fatal, and the records stored
   before the crash keep their offsets (read before and after). The same over a plain socket,
   deterministically: batches retried on the broker that took over after the crash.
2. Standalone (its own, started here; the session one is shared and never restarted): kafka-python
   (idempotent by default) produces to a topic created through Kafka, the standalone is killed with
   SIGKILL while a second producer is sending, and started again. Every acknowledged record is
   there at the offset it was acknowledged with; the log has no gap and holds no record twice;
   records produced after the restart continue at the log end (no offset reused, none skipped).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from tests.cluster.helpers import lookup
from tests.kafka import wire
from tests.kafka.conftest import tracebacks, wait_kafka_port
from tests.kafka.helpers import Rec, create_partitioned, pulsar_topic, unique_topic
from tests.kafka.stream_check import (
    NumberedStream,
    assert_exactly_once,
    key_of,
    read_partitions,
    seq_of,
    value_of,
)
from tests.kafka.test_cluster_clients import PARTITIONS, spread_topic
from tests.kafka.test_kafka_python import CALL_TIMEOUT_S, TIMEOUTS, KafkaPython
from tests.kafka.test_moves import produce_settled
from tests.kafka.wire import RawKafka, record_batch
from tests.support.cluster_proc import LocalCluster
from tests.support.standalone_proc import StandaloneProcess

BEFORE_CRASH = 800             # records acknowledged before the crash (read back before and after)
DURING = 1600                  # records sent around the crash
PACE_S = 0.002
DOWN_S = 1.0                   # the broker stays dead this long before it is started again


def test_idempotent_stream_survives_broker_kill9_and_restart(kafka_cluster: LocalCluster) -> None:
    topic, owners = spread_topic(kafka_cluster)
    victim = next(b for b in kafka_cluster.brokers if b.service_url == owners[0])
    stream = NumberedStream(kafka_cluster.kafka_bootstrap, topic, PARTITIONS)
    stream.send(range(BEFORE_CRASH))
    stream.finish()
    before = read_partitions(kafka_cluster.kafka_bootstrap, topic, PARTITIONS, stream.expected())
    assert_exactly_once(stream, before)
    events: list[str] = []

    def crash_and_restart() -> None:
        start = time.monotonic()
        victim.kill9()
        events.append(f"{victim.name} killed")
        time.sleep(DOWN_S)
        victim.launch()
        wait_kafka_port(victim.kafka_bootstrap, victim.name, victim.log_path)
        events.append(f"{victim.name} serving again after {time.monotonic() - start:.1f} s")

    started = time.monotonic()
    stream.send(range(BEFORE_CRASH, BEFORE_CRASH + DURING), pace_s=PACE_S,
                at={BEFORE_CRASH + DURING // 4: crash_and_restart})
    stream.finish()
    print(f"{DURING} records around the crash acknowledged in {time.monotonic() - started:.1f} s; {events}; "
          f"partitions the victim owned: {[p for p, o in owners.items() if o == victim.service_url]}")

    after = read_partitions(kafka_cluster.kafka_bootstrap, topic, PARTITIONS, stream.expected())
    assert_exactly_once(stream, after)
    for p in range(PARTITIONS):
        old = [(r.offset, r.key, r.value) for r in before[p]]
        assert [(r.offset, r.key, r.value) for r in after[p][:len(old)]] == old, \
            f"partition {p}: records stored before the crash changed offset or content"


def test_producer_state_survives_its_owner_kill9(kafka_cluster: LocalCluster) -> None:
    """Over a plain socket: 5 idempotent one-record batches to the owner, which is then killed with
    SIGKILL; once the other broker has taken the partition over (its lease lapsed), the last batch
    and an older one retried there get their first offsets back and are not stored again, a gap is
    OUT_OF_ORDER_SEQUENCE_NUMBER, the next sequence is stored next. The killed broker is started
    again at the end (the module's cluster stays whole)."""
    topic = unique_topic("restart-wire")
    create_partitioned(kafka_cluster.brokers[0].admin_url, topic, 1)
    owner_url = lookup(kafka_cluster.brokers[0].admin_url, pulsar_topic(topic, 0))["brokerUrl"]
    owner = next(b for b in kafka_cluster.brokers if b.service_url == owner_url)
    other = next(b for b in kafka_cluster.brokers if b is not owner)
    with RawKafka.to(owner.kafka_bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        sent = [record_batch([(f"k{s}".encode(), f"v{s}".encode())], producer_id=pid, producer_epoch=epoch,
                             base_sequence=s) for s in range(5)]
        offsets = [produce_settled(conn, topic, b) for b in sent]
        assert [(a.error, a.base_offset) for a in offsets] == [(wire.NONE, i) for i in range(5)], offsets
    owner.kill9()
    try:
        with RawKafka.to(other.kafka_bootstrap) as conn:
            start = time.monotonic()
            last = produce_settled(conn, topic, sent[-1])
            took = time.monotonic() - start
            assert (last.error, last.base_offset) == (wire.NONE, 4), \
                f"the last batch retried on the broker that took over ({took:.1f} s): {last}, first stored at 4"
            again = conn.produce(topic, 0, sent[1])
            assert (again.error, again.base_offset) == (wire.NONE, 1), f"batch 1 retried after the crash: {again}"
            gap = conn.produce(topic, 0, record_batch([(None, b"gap")], producer_id=pid, producer_epoch=epoch,
                                                      base_sequence=7))
            assert gap.error == wire.OUT_OF_ORDER_SEQUENCE_NUMBER, f"a sequence gap after the crash: {gap}"
            nxt = conn.produce(topic, 0, record_batch([(None, b"v5")], producer_id=pid, producer_epoch=epoch,
                                                      base_sequence=5))
            assert (nxt.error, nxt.base_offset) == (wire.NONE, 5), nxt
            assert conn.list_offset(topic, 0, -1) == (wire.NONE, 6)
        print(f"taken over by {other.name} {took:.1f} s after {owner.name} was killed")
    finally:
        owner.launch()
        wait_kafka_port(owner.kafka_bootstrap, owner.name, owner.log_path)


# --- standalone ------------------------------------------------------------------------------

STANDALONE_PARTITIONS = 2
FIRST = 300                    # acknowledged before the crash, all of them
AFTER_RESTART = 100            # produced once it is back
STOP_SENDING_BOUND_S = 20.0


@pytest.fixture(scope="module")
def own_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A standalone of this module's own: the test kills it."""
    with StandaloneProcess.start(tmp_path_factory.mktemp("kafka-restart") / "data") as sa:
        wait_kafka_port(sa.kafka_bootstrap, "the standalone", sa.log_path)
        yield sa
        problems = tracebacks([("standalone", sa.log_path)])
    assert not problems, "the standalone logged a traceback:\n" + "\n".join(problems)


def producer(bootstrap: str) -> KafkaProducer:
    # idempotent by default; max_block_ms bounds send() while the broker is gone
    return KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, max_block_ms=5_000, **TIMEOUTS)


def abort(p: KafkaProducer) -> None:
    """Close now, dropping what is unsent, so none of it reaches the standalone once restarted.
    (kafka-python 3.0's close(timeout) flushes first and raises when the flush times out, before
    it force-closes: so force the sender thread closed first.)"""
    sender = p._sender
    sender.force_close()
    sender.join(STOP_SENDING_BOUND_S)
    assert not sender.is_alive(), "kafka-python's sender thread did not stop"
    try:
        p.close(timeout=0)
    except KafkaTimeoutError:
        pass


def send_numbered(p: KafkaProducer, topic: str, n: int, acked: dict[int, tuple[int, int]]):
    future = p.send(topic, key=key_of(n), value=value_of(n), partition=n % STANDALONE_PARTITIONS)
    future.add_callback(lambda md: acked.__setitem__(n, (md.partition, md.offset)))
    return future


def read_all(client: KafkaPython, topic: str, at_least: dict[int, int]) -> dict[int, list[Rec]]:
    return {p: client.consume(topic, p, ("offset", 0), expect=at_least[p]) for p in range(STANDALONE_PARTITIONS)}


def test_kafka_python_records_survive_standalone_kill9(own_standalone: StandaloneProcess) -> None:
    sa = own_standalone
    client = KafkaPython(sa.kafka_bootstrap)
    topic = unique_topic("restart-sa")
    client.create_topic(topic, STANDALONE_PARTITIONS, {})    # Kafka's 7-day retention: nothing trimmed

    acked: dict[int, tuple[int, int]] = {}
    first = producer(sa.kafka_bootstrap)
    try:
        futures = [send_numbered(first, topic, n, acked) for n in range(FIRST)]
        first.flush(timeout=CALL_TIMEOUT_S)
        for f in futures:
            f.get(timeout=CALL_TIMEOUT_S)
    finally:
        first.close(timeout=5)
    assert len(acked) == FIRST

    # a second producer keeps sending while the standalone is killed
    stop = threading.Event()
    sending_errors: list[str] = []

    def keep_sending() -> None:
        p = producer(sa.kafka_bootstrap)
        n = FIRST
        try:
            while not stop.is_set():
                try:
                    send_numbered(p, topic, n, acked)
                except Exception as e:      # the broker is gone: send() gives up after max_block_ms
                    sending_errors.append(repr(e))
                n += 1
                time.sleep(0.002)
        finally:
            abort(p)

    sender = threading.Thread(target=keep_sending, daemon=True)
    sender.start()
    deadline = time.monotonic() + 30
    while len(acked) < FIRST + 200:
        assert time.monotonic() < deadline and sender.is_alive(), f"only {len(acked)} acknowledged"
        time.sleep(0.01)
    sa.kill9()
    acked_at_kill = dict(acked)
    stop.set()
    sender.join(STOP_SENDING_BOUND_S)
    assert not sender.is_alive(), "the sending thread did not stop"
    # a callback could only run for an answer received before the kill
    assert set(acked) >= set(acked_at_kill)
    acked_at_kill = dict(acked)
    sa.launch()
    wait_kafka_port(sa.kafka_bootstrap, "the restarted standalone", sa.log_path)

    per_partition = {p: sum(1 for q, _ in acked_at_kill.values() if q == p) for p in range(STANDALONE_PARTITIONS)}
    stored = read_all(client, topic, per_partition)
    ends: dict[int, int] = {}
    for p in range(STANDALONE_PARTITIONS):
        got = stored[p]
        offsets = [r.offset for r in got]
        assert offsets == list(range(len(got))), f"partition {p}: a gap in the offsets after the crash: {offsets}"
        numbers = [seq_of(r) for r in got]
        assert len(numbers) == len(set(numbers)), f"partition {p}: a record stored twice"
        by_offset = {r.offset: r for r in got}
        for n, (q, offset) in acked_at_kill.items():
            if q == p:
                assert offset in by_offset and seq_of(by_offset[offset]) == n, \
                    f"record {n}, acknowledged at offset {offset} of partition {p}, is not there after the crash"
                assert by_offset[offset].value == value_of(n)
        ends[p] = len(got)
    print(f"acknowledged before the kill: {len(acked_at_kill)}; stored after the restart: {ends}; "
          f"send errors while down: {len(sending_errors)}")

    # produced after the restart: offsets continue from the log end, per partition
    later = {n: None for n in range(100_000, 100_000 + AFTER_RESTART)}
    after_acks: dict[int, tuple[int, int]] = {}
    third = producer(sa.kafka_bootstrap)
    try:
        futures = [send_numbered(third, topic, n, after_acks) for n in later]
        third.flush(timeout=CALL_TIMEOUT_S)
        for f in futures:
            f.get(timeout=CALL_TIMEOUT_S)
    finally:
        third.close(timeout=5)
    for p in range(STANDALONE_PARTITIONS):
        offsets = sorted(o for q, o in after_acks.values() if q == p)
        assert offsets == list(range(ends[p], ends[p] + len(offsets))), \
            f"partition {p}: after the restart offsets {offsets[:3]}... do not continue from the log end {ends[p]}"
    final = read_all(client, topic, {p: ends[p] + AFTER_RESTART // STANDALONE_PARTITIONS
                                     for p in range(STANDALONE_PARTITIONS)})
    for p in range(STANDALONE_PARTITIONS):
        assert [(r.offset, r.value) for r in final[p][:ends[p]]] == [(r.offset, r.value) for r in stored[p]]
        assert [r.offset for r in final[p]] == list(range(len(final[p])))
