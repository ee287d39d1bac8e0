"""`EntryReader`: how a managed ledger's kept entries are read — the shared entry cache first,
then the ledger's bookies through a read handle, or the cold tier for an offloaded ledger
(`ledger.ml_offload.Offloader.read` chooses between S3 and the bookies).

- `read(start, max_entries, max_bytes)` walks positions across kept ledgers up to the view's
  `last_confirmed`. A ledger that fails to read after earlier ones were read ends the read with
  what it has; the error comes from the next read, which starts at the failing ledger (so a
  dispatcher retries it and skips nothing).
- Read handles of closed ledgers are kept, at most `managed_ledger_read_handles_max`, oldest
  dropped first; the current ledger is read through its write handle.

What must hold: `read` returns entries in position order with no gaps between the first and
the last it returns, each the bytes stored at that position; every entry read from storage is
put in the cache under its position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from common.config import Config
from common.errors import StrataError
from common.invariant import present
from ledger.cache import EntryCache
from ledger.handle import ReadHandle, WriteHandle
from ledger.position import Position
from ledger.types import Entry
from ledger.view import KeptLedger, LedgerListView

if TYPE_CHECKING:
    from ledger.client import LedgerClient
    from ledger.ml_offload import Offloader


class EntryReader:
    def __init__(self, name: str, view: LedgerListView, cache: EntryCache, client: LedgerClient, config: Config,
                 offloader: Offloader, current: Callable[[], WriteHandle | None]) -> None:
        self._name = name
        self._view = view
        self._cache = cache
        self._client = client
        self._config = config
        self._offloader = offloader
        self._current = current                      # the managed ledger's current write handle
        self.handles: dict[int, ReadHandle] = {}     # read handles of closed ledgers, oldest first

    async def read(self, start: Position, max_entries: int, *, max_bytes: int | None = None) -> list[Entry]:
        """Entries at/after `start`, up to `last_confirmed`, crossing ledgers; [] if none."""
        out: list[Entry] = []
        total_bytes = 0
        position = Position(*start)
        while len(out) < max_entries:
            normalized = self._normalize(position)
            if normalized is None:
                break
            position = normalized
            kept = present(self._view.find(position.ledger_id), "a normalized position is kept",
                           position=str(position))
            last = min(kept.entries - 1, position.entry_id + max_entries - len(out) - 1)
            try:
                got = await self._read_range(kept, position.entry_id, last)
            except StrataError:
                if out:          # a later ledger failed (S3 down, a corrupt object): deliver what
                    return out   # was read; the next read starts at the failing ledger and fails there
                raise
            for entry_id, data in got:
                if max_bytes is not None and out and total_bytes + len(data) > max_bytes:
                    return out
                out.append(Entry(Position(kept.ledger_id, entry_id), data))
                total_bytes += len(data)
            position = Position(kept.ledger_id, last + 1)
        return out

    def _normalize(self, position: Position) -> Position | None:
        """The first kept, confirmed position at/after `position`; None if there is none yet."""
        first = self._view.first_position
        if position < first:
            position = first
        last = self._view.last_confirmed
        if last.entry_id < 0 or position > last:
            return None
        kept = self._view.find(position.ledger_id)
        if kept is None or position.entry_id >= kept.entries:
            for k in self._view.kept:
                if k.ledger_id > position.ledger_id and k.entries:
                    return Position(k.ledger_id, 0)
            return None
        return Position(position.ledger_id, max(0, position.entry_id))

    async def _read_range(self, kept: KeptLedger, first: int, last: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        entry_id = first
        while entry_id <= last:
            data = self._cache.get(self._name, kept.ledger_id, entry_id)
            if data is not None:
                out.append((entry_id, data))
                entry_id += 1
                continue
            miss_end = entry_id
            while miss_end < last and self._cache.get(self._name, kept.ledger_id, miss_end + 1) is None:
                miss_end += 1
            for got_id, got in await self._fetch(kept, entry_id, miss_end):
                self._cache.put(self._name, kept.ledger_id, got_id, got)
                out.append((got_id, got))
            entry_id = miss_end + 1
        return out

    async def _fetch(self, kept: KeptLedger, first: int, last: int) -> list[tuple[int, bytes]]:
        async def from_bookies() -> list[tuple[int, bytes]]:
            return await (await self.handle_for(kept.ledger_id)).read(first, last)
        if kept.cold is not None:
            return await self._offloader.read(kept, first, last, from_bookies)
        return await from_bookies()

    async def handle_for(self, ledger_id: int) -> ReadHandle:
        """A read handle on `ledger_id`'s bookie copy (the current ledger's writer for it)."""
        current = self._current()
        if current is not None and current.ledger_id == ledger_id:
            return current
        handle = self.handles.get(ledger_id)
        if handle is None:
            handle = await self._client.open_ledger(ledger_id, recover=False)
            if len(self.handles) >= self._config.managed_ledger_read_handles_max:
                self.handles.pop(next(iter(self.handles)))
            self.handles[ledger_id] = handle
        return handle
