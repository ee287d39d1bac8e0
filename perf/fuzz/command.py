"""`strata perf fuzz --frames N --seed S [--service-url URL]`: fuzz a live broker, check it holds up.

Starts a standalone (unless --service-url), attaches the round-trip client (roundtrip.py), sends
N fuzz frames (frames.py, driver.py; `--before-connect-share` of them before CONNECT), samples the
broker's RSS (psutil) every MONITOR_INTERVAL_S, and prints the figures: frames, frames/s, how the
broker answered, RSS at start/peak/end, round trips and the longest one.

The run fails (exit 1, the reasons in `failures`) when the broker process dies, its RSS rises past
`--rss-growth-max-mib` over its start, a round trip fails or none completes, a connection the
broker should have closed stays open (hung), a reply does not decode, a connection cannot be
opened, a session's PRODUCER/SUBSCRIBE goes unanswered, or (own standalone only) its log gains an
ERROR line or a traceback during the run.

Why an RSS bound at all, and why this one: everything a connection holds is bounded by the
broker's limits (one partial frame, broker_frame_bytes_max; the write buffer; the request cap), at
most `--connections` fuzz connections are open at once, and the fuzz names a small pool of
topics and subscriptions, so the broker's memory must level off; what grows with the run (topics
and subscriptions whose names a mutation made up, their cursors, entries in the cache) is small
per item. 256 MiB over the start is about 2.7x the broker's whole RSS at start (~93 MB); the
1,000,000-frame run rose 25 MB (docs/benchmarks.md); a leak of 300 bytes a frame passes it.

What must hold: every wait is bounded (`--timeout-s` for the whole run); the broker, the helper
and the temp dir are gone when the command returns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import uvloop

from launch.process import pid_alive
from perf.fuzz.driver import Budget, Driver, Tally
from perf.fuzz.frames import Names
from perf.fuzz.roundtrip import RoundTripHelper, RoundTrips
from perf.harness import install_sigterm_cleanup, listening_pid, print_report, rss_bytes

MIB = 1024 * 1024
MONITOR_INTERVAL_S = 0.25
LOG_LINES_KEPT = 5          # unexpected log records quoted in the failure
LOG_ENTRY_CHARS_MAX = 4000  # of each, with its traceback
# a log record at ERROR or worse (the format is "<date> <time> <LEVEL> <logger>: ..."), or a traceback
RECORD_START = re.compile(r"^\d{4}-\d\d-\d\d ")
UNEXPECTED = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) |^Traceback \(most recent call last\)")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000, help="fuzz frames to send")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: random, printed)")
    parser.add_argument("--service-url", default=None, help="a running broker (default: start a standalone)")
    parser.add_argument("--server-pid", type=int, default=None,
                        help="the broker's pid for RSS (default: the one listening on the service port)")
    parser.add_argument("--connections", type=int, default=8, help="connections in parallel")
    parser.add_argument("--batch-frames", type=int, default=32, help="most routed frames on one connection")
    parser.add_argument("--before-connect-share", type=float, default=0.1,
                        help="share of the frames sent before CONNECT (one per connection)")
    parser.add_argument("--rss-growth-max-mib", type=float, default=256.0,
                        help="the broker's RSS may rise this far over its start")
    parser.add_argument("--roundtrip-interval-s", type=float, default=1.0)
    parser.add_argument("--roundtrip-timeout-s", type=float, default=10.0, help="bound on one round trip")
    parser.add_argument("--close-timeout-s", type=float, default=10.0,
                        help="a connection the broker holds longer than this after the end of its plan is hung")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="give up after this long")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


@dataclass
class Broker:
    """The broker under test: where it listens, its pid (None: unknown) and its log (own standalone)."""

    service_url: str
    pid: int | None
    log_path: Path | None = None
    log_offset: int = 0


@dataclass
class Watch:
    """What the monitor saw during the run."""

    rss_start: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    crashed: bool = False
    stalled: bool = False              # the round-trip helper stopped reporting
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


@contextlib.contextmanager
def broker_from_args(args: argparse.Namespace) -> Iterator[Broker]:
    if args.service_url:
        parsed = urlparse(args.service_url)
        pid = args.server_pid
        if pid is None and parsed.hostname in ("127.0.0.1", "localhost") and parsed.port:
            pid = listening_pid(parsed.port)
        yield Broker(args.service_url, pid)
        return
    from launch.standalone import StandaloneProcess
    with StandaloneProcess.start() as sa:
        yield Broker(sa.service_url, sa.pid, sa.log_path)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.frames < 1 or args.connections < 1 or args.batch_frames < 1 or not 0 <= args.before_connect_share <= 1:
        print("strata perf fuzz: --frames, --connections and --batch-frames must be positive, "
              "--before-connect-share in [0, 1]", file=sys.stderr)
        return 2
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**32)
    install_sigterm_cleanup()
    with broker_from_args(args) as broker:
        report = fuzz(broker, args)
    print_report(f"strata perf fuzz (seed {args.seed})", report, args.json)
    return 1 if report["failures"] else 0


def fuzz(broker: Broker, args: argparse.Namespace) -> dict:
    """One run against `broker`: the report (its `failures` empty when the broker held up)."""
    run_id = uuid.uuid4().hex[:8]
    names = Names(topics=(f"persistent://public/default/fuzz-{run_id}", f"persistent://public/default/fuzz-b-{run_id}",
                          f"non-persistent://public/default/fuzz-np-{run_id}"),
                  subscriptions=("fuzz-shared", "fuzz-other"))
    helper = RoundTripHelper(broker.service_url, names.topics[0], args.roundtrip_interval_s, args.roundtrip_timeout_s)
    helper.start()
    try:
        if broker.log_path is not None:
            broker.log_offset = broker.log_path.stat().st_size
        parsed = urlparse(broker.service_url)
        driver = Driver(parsed.hostname or "127.0.0.1", parsed.port or 6650, names, args.seed,
                        connections=args.connections, batch_frames=args.batch_frames,
                        close_timeout_s=args.close_timeout_s)
        budget = Budget(args.frames, int(args.frames * args.before_connect_share))
        watch = Watch()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            tally = runner.run(_run(driver, budget, broker, helper, watch, args.timeout_s))
    finally:
        trips = helper.close()
    watch.rss_end = _rss(broker)
    return build_report(args, tally, watch, trips, _unexpected_log_lines(broker))


async def _run(driver: Driver, budget: Budget, broker: Broker, helper: RoundTripHelper, watch: Watch,
               timeout_s: float) -> Tally:
    watch.rss_start = watch.rss_peak = _rss(broker)
    started = time.monotonic()
    monitor = asyncio.get_running_loop().create_task(_monitor(broker, helper, watch, budget, started + timeout_s))
    try:
        return await driver.run(budget)
    finally:
        watch.seconds = time.monotonic() - started
        monitor.cancel()
        watch.rss_peak = max(watch.rss_peak, _rss(broker))


async def _monitor(broker: Broker, helper: RoundTripHelper, watch: Watch, budget: Budget, deadline: float) -> None:
    """Samples RSS, drains the round trips; stops the run on a crash, a stalled helper or the deadline."""
    while True:
        await asyncio.sleep(MONITOR_INTERVAL_S)
        watch.rss_peak = max(watch.rss_peak, _rss(broker))
        helper.drain()
        if broker.pid is not None and not pid_alive(broker.pid):
            watch.crashed = True
            budget.stop()
        if helper.stalled():
            watch.stalled = True
            budget.stop()
        if time.monotonic() > deadline:
            watch.failures.append("the run passed --timeout-s")
            budget.stop()


def _rss(broker: Broker) -> int:
    return rss_bytes(broker.pid) if broker.pid is not None else 0


def _unexpected_log_lines(broker: Broker) -> list[str] | None:
    """The ERROR/CRITICAL records and tracebacks the broker logged during the run, each with the
    lines that continue it (None: no log to read)."""
    if broker.log_path is None:
        return None
    with open(broker.log_path, "rb") as log:
        log.seek(broker.log_offset)
        text = log.read().decode(errors="replace")
    found: list[str] = []
    inside = False      # the lines after an unexpected record that do not start a new record
    for line in text.splitlines():
        if UNEXPECTED.match(line):
            found.append(line)
            inside = True
        elif inside and not RECORD_START.match(line):
            found[-1] += "\n" + line
        else:
            inside = False
    return found


def build_report(args: argparse.Namespace, tally: Tally, watch: Watch, trips: RoundTrips,
                 log_lines: list[str] | None) -> dict:
    answered = tally.error_replies + tally.other_replies + tally.closed_by_broker
    report = {
        "seed": args.seed,
        "frames": tally.frames,
        "frames_before_connect": tally.frames_before_connect,
        "seconds": round(watch.seconds, 1),
        "frames_per_s": round(tally.frames / max(watch.seconds, 1e-9)),
        "connections": tally.connections,
        "frames_by_kind": dict(sorted(tally.by_kind.items())),
        "frames_by_fate": dict(sorted(tally.by_fate.items())),
        "answered_error": tally.error_replies,
        "answered_other": tally.other_replies,
        "closed_by_broker": tally.closed_by_broker,
        "closed_while_writing": tally.closed_early,
        "ended_by_client": tally.ended_by_us,
        "silent": max(0, tally.frames - answered),
        "replies": dict(tally.replies.most_common()),
        "sessions": tally.sessions,
        "hung_connections": tally.hung,
        "rss_start_mb": round(watch.rss_start / MIB, 1),
        "rss_peak_mb": round(watch.rss_peak / MIB, 1),
        "rss_end_mb": round(watch.rss_end / MIB, 1),
        "rss_bound_mb": round(watch.rss_start / MIB + args.rss_growth_max_mib, 1),
        "roundtrips": trips.ok,
        "roundtrip_max_ms": round(trips.latency_max_s * 1000, 1),
        "unexpected_log_records": None if log_lines is None else len(log_lines),
    }
    report["failures"] = verdict(args, tally, watch, trips, log_lines)
    return report


def verdict(args: argparse.Namespace, tally: Tally, watch: Watch, trips: RoundTrips,
            log_lines: list[str] | None) -> list[str]:
    """Why the run failed (empty: the broker held up)."""
    failures = list(watch.failures)
    if watch.crashed:
        failures.append("the broker process died")
    if watch.rss_start and watch.rss_peak - watch.rss_start > args.rss_growth_max_mib * MIB:
        failures.append(f"broker RSS rose {(watch.rss_peak - watch.rss_start) / MIB:.0f} MiB, "
                        f"over --rss-growth-max-mib {args.rss_growth_max_mib:g}")
    if watch.stalled:
        failures.append("the round-trip client stopped reporting")
    failures += [f"round trip failed: {reason}" for reason in trips.failures]
    if trips.ok == 0:
        failures.append("no round trip completed")
    counted = {"hung connections": tally.hung, "undecodable replies": tally.bad_replies,
               "connections not opened": tally.connect_failures, "sessions unanswered": tally.session_timeouts}
    failures += [f"{n} {what}" for what, n in counted.items() if n]
    if log_lines:
        failures.append(f"{len(log_lines)} ERROR records or tracebacks in the broker's log; the first:\n"
                        + "\n".join(entry[:LOG_ENTRY_CHARS_MAX] for entry in log_lines[:LOG_LINES_KEPT]))
    return failures
