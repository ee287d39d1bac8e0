"""`LedgerListView`: the `LedgerView` answers over a managed ledger's kept ledgers and indexes.

The managed ledger keeps, per ledger still stored, a `KeptLedger` (id, state, creation time and
its `EntryIndex` of *confirmed* entries; for an offloaded ledger also its cold copy and whether
the bookie copy is gone, which decide where its entries are read from). This class answers every
cursor question from those alone, never reading an entry. Conventions (shared with tests/support/ledger_view.py):
- `next_position` after the last entry of a ledger crosses to the next kept ledger that has
  entries or is the last one (the open ledger, even empty); past the very end it is `(L, e+1)`.
- `last_confirmed` is the last entry of the last non-empty ledger, `(first ledger, -1)` if none.

What must hold: ledger ids strictly increase; only the last ledger may be OPEN.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from common.errors import InvalidPosition
from common.invariant import invariant
from ledger.cold import ColdCopy
from ledger.entry_index import EntryIndex
from ledger.position import Position
from ledger.types import EntryMeta, LedgerInfo, LedgerState


@dataclass
class KeptLedger:
    ledger_id: int
    state: LedgerState
    created_ms: int
    index: EntryIndex
    cold: ColdCopy | None = None                  # its complete cold copy (state OFFLOADED); None = bookies only
    bookie_deleted: bool = False                  # the bookie copy is gone: read only from `cold`

    @property
    def entries(self) -> int:
        return len(self.index)

    def info(self) -> LedgerInfo:
        idx = self.index
        return LedgerInfo(ledger_id=self.ledger_id, entries=len(idx), size_bytes=idx.total_bytes,
                          messages=idx.total_messages, state=self.state, created_ms=self.created_ms,
                          first_publish_ms=idx.first_publish_ms, last_publish_ms=idx.last_publish_ms)


class LedgerListView:
    def __init__(self, name: str) -> None:
        self.name = name
        self.kept: list[KeptLedger] = []      # oldest first
        self._ids: list[int] = []             # ledger ids of `kept`, for bisect

    # --- mutation by the managed ledger ----------------------------------------------------------

    def add(self, ledger: KeptLedger) -> None:
        invariant(not self._ids or ledger.ledger_id > self._ids[-1], "ledger ids strictly increase",
                  new=ledger.ledger_id, last=self._ids[-1] if self._ids else None)
        invariant(all(k.state is not LedgerState.OPEN for k in self.kept), "only the last ledger is open")
        self.kept.append(ledger)
        self._ids.append(ledger.ledger_id)

    def remove(self, ledger_ids: set[int]) -> None:
        self.kept = [k for k in self.kept if k.ledger_id not in ledger_ids]
        self._ids = [k.ledger_id for k in self.kept]

    def find(self, ledger_id: int) -> KeptLedger | None:
        i = bisect.bisect_left(self._ids, ledger_id)
        if i < len(self._ids) and self._ids[i] == ledger_id:
            return self.kept[i]
        return None

    # --- LedgerView ------------------------------------------------------------------------------

    def ledgers(self) -> list[LedgerInfo]:
        return [k.info() for k in self.kept]

    @property
    def last_confirmed(self) -> Position:
        for k in reversed(self.kept):
            if k.entries:
                return Position(k.ledger_id, k.entries - 1)
        return Position(self.kept[0].ledger_id if self.kept else 0, -1)

    @property
    def first_position(self) -> Position:
        for k in self.kept:
            if k.entries:
                return Position(k.ledger_id, 0)
        return self.next_position(self.last_confirmed)

    def next_position(self, position: Position) -> Position:
        ledger_id, entry_id = position
        start = bisect.bisect_left(self._ids, ledger_id)
        for i in range(start, len(self.kept)):
            k = self.kept[i]
            if k.ledger_id == ledger_id:
                if entry_id + 1 < k.entries:
                    return Position(ledger_id, entry_id + 1)
                continue
            if k.entries or i == len(self.kept) - 1:
                return Position(k.ledger_id, 0)
        return Position(ledger_id, entry_id + 1)

    def entry_meta(self, position: Position) -> EntryMeta:
        k = self.find(position[0])
        if k is None or not 0 <= position[1] < k.entries:
            raise InvalidPosition("entry not kept", position=str(Position(*position)))
        i = position[1]
        return EntryMeta(k.index.sizes[i], k.index.messages[i], k.index.publish_ms[i])

    def entries_between(self, start: Position, end: Position) -> int:
        total = 0
        for k in self.kept:
            if k.ledger_id < start[0] or k.ledger_id > end[0]:
                continue
            lo = start[1] + 1 if k.ledger_id == start[0] else 0
            hi = end[1] if k.ledger_id == end[0] else k.entries - 1
            lo, hi = max(lo, 0), min(hi, k.entries - 1)
            if hi >= lo:
                total += hi - lo + 1
        return total

    def position_for_publish_time(self, publish_time_ms: int) -> Position:
        for k in self.kept:
            if k.entries and k.index.publish_max[-1] >= publish_time_ms:
                return Position(k.ledger_id, k.index.first_at_or_after(publish_time_ms))
        return self.next_position(self.last_confirmed)
