"""The Kafka side of a chaos run: idempotent producers and a consumer group, through confluent-kafka.

    plan = KafkaPlan.build(seed, namespace="chaos/ns")
    cluster = ChaosCluster.start(..., env={**BROKER_ENV, **plan.broker_env()})   # bare names in the namespace
    prepare(AdminClient(admin_url), plan)                 # after the Pulsar workload's prepare: the topic
    runner_history.write("kafka-topic", **plan.topic_record())
    procs = [Popen(argv) for _, argv in plan.commands(cluster.kafka_bootstrap, out)]
    ... faults; then the Pulsar workload's stop files: stop-producers, stop-consumers ...
    name, argv = plan.final_command(cluster.kafka_bootstrap, out)     # the full read of every partition

It runs beside the Pulsar workload, on a topic of PARTITIONS partitions in the same namespace (so
unlimited retention and offload to S3 apply to it too), with the same stop files and drain:

- `producer-kafka`: PRODUCERS confluent-kafka producers with `enable.idempotence=true`, `acks=all`
  and no message timeout (librdkafka retries until the end, as the Pulsar producers do), each
  sending `payload(name, seq)` for seq 0, 1, ... to partition seq % PARTITIONS at RATE_PER_S in all,
  with at most PENDING_MAX in flight (over it a slot is skipped). A send is recorded once, when its
  delivery report comes (`ok` with partition and offset, `unknown` with the error: it may be
  stored) or, still pending at the end, `unknown` with t1 null. A fatal error (librdkafka gives the
  producer up: its idempotence state and the broker's disagree) is recorded; the producer is
  then made again, its pending sends recorded `unknown`.
- `consumer-kafka`: the group's MEMBERS, a thread and a confluent-kafka consumer each,
  `subscribe()`d with `enable.auto.commit=false`: every record of a batch is recorded, then the
  batch's offsets are committed synchronously and the commit recorded with its outcome, so a
  record is committed only once it is in the history. Assignments, revocations and the
  consumer's own errors are recorded. Once the producers were told to stop, a monitor compares the
  group's committed offsets with each partition's end every LAG_INTERVAL_S and records the lag
  while there is any: the runner's drain waits for the consumers' histories to go quiet, so it
  waits (bounded) for the group to catch up.
- `final-kafka`: after every other process exited, each partition is read from offset 0 to its
  high watermark by a fresh consumer `assign()`ed to it (no group, nothing committed,
  `auto.offset.reset=error` so a missing start is an error, never a silent jump).

History records (each with t, proc, op, as chaos.history says):

    kafka-topic     (runner) topic (the Kafka name), pulsar (its full Pulsar name), partitions,
                    group, producers, members
    kafka-send      producer, seq, value, outcome ("ok" | "failed" | "unknown"), t0, t1 (null:
                    pending at the end), partition and offset (ok), error
                    (`failed`: refused by the client before it was queued: never stored)
    kafka-producer  producer, event ("open" | "fatal" | "closed"), error
    kafka-consume   member, partition, offset, value, key
    kafka-commit    member, offsets ({partition: next offset}), ok, error
    kafka-member    member, event ("open" | "assign" | "revoke" | "lost" | "closed" | "crashed"),
                    partitions, error
    kafka-error     who (producer or member), error, fatal: librdkafka's error callback
    kafka-lag       lag ({partition: records not committed}), total, error
    kafka-read      partition, offset, value, key (the final read)
    kafka-final     partition, low, high, count, complete, error

What must hold: every wait is bounded (librdkafka calls with timeouts, or `bounded`); a send is
recorded exactly once; a member commits only offsets of records already in the history; the final
read records each offset at most once and every partition gets its `kafka-final`.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from admin_client import AdminClient
from chaos.history import HISTORY_DIR, HistoryWriter, payload, read_file
from chaos.workload.plan import DEFAULT_NAMESPACE, DRAIN_S, FINAL_TIMEOUT_S
from chaos.workload.runtime import (
    CLOSE_TIMEOUT_S,
    RETRY_PAUSE_S,
    STOP_CONSUMERS,
    STOP_POLL_S,
    STOP_PRODUCERS,
    Stop,
    bounded,
    error_text,
    exit_process,
)
from common.errors import AdminConflict

TOPIC = "kafka-0"
PARTITIONS = 3
PRODUCERS = 2
MEMBERS = 3
RATE_PER_S = 60.0                 # records per second over every producer
PENDING_MAX = 500                 # in flight per producer
LINGER_MS = 5
SESSION_TIMEOUT_MS = 8_000        # within the brokers' group.min/max.session.timeout.ms
HEARTBEAT_INTERVAL_MS = 2_000
CALL_TIMEOUT_S = 5.0              # one metadata, watermark or committed-offsets call
CONSUME_TIMEOUT_S = 0.2           # one consume(): how often a member sees the stop
BATCH_MAX = 200
LAG_INTERVAL_S = 1.0
TICK_S = 0.005
CATCH_UP_S = 1.0
FATAL_POLL_S = 2.0                # after a fatal error: delivery reports of the purged sends
JOIN_S = CLOSE_TIMEOUT_S + 5.0
GROUP_START_S = 60.0              # the runner waits this long at most for the group's first records
GROUP_START_POLL_S = 0.25
ROLES = ("producer", "consumer", "final")
PRODUCER_PROC, CONSUMER_PROC, FINAL_PROC = "producer-kafka", "consumer-kafka", "final-kafka"


def available() -> bool:
    """Is the client library (confluent-kafka) installed?"""
    return importlib.util.find_spec("confluent_kafka") is not None


@dataclass(frozen=True)
class KafkaPlan:
    seed: int
    namespace: str
    topic: str                          # the Kafka name (bare: it lives in kafka_default_namespace)
    partitions: int
    producers: tuple[str, ...]
    group: str
    members: tuple[str, ...]
    rate_per_s: float

    @classmethod
    def build(cls, seed: int, namespace: str = DEFAULT_NAMESPACE, rate_per_s: float = RATE_PER_S) -> KafkaPlan:
        return cls(seed, namespace, TOPIC, PARTITIONS, tuple(f"kafka-p{i}" for i in range(PRODUCERS)),
                   f"chaos-group-{seed}", tuple(f"kafka-m{i}" for i in range(MEMBERS)), rate_per_s)

    @property
    def pulsar_topic(self) -> str:
        return f"persistent://{self.namespace}/{self.topic}"

    def broker_env(self) -> dict[str, str]:
        """What every broker needs: bare Kafka topic names (and the group's placement) in the namespace."""
        return {"STRATA_KAFKA_DEFAULT_NAMESPACE": self.namespace}

    def topic_record(self) -> dict[str, Any]:
        return {"topic": self.topic, "pulsar": self.pulsar_topic, "partitions": self.partitions,
                "group": self.group, "producers": list(self.producers), "members": list(self.members)}

    def argv(self, role: str, proc: str, bootstrap: str, out_dir: str | Path, *extra: str) -> list[str]:
        return [sys.executable, "-m", "chaos.workload.kafka", role, "--name", proc, "--seed", str(self.seed),
                "--namespace", self.namespace, "--rate-per-s", repr(self.rate_per_s), "--bootstrap", bootstrap,
                "--out", str(out_dir), *extra]

    def commands(self, bootstrap: str, out_dir: str | Path, *, drain_s: float = DRAIN_S) -> list[tuple[str, list[str]]]:
        """(process name, argv) of the run's Kafka processes; names fit the runner's drain (producer-*,
        consumer-*)."""
        return [(PRODUCER_PROC, self.argv("producer", PRODUCER_PROC, bootstrap, out_dir, "--drain-s", str(drain_s))),
                (CONSUMER_PROC, self.argv("consumer", CONSUMER_PROC, bootstrap, out_dir))]

    def final_command(self, bootstrap: str, out_dir: str | Path,
                      *, timeout_s: float = FINAL_TIMEOUT_S) -> tuple[str, list[str]]:
        return FINAL_PROC, self.argv("final", FINAL_PROC, bootstrap, out_dir, "--timeout-s", str(timeout_s))


def wait_group_consuming(out_dir: str | Path, timeout_s: float = GROUP_START_S) -> bool:
    """Wait (bounded) until the group consumed its first record, as its history says (a group's
    first rebalance waits for members to join: faults before it would find nothing to recover)."""
    path = Path(out_dir) / HISTORY_DIR / f"{CONSUMER_PROC}.jsonl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if b'"op":"kafka-consume"' in path.read_bytes():
                return True
        except OSError:
            pass
        time.sleep(GROUP_START_POLL_S)
    return False


def prepare(admin: AdminClient, plan: KafkaPlan) -> None:
    """The plan's partitioned topic (its namespace, made by the Pulsar workload's prepare, gives it
    unlimited retention and offload)."""
    path = "/admin/v2/" + plan.pulsar_topic.replace("://", "/", 1) + "/partitions"
    try:
        admin.call("PUT", path, plan.partitions)
    except AdminConflict:
        pass


def _client_conf(bootstrap: str, client_id: str, errors: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "client.id": client_id, "error_cb": errors,
            "socket.timeout.ms": 10_000}


# --------------------------------------------------------------------------------------------------
# Producers


@dataclass
class _Pending:
    t0: float
    value: str
    partition: int


@dataclass
class _Producer:
    name: str
    rate_per_s: float
    handle: Any = None
    next_seq: int = 0
    next_due_s: float = 0.0
    fatal: str | None = None
    pending: dict[int, _Pending] = field(default_factory=dict)


class ProducerProcess:
    def __init__(self, plan: KafkaPlan, proc: str, bootstrap: str, out_dir: str, drain_s: float) -> None:
        self.plan = plan
        self.bootstrap = bootstrap
        self.drain_s = drain_s
        self.stop = Stop(out_dir, STOP_PRODUCERS).install()
        self.writer = HistoryWriter(out_dir, proc)
        seqs = _history_seqs(out_dir, proc)
        rate = plan.rate_per_s / len(plan.producers)
        self.producers = [_Producer(name, rate, next_seq=seqs.get(name, -1) + 1) for name in plan.producers]

    def _open(self, st: _Producer) -> None:
        from confluent_kafka import Producer

        def on_error(err: Any) -> None:
            self.writer.write("kafka-error", who=st.name, error=str(err), fatal=bool(err.fatal()))
            if err.fatal():
                st.fatal = str(err)

        conf = {**_client_conf(self.bootstrap, st.name, on_error), "enable.idempotence": True, "acks": "all",
                "linger.ms": LINGER_MS, "message.timeout.ms": 0}
        st.handle = Producer(conf)
        st.fatal = None
        self.writer.write("kafka-producer", producer=st.name, event="open", seq=st.next_seq)

    def run(self) -> int:
        for st in self.producers:
            self._open(st)
            st.next_due_s = time.monotonic()
        while not self.stop.requested():
            now = time.monotonic()
            for st in self.producers:
                if st.fatal is not None:
                    self._renew(st)
                self._tick(st, now)
                st.handle.poll(0)
            time.sleep(TICK_S)
        if not self.stop.terminated:
            self._drain()
        self._finish()
        return 0

    def _tick(self, st: _Producer, now: float) -> None:
        if st.next_due_s < now - CATCH_UP_S:
            st.next_due_s = now
        while st.next_due_s <= now:
            st.next_due_s += 1.0 / st.rate_per_s
            if len(st.pending) < PENDING_MAX:
                self._send(st)

    def _send(self, st: _Producer) -> None:
        seq = st.next_seq
        st.next_seq += 1
        partition = seq % self.plan.partitions
        entry = _Pending(time.time(), payload(st.name, seq), partition)
        st.pending[seq] = entry

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self._record(st, seq, "ok", time.time(), partition=msg.partition(), offset=msg.offset())
            else:
                self._record(st, seq, "unknown", time.time(), error=str(err))
        try:
            st.handle.produce(self.plan.topic, entry.value.encode(), key=st.name.encode(), partition=partition,
                              on_delivery=done)
        except BufferError as exc:      # librdkafka's queue is full: never queued, so never stored
            self._record(st, seq, "failed", time.time(), error=error_text(exc))
        except Exception as exc:        # e.g. a fatal state: it may not say whether it was queued
            self._record(st, seq, "unknown", time.time(), error=error_text(exc))

    def _record(self, st: _Producer, seq: int, outcome: str, t1: float | None, *, partition: int | None = None,
                offset: int | None = None, error: str | None = None) -> None:
        entry = st.pending.pop(seq, None)
        if entry is None:
            return                      # recorded already
        self.writer.write("kafka-send", producer=st.name, seq=seq, value=entry.value, outcome=outcome, t0=entry.t0,
                          t1=t1, partition=partition if partition is not None else entry.partition,
                          offset=offset, error=error)

    def _renew(self, st: _Producer) -> None:
        """After a fatal error: purge, take the reports of what was purged, record the rest unknown,
        and make the producer again (a new producer id)."""
        self.writer.write("kafka-producer", producer=st.name, event="fatal", error=st.fatal)
        old = st.handle
        bounded(old.purge, CLOSE_TIMEOUT_S)
        bounded(lambda: old.poll(FATAL_POLL_S), CLOSE_TIMEOUT_S)
        for seq in sorted(st.pending):
            self._record(st, seq, "unknown", None, error=f"fatal: {st.fatal}")
        self._open(st)

    def _drain(self) -> None:
        deadline = time.monotonic() + self.drain_s
        while time.monotonic() < deadline and any(st.pending for st in self.producers):
            if self.stop.terminated:
                return
            for st in self.producers:
                st.handle.poll(0.05)

    def _finish(self) -> None:
        for st in self.producers:
            for seq in sorted(st.pending):
                self._record(st, seq, "unknown", None)
            error = bounded(st.handle.purge, CLOSE_TIMEOUT_S)
            self.writer.write("kafka-producer", producer=st.name, event="closed", error=error)
        self.writer.close()


def _history_seqs(out_dir: str, proc: str) -> dict[str, int]:
    """The highest seq each producer used in an earlier life of this process (seqs are never reused)."""
    path = Path(out_dir) / HISTORY_DIR / f"{proc}.jsonl"
    highest: dict[str, int] = {}
    if path.exists():
        for record in read_file(path)[0]:
            if record.get("op") == "kafka-send":
                highest[record["producer"]] = max(highest.get(record["producer"], -1), int(record["seq"]))
    return highest


# --------------------------------------------------------------------------------------------------
# The group


class Member:
    """One member of the group, on its own thread: consume, record, commit synchronously."""

    def __init__(self, plan: KafkaPlan, name: str, bootstrap: str, writer: HistoryWriter, stop: Stop) -> None:
        self.plan = plan
        self.name = name
        self.bootstrap = bootstrap
        self.writer = writer
        self.stop = stop
        self.handle: Any = None

    def _event(self, event: str, partitions: list[Any] | None = None, **fields: Any) -> None:
        parts = sorted(tp.partition for tp in partitions) if partitions is not None else None
        self.writer.write("kafka-member", member=self.name, event=event, partitions=parts, **fields)

    def _open(self) -> bool:
        from confluent_kafka import Consumer

        def on_error(err: Any) -> None:
            self.writer.write("kafka-error", who=self.name, error=str(err), fatal=bool(err.fatal()))

        conf = {**_client_conf(self.bootstrap, self.name, on_error), "group.id": self.plan.group,
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS}
        while not self.stop.requested():
            try:
                self.handle = Consumer(conf)
                self.handle.subscribe([self.plan.topic], on_assign=lambda _c, ps: self._event("assign", ps),
                                      on_revoke=lambda _c, ps: self._event("revoke", ps),
                                      on_lost=lambda _c, ps: self._event("lost", ps))
            except Exception as exc:
                self.writer.write("kafka-member", member=self.name, event="crashed", partitions=None,
                                  error=error_text(exc))
                self.handle = None
                self.stop.wait(RETRY_PAUSE_S)
                continue
            self._event("open")
            return True
        return False

    def _close(self, event: str, error: str | None) -> None:
        handle, self.handle = self.handle, None
        close_error = bounded(handle.close, CLOSE_TIMEOUT_S)
        self._event(event, error=error, close_error=close_error)

    def run(self) -> None:
        while not self.stop.requested():
            if self.handle is None and not self._open():
                break
            try:
                msgs = self.handle.consume(num_messages=BATCH_MAX, timeout=CONSUME_TIMEOUT_S)
            except Exception as exc:
                self._close("crashed", error_text(exc))
                continue
            self._handle(msgs)
        if self.handle is not None:
            self._close("closed", None)

    def _handle(self, msgs: list[Any]) -> None:
        from confluent_kafka import TopicPartition
        ends: dict[int, int] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                self.writer.write("kafka-error", who=self.name, error=str(err), fatal=bool(err.fatal()))
                continue
            key = msg.key()
            self.writer.write("kafka-consume", member=self.name, partition=msg.partition(), offset=msg.offset(),
                              value=(msg.value() or b"").decode(errors="replace"),
                              key=key.decode(errors="replace") if key is not None else None)
            ends[msg.partition()] = max(ends.get(msg.partition(), -1), msg.offset() + 1)
        if not ends:
            return
        offsets = {str(p): o for p, o in sorted(ends.items())}
        try:
            done = self.handle.commit(offsets=[TopicPartition(self.plan.topic, p, o) for p, o in sorted(ends.items())],
                                      asynchronous=False)
        except Exception as exc:        # a rebalance, the coordinator moving: the records come again
            self.writer.write("kafka-commit", member=self.name, offsets=offsets, ok=False, error=error_text(exc))
            return
        failed = [f"{tp.partition}: {tp.error}" for tp in done or () if tp.error is not None]
        self.writer.write("kafka-commit", member=self.name, offsets=offsets, ok=not failed,
                          error="; ".join(failed) or None)


def _watch_lag(plan: KafkaPlan, bootstrap: str, out_dir: str, writer: HistoryWriter, stop: Stop) -> None:
    """Once the producers were told to stop: the group's lag every LAG_INTERVAL_S, recorded while
    there is any (or it cannot be read), and once when it reaches zero."""
    from confluent_kafka import Consumer, TopicPartition
    producers_stopped = Path(out_dir) / STOP_PRODUCERS
    while not producers_stopped.exists():
        if stop.wait(STOP_POLL_S):
            return
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": plan.group, "enable.auto.commit": False,
                      "client.id": "kafka-lag", "socket.timeout.ms": 10_000})
    tps = [TopicPartition(plan.topic, p) for p in range(plan.partitions)]
    last_total: int | None = None
    try:
        while not stop.requested():
            try:
                committed = {tp.partition: tp.offset for tp in probe.committed(tps, timeout=CALL_TIMEOUT_S)}
                lag: dict[str, int] = {}
                for tp in tps:
                    low, high = probe.get_watermark_offsets(tp, timeout=CALL_TIMEOUT_S, cached=False)
                    at = committed.get(tp.partition, -1)
                    lag[str(tp.partition)] = max(0, high - (at if at >= 0 else low))
                total = sum(lag.values())
                if total or last_total != 0:
                    writer.write("kafka-lag", lag=lag, total=total, error=None)
                last_total = total
            except Exception as exc:
                writer.write("kafka-lag", lag=None, total=None, error=error_text(exc))
                last_total = None
            stop.wait(LAG_INTERVAL_S)
    finally:
        bounded(probe.close, CLOSE_TIMEOUT_S)


