"""GC: deleted ledgers' segments are removed, mostly-dead ones compacted; disk really shrinks."""

from __future__ import annotations

import asyncio
import os

from bookie import gc
from tests.bookie.storage_helpers import add, config, crash, entry, opened, read_all


def _fs_bytes(path) -> int:
    """What the file system says: allocated blocks of every file under `path`."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


async def _fill(s, layout: list[tuple[int, int]], payload_bytes: int) -> dict[int, list[bytes]]:
    """Write `count` entries to `ledger` for each (ledger, count) in order."""
    written: dict[int, list[bytes]] = {}
    for ledger_id, count in layout:
        payloads = written.setdefault(ledger_id, [])
        batch = []
        for _ in range(count):
            batch.append(os.urandom(payload_bytes))
        entries = [entry(ledger_id, len(payloads) + i, p) for i, p in enumerate(batch)]
        assert await add(s, entries) == [0] * count
        payloads.extend(batch)
    return written


def test_deleting_ledgers_frees_disk_by_delete_and_compaction(tmp_path):
    async def go():
        s = await opened(tmp_path, config(bookie_gc_compact_live_ratio_max=0.5))
        # segments of 1 MiB: ledger 1 alone fills the first ones, then 1 and 2 alternate 3:1
        written = await _fill(s, [(1, 60)] + [(1, 6), (2, 2)] * 10, 32 * 1024)
        await s.checkpoint()
        assert len([x for x in s.index.segments.values() if x.sealed]) >= 3
        used_before, fs_before = s.info().disk_used_bytes, _fs_bytes(tmp_path)
        await s.delete_ledger(1)
        report = await gc.collect(s)
        assert report.deleted_segments >= 1 and report.compacted_segments >= 1, report
        await s.checkpoint()
        used_after, fs_after = s.info().disk_used_bytes, _fs_bytes(tmp_path)
        assert used_after < used_before * 0.5, (used_before, used_after)
        assert fs_after < fs_before * 0.5, (fs_before, fs_after)
        assert await read_all(s, 2) == written[2]  # the live ledger moved intact
        await crash(s)
        s = await opened(tmp_path)
        assert await read_all(s, 2) == written[2]
        assert 1 not in s.index.ledgers
        await s.close()
    asyncio.run(go())


def test_gc_leaves_live_segments_and_the_active_one_alone(tmp_path):
    async def go():
        s = await opened(tmp_path, config(bookie_gc_compact_live_ratio_max=0.5))
        written = await _fill(s, [(1, 40), (2, 40)], 32 * 1024)
        await s.wait_sealed()
        files_before = sorted(os.listdir(tmp_path / "segments"))
        report = await gc.collect(s)
        assert (report.deleted_segments, report.compacted_segments) == (0, 0)
        assert sorted(os.listdir(tmp_path / "segments")) == files_before
        await s.delete_ledger(2)  # only the active segment and part of a sealed one hold it
        await gc.collect(s)
        assert await read_all(s, 1) == written[1]
        await s.close()
        s = await opened(tmp_path)
        assert await read_all(s, 1) == written[1]
        await s.close()
    asyncio.run(go())


def test_half_deleted_segment_is_finished_at_start(tmp_path):
    """GC removes .idx before .seg; a crash in between leaves a .seg that start-up removes."""
    async def go():
        s = await opened(tmp_path)
        await _fill(s, [(1, 40)], 32 * 1024)
        await s.checkpoint()
        await _fill(s, [(2, 3)], 1024)
        await s.delete_ledger(1)
        sealed = sorted(x.segment_id for x in s.index.segments.values()
                        if x.sealed and x.live_bytes == 0)
        await crash(s)
        victim = tmp_path / "segments" / f"{sealed[0]:010d}"
        os.unlink(f"{victim}.idx")
        s = await opened(tmp_path)
        assert not await asyncio.to_thread(os.path.exists, f"{victim}.seg")
        assert len(await read_all(s, 2)) == 3
        await s.close()
    asyncio.run(go())
