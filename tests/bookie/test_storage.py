"""Storage engine, in process: adds, reads, limits, fencing, delete, restart, torn tails."""

from __future__ import annotations

import asyncio
import os

import pytest

from bookie.fileio import OsAppendFile, OsFileSystem
from bookie.storage import StorageMode
from common.completion import as_future
from common.errors import (
    BadRequest,
    ChecksumMismatch,
    DiskFull,
    EntryTooLarge,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    ReadOnly,
)
from tests.bookie.storage_helpers import add, config, crash, entry, opened, read_all


def run(coro):
    return asyncio.run(coro)


def test_add_read_and_lac(tmp_path):
    async def go():
        s = await opened(tmp_path)
        assert await add(s, [entry(1, i, b"e%d" % i) for i in range(5)]) == [0] * 5
        st = s.ledger(1)
        assert (st.lac, st.last_entry_id) == (3, 4)
        entries, error = await s.read(1, 0, 3, False)
        assert error is None and [p for _, p, _ in entries] == [b"e0", b"e1", b"e2", b"e3"]
        with pytest.raises(NoSuchEntry):
            await s.read(1, 0, 4, False)  # past LAC
        entries, _ = await s.read(1, 4, 4, True)
        assert entries[0][1] == b"e4"
        with pytest.raises(NoSuchLedger):
            await s.read(2, 0, 0, True)
        entries, error = await s.read(1, 3, 7, True)  # stops at the first missing entry
        assert len(entries) == 2 and isinstance(error, NoSuchEntry)
        await s.close()
    run(go())


def test_refusals_are_typed_per_entry(tmp_path):
    async def go():
        s = await opened(tmp_path, config(bookie_entry_bytes_max=5 * 1024 * 1024 + 64 * 1024))
        big = b"x" * (s.config.bookie_entry_bytes_max + 1)
        codes = await add(s, [entry(1, 0, b"ok"), entry(1, 1, big), entry(1, 2, b"bad", crc=1),
                              entry(1, 3, b"lac", lac=-2)])
        assert codes == [0, EntryTooLarge.code, ChecksumMismatch.code, BadRequest.code]
        assert await add(s, [entry(1, 4, b"other writer")], token=b"intruder") == [BadRequest.code]
        assert await add(s, [entry(1, 4, b"recovery", recovery=True)], token=b"r") == [0]
        with pytest.raises(BadRequest):
            await s.read(1, 0, s.config.bookie_read_entries_max, True)
        await s.close()
    run(go())


def test_fence_refuses_adds_and_survives_restart_and_crash(tmp_path):
    async def go():
        s = await opened(tmp_path)
        await add(s, [entry(1, 0, b"a"), entry(1, 1, b"b")])
        assert await s.fence(1) == (0, 1)
        assert await s.fence(1) == (0, 1)  # idempotent
        assert await s.fence(9) == (-1, -1)  # unknown ledger: created fenced
        assert await add(s, [entry(1, 2, b"c")]) == [LedgerFenced.code]
        assert await add(s, [entry(9, 0, b"c")]) == [LedgerFenced.code]
        assert await add(s, [entry(1, 2, b"c", recovery=True)]) == [0]
        await crash(s)
        s = await opened(tmp_path)
        assert s.ledger(1).fenced and s.ledger(9).fenced
        assert await add(s, [entry(1, 3, b"d")]) == [LedgerFenced.code]
        assert await read_all(s, 1) == [b"a", b"b", b"c"]
        await s.close()
        s = await opened(tmp_path)
        assert s.ledger(1).fenced and await read_all(s, 1) == [b"a", b"b", b"c"]
        await s.close()
    run(go())


def test_delete_makes_entries_unreadable_at_once_and_for_good(tmp_path):
    async def go():
        s = await opened(tmp_path)
        await add(s, [entry(1, 0, b"a"), entry(2, 0, b"b")])
        await s.delete_ledger(1)
        await s.delete_ledger(1)  # idempotent
        with pytest.raises(NoSuchLedger):
            await s.read(1, 0, 0, True)
        await s.checkpoint()
        await add(s, [entry(2, 1, b"c")])
        await crash(s)
        s = await opened(tmp_path)
        assert [x.ledger_id for x in s.list_ledgers()] == [2]
        assert await read_all(s, 2) == [b"b", b"c"]
        await s.close()
    run(go())


