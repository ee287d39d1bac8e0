"""`LedgerListView`: the `LedgerView` answers over a managed ledger's kept ledgers and indexes.

The managed ledger keeps, per ledger still stored, a `KeptLedger` (id, state, creation time and
its `EntryIndex` of *confirmed* entries; for an offloaded ledger also its cold copy and whether
the bookie copy is gone, which decide where its entries are read from). This class answers every
cursor question from those alone, never reading an entry. Conventions (shared with tests/support/ledger_view.py):
- `next_position` after the last entry of a ledger crosses to the next kept ledger that has
  entries or is the last one (the open ledger, even empty); past the very end it is `(L, e+1)`.
- `last_confirmed` is the last entry of the last non-empty ledger, `(first ledger, -1)` if none.

Kafka offsets: an offset is a message's index in the managed ledger (the first message ever
stored is 0); an entry of n messages covers [its offset, its offset + n). Each kept ledger has
its `first_offset` (persisted in its record, `ledger.ml_metadata`), and its index a running
message count (`EntryIndex.msg_end`), so offset -> ledger is a bisect over `_firsts` and offset
-> entry a bisect in that ledger's index: O(log ledgers + log entries). The open ledger's index
grows as entries are confirmed, so `end_offset` moves exactly then. Gaps between ledgers are
allowed (none is made today): an offset in one maps to the next entry after it.

What must hold: ledger ids strictly increase; only the last ledger may be OPEN; first offsets
never decrease along the kept ledgers (the exact chain, by the records' message counts, is
checked on the persisted records).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from common.errors import InvalidPosition, OffsetOutOfRange
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
    first_offset: int = 0                         # Kafka offset of its first message (its record's)

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
        self._firsts: list[int] = []          # first offsets of `kept`, for bisect

    # --- mutation by the managed ledger ----------------------------------------------------------

    def add(self, ledger: KeptLedger) -> None:
        invariant(not self._ids or ledger.ledger_id > self._ids[-1], "ledger ids strictly increase",
                  new=ledger.ledger_id, last=self._ids[-1] if self._ids else None)
        invariant(all(k.state is not LedgerState.OPEN for k in self.kept), "only the last ledger is open")
        invariant(ledger.first_offset >= 0 and (not self._firsts or ledger.first_offset >= self._firsts[-1]),
                  "first offsets never decrease", new=ledger.first_offset,
                  last=self._firsts[-1] if self._firsts else None, ledger_id=ledger.ledger_id)
        self.kept.append(ledger)
        self._ids.append(ledger.ledger_id)
        self._firsts.append(ledger.first_offset)

    def remove(self, ledger_ids: set[int]) -> None:
        self.kept = [k for k in self.kept if k.ledger_id not in ledger_ids]
        self._ids = [k.ledger_id for k in self.kept]
        self._firsts = [k.first_offset for k in self.kept]

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

    # --- Kafka offsets ---------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """One past the last confirmed message's offset (0 when no ledger is kept)."""
        if not self.kept:
            return 0
        last = self.kept[-1]
        return last.first_offset + last.index.total_messages

    @property
    def log_start_offset(self) -> int:
        """The offset of the first kept message; end_offset when nothing is kept."""
        for k in self.kept:
            if k.entries:
                return k.first_offset
        return self.end_offset

    def offset_of(self, position: Position) -> int:
        """The offset of the first message of the kept entry at `position`."""
        k = self.find(position[0])
        if k is None or not 0 <= position[1] < k.entries:
            raise InvalidPosition("entry not kept", position=str(Position(*position)))
        return k.first_offset + k.index.messages_before(position[1])

    def entry_for_offset(self, offset: int) -> Position:
        """The kept entry whose messages include `offset`; at end_offset, the position the next
        entry will get; OffsetOutOfRange below log_start_offset or past end_offset."""
        start, end = self.log_start_offset, self.end_offset
        if offset == end:
            return self.next_position(self.last_confirmed)
        if not start <= offset < end:
            raise OffsetOutOfRange("offset out of range", offset=offset, start=start, end=end)
        i = bisect.bisect_right(self._firsts, offset) - 1     # the last ledger starting at or before it
        k = self.kept[i]
        entry = k.index.entry_of_message(offset - k.first_offset)
        if entry < k.entries:
            return Position(k.ledger_id, entry)
        return self.next_position(Position(k.ledger_id, k.entries - 1))   # in a gap after ledger i
