"""A topic's compacted view as readers see it: the compacted ledger of its record, read by position.

`read_from(position, n)` answers up to `n` compacted entries whose original position is at or
after `position` (the view is sorted by original position). Finding where to start is a binary
search over the compacted ledger's entries (each probe reads one entry's header), except when
the position continues an earlier read: the entry after each entry handed out is remembered
(`_next_of`, bounded), so a reader going through the view in order never searches again.

The read handle is opened without recovery (the ledger is closed). The view is immutable: a new
compaction installs a new `CompactedView`; readers in the middle of the old one go on in the new
one from their position, which gives the newest value of every key not yet passed.

What must hold: entries come back in original-position order, each at most once per call, never
before `position`; `horizon` is the last topic position covered.
"""

from __future__ import annotations

from collections import OrderedDict

from broker.compaction import format as fmt
from broker.compaction.record import CompactionRecord
from common.invariant import present
from ledger.handle import ReadHandle
from ledger.position import Position
from ledger.types import Entry

NEXT_CACHE_MAX = 8192          # remembered "next compacted entry" links


class CompactedView:
    def __init__(self, record: CompactionRecord, handle: ReadHandle | None) -> None:
        self.record = record
        self.handle = handle                 # None: the compacted ledger is empty
        self._next_of: OrderedDict[Position, int] = OrderedDict()  # position after an entry -> next entry id

    @property
    def horizon(self) -> Position:
        return self.record.horizon

    @property
    def ledger_id(self) -> int:
        return self.record.ledger_id

    @property
    def entries(self) -> int:
        return self.record.entries

    async def _position_at(self, entry_id: int) -> Position:
        handle = present(self.handle, "a view with entries has a read handle", ledger_id=self.ledger_id)
        got = await handle.read(entry_id, entry_id)
        return fmt.decode_position(got[0][1])

    async def _first_at_or_after(self, position: Position) -> int:
        """Entry id of the first compacted entry at/after `position` (entries when none)."""
        known = self._next_of.get(position)
        if known is not None:
            return known
        lo, hi = 0, self.entries
        while lo < hi:
            mid = (lo + hi) // 2
            if await self._position_at(mid) < position:
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def read_from(self, position: Position, max_entries: int) -> list[tuple[Entry, list[int] | None]]:
        """Up to `max_entries` (entry with its original position, mask) at/after `position`."""
        if self.handle is None or self.entries == 0 or position > self.horizon:
            return []
        first = await self._first_at_or_after(position)
        if first >= self.entries:
            return []
        last = min(self.entries - 1, first + max(1, max_entries) - 1)
        out = []
        for entry_id, raw in await self.handle.read(first, last):
            orig, mask, data = fmt.decode(raw)
            out.append((Entry(orig, data), mask))
            self._remember(Position(orig.ledger_id, orig.entry_id + 1), entry_id + 1)
        return out

    def _remember(self, after: Position, entry_id: int) -> None:
        self._next_of[after] = entry_id
        if len(self._next_of) > NEXT_CACHE_MAX:
            self._next_of.popitem(last=False)

    async def read_all(self, batch_entries: int = 256):
        """Every compacted entry in order: (original position, mask, data) (compaction's input)."""
        if self.handle is None:
            return
        entry_id = 0
        while entry_id < self.entries:
            last = min(self.entries - 1, entry_id + batch_entries - 1)
            for _eid, raw in await self.handle.read(entry_id, last):
                yield fmt.decode(raw)
            entry_id = last + 1
