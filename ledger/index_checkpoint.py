"""Checkpoints of the open ledger's entry index, so a takeover reads back only the tail.

A managed ledger's open ledger keeps its per-entry index (`ledger.entry_index`) in memory; the blob
is written when the ledger closes. A new owner after a crash or a kill had to rebuild it by reading
every entry of that ledger back from the bookies (up to a rollover: 50,000 entries): measured, 12
topics of 3,000 1 KiB entries took 8.6 s to load on the new owner, most of a failover.

So while the ledger is open, its index is also written to the same key as the closed blob
(`index_path`) once at least `managed_ledger_index_checkpoint_entries` entries or
`managed_ledger_index_checkpoint_bytes` bytes were added since the last checkpoint and at least
`managed_ledger_index_checkpoint_interval_ms` passed (at most one
write per interval per topic, never more than one in flight). A takeover (`load`, `fits`)
starts from that blob: recovery measures, and the index rebuild reads, only the entries after it.

What must hold: a checkpoint covers only acknowledged entries, which recovery never drops, so a
blob is never longer than the recovered ledger (if it were, or it cannot be read, recovery
ignores it and reads the whole ledger); the closing blob is written after the last checkpoint
write has ended (`settle`), so a late checkpoint never replaces it with a shorter index.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import zlib

from common.clock import Clock
from common.errors import InvariantViolation, StrataError
from common.ratelimited_log import RateLimitedLog
from ledger.entry_index import EntryIndex
from ledger.ml_metadata import index_path
from metadata.api import AsyncStore

log = logging.getLogger(__name__)
_WARN = RateLimitedLog(log, interval_s=5.0)


class IndexCheckpointer:
    """One per managed ledger; follows whichever ledger is open."""

    def __init__(self, store: AsyncStore, name: str, clock: Clock, entries_min: int, bytes_min: int,
                 interval_ms: int) -> None:
        self._store = store
        self._name = name
        self._clock = clock
        self._entries_min = entries_min
        self._bytes_min = bytes_min
        self._written_bytes = 0
        self._interval_s = interval_ms / 1000
        self._ledger_id = -1
        self._written_entries = 0
        self._written_s = clock.monotonic_s()
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._latest: EntryIndex | None = None     # the current ledger's index as last seen

    def appended(self, ledger_id: int, index: EntryIndex) -> None:
        """An entry was acknowledged in `ledger_id`: checkpoint if one is due. Due by entries but
        not yet by time, a timer checkpoints at the interval's end, so a ledger that goes quiet
        after a burst is covered too."""
        if ledger_id != self._ledger_id:
            self._ledger_id, self._written_entries, self._written_bytes = ledger_id, 0, 0
        self._latest = index
        if (self._task is not None and not self._task.done()) or self._timer is not None:
            return   # the write in flight, or the timer, looks again when it ends
        entries, now_s = len(index), self._clock.monotonic_s()
        if (entries - self._written_entries < self._entries_min
                and index.total_bytes - self._written_bytes < self._bytes_min):
            return
        wait_s = self._interval_s - (now_s - self._written_s)
        if wait_s > 0:
            self._timer = asyncio.get_running_loop().call_later(wait_s, self._timer_fired, ledger_id, index)
            return
        self._written_entries, self._written_bytes, self._written_s = entries, index.total_bytes, now_s
        self._task = asyncio.get_running_loop().create_task(self._write(ledger_id, index.to_blob()))

    def _timer_fired(self, ledger_id: int, index: EntryIndex) -> None:
        self._timer = None
        if ledger_id == self._ledger_id and (self._task is None or self._task.done()):
            self.appended(ledger_id, index)

    async def _write(self, ledger_id: int, blob: bytes) -> None:
        try:
            await self._store.put(index_path(self._name, ledger_id), blob)
        except StrataError as exc:
            _WARN.warning(self._name, "index checkpoint of %s ledger %d failed: %s", self._name, ledger_id, exc)
        finally:
            latest = self._latest
            if ledger_id == self._ledger_id and latest is not None:   # entries added meanwhile
                asyncio.get_running_loop().call_soon(self._timer_fired, ledger_id, latest)

    async def settle(self) -> None:
        """Wait for a checkpoint write in flight, and take no more for the current ledger (it is
        closing: its final blob follows)."""
        self._ledger_id = -2
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)


async def load(store: AsyncStore, name: str, ledger_id: int) -> EntryIndex | None:
    """The last checkpoint of an open ledger's index, or None (none, or unreadable). Its
    (entries, total bytes) go to recovery as the known prefix; `fits` checks it afterwards."""
    got = await store.get(index_path(name, ledger_id))
    if got is None:
        return None
    try:
        return EntryIndex.from_blob(got.value)
    except (InvariantViolation, ValueError, zlib.error, struct.error) as exc:   # a torn or foreign blob
        log.warning("%s ledger %d: index checkpoint unreadable, reading the ledger back: %s", name, ledger_id, exc)
        return None


def fits(index: EntryIndex | None, name: str, ledger_id: int, entries: int) -> EntryIndex | None:
    """`index` if the recovered ledger of `entries` entries holds all of it, else None (rebuild
    it all; recovery measured the whole ledger in that case too)."""
    if index is None or len(index) <= entries:
        return index
    log.warning("%s ledger %d: index checkpoint has %d entries, the ledger %d; reading it back",
                name, ledger_id, len(index), entries)
    return None
