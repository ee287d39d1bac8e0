"""Value types shared by the managed ledger and the cursors above it.

`LedgerView` is the read-only face of a managed ledger that cursor arithmetic (backlog, storage
size, TTL, retention) needs. `ledger.managed_ledger.ManagedLedger` implements it; cursor code
depends only on this Protocol, so the arithmetic stays a plain function of cursor and ledger state.

Per-entry facts (`EntryMeta`) are given by the broker at append time: the managed ledger does not
parse Pulsar metadata, it only records the size, the number of messages in the entry (a client
batch counts as its messages) and the publish time, so backlog in messages and bytes, TTL and
seek-by-time never need to read entries back.

Kafka offsets: an offset is a message's index in the managed ledger (the first message ever
stored has offset 0; an entry of n messages covers n offsets). They survive rollovers, trims,
offloads, restarts and takeovers; `ledger.view` says how they are kept.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from ledger.position import Position


class LedgerState(enum.Enum):
    OPEN = "open"            # the managed ledger's current ledger, taking appends
    CLOSED = "closed"        # sealed: last entry id and length are final
    OFFLOADED = "offloaded"  # sealed and copied to the cold tier (bookie copy may be gone)


@dataclass(frozen=True)
class LedgerInfo:
    ledger_id: int
    entries: int             # number of entries (0 for an empty ledger)
    size_bytes: int          # sum of entry payload sizes
    messages: int            # sum of messages over entries
    state: LedgerState
    created_ms: int          # wall time the ledger was created
    first_publish_ms: int    # publish time of its first entry (0 if empty)
    last_publish_ms: int     # publish time of its last entry (0 if empty)


@dataclass(frozen=True)
class EntryMeta:
    size_bytes: int
    messages: int
    publish_time_ms: int


class LedgerView(Protocol):
    """What a cursor may know about the ledger it walks."""

    name: str

    def ledgers(self) -> list[LedgerInfo]:
        """Every ledger still kept, oldest first; the last one may be OPEN."""
        ...

    @property
    def last_confirmed(self) -> Position:
        """Position of the last durably appended entry; `(first ledger, -1)` when empty."""
        ...

    @property
    def first_position(self) -> Position:
        """The first entry still kept (after trims); equals next_position(last_confirmed) when
        nothing is kept."""
        ...

    def next_position(self, position: Position) -> Position:
        """The position right after `position` (may cross into the next ledger, or be one past
        the last confirmed entry)."""
        ...

    def entry_meta(self, position: Position) -> EntryMeta:
        """Facts about one stored entry; raises InvalidPosition if it is not kept."""
        ...

    def entries_between(self, start: Position, end: Position) -> int:
        """Number of kept entries p with start < p <= end."""
        ...

    def position_for_publish_time(self, publish_time_ms: int) -> Position:
        """The first kept entry whose publish time is >= publish_time_ms; one past the end if none."""
        ...

    @property
    def log_start_offset(self) -> int:
        """Kafka offset of the first kept message; equals end_offset when nothing is kept."""
        ...

    @property
    def end_offset(self) -> int:
        """One past the last confirmed message's Kafka offset (log end offset, high watermark)."""
        ...

    def offset_of(self, position: Position) -> int:
        """Kafka offset of the first message of the kept entry at `position`; raises
        InvalidPosition if it is not kept."""
        ...

    def entry_for_offset(self, offset: int) -> Position:
        """The kept entry whose messages include `offset` (the first entry after it if it falls
        in a gap); `next_position(last_confirmed)` when offset == end_offset; raises
        OffsetOutOfRange below log_start_offset or past end_offset."""
        ...


@dataclass(frozen=True)
class Entry:
    """One stored entry as a managed-ledger read returns it."""

    position: Position
    data: bytes
