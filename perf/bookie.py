"""`strata perf bookie`: add throughput and latency of one bookie, against this disk's raw speed.

    strata perf bookie [--address HOST:PORT] [--seconds S] [--json]

Without `--address` it starts a real `strata bookie` process (fsync ON) on a free port in a temp
dir and removes it afterwards. One pipelined writer (one `BookieClient`, up to `--window` adds in
flight) writes 1 KiB entries, then 64 KiB entries, for `--seconds` each; it reports adds/s, MB/s
and add latency p50/p99. Then it measures the disk's raw sequential write bandwidth with the
same group-commit pattern the journal uses: 64 KiB writes to a temp file in the data directory,
fsync every `bookie_journal_group_commit_bytes_max` bytes.

`--json` prints one object: adds_per_s_1k, mb_per_s_1k, p50_ms_1k, p99_ms_1k, adds_per_s_64k,
mb_per_s_64k, p50_ms_64k, p99_ms_64k, disk_mb_per_s_64k, ratio_64k_vs_disk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from common.config import load_config

KIB = 1024


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="strata perf bookie")
    p.add_argument("--address", default=None, help="an existing bookie (default: start one)")
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each phase")
    p.add_argument("--window", type=int, default=2000, help="adds in flight")
    p.add_argument("--config", default=None, help="TOML settings for the bookie it starts")
    p.add_argument("--data-dir", default=None, help="where the started bookie and the raw disk "
                   "test write (default: a temp dir on the current file system)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p.parse_args(argv)


async def _phase(client, ledger_id: int, payload_bytes: int, seconds: float,
                 window: int) -> dict:
    """One writer, `window` adds in flight, for `seconds`; per-add latency from submit to ack."""
    payload = os.urandom(payload_bytes)
    latencies_s: list[float] = []
    in_flight = 0
    done_all = asyncio.Event()
    room = asyncio.Event()
    room.set()
    errors: list[BaseException] = []

    def on_done(fut, started_s=0.0):
        nonlocal in_flight
        in_flight -= 1
        if fut.exception() is not None:
            errors.append(fut.exception())
        latencies_s.append(time.perf_counter() - started_s)
        if in_flight < window:
            room.set()
        if in_flight == 0:
            done_all.set()

    start_s = time.perf_counter()
    entry_id = 0
    token = b"perf"
    while time.perf_counter() - start_s < seconds and not errors:
        if in_flight >= window:
            room.clear()
            await room.wait()
            continue
        for _ in range(min(64, window - in_flight)):  # submit a burst, then let the loop run
            fut = client.submit_add(ledger_id, entry_id, payload, entry_id - 1, writer_token=token)
            started = time.perf_counter()
            fut.add_done_callback(lambda f, s=started: on_done(f, s))
            in_flight += 1
            entry_id += 1
        await asyncio.sleep(0)
    if in_flight:
        done_all.clear()
        await done_all.wait()
    elapsed_s = time.perf_counter() - start_s
    if errors:
        raise errors[0]
    latencies_s.sort()
    n = len(latencies_s)
    return {"adds_per_s": n / elapsed_s, "mb_per_s": n * payload_bytes / elapsed_s / 1e6,
            "p50_ms": latencies_s[n // 2] * 1000, "p99_ms": latencies_s[int(n * 0.99)] * 1000,
            "adds": n}


def raw_disk_mb_per_s(directory: str, batch_bytes: int, write_bytes: int = 64 * KIB,
                      total_bytes: int = 512 * 1024 * 1024, seconds_max: float = 5.0) -> float:
    """Sequential writes of `write_bytes`, fsync every `batch_bytes`: the journal's pattern."""
    path = os.path.join(directory, "perf-raw-disk.tmp")
    block = os.urandom(write_bytes)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    start_s = time.perf_counter()
    try:
        while written < total_bytes and time.perf_counter() - start_s < seconds_max:
            batch = 0
            while batch < batch_bytes:
                os.write(fd, block)
                batch += write_bytes
            os.fdatasync(fd)
            written += batch
        elapsed_s = time.perf_counter() - start_s
    finally:
        os.close(fd)
        os.unlink(path)
    return written / elapsed_s / 1e6


async def _measure(address: str, config, seconds: float, window: int) -> dict:
    from bookie.client import BookieClient

    client = BookieClient(address, config=config)
    try:
        base = int(time.time() * 1000) % (1 << 40) * 4
        small = await _phase(client, base + 1, KIB, seconds, window)
        large = await _phase(client, base + 2, 64 * KIB, seconds, max(32, window // 16))
        for ledger_id in (base + 1, base + 2):
            await client.delete_ledger(ledger_id)
    finally:
        await client.close()
    return {"adds_per_s_1k": small["adds_per_s"], "mb_per_s_1k": small["mb_per_s"],
            "p50_ms_1k": small["p50_ms"], "p99_ms_1k": small["p99_ms"],
            "adds_per_s_64k": large["adds_per_s"], "mb_per_s_64k": large["mb_per_s"],
            "p50_ms_64k": large["p50_ms"], "p99_ms_64k": large["p99_ms"]}


def main(argv: list[str]) -> int:
    args = _parse(argv)
    # the environment too: the bookie it starts reads STRATA_* (bookie_auth_secret, TLS), so must its client
    config = load_config(args.config)
    work_dir = tempfile.mkdtemp(prefix="strata-perf-bookie-", dir=args.data_dir)
    bookie = None
    try:
        address = args.address
        if address is None:
            from launch.bookie import BookieProcess
            cfg_path = Path(args.config) if args.config else None
            bookie = BookieProcess.start(Path(work_dir) / "bookie", config_path=cfg_path)
            address = bookie.address
        runner: Callable[[Coroutine[Any, Any, Any]], Any]   # uvloop.run or asyncio.run
        try:
            import uvloop
            runner = uvloop.run
        except ImportError:
            runner = asyncio.run
        result = runner(_measure(address, config, args.seconds, args.window))
        result["disk_mb_per_s_64k"] = raw_disk_mb_per_s(
            work_dir, config.bookie_journal_group_commit_bytes_max, seconds_max=args.seconds)
        result["ratio_64k_vs_disk"] = result["mb_per_s_64k"] / result["disk_mb_per_s_64k"]
        result["address"] = address
    finally:
        if bookie is not None:
            bookie.close()
        shutil.rmtree(work_dir, ignore_errors=True)
    if args.json:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                          for k, v in result.items()}))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value:.2f}" if isinstance(value, float) else f"{key:>20}: {value}")
    return 0
