"""Retention: which whole ledgers a topic may delete, with Pulsar's meanings of (time, size).

A ledger is *passed* by a cursor when every entry of it is at or before the cursor's mark-delete.
Every cursor passed in counts: the caller passes those that hold data (the broker passes its
durable subscriptions; a reader's non-durable cursor should not pin storage). The trim candidates
are the longest prefix of kept ledgers that every given cursor has passed, never the last ledger
and never an OPEN one (with no cursor, every closed ledger but the last is a candidate: a topic
without subscriptions keeps data only as retention allows).

Walking the candidates oldest first, a ledger is trimmed when retention no longer holds it:
- time: `time_minutes >= 0` and its age (now - its last publish time, or creation time when
  empty) is at least `time_minutes`; `-1` = no time bound ever expires it;
- size: `size_mb >= 0` and the topic's stored bytes (all kept ledgers, minus those already
  chosen for trimming) exceed `size_mb` MiB; `-1` = no size bound;
and it is trimmed when EITHER bound says so. The walk stops at the first ledger kept, so trimming
stays a prefix. Hence: (0, 0) trims as soon as every cursor has passed; (-1, -1) never trims;
(-1, >0) bounds size only; (>0, -1) bounds time only. A 0 not paired with another 0 is
`InvalidRetention`, as Pulsar refuses it: with a positive value it would mean both "keep nothing"
and "keep some"; with -1 ((0, -1), (-1, 0)) it would mean both "keep nothing" and "keep forever".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from common.errors import InvalidRetention
from common.invariant import invariant
from ledger.position import Position
from ledger.types import LedgerInfo, LedgerState, LedgerView

if TYPE_CHECKING:
    from cursor.managed_cursor import ManagedCursor

MIB = 1024 * 1024
MS_PER_MINUTE = 60_000


@dataclass(frozen=True)
class RetentionPolicy:
    time_minutes: int  # keep passed ledgers this long; -1 forever, 0 not at all (only with size 0)
    size_mb: int       # keep passed ledgers while the topic is at most this big; -1 unbounded,
                       # 0 none (only with time 0)

    def __post_init__(self) -> None:
        for name, value in (("time_minutes", self.time_minutes), ("size_mb", self.size_mb)):
            if not isinstance(value, int) or value < -1:
                raise InvalidRetention(f"retention {name} must be an int >= -1", value=value)
        if (self.time_minutes == 0) != (self.size_mb == 0):
            raise InvalidRetention("retention: 0 is valid only paired with 0",
                                   time_minutes=self.time_minutes, size_mb=self.size_mb)


def passes(cursor: ManagedCursor, info: LedgerInfo) -> bool:
    """True if every entry of the ledger is at or before the cursor's mark-delete."""
    md = cursor.mark_delete_position
    return info.ledger_id < md[0] or (info.ledger_id == md[0] and md[1] >= info.entries - 1)


def trim_candidates(view: LedgerView, cursors: Iterable[ManagedCursor]) -> list[LedgerInfo]:
    cursors = list(cursors)
    infos = view.ledgers()
    out = []
    for info in infos[:-1]:
        if info.state is LedgerState.OPEN or not all(passes(c, info) for c in cursors):
            break
        out.append(info)
    return out


def ledgers_to_trim(view: LedgerView, cursors: Iterable[ManagedCursor], policy: RetentionPolicy,
                    now_ms: int) -> list[int]:
    """Ids of the ledgers to delete now, oldest first (a prefix of the kept ledgers)."""
    total_bytes = sum(info.size_bytes for info in view.ledgers())
    time_ms = policy.time_minutes * MS_PER_MINUTE
    size_bytes = policy.size_mb * MIB
    chosen_bytes = 0
    out = []
    for info in trim_candidates(view, cursors):
        stamp_ms = info.last_publish_ms if info.entries else info.created_ms
        expired = policy.time_minutes >= 0 and now_ms - stamp_ms >= time_ms
        over_size = policy.size_mb >= 0 and (size_bytes == 0 or total_bytes - chosen_bytes > size_bytes)
        if not (expired or over_size):
            break
        out.append(info.ledger_id)
        chosen_bytes += info.size_bytes
    return out


def trim_position(view: LedgerView, cursors: Iterable[ManagedCursor], policy: RetentionPolicy,
                  now_ms: int) -> Position | None:
    """The `before` to pass to `ManagedLedger.trim()`: the first entry of the first ledger that
    stays, so exactly the chosen ledgers lie wholly before it. None when nothing is to trim."""
    chosen = ledgers_to_trim(view, cursors, policy, now_ms)
    if not chosen:
        return None
    for info in view.ledgers():
        if info.ledger_id > chosen[-1]:
            return Position(info.ledger_id, 0)
    invariant(False, "the last ledger is never trimmed", chosen=chosen)
    return None


class Trimmable(Protocol):
    async def trim(self, before: Position) -> object: ...


async def apply_retention(ledger: Trimmable, view: LedgerView, cursors: Iterable[ManagedCursor],
                          policy: RetentionPolicy, now_ms: int) -> list[int]:
    """Decide and call `ledger.trim()`; returns the ids chosen for trimming."""
    cursors = list(cursors)
    chosen = ledgers_to_trim(view, cursors, policy, now_ms)
    before = trim_position(view, cursors, policy, now_ms)
    if before is not None:
        await ledger.trim(before)
    return chosen