def _only_segment_files(tmp_path):
    seg_dir = tmp_path / "segments"
    return sorted(p for p in seg_dir.iterdir() if p.suffix == ".seg")


def test_crash_replay_cuts_a_torn_tail_at_every_offset(tmp_path):
    """Acknowledged records survive; a partial record at the end is cut, never exposed."""
    async def write():
        s = await opened(tmp_path)
        for i in range(20):
            await add(s, [entry(1, i, os.urandom(100 + i))])
        await crash(s)
    run(write())
    seg = _only_segment_files(tmp_path)[-1]
    full = seg.read_bytes()

    async def check(cut, expect_entries):
        seg.write_bytes(full[:cut])
        s = await opened(tmp_path)
        got = len(s.ledger(1).entries) if 1 in s.index.ledgers else 0
        assert got == expect_entries, (cut, got)
        assert await add(s, [entry(1, got, b"after")]) == [0]  # appends go after the good prefix
        await crash(s)
        for p in (tmp_path / "segments").iterdir():  # back to the single crashed segment
            if p != seg:
                p.unlink()
        (tmp_path / "checkpoint.json").unlink()

    # record boundaries of the ADD records (after the CREATE record)
    from bookie.record import RecordScanner
    records = RecordScanner(payload_bytes_max=1 << 20).feed(full)
    ends = [r.offset + r.total_bytes for r in records]
    for cut in sorted({ends[3] - 1, ends[3], ends[3] + 1, ends[10] + 39, ends[10] + 41,
                       len(full) - 1}):
        complete = sum(1 for r in records if r.offset + r.total_bytes <= cut and r.kind == 1)
        run(check(cut, complete))


def test_disk_full_turns_read_only_without_corrupting_stored_entries(tmp_path):
    from bookie.fileio import FailingFileSystem

    async def go():
        fs = FailingFileSystem(fail_after_bytes=50_000)
        s = await opened(tmp_path, fs=fs)
        acked = []
        for i in range(200):
            payload = b"%05d" % i * 100
            codes = await add(s, [entry(1, i, payload)])
            if codes != [0]:
                assert codes == [DiskFull.code]
                break
            acked.append(payload)
        assert 0 < len(acked) < 200 and s.mode is StorageMode.DISK_FULL
        assert s.info().read_only
        assert await add(s, [entry(1, len(acked), b"x")]) == [DiskFull.code]
        with pytest.raises(DiskFull):
            await s.fence(1)
        assert await read_all(s, 1) == acked  # reads still served
        await s.close()
        s = await opened(tmp_path)  # a healthy disk again: every acked entry, nothing torn
        assert await read_all(s, 1) == acked
        assert await add(s, [entry(1, len(acked), b"later")]) == [0]
        await s.close()
    run(go())


class _BuggyAppendFile(OsAppendFile):
    """Writes `good_writes` batches, then raises a non-OSError (a bug, not a disk error)."""

    good_writes = 1

    def write_all(self, buffers: list[bytes]) -> None:
        if _BuggyAppendFile.good_writes <= 0:
            raise RuntimeError("injected bug in the writer")
        _BuggyAppendFile.good_writes -= 1
        super().write_all(buffers)


class _BuggyFileSystem(OsFileSystem):
    def open_append(self, path: str):
        return _BuggyAppendFile(path)


def test_a_non_os_error_in_the_journal_turns_read_only_and_fails_pending_adds(tmp_path):
    async def go():
        _BuggyAppendFile.good_writes = 1
        s = await opened(tmp_path, fs=_BuggyFileSystem())
        assert await add(s, [entry(1, 0, b"ok")]) == [0]
        codes = await asyncio.wait_for(add(s, [entry(1, 1, b"lost")]), 10)
        assert codes == [ReadOnly.code]  # a typed error, not a hang
        assert s.mode is StorageMode.IO_ERROR and s.info().read_only
        assert await add(s, [entry(1, 1, b"later")]) == [ReadOnly.code]
        await asyncio.wait_for(s.wait_for_room(), 1)
        assert await read_all(s, 1) == [b"ok"]
        await s.close()
    run(go())


def test_low_free_space_turns_read_only_and_back(tmp_path):
    async def go():
        s = await opened(tmp_path, config(bookie_disk_free_bytes_min=1024 ** 4))
        s.check_disk()
        assert s.mode is StorageMode.LOW_DISK
        assert await add(s, [entry(1, 0, b"a")]) == [DiskFull.code]
        s.config = s.config.replace(bookie_disk_free_bytes_min=0)
        s.check_disk()
        assert s.mode is StorageMode.WRITABLE
        assert await add(s, [entry(1, 0, b"a")]) == [0]
        await s.close()
    run(go())


