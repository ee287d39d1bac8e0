"""`strata perf failover`: how long topics stop when a broker or a bookie dies, and 2 vs 1 broker.

    strata perf failover [--topics 50] [--bundles 8] [--lease-ms MS] [--duration-s 10]
                         [--workers 2] [--size 1024] [--tick-ms 20] [--json]

1. Starts a LocalCluster (launch/cluster.py): PostgreSQL, 3 bookies at E/Qw/Qa 3/2/2, 2 brokers,
   each a separate process, with the metadata session lease `--lease-ms` (default: the setting).
2. Creates a namespace with `--bundles` bundles and opens one official-client producer per topic
   through the multi-host service URL. Bundles are then moved (admin unload with
   destinationBroker) until both brokers serve about half of the topics.
3. Throughput over 2 brokers: after a 2 s run that is not reported (first ledgers, caches),
   `--workers` processes, each with its own client and producers on
   its share of the topics, send as fast as their in-flight windows allow for `--duration-s`:
   `two_broker_msgs_per_s` = acknowledged messages / (first send to last ack).
4. Broker failover: every topic publishes one message each `--tick-ms` (no batching); kill -9
   of the broker owning more topics. For each topic it owned, the time from the kill to its
   first successful publish after it: the acknowledgement that ends the topic's longest silence
   after the kill (the client resends what it held, so that is the first message the new owner
   took). `failover_p50_s`, `failover_max_s` (target: max <= lease + 2 s).
5. Throughput over the 1 broker left, same topics, same load: `one_broker_msgs_per_s`.
6. Bookie failover: the same ticking load; kill -9 of one bookie (3/2/2 on 3 bookies: it is in
   every ensemble). `bookie_failover_s`: the time from the kill to the acknowledgement that ends
   the longest silence, for the slowest topic (`bookie_failover_p50_s`: the median; target 2 s).
   A phase ends when every topic had a publish *sent* after the kill acknowledged.

Other keys: `lease_s`, `topics`, `moved_topics`, `publish_errors` (sends that failed: the
client's send timeout is longer than any wait here, so an error means a lost publish).

What must hold: every wait is bounded (`--timeout-s` per phase); the cluster is stopped whatever
happens; a failover phase whose topics do not all publish again within its bound reports
`failover_error` / `bookie_failover_error` instead of a figure, and the command exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from admin_client import request_json
from common.config import load_config
from common.errors import StrataError, TimeoutExpired
from launch.broker import BrokerProcess
from launch.cluster import LocalCluster
from perf.harness import WorkerPool, print_report, worker_main

SEND_TIMEOUT_MS = 120_000
HTTP_TIMEOUT_S = 30.0
WINDOW_PER_WORKER = 5_000
PRODUCER_PENDING_MAX = 20_000
WARMUP_S = 1.0
WARMUP_THROUGHPUT_S = 2.0   # a first throughput run (at most --duration-s), not reported
KEYS = ("failover_p50_s", "failover_max_s", "lease_s", "bookie_failover_s", "two_broker_msgs_per_s",
        "one_broker_msgs_per_s")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf failover", description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=50, help="topics spread over the 2 brokers (default 50)")
    parser.add_argument("--bundles", type=int, default=8, help="bundles of the test namespace (default 8)")
    parser.add_argument("--lease-ms", type=int, default=None,
                        help="metadata session lease (default: the metadata_session_lease_ms setting)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="each throughput run (default 10)")
    parser.add_argument("--workers", type=int, default=2, help="client processes of the throughput runs")
    parser.add_argument("--size", type=int, default=1024, help="payload bytes (default 1024)")
    parser.add_argument("--tick-ms", type=float, default=20.0,
                        help="during the failovers, each topic publishes once per tick (default 20)")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="bound on each phase (default 120)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def _quiet_logger() -> logging.Logger:
    """The client logs every reconnection to a killed broker at ERROR: expected here, so dropped."""
    logger = logging.getLogger("strata.perf.failover.pulsar_client")
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


# ------------------------------------------------------------------------------------------------
# Admin HTTP


def _http(method: str, url: str, body: dict | None = None) -> Any:
    """One admin call to a broker's URL (admin_client); the JSON answer or None."""
    return request_json(method, url, body, timeout_s=HTTP_TIMEOUT_S)


