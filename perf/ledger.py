"""`strata perf ledger`: append throughput and latency of the replicated ledger client.

With no arguments it starts what it needs: a temp SQLite metadata store and `--bookies` (3)
`strata bookie` processes on free ports in a temp dir (fsync on, as in production), and removes
them afterwards. `--metadata-url URL` uses the bookies already registered in that store instead.

For E/Qw/Qa = 1/1/1 and 3/2/2, with 1 KiB and 64 KiB entries, one writer appends pipelined
(at most `--window` entries or 8 MiB in flight) to a fresh ledger and reports entries/s, MB/s and
the add latency p50/p99 (call to acknowledgement, so it includes queueing behind the window).
The target: 3/2/2 costs at most 2x the time of 1/1/1 (`cost_ratio_322_vs_111_1k`).

`--json` prints one object: entries_per_s_{111,322}_{1k,64k}, mb_per_s_..., p50_ms_..., p99_ms_...,
cost_ratio_322_vs_111_{1k,64k}.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import metadata
from common.config import load_config
from launch.bookie import BookieProcess
from launch.process import stop_all
from ledger.client import LedgerClient
from metadata.aio import AsyncMetadataStore

_READY_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 20.0
_WINDOW_BYTES_MAX = 8 * 1024 * 1024


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(fraction * (len(values) - 1)))]


async def _run_one(client: LedgerClient, quorum: tuple[int, int, int], size: int, count: int,
                   window: int) -> dict[str, float]:
    handle = await client.create_ledger(*quorum)
    payload = os.urandom(size)
    window = max(1, min(window, _WINDOW_BYTES_MAX // size))
    latencies_ms: list[float] = []
    in_flight: list[asyncio.Future] = []
    loop = asyncio.get_running_loop()

    def timed(started: float, fut: asyncio.Future) -> None:
        if not fut.exception():
            latencies_ms.append((loop.time() - started) * 1000)

    started = time.perf_counter()
    for _ in range(count):
        fut = handle.add_future(payload)
        fut.add_done_callback(functools.partial(timed, loop.time()))
        in_flight.append(fut)
        if len(in_flight) >= window:
            await in_flight.pop(0)
    await asyncio.gather(*in_flight)
    elapsed = time.perf_counter() - started
    await handle.close()
    await client.delete_ledger(handle.ledger_id)
    return {"entries_per_s": count / elapsed, "mb_per_s": count * size / elapsed / 1e6,
            "p50_ms": _percentile(latencies_ms, 0.50), "p99_ms": _percentile(latencies_ms, 0.99),
            "seconds": elapsed}


async def _measure(metadata_url: str, counts: dict[str, int], window: int) -> dict[str, float]:
    config = load_config()   # the environment too: bookies that require bookie_auth_secret get it
    store = AsyncMetadataStore(metadata.open_store(metadata_url, config=config), config=config)
    client = LedgerClient(store, config)
    out: dict[str, float] = {}
    try:
        await _run_one(client, (1, 1, 1), 1024, min(500, counts["1k"]), window)   # warm up
        for label, size in (("1k", 1024), ("64k", 64 * 1024)):
            for qlabel, quorum in (("111", (1, 1, 1)), ("322", (3, 2, 2))):
                r = await _run_one(client, quorum, size, counts[label], window)
                for key in ("entries_per_s", "mb_per_s", "p50_ms", "p99_ms"):
                    out[f"{key}_{qlabel}_{label}"] = round(r[key], 3)
            out[f"cost_ratio_322_vs_111_{label}"] = round(
                out[f"entries_per_s_111_{label}"] / out[f"entries_per_s_322_{label}"], 3)
    finally:
        await client.close()
        await store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strata perf ledger", description=__doc__.split("\n")[0])
    p.add_argument("--entries-1k", type=int, default=20_000, help="entries per 1 KiB run")
    p.add_argument("--entries-64k", type=int, default=2_000, help="entries per 64 KiB run")
    p.add_argument("--window", type=int, default=1_000, help="most adds in flight")
    p.add_argument("--bookies", type=int, default=3, help="bookies to start (>= 3)")
    p.add_argument("--metadata-url", default=None, help="use bookies registered in this store")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    counts = {"1k": args.entries_1k, "64k": args.entries_64k}
    tmp = None
    bookies: list[BookieProcess] = []
    try:
        url = args.metadata_url
        if url is None:
            tmp = Path(tempfile.mkdtemp(prefix="strata-perf-ledger-"))
            url = f"sqlite:///{tmp}/meta.db"
            for i in range(max(3, args.bookies)):   # bind host: the settings' (no --host)
                bookies.append(BookieProcess.start(tmp / f"bookie-{i}", metadata_url=url, host=None,
                                                   ready_timeout_s=_READY_TIMEOUT_S))
        result = asyncio.run(_measure(url, counts, args.window))
    finally:
        stop_all(bookies, _STOP_TIMEOUT_S)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        for key in sorted(result):
            print(f"{key:32s} {result[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
