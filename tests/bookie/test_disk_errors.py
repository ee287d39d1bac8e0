"""A failing disk outside the journal (.idx, checkpoint.json) and a slow or failing journal fsync.

Storage runs on `FailingFileSystem` (bookie/fileio.py): real files, with injected ENOSPC, EDQUOT
or EIO on whole-file writes, and a journal fsync that can be held or made to fail. What must
hold: a failed write is a typed error, the bookie turns read-only, every stored entry still
reads back byte-identical, a restart on the same failing disk still serves reads, shutdown
completes, and no add is acknowledged before its fsync succeeded.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import random
import time

import pytest

from bookie import gc
from bookie.client import BookieClient
from bookie.fileio import FailingFileSystem
from bookie.server import BookieServer
from bookie.storage import StorageMode
from common.config import default_config
from common.errors import BookieError, DiskFull, ReadOnly
from tests.bookie.storage_helpers import add, config, entry, opened, read_all

CASES = [(errno.ENOSPC, DiskFull, StorageMode.DISK_FULL),
         (errno.EDQUOT, DiskFull, StorageMode.DISK_FULL),
         (errno.EIO, ReadOnly, StorageMode.IO_ERROR)]
CASE_IDS = ["ENOSPC", "EDQUOT", "EIO"]
DEADLINE_S = 30.0


async def _eventually(predicate, what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll `predicate` (sync or async) until true; fail after `deadline_s`."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {deadline_s} s: {what}")


async def _fill(storage, rng: random.Random, ledgers: dict[int, list[bytes]], count: int) -> None:
    """`count` acknowledged adds of 1-8 KiB spread over `ledgers` (payloads kept per ledger)."""
    for _ in range(count):
        ledger_id = rng.choice(sorted(ledgers))
        payload = rng.randbytes(rng.randint(1024, 8192))
        assert await add(storage, [entry(ledger_id, len(ledgers[ledger_id]), payload)]) == [0]
        ledgers[ledger_id].append(payload)


async def _assert_all_read_back(storage, ledgers: dict[int, list[bytes]]) -> None:
    for ledger_id, payloads in ledgers.items():
        assert await read_all(storage, ledger_id) == payloads, f"ledger {ledger_id}"


def _temp_files(tmp_path) -> list:
    return [p for p in tmp_path.rglob("*.tmp")]


@pytest.mark.parametrize("code,error,mode", CASES, ids=CASE_IDS)
def test_a_failed_index_or_checkpoint_write_turns_read_only_and_loses_nothing(
        tmp_path, code, error, mode, seed):
    rng = random.Random(seed)

    async def go():
        fs = FailingFileSystem()
        s = await opened(tmp_path, fs=fs)
        ledgers: dict[int, list[bytes]] = {1: [], 2: []}
        await _fill(s, rng, ledgers, 300)  # > 1 MiB: segments roll and are sealed on the way
        await s.checkpoint()
        assert any(seg.sealed for seg in s.index.segments.values())
        await _fill(s, rng, ledgers, 50)   # acknowledged, in the active segment only

        fs.file_write_errno = code  # from now on no .idx or checkpoint.json can be written
        with pytest.raises(error):
            await s.checkpoint()
        assert s.mode is mode and s.info().read_only
        assert await add(s, [entry(1, len(ledgers[1]), b"refused")]) == [error.code]
        with pytest.raises(error):
            await s.fence(1)
        with pytest.raises(error):
            await s.delete_ledger(2)
        await _assert_all_read_back(s, ledgers)
        await gc.collect(s)  # a read-only bookie's GC runs, and changes nothing live
        await _assert_all_read_back(s, ledgers)
        await asyncio.wait_for(s.close(), DEADLINE_S)
        assert s.mode is StorageMode.CLOSED
        assert not _temp_files(tmp_path)

        s = await opened(tmp_path, fs=fs)  # restart on the same failing disk: reads served
        assert s.mode is mode and s.info().read_only
        await _assert_all_read_back(s, ledgers)
        assert await add(s, [entry(1, len(ledgers[1]), b"refused")]) == [error.code]
        await asyncio.wait_for(s.close(), DEADLINE_S)

        s = await opened(tmp_path)  # a healthy disk again: writable, nothing lost or torn
        assert s.mode is StorageMode.WRITABLE
        await _assert_all_read_back(s, ledgers)
        assert await add(s, [entry(1, len(ledgers[1]), b"room again")]) == [0]
        await s.close()
    asyncio.run(go())


def test_enospc_at_the_byte_budget_during_a_seal_keeps_the_old_checkpoint_good(tmp_path, seed):
    """The disk fills up in the middle of an .idx/checkpoint write (a torn temp file)."""
    rng = random.Random(seed)

    async def go():
        fs = FailingFileSystem()
        s = await opened(tmp_path, fs=fs)
        ledgers: dict[int, list[bytes]] = {7: []}
        await _fill(s, rng, ledgers, 100)
        fs.budget_bytes = 10  # the journal's next write or the seal hits ENOSPC, part written
        with pytest.raises(DiskFull):
            await s.checkpoint()
        assert s.mode is StorageMode.DISK_FULL
        await _assert_all_read_back(s, ledgers)
        await s.close()
        assert not _temp_files(tmp_path)
        s = await opened(tmp_path, fs=fs)
        assert s.mode is StorageMode.DISK_FULL
        await _assert_all_read_back(s, ledgers)
        await s.close()
    asyncio.run(go())


def test_close_completes_when_the_final_seal_cannot_be_written(tmp_path):
    async def go():
        fs = FailingFileSystem()
        s = await opened(tmp_path, fs=fs)
        payloads = [b"%04d" % i * 300 for i in range(20)]
        assert await add(s, [entry(3, i, p) for i, p in enumerate(payloads)]) == [0] * 20
        fs.file_write_errno = errno.ENOSPC
        await asyncio.wait_for(s.close(), DEADLINE_S)  # does not raise: SIGTERM must exit
        assert s.mode is StorageMode.CLOSED
        s = await opened(tmp_path)  # the unsealed segment is replayed
        assert await read_all(s, 3) == payloads
        await s.close()
    asyncio.run(go())


def test_a_delete_that_fails_to_become_durable_blocks_gc_until_restart(tmp_path):
    async def go():
        fs = FailingFileSystem()
        s = await opened(tmp_path, config(bookie_gc_compact_live_ratio_max=1.0), fs=fs)
        rng = random.Random(4)
        only_1: dict[int, list[bytes]] = {1: []}
        await _fill(s, rng, only_1, 300)  # fills whole segments with ledger 1 alone
        ledgers = {**only_1, 2: []}
        await _fill(s, rng, ledgers, 10)
        await s.checkpoint()
        files_before = sorted(p.name for p in (tmp_path / "segments").iterdir())
        fs.fail_fsync = True
        with pytest.raises(ReadOnly):
            await s.delete_ledger(1)  # gone from memory, but not durably
        assert s.gc_blocked_reason
        report = await gc.collect(s)
        assert report.deleted_segments == report.compacted_segments == 0
        assert sorted(p.name for p in (tmp_path / "segments").iterdir()) == files_before
        await s.close()
        s = await opened(tmp_path)  # the ledger is back, every entry intact
        await _assert_all_read_back(s, ledgers)
        await s.close()
    asyncio.run(go())


# --- the server: periodic tasks, and acks that wait for fsync ---------------------------------

def _server_config(**overrides):
    settings = dict(bookie_checkpoint_interval_ms=100, bookie_gc_interval_ms=100,
                    bookie_journal_group_commit_wait_ms=0.0)
    return default_config(**{**settings, **overrides})


def test_periodic_checkpoint_on_a_full_disk_turns_the_server_read_only_and_it_serves_reads(
        tmp_path):
    async def go():
        cfg = _server_config()
        fs = FailingFileSystem()
        server = BookieServer(str(tmp_path / "b"), cfg, fs=fs)
        await server.start()
        client = BookieClient(server.address, config=cfg)
        payloads = [b"%06d" % i * 100 for i in range(200)]
        for i, payload in enumerate(payloads):
            await client.add(5, i, payload, i - 1, writer_token=b"w")
        fs.file_write_errno = errno.ENOSPC
        await client.add(5, 200, b"one more", 199, writer_token=b"w")  # a seal is due
        payloads.append(b"one more")

        async def read_only():
            return (await client.info()).read_only
        await _eventually(read_only, "the periodic checkpoint hit ENOSPC")
        assert server.storage.mode is StorageMode.DISK_FULL
        with pytest.raises(DiskFull):
            await client.add(5, 201, b"refused", 200, writer_token=b"w")
        got = await client.read(5, 0, 200, allow_past_lac=True)
        assert got == list(enumerate(payloads))
        await asyncio.sleep(0.5)  # several more periods pass
        assert all(not task.done() for task in server._tasks), "a periodic task died"
        await client.close()
        await asyncio.wait_for(server.stop(), DEADLINE_S)

        server = BookieServer(str(tmp_path / "b"), cfg, fs=fs)  # restart on that disk
        await server.start()
        client = BookieClient(server.address, config=cfg)
        assert (await client.info()).read_only
        assert await client.read(5, 0, 200, allow_past_lac=True) == list(enumerate(payloads))
        await client.close()
        await asyncio.wait_for(server.stop(), DEADLINE_S)
    asyncio.run(go())


def test_a_periodic_job_survives_any_exception_and_backs_off(tmp_path):
    async def go():
        server = BookieServer(str(tmp_path / "b"), _server_config())
        calls = []

        async def flaky():
            calls.append(time.monotonic())
            if len(calls) <= 3:
                raise RuntimeError("injected bug in a periodic job")

        task = asyncio.ensure_future(server._every(0.02, flaky))
        await _eventually(lambda: len(calls) >= 6, "the job ran again after failing")
        assert not task.done()
        assert server.periodic_failures == {"flaky": 3}
        gaps = [b - a for a, b in itertools.pairwise(calls)]
        assert gaps[2] >= 0.15  # 0.04, 0.08, 0.16: doubled after each failure
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(go())


def test_an_add_is_acknowledged_only_after_its_fsync_succeeded(tmp_path):
    async def go():
        cfg = _server_config(bookie_checkpoint_interval_ms=3_600_000)
        fs = FailingFileSystem()
        server = BookieServer(str(tmp_path / "b"), cfg, fs=fs)
        await server.start()
        client = BookieClient(server.address, config=cfg)
        storage = server.storage

        fs.hold_fsync()
        held = client.submit_add(1, 0, b"held", -1, writer_token=b"w")
        await _eventually(lambda: fs.fsyncs_held == 1, "the journal waits in fsync")
        await asyncio.sleep(0.3)  # time enough for an early ack to arrive
        assert not held.done(), "acknowledged before its fsync"
        assert not storage.ledger(1).entries  # not readable either
        fs.release_fsync()
        await asyncio.wait_for(held, DEADLINE_S)
        assert await client.read(1, 0, 0, allow_past_lac=True) == [(0, b"held")]

        fs.hold_fsync()
        failing = client.submit_add(1, 1, b"never durable", 0, writer_token=b"w")
        await _eventually(lambda: fs.fsyncs_held == 1, "the journal waits in fsync")
        await asyncio.sleep(0.3)  # as above: time enough for an early answer to arrive
        assert not failing.done(), "answered before its fsync"
        fs.fail_fsync = True
        fs.release_fsync()
        with pytest.raises(ReadOnly):
            await asyncio.wait_for(failing, DEADLINE_S)
        assert storage.mode is StorageMode.IO_ERROR and (await client.info()).read_only
        assert 1 not in storage.ledger(1).entries
        assert await client.read(1, 0, 0, allow_past_lac=True) == [(0, b"held")]
        with pytest.raises(BookieError):
            await client.add(1, 2, b"refused", 0, writer_token=b"w")
        await client.close()
        await asyncio.wait_for(server.stop(), DEADLINE_S)
    asyncio.run(go())


def test_a_data_connection_holds_at_most_its_bound_of_unanswered_requests(tmp_path):
    """While fsync is held nothing is answered: the connection stops being read at
    `bookie_add_requests_queued_max` requests (plus what one read of the socket carried); once
    released every request is answered, in order."""
    from bookie.frames import FrameDecoder, FrameKind, encode_frame
    from proto import bookie_pb2 as pb

    bound = 200  # bookie_add_requests_queued_max, lowered from its default 1,024
    count = bound + 400
    frames_per_write = 20

    async def go():
        cfg = _server_config(bookie_checkpoint_interval_ms=3_600_000, bookie_add_requests_queued_max=bound)
        fs = FailingFileSystem()
        server = BookieServer(str(tmp_path / "b"), cfg, fs=fs)
        await server.start()
        storage = server.storage
        reader, writer = await asyncio.open_connection("127.0.0.1", server.data_port)
        fs.hold_fsync()
        for first in range(0, count, frames_per_write):
            writer.write(b"".join(encode_frame(FrameKind.ADD_REQUEST, pb.AddRequest(
                request_id=i, writer_token=b"w", entries=[entry(9, i, b"%06d" % i)]).SerializeToString())
                for i in range(first, min(count, first + frames_per_write))))
            await writer.drain()
            await asyncio.sleep(0.001)  # separate reads on the bookie's side
        await _eventually(lambda: storage._pending_entries >= bound, "the connection is read")
        await asyncio.sleep(0.3)  # the bookie would take more now if it were unbounded
        assert bound <= storage._pending_entries < count
        fs.release_fsync()
        decoder = FrameDecoder(1 << 20)
        ids: list[int] = []
        while len(ids) < count:
            data = await asyncio.wait_for(reader.read(1 << 16), DEADLINE_S)
            assert data, "the bookie closed the connection"
            for kind, body in decoder.feed(data):
                assert kind == FrameKind.ADD_RESPONSE
                response = pb.AddResponse.FromString(body)
                assert [r.error_code for r in response.results] == [0]
                ids.append(response.request_id)
        assert ids == list(range(count))
        writer.close()
        await asyncio.wait_for(server.stop(), DEADLINE_S)
    asyncio.run(go())