def _owner_web_url(admin_url: str, topic: str) -> str:
    """The httpUrl of the broker owning `topic` (persistent://t/ns/name), by Pulsar's lookup."""
    path = topic.replace("persistent://", "")
    return str(_http("GET", f"{admin_url}/lookup/v2/topic/persistent/{path}")["httpUrl"]).rstrip("/")


def _bundle_of(admin_url: str, topic: str) -> str:
    path = topic.replace("persistent://", "")
    return str(_http("GET", f"{admin_url}/lookup/v2/topic/persistent/{path}/bundle"))


def owners(cluster: LocalCluster, topics: list[str]) -> dict[str, BrokerProcess]:
    """topic -> the broker that owns it now."""
    by_url = {b.admin_url: b for b in cluster.brokers}
    live = next(b for b in cluster.brokers if b.alive())
    return {t: by_url[_owner_web_url(live.admin_url, t)] for t in topics}


def balance(cluster: LocalCluster, namespace: str, topics: list[str]) -> None:
    """Move bundles (unload with destinationBroker, sent to the owner) from the broker with more
    topics to the other until their topic counts differ by as little as whole bundles allow."""
    a, b = cluster.brokers[0], cluster.brokers[1]
    admin = a.admin_url
    bundle_topics: dict[str, list[str]] = {}
    for topic in topics:
        bundle_topics.setdefault(_bundle_of(admin, topic), []).append(topic)
    owner_of = owners(cluster, topics)
    bundle_owner = {key: owner_of[ts[0]] for key, ts in bundle_topics.items()}
    for _ in range(len(bundle_topics)):
        counts = {n.name: sum(len(ts) for k, ts in bundle_topics.items() if bundle_owner[k] is n) for n in (a, b)}
        big, small = (a, b) if counts[a.name] >= counts[b.name] else (b, a)
        gap = counts[big.name] - counts[small.name]
        movable = [k for k in bundle_topics if bundle_owner[k] is big and 0 < 2 * len(bundle_topics[k]) <= gap + 1]
        if not movable or gap <= 1:
            return
        key = max(movable, key=lambda k: len(bundle_topics[k]))
        _http("PUT", f"{big.admin_url}/admin/v2/namespaces/{namespace}/{key}/unload"
                     f"?destinationBroker={small.web_id}")
        bundle_owner[key] = small


# ------------------------------------------------------------------------------------------------
# Ticking publishers: one message per topic per tick, first post-event ack per topic