def test_bounded_add_queue_makes_writers_wait(tmp_path):
    async def go():
        s = await opened(tmp_path, config(bookie_add_queue_entries_max=10))
        pendings = [s.add_request(b"w", [entry(1, i, b"p")]) for i in range(15)]
        assert s._pending_entries == 15
        waiter = asyncio.ensure_future(s.wait_for_room())
        await asyncio.gather(*(as_future(p.durable) for p in pendings))
        await asyncio.wait_for(waiter, 5)
        assert s._pending_entries == 0
        await s.close()
    run(go())


def test_stored_corruption_is_detected_on_read(tmp_path):
    async def go():
        s = await opened(tmp_path)
        await add(s, [entry(1, 0, b"A" * 64), entry(1, 1, b"B" * 64)])
        await s.close()
        seg = _only_segment_files(tmp_path)[0]
        data = bytearray(seg.read_bytes())
        data[data.index(b"B" * 64) + 10] ^= 0xFF
        seg.write_bytes(bytes(data))
        s = await opened(tmp_path)  # sealed segment: loaded from its .idx, not rescanned
        entries, error = await s.read(1, 0, 1, True)
        assert [p for _, p, _ in entries] == [b"A" * 64] and isinstance(error, ChecksumMismatch)
        await s.close()
    run(go())


def test_a_crash_leaves_reserved_zeros_that_replay_cuts_and_close_gives_back(tmp_path):
    """The active segment reserves space ahead (fileio.APPEND_RESERVE_BYTES), so a kill -9
    leaves the file ending in zeros past its last record; replay keeps every acknowledged
    entry, appends go right after it, and a clean stop leaves the file as long as its records."""
    from bookie.record import RecordScanner

    def records_end(data: bytes) -> int:
        scanned = RecordScanner(payload_bytes_max=1 << 20).feed(data)
        return scanned[-1].offset + scanned[-1].total_bytes if scanned else 0

    async def go():
        s = await opened(tmp_path)
        for i in range(5):
            assert await add(s, [entry(1, i, b"%d" % i * 100)]) == [0]
        seg = _only_segment_files(tmp_path)[-1]
        data = seg.read_bytes()
        assert len(data) > records_end(data) and not data[records_end(data):].strip(b"\0")
        await crash(s)  # stops the journal, which gives the reserve back: put it back as kill -9 leaves it
        seg.write_bytes(seg.read_bytes() + bytes(64 * 1024))
        s = await opened(tmp_path)
        assert await read_all(s, 1) == [b"%d" % i * 100 for i in range(5)]
        assert await add(s, [entry(1, 5, b"after")]) == [0]
        await s.close()
        s = await opened(tmp_path)
        assert await read_all(s, 1) == [*(b"%d" % i * 100 for i in range(5)), b"after"]
        await s.close()
        for seg in _only_segment_files(tmp_path):
            data = seg.read_bytes()
            assert records_end(data) == len(data)
    run(go())


def test_disk_use_counts_a_file_deleted_while_it_is_listed_as_zero(tmp_path, monkeypatch):
    """The GC may delete a segment between the directory listing and its stat (GetInfo and the
    metrics ask at any time): that file counts 0, nothing fails."""
    async def go():
        s = await opened(tmp_path)
        assert await add(s, [entry(1, i, b"x" * 100) for i in range(5)]) == [0] * 5
        before = s.disk_used_bytes()
        real_scandir = os.scandir

        class Listed:
            """A listing read to the end, then one of its files deleted before anyone stats it."""

            def __init__(self, path):
                gone = tmp_path / "deleted-by-gc.seg"
                gone.write_bytes(b"z" * 4096)
                with real_scandir(path) as it:
                    self.entries = list(it)     # it is listed...
                gone.unlink()                   # ...and gone before its stat

            def __enter__(self):
                return iter(self.entries)

            def __exit__(self, *exc):
                return False

        def scandir_then_delete(path):
            return Listed(path) if str(path) == str(tmp_path) else real_scandir(path)

        monkeypatch.setattr(os, "scandir", scandir_then_delete)
        assert s.disk_used_bytes() == before
        monkeypatch.setattr(os, "scandir", real_scandir)
        await s.close()
    run(go())
