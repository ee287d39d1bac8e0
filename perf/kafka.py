"""`strata perf kafka`: the Kafka protocol against the Pulsar protocol on one standalone, side by side.

    strata perf kafka [--messages N] [--size 1024] [--linger-ms 5] [--long-poll-records 200]
                      [--group-members 3] [--commit-interval-ms 1000] [--rounds R] [--profile DIR] [--json]

Starts one standalone (its Pulsar and Kafka ports) and runs, on fresh 1-partition topics:

1. Kafka produce: confluent-kafka (librdkafka) Producer, linger.ms 5, acks=all, N records of
   `--size` bytes.
2. Kafka consume: a confluent-kafka Consumer assign()ed at offset 0 of that topic (a group.id
   because librdkafka needs one, nothing committed) reads all N, right after they were written
   (as the Pulsar consumers below read what was just written).
   Then Kafka produce again, to a topic of its own, with enable.idempotence=true.
3. The same workload with the Pulsar protocol: the native driver (perf/native.py, Strata's own
   protocol-level load generator) and the official pulsar-client (batching on, its defaults),
   each producing N messages and then consuming them (a subscription made before the produce).
4. Long poll: a consumer waiting at the end of a topic, a producer sending one stamped record
   every `--long-poll-interval-ms` without batching delay; latency = receive - send time (same
   clock), p50/p99 over `--long-poll-records`. Kafka: fetch.wait.max.ms 500 (the default);
   Pulsar (official client, pushed): for comparison.
5. A consumer group against assign(): a backlog of N records spread over `--group-members`
   partitions, read by that many confluent-kafka consumers, each a worker process: either members
   of one group (subscribe(), enable.auto.commit=true, auto.commit.interval.ms
   `--commit-interval-ms`: JoinGroup/SyncGroup at set-up, then heartbeats and a commit every
   interval from each member while they read) or each `assign()`ed one partition from offset 0 (no
   group, nothing committed). Each load reads a backlog of its own, produced just before it
   (unmeasured), so both read what was just written; the order alternates by round. The group
   joins during set-up (its members hold what they are given, fetching nothing, until the start)
   and the CPU window closes when the readers have every record (before they close: a member's
   last commit and its leave), so the measured part is the reading with the group's running costs:
   the committed offsets fetched at the start, heartbeats and a commit a second per member.

Each load runs in a spawned worker process (perf.harness.WorkerPool): it connects and checks its
topic first, then the parent samples the server's CPU (the standalone, which is the broker, plus
its bookies, found with psutil; and the broker alone; each to the nanosecond: `thread_cpu_s`),
starts it and samples again when it is done.
Reported per workload: msgs/s (first send to last receipt or receive), server and broker CPU
µs per message; ratios Kafka / Pulsar (native and official client), idempotent / plain, and the
targets: Kafka produce and consume server CPU/msg ≤ 1.3x the Pulsar protocol's, idempotent
produce ≤ 1.1x plain, long-poll p50 ≤ 10 ms, group / assign ≤ 1.1x. With `--rounds R` every workload runs R times
(interleaved) and the medians count. The ratios measured in one run are what counts: several
servers share this box's two cores, so absolute figures drift from run to run.

`--profile DIR` records the broker with py-spy (the venv's, or one on PATH) during each Kafka
load (DIR/kafka-<load>.txt, py-spy's raw collapsed stacks, a flame graph's input; only the
thread holding the GIL, so idle threads are left out) and reports each load's top functions by
own time and the Kafka front end's by total time; the sampling perturbs the figures, so profile
in a run of its own.

What must hold: every wait is bounded (`--timeout-s` per load, the long-poll bounds); the
standalone, the workers, py-spy and the temp dir are gone when the command returns.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import multiprocessing
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from common.errors import StrataError, TimeoutExpired
from perf.harness import (
    KIB,
    Server,
    ServerCpu,
    WorkerPool,
    cpu_per_message_us,
    create_partitioned_topic,
    install_sigterm_cleanup,
    process_cpu_s,
    throughput,
    worker_main,
)

TITLE = "strata perf kafka"
NAMESPACE = "public/default"
KAFKA_READY_TIMEOUT_S = 30.0
PROFILE_STOP_TIMEOUT_S = 30.0
PROFILE_TOP = 15
READERS_POLL_S = 0.01              # how often the parent looks at the readers' shared count
TARGETS = {"kafka_over_pulsar_cpu_max": 1.3, "idempotent_over_plain_cpu_max": 1.1, "long_poll_p50_ms_max": 10.0,
           "group_over_assign_cpu_max": 1.1}

# workload -> (protocol, kind)
WORKLOADS = {
    "kafka-produce": ("kafka", "produce"),
    "kafka-produce-idempotent": ("kafka", "produce"),
    "kafka-consume": ("kafka", "consume"),
    "pulsar-native-produce": ("pulsar", "produce"),
    "pulsar-native-consume": ("pulsar", "consume"),
    "pulsar-client-produce": ("pulsar", "produce"),
    "pulsar-client-consume": ("pulsar", "consume"),
}
FIGURES = ("msgs_per_s", "seconds", "server_cpu_us_per_msg", "broker_cpu_us_per_msg")
# the consumer-group run (5. above): load -> the reader's mode
GROUP_WORKLOADS = {"kafka-assign-consume": "assign", "kafka-group-consume": "group"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=TITLE, description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=300_000, help="messages per load (default 300,000)")
    parser.add_argument("--size", type=int, default=KIB, help="payload bytes per message (default 1024)")
    parser.add_argument("--linger-ms", type=int, default=5, help="the Kafka producers' linger.ms")
    parser.add_argument("--rounds", type=int, default=1, help="run every load this often; medians count")
    parser.add_argument("--long-poll-records", type=int, default=200, help="records timed per protocol")
    parser.add_argument("--long-poll-interval-ms", type=float, default=50.0, help="one record every this long")
    parser.add_argument("--fetch-wait-max-ms", type=int, default=500, help="the long-poll consumer's fetch.wait.max.ms")
    parser.add_argument("--group-members", type=int, default=3,
                        help="group against assign: consumers (and partitions of the backlog; default 3)")
    parser.add_argument("--commit-interval-ms", type=int, default=1000,
                        help="group against assign: the members' auto.commit.interval.ms (default 1000)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="record the broker with py-spy during each Kafka load into DIR")
    parser.add_argument("--bookies", type=int, default=1, help="bookies of the standalone")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="bound on each load")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> str | None:
    if args.messages < 1 or args.size < 8 or args.rounds < 1 or args.long_poll_records < 1:
        return "--messages, --rounds and --long-poll-records must be positive and --size >= 8"
    if args.linger_ms < 0 or args.long_poll_interval_ms <= 0 or args.fetch_wait_max_ms < 0 or args.timeout_s <= 0:
        return "--linger-ms, --fetch-wait-max-ms >= 0; --long-poll-interval-ms, --timeout-s > 0"
    if args.group_members < 1 or args.commit_interval_ms < 1 or args.messages < args.group_members:
        return "--group-members and --commit-interval-ms must be positive, --messages >= --group-members"
    return None


# ------------------------------------------------------------------------------------------------
# The standalone, topics, CPU


def _wait_kafka_port(bootstrap: str) -> None:
    import socket
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + KAFKA_READY_TIMEOUT_S
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutExpired("the Kafka port never accepted a connection", bootstrap=bootstrap,
                                     timeout_s=KAFKA_READY_TIMEOUT_S) from None
            time.sleep(0.1)


def _new_topic(server: Server, kind: str, partitions: int = 1) -> tuple[str, str]:
    """A fresh topic (1 partition unless said): (its Kafka name, its Pulsar name)."""
    name = f"perf-kafka-{kind}-{uuid.uuid4().hex[:8]}"
    pulsar_name = f"persistent://{NAMESPACE}/{name}"
    create_partitioned_topic(server.admin_url, pulsar_name, partitions)
    return name, pulsar_name


def thread_cpu_s(pid: int) -> float:
    """CPU seconds of a process's live threads, to the nanosecond (/proc/PID/task/*/schedstat, whose
    first field is time on a CPU); psutil's figure, in 10 ms clock ticks, where there is no /proc.

    Why not psutil alone: a load of a few hundred messages costs the broker a few ms, under one
    tick. A thread that exits during a load takes its time with it; the broker's threads (its
    event loop, the executor's) live as long as it does."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return process_cpu_s(pid)
    total_ns = 0
    for task in tasks:
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue   # the thread ended meanwhile
    return total_ns / 1e9