class TickingLoad:
    """One client, one producer per topic, a thread publishing one message per topic per tick.

    mark() notes an event time (just before a kill). From then on, per topic:
    - resumed_at[topic]: the end of the longest silence between acknowledgements that began at
      or after the mark (the silence measured from the mark or from the last acknowledgement
      before it ended: acknowledgements already on the wire when the node died come first);
      that is when the topic publishes again, the backlog the client held being resent first;
    - sent_after_acked: topics with an acknowledged publish that was *sent* after the mark:
      the stall is over for them (acknowledgements come in order), so resumed_at is final."""

    def __init__(self, service_url: str, topics: list[str], size: int, tick_s: float) -> None:
        import pulsar

        self._pulsar = pulsar
        self.client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=_quiet_logger())
        self.producers = {t: self.client.create_producer(
            t, batching_enabled=False, block_if_queue_full=False, max_pending_messages=PRODUCER_PENDING_MAX,
            send_timeout_millis=SEND_TIMEOUT_MS) for t in topics}
        self.payload = os.urandom(size)
        self.tick_s = tick_s
        self.mark_s: float | None = None
        self.resumed_at: dict[str, float] = {}
        self.sent_after_acked: set[str] = set()
        self._last_ack_s: dict[str, float] = {}
        self._longest_gap_s: dict[str, float] = {}
        self.errors: list[str] = []
        self.acked = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _callback(self, topic: str, sent_s: float) -> Callable[[Any, Any], None]:
        def done(result: Any, _msg_id: Any) -> None:
            if result != self._pulsar.Result.Ok:
                if len(self.errors) < 20:
                    self.errors.append(f"{topic}: {result}")
                return
            self.acked += 1
            mark = self.mark_s
            if mark is not None and topic not in self.sent_after_acked:
                self._note_ack(topic, mark, time.monotonic())
                if sent_s >= mark:
                    self.sent_after_acked.add(topic)
        return done

    def _run(self) -> None:
        next_s = time.monotonic()
        while not self._stop.is_set():
            for topic, producer in self.producers.items():
                producer.send_async(self.payload, self._callback(topic, time.monotonic()))
            next_s += self.tick_s
            self._stop.wait(max(0.0, next_s - time.monotonic()))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ticking-load", daemon=True)
        self._thread.start()

    def _note_ack(self, topic: str, mark_s: float, now_s: float) -> None:
        gap_s = now_s - max(mark_s, self._last_ack_s.get(topic, mark_s))
        if gap_s >= self._longest_gap_s.get(topic, -1.0):
            self._longest_gap_s[topic] = gap_s
            self.resumed_at[topic] = now_s
        self._last_ack_s[topic] = now_s

    def mark(self) -> float:
        self.mark_s = None
        self.resumed_at, self.sent_after_acked = {}, set()
        self._last_ack_s, self._longest_gap_s = {}, {}
        self.mark_s = time.monotonic()
        return self.mark_s

    def wait_acked(self, topics: list[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(t in self.sent_after_acked for t in topics):
            if time.monotonic() > deadline:
                missing = [t for t in topics if t not in self.sent_after_acked]
                raise TimeoutExpired("topics did not publish again", missing=missing[:5],
                                     count=len(missing), timeout_s=timeout_s, errors=self.errors[:5])
            time.sleep(0.01)

    def pause(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._stop.clear()

    def close(self) -> None:
        self._stop.set()
        self.client.close()


def measure_after(load: TickingLoad, topics: list[str], event: Callable[[], None],
                  timeout_s: float) -> list[float]:
    """Run the ticking load, fire `event` (a kill) after WARMUP_S, and return, per topic, the
    seconds from the event to the first acknowledged publish sent after it."""
    load.start()
    try:
        time.sleep(WARMUP_S)
        mark_s = load.mark()
        event()
        load.wait_acked(topics, timeout_s)
        return [load.resumed_at[t] - mark_s for t in topics]
    finally:
        load.pause()


# ------------------------------------------------------------------------------------------------
# Throughput: worker processes sending as fast as their windows allow for a fixed time


def run_throughput(kw: dict, signal_ready: Callable[[], None], wait_start: Callable[[], None]) -> dict:
    """A worker: its own client and a producer per topic of its share; round-robin send_async
    under one in-flight window for `duration_s`; counts acknowledged messages."""
    import pulsar

    client = pulsar.Client(kw["service_url"], operation_timeout_seconds=30, logger=_quiet_logger())
    try:
        producers = [client.create_producer(
            t, batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=1,
            block_if_queue_full=True, max_pending_messages=PRODUCER_PENDING_MAX,
            send_timeout_millis=SEND_TIMEOUT_MS) for t in kw["topics"]]
        window = threading.Semaphore(WINDOW_PER_WORKER)
        acked = [0]
        errors: list[str] = []

        def done(result: Any, _msg_id: Any) -> None:
            if result == pulsar.Result.Ok:
                acked[0] += 1
            elif len(errors) < 10:
                errors.append(str(result))
            window.release()

        payload = os.urandom(kw["size"])
        signal_ready()
        wait_start()
        start_s = time.time()
        end_at = time.monotonic() + kw["duration_s"]
        sent = 0
        while time.monotonic() < end_at:
            if not window.acquire(timeout=SEND_TIMEOUT_MS / 1000):
                raise TimeoutExpired("no send completions", timeout_s=SEND_TIMEOUT_MS / 1000)
            producers[sent % len(producers)].send_async(payload, done)
            sent += 1
        for producer in producers:
            producer.flush()
        for _ in range(WINDOW_PER_WORKER):
            if not window.acquire(timeout=SEND_TIMEOUT_MS / 1000):
                raise TimeoutExpired("send callbacks missing", timeout_s=SEND_TIMEOUT_MS / 1000)
        end_s = time.time()
    finally:
        client.close()
    if errors:
        raise StrataError("sends failed", results=errors)
    return {"messages": acked[0], "bytes": acked[0] * kw["size"], "start_s": start_s, "end_s": end_s}


def throughput_msgs_per_s(service_url: str, topics: list[str], args: argparse.Namespace,
                          duration_s: float | None = None) -> float:
    """Acknowledged messages per second over all workers (first start to last ack)."""
    import functools
    import multiprocessing

    duration_s = duration_s or args.duration_s
    shares = [topics[i::args.workers] for i in range(args.workers)]
    kwargs = [{"service_url": service_url, "topics": share, "size": args.size, "duration_s": duration_s}
              for share in shares if share]
    pool = WorkerPool(functools.partial(worker_main, run_throughput), kwargs,
                      multiprocessing.get_context("spawn"))
    pool.launch()
    pool.go()
    results = pool.collect(duration_s + args.timeout_s)
    messages = sum(r["messages"] for r in results)
    seconds = max(r["end_s"] for r in results) - min(r["start_s"] for r in results)
    return messages / max(seconds, 1e-9)


# ------------------------------------------------------------------------------------------------
# The run


def _quantiles(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), max(values)


def _progress(text: str) -> None:
    print(f"[perf failover] {text}", file=sys.stderr, flush=True)


def _phase(name: str, fn: Callable[[], list[float]], report: dict) -> list[float] | None:
    """Run one failover measurement; a phase that times out is reported as `<name>_error`."""
    try:
        values = fn()
    except TimeoutExpired as exc:
        report[f"{name}_error"] = str(exc)[:500]
        _progress(f"{name}: {exc}")
        return None
    _progress(f"{name}: p50 {statistics.median(values):.3f} s, max {max(values):.3f} s over {len(values)} topics")
    return values


def run(args: argparse.Namespace) -> dict:
    lease_ms = args.lease_ms or load_config(None).metadata_session_lease_ms
    report: dict[str, Any] = {"lease_s": lease_ms / 1000, "topics": args.topics}
    with LocalCluster.start(brokers=2, bookies=3, e=3, qw=2, qa=2, lease_ms=lease_ms) as cluster:
        namespace = f"public/failover-{uuid.uuid4().hex[:8]}"
        _http("PUT", f"{cluster.brokers[0].admin_url}/admin/v2/namespaces/{namespace}",
              {"bundles": {"numBundles": args.bundles}})
        topics = [f"persistent://{namespace}/t-{i}" for i in range(args.topics)]
        load = TickingLoad(cluster.service_url, topics, args.size, args.tick_ms / 1000)
        try:
            balance(cluster, namespace, topics)
            load.start()                      # every producer publishes where its topic now is
            time.sleep(WARMUP_S)
            load.pause()
            throughput_msgs_per_s(cluster.service_url, topics, args, min(WARMUP_THROUGHPUT_S, args.duration_s))
            report["two_broker_msgs_per_s"] = round(throughput_msgs_per_s(cluster.service_url, topics, args))
            _progress(f"2 brokers: {report['two_broker_msgs_per_s']} msg/s")
            placed = owners(cluster, topics)
            victim = max(cluster.brokers, key=lambda b: sum(1 for o in placed.values() if o is b))
            moved = [t for t, o in placed.items() if o is victim]
            report["moved_topics"] = len(moved)
            broker_s = _phase("failover", lambda: measure_after(
                load, moved, victim.kill9, lease_ms / 1000 + args.timeout_s), report)
            report["one_broker_msgs_per_s"] = round(throughput_msgs_per_s(cluster.service_url, topics, args))
            _progress(f"1 broker: {report['one_broker_msgs_per_s']} msg/s")
            bookie_s = _phase("bookie_failover", lambda: measure_after(
                load, topics, cluster.bookies[0].kill9, args.timeout_s), report)
            report["publish_errors"] = len(load.errors)
        finally:
            load.close()
    if broker_s:
        report["failover_p50_s"], report["failover_max_s"] = (round(v, 3) for v in _quantiles(broker_s))
    if bookie_s:
        report["bookie_failover_p50_s"], report["bookie_failover_s"] = (round(v, 3) for v in _quantiles(bookie_s))
    return report


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.topics < 2 or args.bundles < 2 or args.workers < 1 or args.duration_s <= 0 or args.tick_ms <= 0:
        print("strata perf failover: needs --topics >= 2, --bundles >= 2, --workers >= 1, positive times",
              file=sys.stderr)
        return 2
    try:
        report = run(args)
    except StrataError as exc:
        print(f"strata perf failover: {exc}", file=sys.stderr)
        return 1
    print_report("strata perf failover", report, args.json)
    return 0 if all(key in report for key in KEYS) else 1
