"""Garbage collection: give back the disk of deleted ledgers.

How it works (`collect`, run every `bookie_gc_interval_ms` and callable directly)
- Only sealed segments below the checkpoint on disk (`Storage.checkpoint_replay_from`; never
  the active one) are considered; liveness is kept exact by the index (`SegmentInfo.live_bytes`,
  updated on every add, delete and move).
- A sealed segment with no live record is deleted: first its .idx, then the .seg, then the
  directory is fsynced. (Start-up treats a sealed-range .seg without .idx as half-deleted.)
- A sealed segment whose live bytes / file bytes <= `bookie_gc_compact_live_ratio_max` is
  compacted: its live records are read back (CRC-checked), re-appended to the active segment
  through the journal, and once they are durable the index points at the copies and the old
  segment is deleted as above.
- GC holds the storage's seal lock, so no segment is sealed (idx + checkpoint) meanwhile.
- A segment holding a corrupt record whose entry still awaits repair (bookie/corrupt.py) is
  kept, so a restart before the repair finds the bad record again through its .idx. A live
  record that fails its checksum during compaction is handed to `Storage.found_corrupt` (not
  served any more, reported for repair) and left behind, and the segment kept until repaired.
- Files are removed through the storage's FileSystem; a failing removal turns the bookie
  read-only like any failed write (typed DiskFull/ReadOnly raised); a read-only bookie still
  deletes dead segments but does not compact (compaction appends). After a delete that failed
  to become durable (`Storage.gc_blocked_reason`) GC reclaims nothing until restart: that
  ledger's bytes look dead in memory but it is back after a restart.

What must hold: a segment file is deleted only when no live index entry points into it, and
every live entry it held is durable elsewhere first.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from bookie.fileio import FileSystem
from bookie.index import decode_idx, pack_location
from bookie.segment_reader import segment_path
from bookie.storage import Storage
from common.errors import BookieError, ChecksumMismatch
from common.invariant import invariant

log = logging.getLogger(__name__)


@dataclass
class GcReport:
    deleted_segments: int = 0
    compacted_segments: int = 0
    reclaimed_bytes: int = 0   # file bytes removed, minus bytes re-appended by compaction


async def collect(storage: Storage) -> GcReport:
    report = GcReport()
    if storage.gc_blocked_reason:
        log.warning("GC skipped until restart: %s", storage.gc_blocked_reason)
        return report
    ratio_max = storage.config.bookie_gc_compact_live_ratio_max
    async with storage.seal_lock:
        below = min(storage.checkpoint_replay_from, storage.active_segment_id)
        candidates = sorted((s for s in storage.index.segments.values()
                             if s.sealed and s.segment_id < below),
                            key=lambda s: s.segment_id)
        held = storage.corrupt.held_segments()
        for segment in candidates:
            if segment.segment_id in held:
                continue  # a corrupt record awaiting repair: a restart must find it again
            if segment.live_bytes <= 0:
                report.reclaimed_bytes += await _delete_segment(storage, segment.segment_id)
                report.deleted_segments += 1
            elif segment.live_bytes <= ratio_max * segment.size_bytes:
                if storage.refusal() is not None:
                    continue  # compaction appends; a read-only bookie only deletes
                try:
                    moved = await _compact(storage, segment.segment_id)
                except (BookieError, OSError) as exc:  # OSError: reading the .idx back
                    log.warning("compaction of segment %s stopped: %s", segment.segment_id, exc)
                    continue
                if segment.segment_id in storage.corrupt.held_segments():
                    report.reclaimed_bytes -= moved  # the copies; the file goes once repaired
                    continue
                report.reclaimed_bytes += await _delete_segment(storage, segment.segment_id) - moved
                report.compacted_segments += 1
    return report


async def _delete_segment(storage: Storage, segment_id: int) -> int:
    segment = storage.index.segments[segment_id]
    invariant(segment.sealed and segment.live_bytes <= 0, "delete only dead sealed segments",
              segment_id=segment_id, live_bytes=segment.live_bytes)
    await storage.reader.run(storage.reader.forget, segment_id)
    seg_path = segment_path(storage.segments_dir, segment_id)
    idx_path = segment_path(storage.segments_dir, segment_id, ".idx")
    try:
        freed = await asyncio.get_running_loop().run_in_executor(
            None, _unlink_pair, storage.fs, idx_path, seg_path, storage.segments_dir)
    except OSError as exc:
        raise storage.fail_writes(exc, f"removal of segment {segment_id}") from exc
    del storage.index.segments[segment_id]
    storage.deleted_segments += 1
    return freed


def _unlink_pair(fs: FileSystem, idx_path: str, seg_path: str, directory: str) -> int:
    # .idx first: a .seg alone below the checkpoint means "being deleted" to start-up
    freed = fs.unlink(idx_path) + fs.unlink(seg_path)
    fs.fsync_dir(directory)
    return freed


async def _compact(storage: Storage, segment_id: int) -> int:
    """Re-append the segment's live records; returns the bytes re-appended."""
    idx_path = segment_path(storage.segments_dir, segment_id, ".idx")
    data = await storage.reader.run(_read_file, idx_path)
    quads = decode_idx(data, idx_path)
    moved_bytes = 0
    batch: list[tuple[int, int, int]] = []  # (ledger, entry, location)
    batch_bytes = 0
    batch_bytes_max = storage.config.bookie_gc_compact_batch_bytes  # read back and re-appended at once
    for i in range(0, len(quads), 4):
        ledger_id, entry_id, offset, length = quads[i], quads[i + 1], quads[i + 2], quads[i + 3]
        location = pack_location(segment_id, offset, length)
        if not storage.index.is_live(ledger_id, entry_id, location):
            continue
        batch.append((ledger_id, entry_id, location))
        batch_bytes += length
        if batch_bytes >= batch_bytes_max:
            moved_bytes += await _move_batch(storage, batch)
            batch, batch_bytes = [], 0
    if batch:
        moved_bytes += await _move_batch(storage, batch)
    invariant(storage.index.segments[segment_id].live_bytes <= 0,
              "a compacted segment holds nothing live", segment_id=segment_id)
    return moved_bytes


async def _move_batch(storage: Storage, batch: list[tuple[int, int, int]]) -> int:
    records = await storage.reader.run(storage.reader.records, [loc for _, _, loc in batch])
    index = storage.index
    copies = []
    for (ledger_id, entry_id, location), record in zip(batch, records):
        if record is None:
            if storage.found_corrupt(ledger_id, entry_id, location):
                continue  # not served any more; the segment stays until it is repaired
            raise ChecksumMismatch("a live record failed its checksum during compaction",
                                   ledger_id=ledger_id, entry_id=entry_id)
        if not index.is_live(ledger_id, entry_id, location):
            continue  # deleted while we were reading
        future, new_location = storage.append_copy(ledger_id, entry_id, record.lac,
                                                   record.payload, record.payload_crc32c)
        copies.append((future, ledger_id, entry_id, location, new_location, record))
    moved = 0
    for future, ledger_id, entry_id, location, (seg, off, length), record in copies:
        await future
        if index.is_live(ledger_id, entry_id, location):
            state = index.ledgers[ledger_id]
            index.insert(state, entry_id, seg, off, length, record.lac, len(record.payload))
        moved += length
    return moved


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