def consumer_main(plan: KafkaPlan, proc: str, bootstrap: str, out_dir: str) -> None:
    stop = Stop(out_dir, STOP_CONSUMERS).install()
    writer = HistoryWriter(out_dir, proc)
    members = [Member(plan, name, bootstrap, writer, stop) for name in plan.members]
    threads = [threading.Thread(target=m.run, name=m.name, daemon=True) for m in members]
    threads.append(threading.Thread(target=_watch_lag, args=(plan, bootstrap, out_dir, writer, stop),
                                    name="kafka-lag", daemon=True))
    for thread in threads:
        thread.start()
    while not stop.wait(STOP_POLL_S):
        pass
    deadline = time.monotonic() + JOIN_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    writer.close()
    exit_process(0)


# --------------------------------------------------------------------------------------------------
# The final read


def _read_partition(plan: KafkaPlan, bootstrap: str, writer: HistoryWriter, partition: int, deadline: float,
                    stop: Stop) -> None:
    """Offsets 0 .. high watermark of one partition, each recorded once; then its kafka-final."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    errors: list[str] = []

    def on_error(err: Any) -> None:
        errors.append(str(err))

    consumer = Consumer({**_client_conf(bootstrap, "final-kafka", on_error),
                         "group.id": f"{plan.group}-final-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "enable.auto.offset.store": False, "auto.offset.reset": "error"})
    low: int | None = None
    high: int | None = None
    next_offset, count, complete = 0, 0, False
    error: str | None = None
    try:
        tp = TopicPartition(plan.topic, partition)
        while high is None and time.monotonic() < deadline and not stop.terminated:
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout=CALL_TIMEOUT_S, cached=False)
            except Exception as exc:
                error = error_text(exc)
                time.sleep(RETRY_PAUSE_S)
        end = -1 if high is None else high
        if high is not None:
            consumer.assign([TopicPartition(plan.topic, partition, 0)])
        while next_offset < end and time.monotonic() < deadline and not stop.terminated:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                error = str(err)
                if err.code() == KafkaError._AUTO_OFFSET_RESET:   # offset 0 is gone: a read that cannot finish
                    break
                continue
            offset = msg.offset()
            if offset is None or offset < next_offset:
                continue                    # read again after a reconnect: recorded already
            key = msg.key()
            writer.write("kafka-read", partition=partition, offset=offset,
                         value=(msg.value() or b"").decode(errors="replace"),
                         key=key.decode(errors="replace") if key is not None else None)
            next_offset = offset + 1
            count += 1
        complete = high is not None and next_offset >= end
        if not complete and error is None:
            error = "out of time" if not stop.terminated else "terminated"
    finally:
        bounded(consumer.close, CLOSE_TIMEOUT_S)
        writer.write("kafka-final", partition=partition, low=low, high=high, count=count, complete=complete,
                     error=None if complete else (error or (errors[-1] if errors else None)))


def final_main(plan: KafkaPlan, proc: str, bootstrap: str, out_dir: str, timeout_s: float) -> None:
    stop = Stop(out_dir, None).install()
    writer = HistoryWriter(out_dir, proc)
    deadline = time.monotonic() + timeout_s
    for partition in range(plan.partitions):
        _read_partition(plan, bootstrap, writer, partition, deadline, stop)
    writer.close()
    exit_process(0)


# --------------------------------------------------------------------------------------------------
# `python -m chaos.workload.kafka <role> ...`


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos.workload.kafka")
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--name", required=True, help="the process name (its history file)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--rate-per-s", type=float, default=RATE_PER_S, help="total, every producer")
    parser.add_argument("--bootstrap", required=True, help="bootstrap.servers: every broker's Kafka listener")
    parser.add_argument("--out", required=True, help="the run's directory (history/, stop files)")
    parser.add_argument("--drain-s", type=float, default=DRAIN_S, help="producers: wait for pending sends")
    parser.add_argument("--timeout-s", type=float, default=FINAL_TIMEOUT_S, help="final: the whole read")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    plan = KafkaPlan.build(args.seed, args.namespace, args.rate_per_s)
    if args.role == "producer":
        exit_process(ProducerProcess(plan, args.name, args.bootstrap, args.out, args.drain_s).run())
    elif args.role == "consumer":
        consumer_main(plan, args.name, args.bootstrap, args.out)
    else:
        final_main(plan, args.name, args.bootstrap, args.out, args.timeout_s)


if __name__ == "__main__":
    main()