class _Cpu:
    """The server's CPU (the standalone and its descendants: its bookies) and the broker's alone."""

    def __init__(self, server: Server, broker_pid: int) -> None:
        self.server = server
        self.broker_pid = broker_pid

    def sample(self) -> tuple[float, float]:
        pids = self.server.cpu.pids()
        return sum(thread_cpu_s(pid) for pid in pids), thread_cpu_s(self.broker_pid)


class _Profiler:
    """py-spy recording the broker while a load runs (raw collapsed stacks), when asked for."""

    def __init__(self, directory: Path | None, pid: int) -> None:
        self.directory = directory
        self.pid = pid
        self.exe = None
        if directory is not None:
            here = Path(sys.executable).parent / "py-spy"
            self.exe = str(here) if here.exists() else shutil.which("py-spy")
            if self.exe is None:
                raise StrataError("--profile needs py-spy: pip install py-spy")
            directory.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.path: Path | None = None

    def start(self, load: str) -> None:
        if self.exe is None or self.directory is None:
            return
        self.path = self.directory / f"{load}.txt"
        self.proc = subprocess.Popen([self.exe, "record", "--pid", str(self.pid), "--format", "raw",
                                      "--rate", "250", "--gil", "-o", str(self.path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)   # attached before the load starts
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            raise StrataError("py-spy could not record the broker", error=err[-2000:])

    def stop(self) -> dict | None:
        proc, path = self.proc, self.path
        self.proc = self.path = None
        if proc is None or path is None:
            return None
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=PROFILE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=PROFILE_STOP_TIMEOUT_S)
            raise TimeoutExpired("py-spy did not stop", timeout_s=PROFILE_STOP_TIMEOUT_S) from None
        return top_frames(path) if path.exists() else None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=PROFILE_STOP_TIMEOUT_S)


