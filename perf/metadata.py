"""`strata perf metadata`: compare-and-set throughput and watch latency, SQLite and PostgreSQL.

With no arguments it makes what it needs: a temp SQLite file and a throw-away PostgreSQL server
(the machine's binaries, `launch.postgres`, with its durable defaults: fsync on), and removes
them afterwards. `--sqlite-url` / `--postgres-url` point it at existing databases instead.

- CAS ops/s: one client doing `put(expected_version=v)` back to back on one key (each one a
  durable write transaction), as a broker updating a ledger list or cursor would.
- Watch latency: a writer store and a separate watcher store (as two brokers would be); the
  writer puts a timestamp at a steady rate, the watcher's callback measures commit-to-callback
  time. It is bounded below by the poll interval (`metadata_watch_poll_ms`), so p50 is about
  half of it.

`--json` prints one JSON object with cas_ops_per_s_{sqlite,postgres},
watch_p50_ms_{sqlite,postgres}, watch_p99_ms_{sqlite,postgres}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time

from common.config import Config, default_config
from launch.postgres import PostgresServer
from metadata import open_store
from metadata.api import WatchEvent


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def measure_cas(url: str, ops: int, config) -> float:
    store = open_store(url, config=config)
    try:
        version = store.put("/perf/cas", b"0")
        for _ in range(min(50, ops)):  # warm the pool and caches
            version = store.put("/perf/cas", b"w", expected_version=version)
        started = time.perf_counter()
        for i in range(ops):
            version = store.put("/perf/cas", i.to_bytes(8, "big"), expected_version=version)
        return ops / (time.perf_counter() - started)
    finally:
        store.close()


def measure_watch(url: str, events: int, interval_s: float, config) -> tuple[float, float]:
    writer = open_store(url, config=config)
    watcher = open_store(url, config=config)
    latencies_ms: list[float] = []
    all_seen = threading.Event()

    def on_event(event: WatchEvent) -> None:
        if event.value is None or len(event.value) != 8:
            return
        (sent_ns,) = struct.unpack(">q", event.value)
        latencies_ms.append((time.perf_counter_ns() - sent_ns) / 1e6)
        if len(latencies_ms) >= events:
            all_seen.set()

    try:
        watcher.watch("/perf/watch", on_event)
        next_at = time.perf_counter()
        for _ in range(events):
            next_at += interval_s
            writer.put("/perf/watch/k", struct.pack(">q", time.perf_counter_ns()))
            time.sleep(max(0.0, next_at - time.perf_counter()))
        if not all_seen.wait(30):
            raise RuntimeError(f"watcher saw {len(latencies_ms)} of {events} events within 30 s")
        values = sorted(latencies_ms)
        return _percentile(values, 0.50), _percentile(values, 0.99)
    finally:
        watcher.close()
        writer.close()


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="strata perf metadata", description=__doc__.split("\n\n")[0])
    p.add_argument("--sqlite-url", help="use this SQLite database instead of a temp file")
    p.add_argument("--postgres-url", help="use this PostgreSQL database instead of a temp server")
    p.add_argument("--backends", default="sqlite,postgres", help="comma list of sqlite,postgres")
    p.add_argument("--cas-ops", type=int, default=2_000, help="CAS operations to time per backend")
    p.add_argument("--watch-events", type=int, default=300, help="watch events to time per backend")
    p.add_argument("--watch-interval-ms", type=float, default=7.0, help="time between watched writes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p.parse_args(argv)


def _run_backend(name: str, url: str, args: argparse.Namespace, config) -> dict[str, float]:
    cas = measure_cas(url, args.cas_ops, config)
    p50, p99 = measure_watch(url, args.watch_events, args.watch_interval_ms / 1000, config)
    return {f"cas_ops_per_s_{name}": round(cas, 1), f"watch_p50_ms_{name}": round(p50, 2),
            f"watch_p99_ms_{name}": round(p99, 2)}


def main(argv: list[str]) -> int:
    args = _parse(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - {"sqlite", "postgres"}
    if unknown or args.cas_ops < 1 or args.watch_events < 1:
        print(f"bad arguments: backends {sorted(unknown)}, counts must be >= 1", file=sys.stderr)
        return 2
    config = default_config()
    results: dict[str, float] = {}
    temp_dir = tempfile.mkdtemp(prefix="strata-perf-metadata-")
    server: PostgresServer | None = None
    try:
        if "sqlite" in backends:
            url = args.sqlite_url or f"sqlite:///{os.path.join(temp_dir, 'meta.db')}"
            results.update(_run_backend("sqlite", url, args, config))
        if "postgres" in backends:
            url = args.postgres_url
            if url is None:
                server = PostgresServer().start()
                url = server.create_database("perf")
            results.update(_run_backend("postgres", url, args, config))
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(temp_dir, ignore_errors=True)
    _print(results, backends, config, as_json=args.json)
    return 0


def _print(results: dict[str, float], backends: list[str], config: Config, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(results))
        return
    print(f"metadata store (watch poll {config.metadata_watch_poll_ms} ms; durable commits)")
    print(f"{'backend':<10} {'CAS ops/s':>10} {'watch p50 ms':>13} {'watch p99 ms':>13}")
    for name in backends:
        print(f"{name:<10} {results[f'cas_ops_per_s_{name}']:>10.1f} "
              f"{results[f'watch_p50_ms_{name}']:>13.2f} {results[f'watch_p99_ms_{name}']:>13.2f}")
