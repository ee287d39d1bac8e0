"""Real `strata bookie` processes: crash safety under load, fencing, GC, disk full, registration."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from bookie.client import BookieClient
from bookie.index import CHECKPOINT_NAME
from common.config import default_config
from common.errors import BookieUnavailable, DiskFull, LedgerFenced, ShuttingDown, TimeoutExpired
from common.net import free_port
from launch.bookie import BookieProcess
from tests.support.waiting import until

CONFIG = default_config()


def _payload(seed: int, entry_id: int) -> bytes:
    return (b"%d:%d:" % (seed, entry_id)) * 8


def _du(path) -> int:
    return sum(os.stat(os.path.join(r, f)).st_blocks * 512
               for r, _, files in os.walk(path) for f in files)


def test_100k_pipelined_adds_kill9_midstream_every_acked_entry_survives(tmp_path, seed):
    bookie = BookieProcess.start(tmp_path / "b")
    total, window = 100_000, 5_000

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)
        acked: list[int] = []
        failed = 0
        killed = False
        futures = []

        def done(fut, entry_id):
            nonlocal failed
            if fut.exception() is None:
                acked.append(entry_id)
            else:
                assert isinstance(fut.exception(), (BookieUnavailable, TimeoutExpired))
                failed += 1

        for entry_id in range(total):
            fut = client.submit_add(1, entry_id, _payload(seed, entry_id), entry_id - 1,
                                    writer_token=b"w")
            fut.add_done_callback(lambda f, e=entry_id: done(f, e))
            futures.append(fut)
            if len(futures) - len(acked) - failed >= window:
                await asyncio.wait(futures[-window:], return_when=asyncio.FIRST_COMPLETED)
            if not killed and len(acked) >= total // 2:
                bookie.kill9()  # mid-stream: thousands of adds in flight
                killed = True
            if entry_id % 256 == 0:
                await asyncio.sleep(0)
        await asyncio.wait(futures, timeout=60)
        assert all(f.done() for f in futures)
        assert killed and failed > 0 and len(acked) >= total // 2
        # responses come in order on one stream: the acked entries are a prefix
        assert sorted(acked) == list(range(len(acked)))

        bookie.restart()
        await client.wait_reachable(10)
        got = await client.read(1, 0, len(acked) - 1, allow_past_lac=True)
        assert [e for e, _ in got] == list(range(len(acked)))
        bad = [e for e, p in got if p != _payload(seed, e)]
        assert not bad, f"{len(bad)} entries differ, first {bad[:5]}"
        # the same client carries on over a new stream
        await client.add(2, 0, b"after restart", -1, writer_token=b"w")
        assert await client.read(2, 0, 0, allow_past_lac=True) == [(0, b"after restart")]
        await client.close()

    try:
        asyncio.run(go())
    finally:
        bookie.close()


def test_fencing_refuses_the_old_writer_and_survives_kill9(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b")

    async def go():
        writer = BookieClient(bookie.address, config=CONFIG)
        recoverer = BookieClient(bookie.address, config=CONFIG)
        for i in range(10):
            await writer.add(7, i, b"e%d" % i, i - 1, writer_token=b"old")
        assert await recoverer.fence(7) == (8, 9)
        assert await recoverer.fence(7) == (8, 9)
        with pytest.raises(LedgerFenced):
            await writer.add(7, 10, b"late", 9, writer_token=b"old")
        await recoverer.add(7, 10, b"recovered", 9, writer_token=b"new", recovery=True)
        bookie.kill9()
        bookie.restart()
        await writer.wait_reachable(10)
        await recoverer.wait_reachable(10)
        with pytest.raises(LedgerFenced):
            await writer.add(7, 11, b"later", 10, writer_token=b"old")
        (summary,) = [s for s in await recoverer.list_ledgers() if s.ledger_id == 7]
        assert summary.fenced and summary.last_entry_id == 10
        assert await recoverer.read_lac(7) == (9, 10)
        await writer.close()
        await recoverer.close()

    try:
        asyncio.run(go())
    finally:
        bookie.close()


def test_gc_frees_disk_reported_by_getinfo_and_file_system(tmp_path):
    cfg_path = tmp_path / "bookie.toml"
    cfg_path.write_text("bookie_segment_file_bytes_max = 1048576\n"
                        "bookie_checkpoint_interval_ms = 200\n"
                        "bookie_gc_interval_ms = 300\n")
    bookie = BookieProcess.start(tmp_path / "b", config_path=cfg_path)

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)
        big, small = os.urandom(64 * 1024), os.urandom(1024)
        await asyncio.gather(*(client.add(1, i, big, i - 1, writer_token=b"w") for i in range(160)))
        await asyncio.gather(*(client.add(2, i, small, i - 1, writer_token=b"w") for i in range(50)))
        added_ns = time.time_ns()                # a checkpoint after this has sealed what they wrote
        checkpoint = bookie.data_dir / CHECKPOINT_NAME
        await until(lambda: checkpoint.exists() and checkpoint.stat().st_mtime_ns > added_ns, 30,
                    what="a checkpoint after the adds", interval_s=0.05)
        used_before, du_before = (await client.info()).disk_used_bytes, _du(bookie.data_dir)
        assert used_before > 10 * 1024 * 1024
        await client.delete_ledger(1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            used = (await client.info()).disk_used_bytes
            if used < used_before // 4 and _du(bookie.data_dir) < du_before // 4:
                break
            await asyncio.sleep(0.2)
        assert (await client.info()).disk_used_bytes < used_before // 4
        assert _du(bookie.data_dir) < du_before // 4
        assert await client.read(2, 0, 49, allow_past_lac=True) == [(i, small) for i in range(50)]
        assert bookie.stop() == 0
        bookie.restart()
        await client.wait_reachable(10)
        assert await client.read(2, 0, 48) == [(i, small) for i in range(49)]
        await client.close()

    try:
        asyncio.run(go())
    finally:
        bookie.close()


def test_disk_full_turns_read_only_reads_still_work_nothing_lost(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b", extra_args=["--inject-enospc-after-bytes", "300000"])

    async def go():
        client = BookieClient(bookie.address, config=CONFIG)
        acked = []
        for i in range(1000):
            try:
                await client.add(3, i, _payload(1, i) * 10, i - 1, writer_token=b"w")
            except DiskFull:
                break
            acked.append(i)
        assert 10 < len(acked) < 1000
        info = await client.info()
        assert info.read_only
        with pytest.raises(DiskFull):
            await client.add(3, len(acked), b"x", len(acked) - 1, writer_token=b"w")
        got = await client.read(3, 0, len(acked) - 1, allow_past_lac=True)
        assert got == [(i, _payload(1, i) * 10) for i in acked]
        assert bookie.stop() == 0  # SIGTERM on a full disk still shuts down cleanly
        bookie.extra_args = []  # the disk has room again
        bookie.restart()
        await client.wait_reachable(10)
        assert not (await client.info()).read_only
        got = await client.read(3, 0, len(acked) - 1, allow_past_lac=True)
        assert got == [(i, _payload(1, i) * 10) for i in acked]
        await client.add(3, len(acked), b"room again", len(acked) - 1, writer_token=b"w")
        await client.close()

    try:
        asyncio.run(go())
    finally:
        bookie.close()


def test_registers_ephemerally_and_sigterm_shuts_down_cleanly(tmp_path):
    from metadata import open_store

    url = f"sqlite:///{tmp_path}/meta.db"
    bookie = BookieProcess.start(tmp_path / "b", metadata_url=url)
    store = open_store(url)
    try:
        assert store.children("/bookies/available") == [bookie.address]
        value = json.loads(store.get(f"/bookies/available/{bookie.address}").value)
        assert value["address"] == bookie.address and value["read_only"] is False
        assert value["free_bytes"] > 0
        assert bookie.stop() == 0
        assert store.children("/bookies/available") == []
    finally:
        store.close()
        bookie.close()


def test_client_errors_without_a_bookie_are_typed(tmp_path):
    async def go():
        config = default_config(ledger_read_timeout_ms=500, ledger_add_timeout_ms=500)
        client = BookieClient(f"127.0.0.1:{free_port()}", config=config)
        with pytest.raises(BookieUnavailable):
            await client.add(1, 0, b"x", -1, writer_token=b"w")
        with pytest.raises(BookieUnavailable):
            await client.read(1, 0, 0)
        with pytest.raises(BookieUnavailable):
            await client.info()
        await client.close()
        with pytest.raises(ShuttingDown):
            await client.add(1, 0, b"x", -1, writer_token=b"w")
    asyncio.run(go())


def test_add_to_a_stalled_bookie_times_out_then_recovers(tmp_path):
    import signal

    bookie = BookieProcess.start(tmp_path / "b")

    async def go():
        config = default_config(ledger_add_timeout_ms=500)
        client = BookieClient(bookie.address, config=config)
        await client.add(1, 0, b"a", -1, writer_token=b"w")
        bookie.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutExpired):
                await client.add(1, 1, b"b", 0, writer_token=b"w")
            assert time.monotonic() - started < 5
        finally:
            bookie.proc.send_signal(signal.SIGCONT)
        await client.add(1, 2, b"c", 1, writer_token=b"w")  # a fresh stream
        assert (await client.read(1, 2, 2, allow_past_lac=True))[0][1] == b"c"
        await client.close()

    try:
        asyncio.run(go())
    finally:
        bookie.close()


def test_a_second_bookie_on_a_taken_port_fails_loudly(tmp_path):
    from bookie.server import BookieServer

    async def go():
        first = BookieServer(str(tmp_path / "a"), CONFIG)
        await first.start()
        second = BookieServer(str(tmp_path / "b"), CONFIG, port=first.port)
        try:
            with pytest.raises(RuntimeError):  # no SO_REUSEPORT: bind fails, no silent sharing
                await second.start()
        finally:
            await second.storage.close()
            await first.stop()
    asyncio.run(go())
