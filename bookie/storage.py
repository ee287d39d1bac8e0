"""The bookie's storage engine: one shared, append-only log of segment files, an in-memory index.

Design (and why)
- All ledgers share one sequence of segment files `segments/NNNNNNNNNN.seg`. Exactly one, the
  *active* segment, is written: it is the journal. Every add, fence, ledger creation and delete
  is a record (bookie/record.py: length + CRC32C framing) appended to it by the group-commit
  thread (bookie/journal.py) and acknowledged only after fsync. Entries are written ONCE: the
  journal record *is* the stored entry, and the index points straight into it. BookKeeper keeps
  a separate journal plus entry logs so the journal can sit on its own disk; on one disk that
  writes every byte twice, halving bandwidth, so here the journal file becomes a segment.
  Sharing segments among ledgers keeps writes sequential however many ledgers are open, and
  keeps the file count independent of the ledger count; the price is GC by compaction.
- Index: (ledger, entry) -> (segment, offset, length), a dict per ledger (bookie/index.py).
- Checkpoint = seal: the active segment is rolled (fsynced, closed, a new one opened), its
  index is written to `NNN.idx`, then `checkpoint.json` records every ledger's state and that
  replay starts at the new active segment. Start-up loads the .idx files of sealed segments and
  replays only the segments after the checkpoint, record by record, stopping at the first torn
  or invalid record and truncating it away. So the "old journal" a checkpoint retires is simply
  a sealed segment: it is never replayed again, and GC deletes it once nothing in it is live.
- A kill -9 at any moment: acknowledged records were fsynced before the ack, so replay finds
  them; a torn tail fails its CRC and is cut off, never exposed.
- GC (bookie/gc.py) deletes sealed segments with no live record and compacts sealed segments
  whose live ratio is at or below `bookie_gc_compact_live_ratio_max` by re-appending their live
  records to the active segment, then deleting the old file.
- A stored record that fails its CRC32C on a read (a bit flipped on disk) is never served:
  the read answers ChecksumMismatch and the reader fails over to another replica.
  `found_corrupt` then drops the entry from the index (dead bytes) and remembers it in
  `corrupt` (bookie/corrupt.py, bounded), which the registration reports; later reads of it
  answer ChecksumMismatch at once, without touching the disk (not NoSuchEntry: ledger recovery
  counts "no such entry" as evidence the entry was never acknowledged). The add of a good copy
  (the auditor's repair, a recovery add) makes it served again and takes it out of the set.

What must hold
- An add is acknowledged only once durable; the index holds only durable records.
- A fenced ledger never again accepts an add without `recovery`, also across restarts.
- A deleted ledger is unreadable at once; its bytes count as dead for GC.
- A record that failed its checksum is never returned; an entry dropped for it stays in
  `corrupt` (answering ChecksumMismatch) until a good copy is added, unless the set was full.
- When a write fails the bookie turns read-only and no stored record changes: a journal write
  or fsync, an `.idx` or `checkpoint.json` write alike. An `OSError` from the disk becomes a
  typed error here (bookie/fileio.py `disk_error`: DiskFull for ENOSPC/EDQUOT, else ReadOnly)
  and the mode goes to DISK_FULL or IO_ERROR for good (until restart). A segment whose seal
  failed stays unsealed and is replayed at the next start, so nothing depends on the lost
  write. `open()` comes up read-only, serving what is stored, when it cannot seal or start a
  segment; `close()` is best effort, so a SIGTERMed bookie exits even on a failing disk.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c as _crc32c

from bookie import recovery
from bookie.corrupt import CorruptEntries
from bookie.fileio import FileSystem, OsFileSystem, disk_error, is_disk_full
from bookie.index import (
    CHECKPOINT_NAME,
    Index,
    LedgerState,
    SegmentInfo,
    encode_checkpoint,
    encode_idx,
    unpack_location,
)
from bookie.journal import Journal, RollItem, WriteItem
from bookie.record import HEADER_BYTES, RecordKind, encode, encode_header
from bookie.segment_reader import SegmentReader, segment_path
from bookie.types import BookieInfo, LedgerSummary
from common.completion import Completion
from common.config import Config
from common.errors import (
    BadRequest,
    BookieError,
    ChecksumMismatch,
    DiskFull,
    EntryTooLarge,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    ReadOnly,
    ShuttingDown,
)
from common.invariant import invariant, present
from common.ratelimited_log import RateLimitedLog

log = logging.getLogger(__name__)
_WARN = RateLimitedLog(log, interval_s=60.0)
_ADD = int(RecordKind.ADD)


class StorageMode(enum.Enum):
    WRITABLE = "writable"          # accepts adds
    LOW_DISK = "low_disk"          # free space < bookie_disk_free_bytes_min; re-checked, may recover
    DISK_FULL = "disk_full"        # a write hit ENOSPC/EDQUOT; read-only until restart
    IO_ERROR = "io_error"          # a write or fsync failed otherwise; read-only until restart
    CLOSED = "closed"              # close() ran; nothing accepted


_MODE_TRANSITIONS: dict[StorageMode, frozenset[StorageMode]] = {
    StorageMode.WRITABLE: frozenset({StorageMode.LOW_DISK, StorageMode.DISK_FULL,
                                     StorageMode.IO_ERROR, StorageMode.CLOSED}),
    StorageMode.LOW_DISK: frozenset({StorageMode.WRITABLE, StorageMode.DISK_FULL,
                                     StorageMode.IO_ERROR, StorageMode.CLOSED}),
    StorageMode.DISK_FULL: frozenset({StorageMode.CLOSED}),
    StorageMode.IO_ERROR: frozenset({StorageMode.CLOSED}),
    StorageMode.CLOSED: frozenset(),
}


@dataclass(slots=True)
class PendingAdds:
    """One AddRequest in progress: per-entry outcome codes, and a future for durability."""

    codes: list[int]               # 0 = accepted (durable once `durable` resolves), else error code
    messages: dict[int, str]       # index -> error message, for refused entries
    durable: Completion            # set (None) when durable; an exception if the journal failed


@dataclass(slots=True)
class _AddDone:
    future: Completion
    # Flat: state, entry_id, offset, length, lac, payload_bytes for each accepted entry.
    inserts: list


@dataclass(slots=True)
class _Done:
    future: asyncio.Future


class Storage:
    """Owned by one event loop; its journal thread and reader thread never touch the index."""

    def __init__(self, data_dir: str, config: Config, *, fs: FileSystem | None = None) -> None:
        self.data_dir = data_dir
        self.segments_dir = os.path.join(data_dir, "segments")
        self.config = config
        self._fs = fs or OsFileSystem()
        self.index = Index()
        self.mode = StorageMode.WRITABLE
        self.mode_reason = ""
        self.bookie_id = ""
        self._journal: Journal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active_segment_id = 0
        self._active_offset = 0   # where the next record goes in the active segment
        # `replay_from_segment` of the last checkpoint on disk: segments below it are sealed
        # there too. GC touches only those: a segment whose .idx was written but whose
        # checkpoint write then failed is still replayed at start, so it must stay.
        self._checkpoint_replay_from = 0
        self._pending_entries = 0  # adds submitted to the journal, not yet durable
        self._room = asyncio.Event()
        # True while _on_journal_done settles a batch: a listener may wait for the batch's end
        # (`on_batch_reported`) to answer all of it in one write per connection.
        self.reporting_batch = False
        self._batch_listeners: list[Callable[[], None]] = []
        self._room.set()
        self._seal_lock = asyncio.Lock()
        self._seal_tasks: set[asyncio.Task] = set()
        self.reader = SegmentReader(self.segments_dir, config.bookie_entry_bytes_max)
        self._entry_bytes_max = config.bookie_entry_bytes_max
        self._segment_bytes_max = config.bookie_segment_file_bytes_max
        self.compacted_segments = 0
        self.deleted_segments = 0
        self.entries_written = 0   # entries made durable since open (/metrics)
        # Why GC must not reclaim anything until restart ("" = it may).
        self.gc_blocked_reason = ""
        # Entries whose stored record failed its checksum, not served until a good copy comes.
        self.corrupt = CorruptEntries()

    @property
    def _open_loop(self) -> asyncio.AbstractEventLoop:
        return present(self._loop, "the storage is open")

    @property
    def _open_journal(self) -> Journal:
        return present(self._journal, "a writable storage has a journal")

    @property
    def journal(self) -> Journal | None:
        """The running journal (None before open), for its latency and byte counters."""
        return self._journal

    # --- start and stop -------------------------------------------------------------------------

    async def open(self) -> None:
        """Recover from disk (load sealed indexes, replay the rest), then start a new segment.

        If the disk cannot take the new segment, the replayed segments' .idx or the checkpoint,
        the storage still opens, read-only (DISK_FULL or IO_ERROR), and serves what it holds:
        unsealed segments are simply replayed again at the next start."""
        self._loop = asyncio.get_running_loop()
        os.makedirs(self.segments_dir, exist_ok=True)
        self.bookie_id = await self._loop.run_in_executor(None, _bookie_id, self.data_dir,
                                                          self._fs)
        replayed = await self.reader.run(recovery.recover, self.index, self.data_dir,
                                         self.segments_dir, self._entry_bytes_max)
        self._active_segment_id = max(self.index.segments, default=0) + 1
        self._checkpoint_replay_from = min(replayed, default=self._active_segment_id)
        try:
            self._start_journal()
        except OSError as exc:
            error = self._fail_writes(exc, f"new segment {self._active_segment_id}")
            log.error("bookie opens read-only, without a journal: %s", error)
            return
        try:
            for segment_id in replayed:  # replayed segments are complete now: seal them
                await self._write_idx(segment_id)
            await self._write_checkpoint()
        except BookieError as exc:
            log.error("bookie opens read-only, serving what it stores: %s", exc)

    def _start_journal(self) -> None:
        cfg = self.config
        sid = self._active_segment_id
        path = segment_path(self.segments_dir, sid)
        self._journal = journal = Journal(
            fs=self._fs, directory=self.segments_dir, segment_id=sid, path=path,
            on_done=self._on_journal_done, call_soon_threadsafe=self._open_loop.call_soon_threadsafe,
            group_commit_wait_ms=cfg.bookie_journal_group_commit_wait_ms,
            group_commit_bytes_max=cfg.bookie_journal_group_commit_bytes_max,
            skip_fsync=cfg.bookie_unsafe_skip_fsync)
        self._active_offset = journal.start_offset
        self.index.segments[sid] = SegmentInfo(sid, size_bytes=self._active_offset)

    async def close(self) -> None:
        """Make everything pending durable, seal the active segment, stop threads. Idempotent.

        Best effort, so shutdown completes on a failing disk: a final seal that cannot be
        written is logged (the segment is replayed at the next start), and a journal thread
        that does not stop within its bound is left behind (its items were never acked)."""
        if self.mode is StorageMode.CLOSED or self._loop is None:
            return
        if self.refusal() is None:
            try:
                await self.checkpoint()
            except BookieError as exc:
                log.warning("closing without a final checkpoint: %s", exc)
        await self.wait_sealed()
        self._set_mode(StorageMode.CLOSED, "closed")
        if self._journal is not None:
            stop_s = self.config.bookie_journal_stop_timeout_ms / 1000
            if not await self._loop.run_in_executor(None, self._journal.stop, stop_s):
                log.error("journal thread did not stop within %.0f s (disk hung?); closing "
                          "without it, replay at start-up recovers what reached the disk", stop_s)
            await asyncio.sleep(0)  # let the journal's last completions run
        await self.reader.close()

    # --- adds -----------------------------------------------------------------------------------

    def has_room(self) -> bool:
        """Whether an add request may be taken now (`wait_for_room` would not wait)."""
        return self._pending_entries < self.config.bookie_add_queue_entries_max

    async def wait_for_room(self) -> None:
        """Backpressure: wait while `bookie_add_queue_entries_max` adds await the journal."""
        while self._pending_entries >= self.config.bookie_add_queue_entries_max:
            self._room.clear()
            await self._room.wait()

    def refusal(self) -> BookieError | ShuttingDown | None:
        """Why this bookie refuses writes now, or None."""
        mode = self.mode
        if mode is StorageMode.WRITABLE:
            return None
        if mode is StorageMode.DISK_FULL or mode is StorageMode.LOW_DISK:
            return DiskFull(self.mode_reason)
        if mode is StorageMode.CLOSED:
            return ShuttingDown("bookie is shutting down")
        return ReadOnly(self.mode_reason)

    def add_request(self, writer_token: bytes, entries,
                    on_durable: Callable[[Completion], Any] = lambda durable: None) -> PendingAdds:
        """Validate and place every entry of one AddRequest; returns at once, durable later:
        `on_durable` is called in the turn the journal reports the batch (a refused request: at
        once, from inside this call; a failed journal: a turn later)."""
        future = Completion(self._open_loop, on_durable)
        n = len(entries)
        codes, messages = [0] * n, {}
        refusal = self.refusal()
        if refusal is not None:
            future.set_result(None)
            return PendingAdds([refusal.code] * n, dict.fromkeys(range(n), refusal.message), future)
        if self._active_offset >= self._segment_bytes_max:
            self._roll()
        buffers: list[bytes] = []
        inserts: list = []
        offset = self._active_offset
        for i, entry in enumerate(entries):
            payload = entry.payload  # a protobuf bytes field is copied on every access: once
            error = self._check_add(entry, payload, writer_token)
            if error is not None:
                codes[i], messages[i] = error.code, error.message
                continue
            ledger_id, entry_id, lac = entry.ledger_id, entry.entry_id, entry.last_add_confirmed
            state = self.index.ledgers.get(ledger_id)
            if state is None:
                state = self.index.create_ledger(ledger_id, writer_token, self._active_segment_id)
                offset += self._append_meta(buffers, RecordKind.CREATE, ledger_id, writer_token)
            payload_bytes = len(payload)
            buffers.append(encode_header(_ADD, ledger_id, entry_id, lac, payload_bytes, entry.crc32c))
            buffers.append(payload)
            length = HEADER_BYTES + payload_bytes
            inserts += (state, entry_id, offset, length, lac, payload_bytes)
            offset += length
        if not buffers:
            future.set_result(None)
            return PendingAdds(codes, messages, future)
        self._submit(buffers, offset, _AddDone(future, inserts))
        self._pending_entries += len(inserts) // 6
        return PendingAdds(codes, messages, future)

    def _check_add(self, entry, payload: bytes, writer_token: bytes) -> BookieError | None:
        payload_bytes = len(payload)
        if payload_bytes > self._entry_bytes_max:
            return EntryTooLarge(f"entry of {payload_bytes} bytes > {self._entry_bytes_max}")
        if _crc32c(payload) != entry.crc32c:
            return ChecksumMismatch(f"entry {entry.ledger_id}:{entry.entry_id} arrived corrupted")
        if entry.last_add_confirmed < -1:
            return BadRequest("last_add_confirmed below -1")
        state = self.index.ledgers.get(entry.ledger_id)
        if state is None or entry.recovery:
            return None
        if state.fenced:
            return LedgerFenced(f"ledger {entry.ledger_id} is fenced")
        if state.writer_token != writer_token:
            return BadRequest(f"ledger {entry.ledger_id} belongs to another writer")
        return None

    def _append_meta(self, buffers: list, kind: RecordKind, ledger_id: int,
                     payload: bytes = b"") -> int:
        record = encode(kind, ledger_id, payload=payload)
        buffers.append(record)
        return len(record)

    def _submit(self, buffers: list, end_offset: int, done) -> None:
        nbytes = end_offset - self._active_offset
        self._open_journal.submit(WriteItem(buffers, nbytes, self._active_segment_id, done))
        self._active_offset = end_offset
        self.index.segments[self._active_segment_id].size_bytes = end_offset

    def on_batch_reported(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after each journal batch's completions have all been set."""
        self._batch_listeners.append(listener)

    def _on_journal_done(self, batch: list, error: BaseException | None) -> None:
        """On the loop: a journal batch is durable (error None) or failed."""
        self.reporting_batch = True
        try:
            self._settle_batch(batch, error)
        finally:
            self.reporting_batch = False
        for listener in self._batch_listeners:
            listener()

    def _settle_batch(self, batch: list, error: BaseException | None) -> None:
        if error is not None:
            self._fail_writes(error, "the journal")
        exc = None if error is None else self.refusal()
        for item in batch:
            done = item.on_durable
            if isinstance(done, _AddDone):
                self._pending_entries -= len(done.inserts) // 6
                if exc is None:
                    self._apply_adds(item.segment_id, done.inserts)
                    self.entries_written += len(done.inserts) // 6
                    if self.corrupt:
                        self._repaired(done.inserts)
            if done is not None and not done.future.done():
                if exc is None:
                    done.future.set_result(None)
                else:
                    done.future.set_exception(exc)
        if self._pending_entries < self.config.bookie_add_queue_entries_max:
            self._room.set()
        invariant(self._pending_entries >= 0, "pending adds never negative")

    def _apply_adds(self, segment_id: int, inserts: list) -> None:
        insert, ledgers = self.index.insert, self.index.ledgers
        for i in range(0, len(inserts), 6):
            state: LedgerState = inserts[i]
            if ledgers.get(state.ledger_id) is not state:
                continue  # deleted while its add was in the journal
            insert(state, inserts[i + 1], segment_id, inserts[i + 2], inserts[i + 3],
                   inserts[i + 4], inserts[i + 5])

    def _repaired(self, inserts: list) -> None:
        """Durable adds that bring back entries found corrupt: served again, out of the set."""
        for i in range(0, len(inserts), 6):
            state: LedgerState = inserts[i]
            entry_id = inserts[i + 1]
            if entry_id in state.entries and self.corrupt.repaired(state.ledger_id, entry_id):
                log.info("stored entry %d:%d repaired: a good copy is stored and served",
                         state.ledger_id, entry_id)

    def _fail_writes(self, error: BaseException, what: str) -> BookieError:
        """A write of `what` failed: read-only for good (DISK_FULL or IO_ERROR, as for every
        failed write); returns the typed error to raise or report for it."""
        if isinstance(error, BookieError):
            typed = error
        elif isinstance(error, OSError):
            typed = disk_error(error, what)
        else:  # a bug in the writer (the journal fails on any exception)
            typed = ReadOnly(f"writing {what} failed: {error!r}")
        if self.mode not in (StorageMode.DISK_FULL, StorageMode.IO_ERROR, StorageMode.CLOSED):
            full = isinstance(typed, DiskFull) or is_disk_full(error)
            self._set_mode(StorageMode.DISK_FULL if full else StorageMode.IO_ERROR, typed.message)
            log.error("bookie turned read-only: %s", typed.message)
        return typed

    def _set_mode(self, mode: StorageMode, reason: str) -> None:
        """The one place the mode changes; refuses transitions the table does not allow."""
        invariant(mode in _MODE_TRANSITIONS[self.mode], "legal storage mode transition",
                  old=self.mode.value, new=mode.value)
        self.mode, self.mode_reason = mode, reason

    def check_disk(self) -> None:
        """Enter or leave LOW_DISK from the file system's free space (called periodically)."""
        free_bytes = self.disk_free_bytes()
        minimum = self.config.bookie_disk_free_bytes_min
        if self.mode is StorageMode.WRITABLE and free_bytes < minimum:
            self._set_mode(StorageMode.LOW_DISK,
                           f"free disk {free_bytes} B < bookie_disk_free_bytes_min {minimum} B")
        elif self.mode is StorageMode.LOW_DISK and free_bytes >= minimum:
            self._set_mode(StorageMode.WRITABLE, "")

    # --- fence, delete ---------------------------------------------------------------------------

    async def fence(self, ledger_id: int) -> tuple[int, int]:
        """Fence (creating the ledger fenced if unknown); durable before it returns."""
        records: list[tuple[RecordKind, bytes]] = []
        state = self.index.ledgers.get(ledger_id)
        if state is None:
            state = self.index.create_ledger(ledger_id, b"", self._active_segment_id)
            records.append((RecordKind.CREATE, b""))
        state.fenced = True  # refuse adds from now on, even before the record is durable
        records.append((RecordKind.FENCE, b""))
        await self._write_meta(ledger_id, records)
        return state.lac, state.last_entry_id

    async def delete_ledger(self, ledger_id: int) -> None:
        """Forget the ledger at once (unreadable), durably. Unknown ledgers are fine.
        A read-only bookie refuses before forgetting anything: a delete that cannot be made
        durable must not make the ledger's bytes look dead to GC."""
        refusal = self.refusal()
        if refusal is not None and ledger_id in self.index.ledgers:
            raise refusal
        if self.index.drop_ledger(ledger_id) is None:
            return
        self.corrupt.forget_ledger(ledger_id)
        try:
            await self._write_meta(ledger_id, [(RecordKind.DELETE, b"")])
        except BookieError:
            # Forgotten in memory, not on disk: after a restart the ledger is back, so its
            # bytes (dead in the index now) must not be reclaimed during this run.
            self.gc_blocked_reason = f"the delete of ledger {ledger_id} is not durable"
            raise

    async def _write_meta(self, ledger_id: int, records: list[tuple[RecordKind, bytes]]) -> None:
        refusal = self.refusal()
        if refusal is not None:
            raise refusal
        if self._active_offset >= self._segment_bytes_max:
            self._roll()
        buffers: list[bytes] = []
        end = self._active_offset
        for kind, payload in records:
            end += self._append_meta(buffers, kind, ledger_id, payload)
        done = _Done(self._open_loop.create_future())
        self._submit(buffers, end, done)
        await done.future

    # --- reads --------------------------------------------------------------------------------

    def ledger(self, ledger_id: int) -> LedgerState:
        state = self.index.ledgers.get(ledger_id)
        if state is None:
            raise NoSuchLedger(f"no ledger {ledger_id} on this bookie")
        return state

    async def read(self, ledger_id: int, first_entry: int, last_entry: int,
                   allow_past_lac: bool) -> tuple[list[tuple[int, bytes, int]], BookieError | None]:
        """Entries first..last as (entry_id, payload, crc32c), and the error that cut the range
        short (NoSuchEntry at the first missing one), or None if all were found."""
        state = self.ledger(ledger_id)
        if last_entry < first_entry:
            raise BadRequest("last_entry < first_entry")
        if last_entry - first_entry + 1 > self.config.bookie_read_entries_max:
            raise BadRequest(f"read of more than {self.config.bookie_read_entries_max} entries")
        if not allow_past_lac and last_entry > state.lac:
            raise NoSuchEntry(f"entry {last_entry} of ledger {ledger_id} is past LAC {state.lac}")
        locations = []
        error: BookieError | None = None
        for entry_id in range(first_entry, last_entry + 1):
            location = state.entries.get(entry_id)
            if location is None:
                error = self._missing(ledger_id, entry_id)
                break
            locations.append(location)
        if not locations:
            raise present(error, "an empty range stopped at a missing entry")
        payloads = await self.reader.run(self.reader.payloads, locations)
        out: list[tuple[int, bytes, int]] = []
        for entry_id, (payload, crc) in enumerate(payloads, start=first_entry):
            if payload is None:
                self.found_corrupt(ledger_id, entry_id, locations[entry_id - first_entry])
                return out, ChecksumMismatch(f"stored entry {ledger_id}:{entry_id} is corrupt")
            out.append((entry_id, payload, crc))
        return out, error

    def _missing(self, ledger_id: int, entry_id: int) -> BookieError:
        if (ledger_id, entry_id) in self.corrupt:
            return ChecksumMismatch(f"stored entry {ledger_id}:{entry_id} is corrupt (awaiting repair)")
        return NoSuchEntry(f"no entry {entry_id} of ledger {ledger_id} on this bookie")

    def found_corrupt(self, ledger_id: int, entry_id: int, location: int) -> bool:
        """The record at `location` failed its checksum (a read, or GC's compaction): if the
        index still serves it, stop (drop the entry) and remember the entry for repair, logging
        it once. False when the set is full: the entry stays indexed, found again later."""
        state = self.index.ledgers.get(ledger_id)
        if state is None or state.entries.get(entry_id) != location:
            return True             # deleted, or replaced by a good copy, while it was read
        segment_id, offset, _ = unpack_location(location)
        if not self.corrupt.add(ledger_id, entry_id, segment_id):
            _WARN.error("corrupt-full", "stored entry %d:%d is corrupt and %d entries already await "
                        "repair: still indexed, reported once there is room (%d such finds)",
                        ledger_id, entry_id, len(self.corrupt), self.corrupt.overflow_total)
            return False
        self.index.drop_entry(state, entry_id)
        log.error("stored entry %d:%d is corrupt (segment %d, offset %d): no longer served, "
                  "reported for repair", ledger_id, entry_id, segment_id, offset)
        return True

    def forget_corrupt(self, ledger_id: int, entry_id: int) -> bool:
        """The auditor has nothing to repair for this entry (its ledger is gone, or the entry
        no longer lives here): stop reporting it. It stays unserved. True if it was reported."""
        return self.corrupt.forget(ledger_id, entry_id)

    def list_ledgers(self) -> list[LedgerSummary]:
        return [LedgerSummary(s.ledger_id, s.last_entry_id, s.lac, s.fenced, s.payload_bytes)
                for s in sorted(self.index.ledgers.values(), key=lambda s: s.ledger_id)]

    def disk_free_bytes(self) -> int:
        st = os.statvfs(self.data_dir)
        return st.f_bavail * st.f_frsize

    def disk_used_bytes(self) -> int:
        """Bytes of every file of this bookie, from the file system (not from the index). A file
        the GC deletes while it is counted (listed, then gone before its stat) counts 0."""
        total = 0
        for directory in (self.data_dir, self.segments_dir):
            with os.scandir(directory) as it:
                for entry in it:
                    try:
                        if entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue
        return total

    def info(self) -> BookieInfo:
        return BookieInfo(disk_used_bytes=self.disk_used_bytes(),
                          disk_free_bytes=self.disk_free_bytes(),
                          ledger_count=len(self.index.ledgers),
                          read_only=self.mode is not StorageMode.WRITABLE,
                          bookie_id=self.bookie_id)

    # --- checkpoint (= seal the active segment) ---------------------------------------------------

    def _roll(self) -> asyncio.Future:
        """Start a new active segment; the old one is sealed (idx, checkpoint) once durable."""
        new_id = self._active_segment_id + 1
        done = _Done(self._open_loop.create_future())
        self._open_journal.submit(RollItem(new_id, segment_path(self.segments_dir, new_id), done))
        self._active_segment_id, self._active_offset = new_id, 0
        self.index.segments[new_id] = SegmentInfo(new_id, size_bytes=0)
        task = asyncio.ensure_future(self._seal_after(done.future, new_id - 1))
        self._seal_tasks.add(task)
        task.add_done_callback(self._seal_done)
        return task

    async def _seal_after(self, rolled: asyncio.Future, segment_id: int) -> None:
        """Seal once the roll is durable; raises the typed error of a failed .idx/checkpoint."""
        try:
            await rolled
        except BookieError:
            return  # the journal failed; the segment stays unsealed and is replayed at start
        async with self._seal_lock:
            await self._write_idx(segment_id)
            await self._write_checkpoint()

    def _seal_done(self, task: asyncio.Task) -> None:
        self._seal_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Already read-only (_fail_writes); a roll started by an add has no awaiter.
            log.warning("sealing failed: %s", task.exception())

    async def wait_sealed(self) -> None:
        """Wait until every rolled segment so far is sealed (idx and checkpoint written)."""
        while self._seal_tasks:
            await asyncio.gather(*list(self._seal_tasks), return_exceptions=True)

    async def checkpoint(self) -> None:
        """Seal the active segment if it holds anything, so replay starts after it."""
        if self.refusal() is not None:
            return
        if self._active_offset > 0:
            await self._roll()
        else:
            async with self._seal_lock:
                await self._write_checkpoint()

    async def _write_idx(self, segment_id: int) -> None:
        segment = self.index.segments.get(segment_id)
        if segment is None or segment.sealed:
            return
        data = encode_idx(present(segment.quads, "an unsealed segment keeps its index in memory"))
        path = segment_path(self.segments_dir, segment_id, ".idx")
        await self._write_file(path, data, f"the index of segment {segment_id}")
        segment.sealed, segment.quads = True, None

    async def _write_checkpoint(self) -> None:
        unsealed = [sid for sid, s in self.index.segments.items() if not s.sealed]
        replay_from = min(unsealed, default=self._active_segment_id)
        data = encode_checkpoint(replay_from, list(self.index.ledgers.values()))
        path = os.path.join(self.data_dir, CHECKPOINT_NAME)
        await self._write_file(path, data, CHECKPOINT_NAME)
        self._checkpoint_replay_from = replay_from

    async def _write_file(self, path: str, data: bytes, what: str) -> None:
        """Write a whole file atomically; a disk error turns the storage read-only and is
        raised typed (DiskFull or ReadOnly). The old file, if any, is left as it was."""
        try:
            await self._open_loop.run_in_executor(None, self._fs.write_file_atomically, path, data)
        except OSError as exc:
            raise self._fail_writes(exc, what) from exc

    # --- for GC ----------------------------------------------------------------------------------

    @property
    def active_segment_id(self) -> int:
        return self._active_segment_id

    @property
    def checkpoint_replay_from(self) -> int:
        """Segments below this are sealed in the checkpoint on disk (GC may collect them)."""
        return self._checkpoint_replay_from

    @property
    def seal_lock(self) -> asyncio.Lock:
        return self._seal_lock

    @property
    def fs(self) -> FileSystem:
        return self._fs

    def fail_writes(self, error: BaseException, what: str) -> BookieError:
        """For GC: a file operation on `what` failed; read-only, and the typed error."""
        return self._fail_writes(error, what)

    def append_copy(self, ledger_id: int, entry_id: int, lac: int, payload: bytes,
                    crc: int) -> tuple[asyncio.Future, tuple[int, int, int]]:
        """Re-append a live entry (compaction): (future resolved once durable, new location)."""
        refusal = self.refusal()
        if refusal is not None:
            raise refusal
        if self._active_offset >= self._segment_bytes_max:
            self._roll()
        offset = self._active_offset
        header = encode_header(_ADD, ledger_id, entry_id, lac, len(payload), crc)
        length = HEADER_BYTES + len(payload)
        done = _Done(self._open_loop.create_future())
        segment_id = self._active_segment_id
        self._submit([header, payload], offset + length, done)
        return done.future, (segment_id, offset, length)


def _bookie_id(data_dir: str, fs: FileSystem) -> str:
    """This data dir's id, created on first start (a new bookie on a full disk: DiskFull)."""
    path = os.path.join(data_dir, "BOOKIE_ID")
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        bookie_id = uuid.uuid4().hex
        try:
            fs.write_file_atomically(path, bookie_id.encode())
        except OSError as exc:
            raise disk_error(exc, "BOOKIE_ID") from exc
        return bookie_id
