"""The journal: one thread that appends records to the active segment with group commit.

How it works
- The event loop calls `submit(item)`; items are appended to `_pending` under a lock and are
  written strictly in submission order. The loop has already decided each record's offset, so
  the thread never computes positions: it only moves bytes.
- The thread takes everything pending, waits until the oldest pending item has waited
  `bookie_journal_group_commit_wait_ms` or `bookie_journal_group_commit_bytes_max` bytes are
  pending (whichever first), writes the whole batch with writev, fsyncs ONCE, then hands the
  batch back to the loop with one `call_soon_threadsafe(on_done, items, error)`. So one fsync
  covers every add that arrived while the previous fsync ran, and the event loop keeps
  accepting adds while the disk works. The default wait is 0 (BookKeeper's
  `journalFlushWhenQueueEmpty`): an idle journal fsyncs at once, a busy one batches what
  queued behind the running fsync. A 2 ms wait cost ~2 ms of every publish at 5k msg/s
  and gained no throughput at max rate (217k vs 222k msg/s, same run).
- A `RollItem` seals the current file (fsync, close) and opens the next one (fsync dir).
- A write or fsync error (ENOSPC, EIO), or any other exception while writing a batch (a bug),
  truncates the file back to its last durable size, fails the batch and every later item with
  that error, and leaves the journal FAILED for good: the bookie turns read-only and nothing
  torn is ever acknowledged or exposed.
- `stop()` writes and fsyncs what is pending, then ends the thread; it waits at most
  `bookie_journal_stop_timeout_ms` (a hung disk must not keep a SIGTERMed bookie alive) and says whether the
  thread ended.

What must hold: an item is reported done without error only after its bytes are fsynced
(unless the UNSAFE `bookie_unsafe_skip_fsync` is set); items complete in submission order.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bookie.fileio import AppendFile, FileSystem
from common.config import SETTINGS_BY_NAME
from common.histogram import DISK_LATENCY_BOUNDS_S, LatencyHistogram
from common.invariant import invariant

# How long stop() waits for the thread to write, fsync and close: far above one 4 MiB batch
# on any working disk, below the 20 s a supervisor gives SIGTERM before SIGKILL.


@dataclass(slots=True)
class WriteItem:
    """Records to append, and what the loop needs back when they are durable."""

    buffers: list[bytes]
    nbytes: int
    segment_id: int          # the file the loop placed these records in
    on_durable: Any          # opaque to the journal; the storage's completion record
    submitted_s: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class RollItem:
    """Seal `segment_id - 1`'s file and start `segment_id`'s."""

    segment_id: int
    path: str
    on_durable: Any = None
    nbytes: int = 0
    submitted_s: float = field(default_factory=time.monotonic)


class JournalState(enum.Enum):
    RUNNING = "running"    # writing and fsyncing
    FAILED = "failed"      # a write/fsync failed: every item fails with `error`; never recovers
    STOPPED = "stopped"    # stop() drained it; no more items accepted


class Journal:
    def __init__(self, *, fs: FileSystem, directory: str, segment_id: int, path: str,
                 on_done: Callable[[list, BaseException | None], None],
                 call_soon_threadsafe: Callable[..., Any],
                 group_commit_wait_ms: float, group_commit_bytes_max: int,
                 skip_fsync: bool) -> None:
        self._fs = fs
        self._directory = directory
        self._segment_id = segment_id
        self._file: AppendFile = fs.open_append(path)
        fs.fsync_dir(directory)
        self._on_done = on_done
        self._call_soon_threadsafe = call_soon_threadsafe
        self._wait_s = group_commit_wait_ms / 1000.0
        self._bytes_max = group_commit_bytes_max
        self._skip_fsync = skip_fsync
        self._cond = threading.Condition()
        self._pending: list[WriteItem | RollItem] = []
        self._pending_bytes = 0
        self._stopping = False
        self.state = JournalState.RUNNING
        self.error: BaseException | None = None
        self.fsyncs = 0  # fsyncs done (for tests and metrics)
        # Written by the journal thread only, read by /metrics (bookie/metrics.py):
        self.sync_latency = LatencyHistogram(DISK_LATENCY_BOUNDS_S)       # one fsync, s
        self.add_latency = LatencyHistogram(DISK_LATENCY_BOUNDS_S)        # submit -> durable, s, per write item
        self.bytes_written = 0                                            # record bytes made durable
        self._thread = threading.Thread(target=self._run, name="bookie-journal", daemon=True)
        self._thread.start()

    @property
    def start_offset(self) -> int:
        """Size of the active file when the journal opened it (where new records go)."""
        return self._file.size_bytes

    def submit(self, item: WriteItem | RollItem) -> None:
        with self._cond:
            invariant(not self._stopping, "no items after stop()")
            self._pending.append(item)
            self._pending_bytes += item.nbytes
            self._cond.notify()

    def stop(self, timeout_s: float = SETTINGS_BY_NAME["bookie_journal_stop_timeout_ms"].default / 1000) -> bool:
        """Write and fsync what is pending, then end the thread and close the file.

        Waits at most `timeout_s`; returns whether the thread ended. When it did not (a disk
        that hangs in write or fsync), the thread is left running as a daemon: the items it
        holds are simply never acknowledged, and whatever of them reached the disk is found
        (or cut off as torn) by replay at the next start, so giving up here loses nothing
        acknowledged. The caller logs it and goes on shutting down."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # --- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._take_batch()
            if batch is None:
                break
            error = self.error
            if error is None:
                error = self._write_batch(batch)
            self._call_soon_threadsafe(self._on_done, batch, error)
        try:
            self._file.close()
        except OSError:
            pass
        if self.state is JournalState.RUNNING:
            self.state = JournalState.STOPPED

    def _take_batch(self) -> list | None:
        with self._cond:
            while not self._pending and not self._stopping:
                self._cond.wait()
            if not self._pending:
                return None
            # Group commit: give later adds a chance to share this fsync.
            while not self._stopping and self._pending_bytes < self._bytes_max:
                waited_s = time.monotonic() - self._pending[0].submitted_s
                if waited_s >= self._wait_s:
                    break
                self._cond.wait(self._wait_s - waited_s)
            batch, self._pending, self._pending_bytes = self._pending, [], 0
            return batch

    def _write_batch(self, batch: list) -> BaseException | None:
        """Write every item (rolling files where asked), fsync once per file; None if all ok."""
        buffers: list[bytes] = []
        durable_size = self._file.size_bytes
        try:
            for item in batch:
                if isinstance(item, RollItem):
                    self._flush(buffers)
                    buffers = []
                    self._roll(item)
                    durable_size = self._file.size_bytes
                    continue
                invariant(item.segment_id == self._segment_id, "records go to the active file",
                          item_segment=item.segment_id, active=self._segment_id)
                buffers.extend(item.buffers)
            self._flush(buffers)
        except BaseException as exc:
            # TypeError) must fail the journal too, or this thread dies silently and every
            # pending add and wait_for_room() waits forever while the bookie looks writable.
            self._fail(exc, durable_size)
            return exc
        now_s = time.monotonic()
        for item in batch:
            if isinstance(item, WriteItem):
                self.add_latency.observe(now_s - item.submitted_s)
                self.bytes_written += item.nbytes
        return None

    def _flush(self, buffers: list[bytes]) -> None:
        if not buffers:
            return
        self._file.write_all(buffers)
        if not self._skip_fsync:
            started_s = time.monotonic()
            self._file.fsync()
            self.sync_latency.observe(time.monotonic() - started_s)
        self.fsyncs += 1

    def _roll(self, item: RollItem) -> None:
        invariant(item.segment_id == self._segment_id + 1, "segments roll one at a time",
                  new=item.segment_id, active=self._segment_id)
        self._file.fsync()
        self._file.close()
        self._file = self._fs.open_append(item.path)
        self._fs.fsync_dir(self._directory)
        self._segment_id = item.segment_id

    def _fail(self, exc: BaseException, durable_size: int) -> None:
        self.error = exc
        self.state = JournalState.FAILED
        try:
            self._file.truncate(durable_size)  # drop the torn batch; shrinking needs no space
            self._file.fsync()
        except OSError:
            pass  # replay at start-up stops at the torn record anyway
