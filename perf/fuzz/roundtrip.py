"""The real client that must keep round-tripping while the fuzz runs: an official `pulsar-client`
producer and an Exclusive consumer on the fuzz's round-trip topic, in a helper process.

Every `interval_s` the helper sends a message with a fresh marker and receives until that marker
arrives (acking what it receives: fuzz sessions publish on the same topic, so other messages
arrive too), then reports ("ok", index, latency_s). A round trip not done within `timeout_s` (send
and receives together) is reported ("failed", index, reason), and so is any client exception.
The helper runs in its own process so the fuzz loop's GIL does not inflate the latencies.

What must hold: every round trip is bounded by `timeout_s`; the helper stops within `timeout_s`
of the stop flag; the report queue is bounded (the parent drains it as the run goes); a helper
that cannot set up puts ("setup-failed", -1, reason) and exits.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import queue
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from common.errors import StrataError

SUBSCRIPTION = "fuzz-roundtrip"
REPORTS_MAX = 10_000
READY_TIMEOUT_S = 60.0
STOP_POLL_S = 0.05


def run(service_url: str, topic: str, interval_s: float, timeout_s: float, reports: Any, stop: Any) -> None:
    """Body of the helper process. `stop` is a shared flag (multiprocessing.Value), polled: a
    multiprocessing.Event would leave its setter blocked forever if this process died waiting on it."""
    try:
        import pulsar
        client = pulsar.Client(service_url, operation_timeout_seconds=max(1, int(timeout_s)),
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        consumer = client.subscribe(topic, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Exclusive)
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=int(timeout_s * 1000))
    except Exception:
        reports.put(("setup-failed", -1, traceback.format_exc()), timeout=10)
        return
    reports.put(("ready", -1, None), timeout=10)
    index = 0
    try:
        while not stop.value:
            started = time.perf_counter()
            # re-armed each round: a helper stuck inside the client shows where, on stderr
            faulthandler.dump_traceback_later(2 * timeout_s + interval_s, file=sys.stderr)
            reports.put(_round_trip(producer, consumer, index, timeout_s), timeout=timeout_s)
            index += 1
            while not stop.value and time.perf_counter() - started < interval_s:
                time.sleep(STOP_POLL_S)
    finally:
        faulthandler.cancel_dump_traceback_later()
        client.close()


def _round_trip(producer: Any, consumer: Any, index: int, timeout_s: float) -> tuple[str, int, Any]:
    marker = f"roundtrip-{index}-{time.time_ns()}".encode()
    started = time.perf_counter()
    deadline = started + timeout_s
    try:
        producer.send(marker)
        while True:
            left_ms = int((deadline - time.perf_counter()) * 1000)
            if left_ms <= 0:
                return "failed", index, f"marker not received within {timeout_s} s"
            msg = consumer.receive(timeout_millis=left_ms)
            consumer.acknowledge(msg)
            if msg.data() == marker:
                return "ok", index, time.perf_counter() - started
    except Exception as exc:  # the client's own exceptions (pulsar.Timeout ...): the round trip failed
        return "failed", index, f"{type(exc).__name__}: {exc}"


@dataclass
class RoundTrips:
    """What the parent knows of the helper's round trips."""

    ok: int = 0
    latency_max_s: float = 0.0
    failures: list[str] = field(default_factory=list)   # the first few reasons
    last_report_s: float = field(default_factory=time.monotonic)

    ready: bool = False

    def add(self, kind: str, index: int, value: Any) -> None:
        self.last_report_s = time.monotonic()
        if kind == "ready":
            self.ready = True
        elif kind == "ok":
            self.ok += 1
            self.latency_max_s = max(self.latency_max_s, float(value))
        elif len(self.failures) < 10:
            self.failures.append(f"{kind} #{index}: {value}")


class RoundTripHelper:
    """Starts, drains and stops the helper process."""

    def __init__(self, service_url: str, topic: str, interval_s: float, timeout_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.reports = ctx.Queue(maxsize=REPORTS_MAX)
        self.stop_flag = ctx.Value("b", 0)
        self.proc = ctx.Process(target=run, daemon=True, args=(service_url, topic, interval_s, timeout_s,
                                                                self.reports, self.stop_flag))
        self.stats = RoundTrips()

    def start(self) -> None:
        """Start the helper and wait until its producer and consumer exist (bounded)."""
        self.proc.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.drain().ready:
            time.sleep(0.1)
            if self.stats.failures or not self.proc.is_alive() or time.monotonic() > deadline:
                self.close()
                raise StrataError("the round-trip client did not start", failures=self.stats.failures,
                                  exitcode=self.proc.exitcode)
        self.stats.last_report_s = time.monotonic()

    def drain(self) -> RoundTrips:
        while True:
            try:
                kind, index, value = self.reports.get_nowait()
            except queue.Empty:
                return self.stats
            self.stats.add(kind, index, value)

    def stalled(self) -> bool:
        """No report for longer than a round trip may take plus the interval (the helper hangs)."""
        return time.monotonic() - self.stats.last_report_s > 2 * self.timeout_s + self.interval_s

    def close(self) -> RoundTrips:
        self.stop_flag.value = 1
        self.proc.join(timeout=self.timeout_s + 10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=5)
        return self.drain()
