"""`strata perf topics`: broker memory and idle CPU with many idle topics.

    strata perf topics [--topics 1000] [--idle-s 10] [--settle-s 11] [--open-concurrency 50]
                       [--bookies 1] [--no-send] [--tracemalloc [FRAMES]] [--json]

1. Starts a standalone (temp dir, free ports). The broker runs in the standalone process; the
   bookies are its child processes and are NOT counted in the broker figures (reported apart).
2. Baseline: one throw-away topic is opened and closed first (so lazily started broker work and
   imports are in the baseline, not charged to the topics), then the broker's RSS
   (psutil) is read.
3. Opens N topics, each with one producer and one Exclusive consumer (the native client, one
   connection, as the official client shares one per broker), waits `--idle-s`, and reads the
   broker's RSS and its CPU (user+system) over that idle window: `idle_*` keys.
4. Sends one message per topic, waits until every consumer received and acked it, lets the broker
   settle for `--settle-s` (default 11 s: the 10 s rate window, during which the stats sampler
   still samples a topic that had traffic, plus one tick), then idles again and reports the
   same: `sent_*` keys.

Keys: `broker_rss_mb_{baseline,idle,sent}`, `kib_per_topic_{idle,sent}` (RSS growth over the
baseline / N), `broker_idle_cpu_ms_per_s_{idle,sent}` (broker CPU per wall second while idle),
`idle_cpu_us_per_s_per_topic_{idle,sent}`, `bookies_rss_mb`, `open_s`, `send_s`.

`--tracemalloc` runs the broker with STRATA_TRACEMALLOC (broker/memdebug.py): SIGUSR1 at the
baseline and after the idle phase; the allocation sites that grew most are printed to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import uuid
from pathlib import Path

from common.errors import StrataError, TimeoutExpired
from perf.harness import (
    descendants,
    install_sigterm_cleanup,
    print_report,
    process_cpu_s,
    rss_bytes,
)
from perf.native_client import EARLIEST, SUB_EXCLUSIVE, NativeClient

KIB = 1024
SEND_TIMEOUT_S = 120.0
TRACEMALLOC_WAIT_S = 30.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf topics", description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000, help="topics to open (default 1000)")
    parser.add_argument("--idle-s", type=float, default=10.0, help="idle window measured (default 10)")
    parser.add_argument("--open-concurrency", type=int, default=50, help="topics opened at a time")
    parser.add_argument("--bookies", type=int, default=1, help="bookies of the standalone")
    parser.add_argument("--settle-s", type=float, default=11.0,
                        help="wait after the send before the second idle window (default 11)")
    parser.add_argument("--no-send", action="store_true", help="skip the one-message-per-topic phase")
    parser.add_argument("--tracemalloc", type=int, nargs="?", const=1, default=0, metavar="FRAMES",
                        help="trace the broker's allocations; print the top growth sites to stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


class _Topic:
    __slots__ = ("consumer", "name", "producer")

    def __init__(self, name: str, producer, consumer) -> None:
        self.name = name
        self.producer = producer
        self.consumer = consumer


async def _open_one(client: NativeClient, name: str) -> _Topic:
    producer = await client.create_producer(name)
    [consumer] = await client.subscribe(name, "perf-topics", sub_type=SUB_EXCLUSIVE,
                                        initial_position=EARLIEST, receiver_queue_size=100)
    return _Topic(name, producer, consumer)


async def _open_all(client: NativeClient, names: list[str], concurrency: int) -> list[_Topic]:
    out: list[_Topic] = []
    for i in range(0, len(names), concurrency):
        out += await asyncio.gather(*(_open_one(client, n) for n in names[i:i + concurrency]))
    return out


async def _send_one_each(topics: list[_Topic]) -> None:
    """One message per topic; every receipt in and every consumer has received and acked it."""
    for t in topics:
        await t.producer.send_payloads(t.producer.encoder(), [b"x" * 100])
    await asyncio.gather(*(t.producer.flush(SEND_TIMEOUT_S) for t in topics))

    async def receive(t: _Topic) -> None:
        entries = await t.consumer.receive_entries(timeout_s=SEND_TIMEOUT_S)
        if not entries:
            raise TimeoutExpired("message not received", topic=t.name, timeout_s=SEND_TIMEOUT_S)
        t.consumer.ack(entries[-1])
        await t.consumer.flush_acks()

    await asyncio.gather(*(receive(t) for t in topics))


def _idle_window(pid: int, idle_s: float) -> tuple[int, float]:
    """Sleep `idle_s` (the client's loop is not running); (RSS at the end, broker CPU ms/s)."""
    cpu0, t0 = process_cpu_s(pid), time.monotonic()
    time.sleep(idle_s)
    cpu1, t1 = process_cpu_s(pid), time.monotonic()
    return rss_bytes(pid), (cpu1 - cpu0) * 1000 / (t1 - t0)


class _Tracemalloc:
    """SIGUSR1 to a broker started with STRATA_TRACEMALLOC; reads back what it wrote."""

    def __init__(self, pid: int, out_path: Path) -> None:
        self.pid = pid
        self.out_path = out_path

    def dump(self) -> str:
        before = self.out_path.stat().st_size if self.out_path.exists() else 0
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + TRACEMALLOC_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if self.out_path.exists() and self.out_path.stat().st_size > before:
                time.sleep(0.5)  # let it finish writing
                with open(self.out_path) as f:
                    f.seek(before)
                    return f.read()
        raise TimeoutExpired("no tracemalloc dump from the broker", timeout_s=TRACEMALLOC_WAIT_S)


def _report(args, baseline: int, idle: tuple[int, float], sent: tuple[int, float] | None,
            bookies_rss: int, open_s: float, send_s: float | None) -> dict:
    n = args.topics

    def figures(tag: str, sample: tuple[int, float]) -> dict:
        rss, cpu = sample
        return {f"broker_rss_mb_{tag}": round(rss / 1e6, 1),
                f"kib_per_topic_{tag}": round((rss - baseline) / KIB / n, 1),
                f"broker_idle_cpu_ms_per_s_{tag}": round(cpu, 2),
                f"idle_cpu_us_per_s_per_topic_{tag}": round(cpu * 1000 / n, 3)}

    out = {"topics": n, "broker_rss_mb_baseline": round(baseline / 1e6, 1), **figures("idle", idle)}
    if sent is not None:
        out.update(figures("sent", sent))
    out.update(bookies_rss_mb=round(bookies_rss / 1e6, 1), open_s=round(open_s, 2),
               send_s=None if send_s is None else round(send_s, 2), idle_s=args.idle_s,
               settle_s=None if sent is None else args.settle_s)
    return out


async def _measure(args: argparse.Namespace, service_url: str, pid: int,
                   tracer: _Tracemalloc | None) -> dict:
    tag = uuid.uuid4().hex[:8]
    client = NativeClient(service_url)
    try:
        warm = await _open_one(client, f"persistent://public/default/perf-topics-{tag}-warmup")
        await warm.producer.close()
        await warm.consumer.close()
        await asyncio.sleep(1.0)
        baseline = rss_bytes(pid)
        if tracer is not None:
            tracer.dump()
        names = [f"persistent://public/default/perf-topics-{tag}-{i}" for i in range(args.topics)]
        start = time.monotonic()
        topics = await _open_all(client, names, args.open_concurrency)
        open_s = time.monotonic() - start
        idle = _idle_window(pid, args.idle_s)
        if tracer is not None:
            print(tracer.dump(), file=sys.stderr)
        sent = send_s = None
        if not args.no_send:
            start = time.monotonic()
            await _send_one_each(topics)
            send_s = time.monotonic() - start
            await asyncio.sleep(0.5)  # acks reach the broker, cursors persist
            time.sleep(args.settle_s)  # noqa: ASYNC251 - on purpose: the client's loop is idle too
            sent = _idle_window(pid, args.idle_s)
        bookies = sum(rss_bytes(p) for p in descendants(pid) if p != pid)
        return _report(args, baseline, idle, sent, bookies, open_s, send_s)
    finally:
        await client.close()


def run(args: argparse.Namespace) -> dict:
    from launch.standalone import StandaloneProcess
    env = {}
    trace_out = None
    if args.tracemalloc:
        trace_out = Path(f"/tmp/strata-tracemalloc-{os.getpid()}-{uuid.uuid4().hex[:6]}.txt")
        env = {"STRATA_TRACEMALLOC": str(args.tracemalloc), "STRATA_TRACEMALLOC_OUT": str(trace_out)}
    with StandaloneProcess.start(bookies=args.bookies, env=env) as sa:
        tracer = _Tracemalloc(sa.pid, trace_out) if trace_out else None
        try:
            return asyncio.run(_measure(args, sa.service_url, sa.pid, tracer))
        except StrataError:
            print(f"--- end of the standalone's log ---\n{sa.log_tail()}", file=sys.stderr)
            raise
        finally:
            if trace_out is not None:
                trace_out.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    install_sigterm_cleanup()
    if args.topics < 1 or args.idle_s <= 0 or args.open_concurrency < 1:
        print("strata perf topics: --topics, --idle-s and --open-concurrency must be positive",
              file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"strata perf topics: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("strata perf topics: interrupted", file=sys.stderr)
        return 130
    print_report("strata perf topics", result, args.json)
    return 0