FRAME_LINE = re.compile(r":\d+\)$")


def top_frames(path: Path, top: int = PROFILE_TOP) -> dict:
    """From py-spy raw output (`frame;frame;... count` a line, root first; recorded with --gil, so
    only the thread holding the GIL is sampled: Python at work, no idle pool thread): the functions
    with the most own samples, and the functions of the Kafka front end and codec (broker/kafka,
    wire/kafka) with the most samples under them, in % of all samples."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        functions = [FRAME_LINE.sub(")", f) for f in stack.split(";")]   # func (file:line) -> func (file)
        samples += count
        own[functions[-1]] += count
        for function in set(functions):
            if "kafka/" in function:
                total[function] += count

    def share(counter: collections.Counter[str]) -> list[list]:
        return [[function, round(100.0 * n / samples, 1)] for function, n in counter.most_common(top)]

    return {"file": str(path), "samples": samples, "own_pct": share(own), "kafka_total_pct": share(total)}


# ------------------------------------------------------------------------------------------------
# One load


def _measure(cpu: _Cpu, pool: WorkerPool, count_key: str, timeout_s: float,
             profiler: _Profiler | None = None, load: str = "") -> dict:
    """Launch the workers (set up, unmeasured), then CPU before, go, collect, CPU after."""
    try:
        pool.launch()
        if profiler is not None:
            profiler.start(load)
        cpu_before, broker_before = cpu.sample()
        pool.go()
        results = pool.collect(timeout_s)
        cpu_after, broker_after = cpu.sample()
    finally:
        pool.terminate()
    profile = profiler.stop() if profiler is not None else None
    return _figures(results, count_key, (cpu_before, cpu_after), (broker_before, broker_after), profile)


def _measure_readers(cpu: _Cpu, pool: WorkerPool, shared, expected: int, timeout_s: float,
                     profiler: _Profiler | None = None, load: str = "") -> dict:
    """As `_measure` for readers sharing a count (kafka_clients.run_reader), but the CPU window ends
    when they have every record between them, before they close: a group member's last commit and
    its leave (which rebalances the others) are once per consumer, as its join is, not per record."""
    try:
        pool.launch()
        if profiler is not None:
            profiler.start(load)
        cpu_before, broker_before = cpu.sample()
        pool.go()
        deadline = time.monotonic() + timeout_s
        while shared.value < expected and all(p.is_alive() for p in pool.procs):   # a failed reader: collect says
            if time.monotonic() > deadline:
                raise TimeoutExpired("Kafka readers did not get every record", received=shared.value,
                                     expected=expected, timeout_s=timeout_s)
            time.sleep(READERS_POLL_S)
        cpu_after, broker_after = cpu.sample()
        results = pool.collect(timeout_s)
    finally:
        pool.terminate()
    profile = profiler.stop() if profiler is not None else None
    return _figures(results, "received", (cpu_before, cpu_after), (broker_before, broker_after), profile)


def _figures(results: list[dict], count_key: str, server: tuple[float, float], broker: tuple[float, float],
             profile: dict | None) -> dict:
    messages, _, seconds = throughput(results, count_key)
    out: dict = {"messages": messages, "seconds": round(seconds, 3), "msgs_per_s": round(messages / seconds, 1),
                 "server_cpu_us_per_msg": cpu_per_message_us(server[0], server[1], messages),
                 "broker_cpu_us_per_msg": cpu_per_message_us(broker[0], broker[1], messages)}
    per_batch = [r["messages_per_batch"] for r in results if r.get("messages_per_batch")]
    if per_batch:
        out["messages_per_batch"] = per_batch[0]
    if any("commits" in r for r in results):
        out["commits"] = sum(r.get("commits", 0) for r in results)
        out["commits_failed"] = sum(r.get("commits_failed", 0) for r in results)
        out["commit_errors"] = [e for r in results for e in r.get("commit_errors", [])][:10]
    if profile is not None:
        out["profile"] = profile
    return out


class _Run:
    """The loads of one run against one standalone."""

    def __init__(self, args: argparse.Namespace, server: Server, broker_pid: int, bootstrap: str) -> None:
        self.args = args
        self.server = server
        self.broker_pid = broker_pid
        self.bootstrap = bootstrap
        self.ctx = multiprocessing.get_context("spawn")
        self.cpu = _Cpu(server, broker_pid)
        self.profiler = _Profiler(args.profile, broker_pid) if args.profile else None

    def _pool(self, run, kwargs: dict) -> WorkerPool:
        return WorkerPool(functools.partial(worker_main, run), [kwargs], self.ctx)

    def kafka_round(self) -> dict[str, dict]:
        from perf import kafka_clients as kc
        a = self.args
        out = {}
        plain, _ = _new_topic(self.server, "plain")
        idem, _ = _new_topic(self.server, "idem")
        # plain produce, its consume at once (as the Pulsar loads: what was just written), then idempotent
        out["kafka-produce"] = self._kafka_produce(plain, False)
        kw = {"bootstrap": self.bootstrap, "topic": plain, "expected": a.messages, "timeout_s": a.timeout_s}
        out["kafka-consume"] = _measure(self.cpu, self._pool(kc.run_consumer, kw), "received",
                                        a.timeout_s, self.profiler, "kafka-consume")
        out["kafka-produce-idempotent"] = self._kafka_produce(idem, True)
        return out

    def _kafka_produce(self, topic: str, idempotent: bool) -> dict:
        from perf import kafka_clients as kc
        a = self.args
        load = "kafka-produce-idempotent" if idempotent else "kafka-produce"
        kw = {"bootstrap": self.bootstrap, "topic": topic, "messages": a.messages, "size": a.size,
              "linger_ms": a.linger_ms, "idempotent": idempotent, "timeout_s": a.timeout_s}
        return _measure(self.cpu, self._pool(kc.run_producer, kw), "messages", a.timeout_s, self.profiler, load)

    def group_round(self, group_first: bool) -> dict[str, dict]:
        """The same M readers as members of one group (auto-commit) and with assign(), each load on
        a backlog of its own produced just before it; `group_first` alternates the order by round."""
        from perf import kafka_clients as kc
        a = self.args
        members = a.group_members
        order = ["kafka-group-consume", "kafka-assign-consume"]
        if not group_first:
            order.reverse()
        out = {}
        for load in order:
            mode = GROUP_WORKLOADS[load]
            topic, _ = _new_topic(self.server, mode, members)
            kc.produce_backlog(self.bootstrap, topic, members, a.messages, a.size, a.linger_ms, a.timeout_s)
            shared = self.ctx.Value("q", 0)
            group = f"perf-kafka-group-{uuid.uuid4().hex[:8]}"
            kws = [{"bootstrap": self.bootstrap, "topic": topic, "partitions": members, "members": members,
                    "index": i, "mode": mode, "group": group, "commit_interval_ms": a.commit_interval_ms,
                    "expected": a.messages, "shared_count": shared, "timeout_s": a.timeout_s}
                   for i in range(members)]
            pool = WorkerPool(functools.partial(worker_main, kc.run_reader), kws, self.ctx)
            result = _measure_readers(self.cpu, pool, shared, a.messages, a.timeout_s, self.profiler, load)
            if result["messages"] < a.messages:
                raise StrataError(f"{load}: the readers did not get every record", received=result["messages"],
                                  expected=a.messages)
            out[load] = result
        return out

    def pulsar_round(self, driver: str) -> dict[str, dict]:
        import perf.native as native
        import perf.official_client as official
        from perf.consume import _create_subscription
        a = self.args
        module = native if driver == "native" else official
        name = "pulsar-native" if driver == "native" else "pulsar-client"
        _, topic = _new_topic(self.server, driver)
        subscription = "perf-kafka"
        asyncio.run(_create_subscription(self.server.service_url, topic, subscription, False))
        produce_kw = {"service_url": self.server.service_url, "topic": topic, "messages": a.messages,
                      "size": a.size, "rate": None, "max_pending": 10_000, "compression": "none",
                      # the official client's default batching delay; the native driver sends full batches
                      "batch_delay_ms": 10.0, "token": "", "tls_trust_file": ""}
        out = {f"{name}-produce": _measure(self.cpu, self._pool(module.run_producer, produce_kw),
                                           "messages", a.timeout_s)}
        from perf.native_client import SUB_EXCLUSIVE
        consume_kw = {"service_url": self.server.service_url, "topic": topic, "subscription": subscription,
                      "sub_type": SUB_EXCLUSIVE, "shared": False, "expected": a.messages,
                      "shared_count": self.ctx.Value("q", 0), "size": a.size, "receiver_queue": 1000,
                      "ack": "individual", "verify": False, "idle_timeout_s": 30.0}
        result = _measure(self.cpu, self._pool(module.run_consumer, consume_kw), "received",
                          a.timeout_s)
        if result["messages"] != a.messages:
            raise StrataError(f"{name} consumer did not get every message", received=result["messages"],
                              expected=a.messages)
        out[f"{name}-consume"] = result
        return out

    def long_poll(self) -> dict[str, dict]:
        from perf import kafka_clients as kc
        a = self.args
        interval_s = a.long_poll_interval_ms / 1000.0
        bound_s = a.timeout_s + (a.long_poll_records + kc.WARMUP) * interval_s * 4
        kafka_topic, _ = _new_topic(self.server, "long-poll")
        _, pulsar_topic = _new_topic(self.server, "long-poll-pulsar")
        return {"kafka": kc.kafka_long_poll(self.bootstrap, kafka_topic, a.long_poll_records, interval_s,
                                            a.fetch_wait_max_ms, bound_s),
                "pulsar": kc.pulsar_long_poll(self.server.service_url, pulsar_topic, a.long_poll_records,
                                              interval_s, bound_s)}

    def close(self) -> None:
        if self.profiler is not None:
            self.profiler.close()


# ------------------------------------------------------------------------------------------------
# The run and its report


def run(args: argparse.Namespace) -> dict:
    from launch.standalone import StandaloneProcess
    with StandaloneProcess.start(bookies=args.bookies) as sa:
        try:
            _wait_kafka_port(sa.kafka_bootstrap)
            server = Server(sa.service_url, sa.admin_url, ServerCpu([sa.pid]), started_here=True)
            loads = _Run(args, server, sa.pid, sa.kafka_bootstrap)
            rounds: list[dict[str, dict]] = []
            try:
                for i in range(args.rounds):
                    one: dict[str, dict] = {}
                    one.update(loads.kafka_round())
                    one.update(loads.pulsar_round("native"))
                    one.update(loads.pulsar_round("pulsar-client"))
                    one.update(loads.group_round(group_first=i % 2 == 1))
                    rounds.append(one)
                long_poll = loads.long_poll()
            finally:
                loads.close()
        except StrataError:  # the log goes with the temp dir: show its end while it is there
            print(f"--- end of the standalone's log ---\n{sa.log_tail()}", file=sys.stderr)
            raise
    return report(args, rounds, long_poll)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _median_rows(rounds: list[dict[str, dict]], loads: Iterable[str] = WORKLOADS) -> dict[str, dict]:
    rows = {}
    for load in loads:
        row = dict(rounds[0][load])
        for key in FIGURES:
            values = [r[load][key] for r in rounds if r[load].get(key) is not None]
            row[key] = round(statistics.median(values), 3) if values else None
        rows[load] = row
    return rows


def report(args: argparse.Namespace, rounds: list[dict[str, dict]], long_poll: dict[str, dict]) -> dict:
    rows = _median_rows(rounds)
    cpu = {load: rows[load]["server_cpu_us_per_msg"] for load in rows}
    broker = {load: rows[load]["broker_cpu_us_per_msg"] for load in rows}
    ratios: dict[str, float | None] = {}
    for kafka_load, kind in (("kafka-produce", "produce"), ("kafka-produce-idempotent", "produce"),
                             ("kafka-consume", "consume")):
        for driver in ("native", "client"):
            pulsar_load = f"pulsar-{driver}-{kind}"
            ratios[f"{kafka_load}/{pulsar_load}"] = _ratio(cpu[kafka_load], cpu[pulsar_load])
            ratios[f"{kafka_load}/{pulsar_load} (broker)"] = _ratio(broker[kafka_load], broker[pulsar_load])
    ratios["kafka-produce-idempotent/kafka-produce"] = _ratio(cpu["kafka-produce-idempotent"], cpu["kafka-produce"])
    ratios["kafka-produce-idempotent/kafka-produce (broker)"] = _ratio(broker["kafka-produce-idempotent"],
                                                                      broker["kafka-produce"])
    by_round = [_ratio(r["kafka-produce-idempotent"]["server_cpu_us_per_msg"],
                       r["kafka-produce"]["server_cpu_us_per_msg"]) for r in rounds]

    def within(value: float | None, bound: float) -> bool | None:
        return None if value is None else value <= bound

    group = _group_report(args, rounds)

    kafka_cpu = TARGETS["kafka_over_pulsar_cpu_max"]
    targets = {
        "kafka_produce_cpu_vs_native": within(ratios["kafka-produce/pulsar-native-produce"], kafka_cpu),
        "kafka_produce_cpu_vs_client": within(ratios["kafka-produce/pulsar-client-produce"], kafka_cpu),
        "kafka_consume_cpu_vs_native": within(ratios["kafka-consume/pulsar-native-consume"], kafka_cpu),
        "kafka_consume_cpu_vs_client": within(ratios["kafka-consume/pulsar-client-consume"], kafka_cpu),
        "idempotent_cpu": within(ratios["kafka-produce-idempotent/kafka-produce"],
                                 TARGETS["idempotent_over_plain_cpu_max"]),
        "long_poll_p50": within(long_poll["kafka"]["p50_ms"], TARGETS["long_poll_p50_ms_max"]),
        "group_commit_cpu": within(group["ratio"], TARGETS["group_over_assign_cpu_max"]),
    }
    return {"messages": args.messages, "size": args.size, "linger_ms": args.linger_ms, "rounds": args.rounds,
            "rows": rows, "ratios": ratios, "idempotent_ratio_by_round": by_round,
            "long_poll": long_poll, "group": group, "targets": TARGETS, "within_target": targets}


def _group_report(args: argparse.Namespace, rounds: list[dict[str, dict]]) -> dict:
    """The consumer-group run: both rows (medians), group / assign server and broker CPU per message."""
    rows = _median_rows(rounds, GROUP_WORKLOADS)
    for load, row in rows.items():
        if "commits" in row:
            row["commits"] = round(statistics.median(r[load].get("commits", 0) for r in rounds))
            row["commits_failed"] = sum(r[load].get("commits_failed", 0) for r in rounds)
    group, assign = rows["kafka-group-consume"], rows["kafka-assign-consume"]
    return {"members": args.group_members, "partitions": args.group_members,
            "commit_interval_ms": args.commit_interval_ms, "rows": rows,
            "ratio": _ratio(group["server_cpu_us_per_msg"], assign["server_cpu_us_per_msg"]),
            "ratio_broker": _ratio(group["broker_cpu_us_per_msg"], assign["broker_cpu_us_per_msg"]),
            "ratio_by_round": [_ratio(r["kafka-group-consume"]["server_cpu_us_per_msg"],
                                      r["kafka-assign-consume"]["server_cpu_us_per_msg"]) for r in rounds]}


def _cell(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def print_table(result: dict) -> None:
    rows, ratios = result["rows"], result["ratios"]
    print(f"{TITLE}: {result['messages']:,} messages of {result['size']} B per load, "
          f"linger.ms {result['linger_ms']}, median of {result['rounds']} round(s); one standalone")
    print(f"  {'workload':26s} {'msgs/s':>9s} {'server µs/msg':>14s} {'broker µs/msg':>14s} "
          f"{'K/native':>9s} {'K/client':>9s} {'msgs/batch':>10s}")
    for load, (protocol, kind) in WORKLOADS.items():
        r = rows[load]
        vs_native = vs_client = None
        if protocol == "kafka":
            vs_native = ratios[f"{load}/pulsar-native-{kind}"]
            vs_client = ratios[f"{load}/pulsar-client-{kind}"]
        print(f"  {load:26s} {_cell(r['msgs_per_s'], ',.0f'):>9s} {_cell(r['server_cpu_us_per_msg']):>14s} "
              f"{_cell(r['broker_cpu_us_per_msg']):>14s} {_cell(vs_native, '.3f'):>9s} {_cell(vs_client, '.3f'):>9s} "
              f"{_cell(r.get('messages_per_batch'), '.1f'):>10s}")
    print(f"  idempotent / plain server CPU per message: {ratios['kafka-produce-idempotent/kafka-produce']} "
          f"(broker alone {ratios['kafka-produce-idempotent/kafka-produce (broker)']}; "
          f"by round {result['idempotent_ratio_by_round']})")
    for protocol, lp in result["long_poll"].items():
        extra = f", fetch.wait.max.ms {lp['fetch_wait_max_ms']}" if "fetch_wait_max_ms" in lp else ""
        print(f"  long poll {protocol:7s} p50 {_cell(lp['p50_ms'])} ms, p99 {_cell(lp['p99_ms'])} ms, "
              f"max {_cell(lp['max_ms'])} ms over {lp['records']} records{extra}")
    group = result["group"]
    print(f"  consumer group of {group['members']} (auto-commit every {group['commit_interval_ms']} ms) against the "
          f"same {group['members']} consumers with assign(), {result['messages']:,} records over "
          f"{group['partitions']} partitions:")
    print(f"  {'workload':26s} {'msgs/s':>9s} {'server µs/msg':>14s} {'broker µs/msg':>14s} {'commits':>9s}")
    for load in GROUP_WORKLOADS:
        r = group["rows"][load]
        commits = f"{r['commits']}" + (f" ({r['commits_failed']} failed)" if r.get("commits_failed") else "")
        print(f"  {load:26s} {_cell(r['msgs_per_s'], ',.0f'):>9s} {_cell(r['server_cpu_us_per_msg']):>14s} "
              f"{_cell(r['broker_cpu_us_per_msg']):>14s} {commits if 'commits' in r else '-':>9s}")
    print(f"  group / assign server CPU per message: {group['ratio']} (broker alone {group['ratio_broker']}; "
          f"by round {group['ratio_by_round']})")
    t = result["targets"]
    print(f"  targets: Kafka/Pulsar server CPU ≤ {t['kafka_over_pulsar_cpu_max']}, idempotent/plain ≤ "
          f"{t['idempotent_over_plain_cpu_max']}, long-poll p50 ≤ {t['long_poll_p50_ms_max']} ms, group/assign ≤ "
          f"{t['group_over_assign_cpu_max']}: "
          + ", ".join(f"{k} {'✔' if v else '✘' if v is not None else '-'}" for k, v in result["within_target"].items()))
    for load, row in [*((w, rows[w]) for w in WORKLOADS), *group["rows"].items()]:
        profile = row.get("profile")
        if profile:
            print(f"  profile of {load} ({profile['samples']} samples, {profile['file']}), own time:")
            for function, pct in profile["own_pct"]:
                print(f"    {pct:5.1f}%  {function}")
            print("  ... and under the Kafka front end's functions (total time):")
            for function, pct in profile["kafka_total_pct"]:
                print(f"    {pct:5.1f}%  {function}")


def main(argv: list[str]) -> int:
    import json
    args = parse_args(argv)
    install_sigterm_cleanup()
    problem = check_args(args)
    if problem:
        print(f"{TITLE}: {problem}", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"{TITLE}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context managers stopped everything
        print(f"{TITLE}: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0
