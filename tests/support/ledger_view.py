"""An in-memory `LedgerView`: a plain value model of managed-ledger STATE for cursor tests.

It is built from a list of ledgers, each a list of per-entry facts (size, messages, publish
time). It is not a test double of behaviour under test: it only answers the `LedgerView`
questions by brute force over those lists, so cursor arithmetic can be checked against it.

Conventions (those the cursor relies on): `next_position` crosses into the next kept ledger
(even an empty, open one) after the last entry of a ledger, and is `(L, e+1)` past the last entry
of the last ledger; `last_confirmed` is the last entry of the last non-empty ledger, or
`(first ledger, -1)` when nothing is stored. Kafka offsets are each message's index among all
messages ever appended (`first_offset` is the first one's; trimmed messages keep theirs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.errors import InvalidPosition, OffsetOutOfRange
from ledger.position import Position
from ledger.types import EntryMeta, LedgerInfo, LedgerState


@dataclass
class _Ledger:
    ledger_id: int
    entries: list[EntryMeta] = field(default_factory=list)
    state: LedgerState = LedgerState.OPEN
    created_ms: int = 0


class MemoryLedgerView:
    def __init__(self, ledgers: list[list[tuple[int, int, int]]] | None = None, *,
                 name: str = "tenant/ns/persistent/topic", first_ledger_id: int = 1,
                 last_open: bool = True, first_offset: int = 0) -> None:
        """`ledgers`: per ledger, a list of (size_bytes, messages, publish_time_ms)."""
        self.name = name
        self.trimmed_messages = first_offset       # offsets below the first kept ledger's
        self._ledgers: list[_Ledger] = []
        self._next_id = first_ledger_id
        for entries in ledgers or [[]]:
            self.roll()
            for size, messages, publish in entries:
                self.append(size, messages, publish)
        if not last_open:
            self._ledgers[-1].state = LedgerState.CLOSED

    # ---- mutation (what the managed ledger would do) -----------------------------------------

    def roll(self, created_ms: int = 0) -> int:
        if self._ledgers:
            self._ledgers[-1].state = LedgerState.CLOSED
        ledger = _Ledger(self._next_id, created_ms=created_ms)
        self._next_id += 1
        self._ledgers.append(ledger)
        return ledger.ledger_id

    def append(self, size_bytes: int = 100, messages: int = 1, publish_time_ms: int = 0) -> Position:
        ledger = self._ledgers[-1]
        assert ledger.state is LedgerState.OPEN, "append to a closed ledger"
        ledger.entries.append(EntryMeta(size_bytes, messages, publish_time_ms))
        return Position(ledger.ledger_id, len(ledger.entries) - 1)

    def trim(self, before: Position) -> list[int]:
        """Drop every ledger (never the last) whose entries all lie before `before`."""
        dropped = []
        while len(self._ledgers) > 1:
            ledger = self._ledgers[0]
            if Position(ledger.ledger_id, len(ledger.entries) - 1) >= before:
                break
            gone = self._ledgers.pop(0)
            self.trimmed_messages += sum(e.messages for e in gone.entries)
            dropped.append(gone.ledger_id)
        return dropped

    def all_positions(self) -> list[Position]:
        return [Position(kept.ledger_id, e) for kept in self._ledgers for e in range(len(kept.entries))]

    # ---- LedgerView ----------------------------------------------------------------------------

    def ledgers(self) -> list[LedgerInfo]:
        return [LedgerInfo(
            ledger_id=kept.ledger_id, entries=len(kept.entries),
            size_bytes=sum(e.size_bytes for e in kept.entries),
            messages=sum(e.messages for e in kept.entries), state=kept.state, created_ms=kept.created_ms,
            first_publish_ms=kept.entries[0].publish_time_ms if kept.entries else 0,
            last_publish_ms=kept.entries[-1].publish_time_ms if kept.entries else 0,
        ) for kept in self._ledgers]

    @property
    def last_confirmed(self) -> Position:
        for ledger in reversed(self._ledgers):
            if ledger.entries:
                return Position(ledger.ledger_id, len(ledger.entries) - 1)
        return Position(self._ledgers[0].ledger_id, -1)

    @property
    def first_position(self) -> Position:
        for ledger in self._ledgers:
            if ledger.entries:
                return Position(ledger.ledger_id, 0)
        return self.next_position(self.last_confirmed)

    def next_position(self, position: Position) -> Position:
        ledger_id, entry_id = position
        for ledger in self._ledgers:
            if ledger.ledger_id < ledger_id:
                continue
            if ledger.ledger_id == ledger_id:
                if entry_id + 1 < len(ledger.entries):
                    return Position(ledger_id, entry_id + 1)
                continue
            if ledger.entries or ledger is self._ledgers[-1]:
                return Position(ledger.ledger_id, 0)
        return Position(ledger_id, entry_id + 1)

    def entry_meta(self, position: Position) -> EntryMeta:
        for ledger in self._ledgers:
            if ledger.ledger_id == position[0] and 0 <= position[1] < len(ledger.entries):
                return ledger.entries[position[1]]
        raise InvalidPosition("entry not kept", position=str(Position(*position)))

    def entries_between(self, start: Position, end: Position) -> int:
        return sum(1 for p in self.all_positions() if start < p <= end)

    def position_for_publish_time(self, publish_time_ms: int) -> Position:
        for ledger in self._ledgers:
            for entry_id, meta in enumerate(ledger.entries):
                if meta.publish_time_ms >= publish_time_ms:
                    return Position(ledger.ledger_id, entry_id)
        return self.next_position(self.last_confirmed)

    # ---- Kafka offsets, by brute force over every kept message ------------------------------------

    def _offsets(self) -> list[tuple[Position, int, int]]:
        """(position, its first offset, its messages) of every kept entry, in order."""
        out, offset = [], self.trimmed_messages
        for position in self.all_positions():
            messages = self.entry_meta(position).messages
            out.append((position, offset, messages))
            offset += messages
        return out

    @property
    def end_offset(self) -> int:
        return self.trimmed_messages + sum(e.messages for kept in self._ledgers for e in kept.entries)

    @property
    def log_start_offset(self) -> int:
        return self.trimmed_messages

    def offset_of(self, position: Position) -> int:
        for p, offset, _ in self._offsets():
            if p == position:
                return offset
        raise InvalidPosition("entry not kept", position=str(Position(*position)))

    def entry_for_offset(self, offset: int) -> Position:
        if offset == self.end_offset:
            return self.next_position(self.last_confirmed)
        for p, first, messages in self._offsets():
            if first <= offset < first + messages:
                return p
        raise OffsetOutOfRange("offset out of range", offset=offset, start=self.log_start_offset,
                               end=self.end_offset)
