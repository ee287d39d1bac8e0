"""Exact backlog and storage arithmetic: plain functions of cursor state and a `LedgerView`.

Per subscription (cursor S with mark-delete md):
- `backlog_entries` (Pulsar's msgBacklog): entries in (md, last_confirmed] that S has not
  fully acked. A batch entry counts once, even if some of its members are acked.
- `backlog_messages` (precise): the messages of those entries, minus the members of partially
  acked batches that are acked on their own.
- `backlog_bytes` (backlogSize): the stored bytes of those entries (a partially acked batch
  still costs all its bytes).
- `unacked_entries`: entries already dispatched (before the read position) but not acked.
- `state_bytes`, `persisted_bytes`, `state_error`, `persist_error`: the size of the cursor's
  state as last encoded and as last persisted, why acks that add holes are refused (state over
  `cursor_state_bytes_max`), and why the last persist failed (e.g. fenced); None when all is well.

Per topic: `storage_size_bytes` = bytes of every ledger still kept. It exceeds the backlog
because deletion is by whole ledger and by prefix (one hole pins every later ledger), and
because retention keeps acked ledgers on purpose. `kept_ledgers` says, per kept ledger, why.

Cost: per ledger after md, min(#unacked entries, #acked entries + entries before md) calls of
`entry_meta`; ledgers with no ack and no md inside use `LedgerInfo` totals directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from pyroaring import BitMap64

from cursor.ack_state import popcount
from cursor.managed_cursor import ManagedCursor
from cursor.retention import RetentionPolicy, ledgers_to_trim, passes
from ledger.position import Position
from ledger.types import LedgerInfo, LedgerState, LedgerView


@dataclass(frozen=True)
class SubscriptionStats:
    backlog_entries: int             # msgBacklog
    backlog_messages: int            # precise message backlog
    backlog_bytes: int               # backlogSize
    unacked_entries: int             # dispatched, not acked
    individually_acked_entries: int  # fully acked entries above mark-delete (the holes' other side)
    partial_batches: int             # entries with some batch members acked
    mark_delete_position: Position
    read_position: Position
    state_bytes: int = 0               # cursor state as last encoded (persisted or not)
    persisted_bytes: int = 0           # the value last persisted (or loaded)
    state_error: str | None = None     # state over cursor_state_bytes_max: holes are refused
    persist_error: str | None = None   # the last persist failure (fenced, store down, too large)


class KeptLedger(NamedTuple):
    ledger_id: int
    size_bytes: int
    reasons: tuple[str, ...]


def _confirmed_entries(info: LedgerInfo, lac: Position) -> int:
    if info.ledger_id > lac[0]:
        return 0
    if info.ledger_id == lac[0]:
        return min(info.entries, lac[1] + 1)
    return info.entries


def _unacked_in_ledger(cursor: ManagedCursor, view: LedgerView, info: LedgerInfo,
                       lac: Position) -> tuple[int, int, int]:
    """(entries, messages, bytes) of the entries of one ledger the cursor has not fully acked."""
    md = cursor.mark_delete_position
    count = _confirmed_entries(info, lac)
    if info.ledger_id < md[0]:
        return 0, 0, 0
    start = md[1] + 1 if info.ledger_id == md[0] else 0
    if start >= count:
        return 0, 0, 0
    acked = cursor.acked_ledgers.get(info.ledger_id)
    n_acked = len(acked) if acked is not None else 0
    unacked = count - start - n_acked
    if unacked == 0:
        return 0, 0, 0
    ledger_id = info.ledger_id
    if unacked <= start + n_acked + (info.entries - count):
        messages = size = 0
        remaining = BitMap64()
        remaining.add_range(start, count)
        if acked is not None:
            remaining -= acked
        for entry_id in remaining:
            meta = view.entry_meta(Position(ledger_id, entry_id))
            messages += meta.messages
            size += meta.size_bytes
        return unacked, messages, size
    messages, size = info.messages, info.size_bytes
    excluded = list(range(0, start)) + list(range(count, info.entries)) + (list(acked) if acked else [])
    for entry_id in excluded:
        meta = view.entry_meta(Position(ledger_id, entry_id))
        messages -= meta.messages
        size -= meta.size_bytes
    return unacked, messages, size


def backlog(cursor: ManagedCursor, view: LedgerView) -> tuple[int, int, int]:
    """(backlog_entries, backlog_messages, backlog_bytes), exact."""
    lac = view.last_confirmed
    entries = messages = size = 0
    for info in view.ledgers():
        e, m, b = _unacked_in_ledger(cursor, view, info, lac)
        entries, messages, size = entries + e, messages + m, size + b
    for position, batch in cursor.partial_batches.items():
        acked_members = batch.batch_size - popcount(batch.remaining)
        messages -= min(acked_members, view.entry_meta(position).messages)
    return entries, messages, size


def unacked_entries(cursor: ManagedCursor, view: LedgerView) -> int:
    """Entries in (mark-delete, read position) that are not acked: dispatched, awaiting ack."""
    md, read = cursor.mark_delete_position, cursor.read_position
    if read <= md:
        return 0
    total = view.entries_between(md, Position(read[0], read[1] - 1))
    for ledger_id, acked in cursor.acked_ledgers.items():
        if ledger_id < read[0]:
            total -= len(acked)
        elif ledger_id == read[0] and read[1] > 0:
            total -= acked.rank(read[1] - 1)
    return total


def subscription_stats(cursor: ManagedCursor, view: LedgerView) -> SubscriptionStats:
    entries, messages, size = backlog(cursor, view)
    return SubscriptionStats(
        backlog_entries=entries, backlog_messages=messages, backlog_bytes=size,
        unacked_entries=unacked_entries(cursor, view),
        individually_acked_entries=cursor.individually_acked_count(),
        partial_batches=len(cursor.partial_batches),
        mark_delete_position=cursor.mark_delete_position, read_position=cursor.read_position,
        state_bytes=cursor.state_limit.measured_bytes, persisted_bytes=cursor.persisted_bytes,
        state_error=_text(cursor.state_error), persist_error=_text(cursor.persist_error))


def _text(error: Exception | None) -> str | None:
    return None if error is None else str(error)


def storage_size_bytes(view: LedgerView) -> int:
    """Bytes of every ledger the topic still keeps (Pulsar's storageSize)."""
    return sum(info.size_bytes for info in view.ledgers())


def kept_ledgers(view: LedgerView, cursors: Iterable[ManagedCursor], retention: RetentionPolicy,
                 now_ms: int) -> list[KeptLedger]:
    """Every kept ledger, oldest first, with why it is kept. `cursors` are those that hold data
    (the broker passes its durable subscriptions, not readers).

    Reasons (a ledger may have several; in this order):
    - "open": the ledger takes appends; it is never trimmed.
    - "backlog of S": the ledger holds at least one entry subscription S has not acked (an
      empty ledger counts when S's mark-delete is before it: it lies in S's unread range).
    - "ack hole of S": every entry of the ledger is acked by S, yet S's mark-delete is before
      the ledger's last entry: an earlier unacked entry of S (a hole) pins it, because ledgers
      are trimmed only as a prefix, up to the slowest mark-delete.
    - "retention": every given cursor has passed the ledger, and the retention policy
      (time and size, see cursor.retention) keeps it.
    - "last ledger": a closed ledger that is the last one (a closed managed ledger); never
      trimmed, so that a position after it stays defined.
    An empty tuple means nothing keeps the ledger: the next retention pass trims it.
    """
    durable = list(cursors)
    infos = view.ledgers()
    lac = view.last_confirmed
    trimmed = set(ledgers_to_trim(view, durable, retention, now_ms))
    out: list[KeptLedger] = []
    for index, info in enumerate(infos):
        reasons: list[str] = []
        if info.state is LedgerState.OPEN:
            reasons.append("open")
        for cursor in durable:
            if passes(cursor, info):
                continue
            unacked, _, _ = _unacked_in_ledger(cursor, view, info, lac)
            if unacked or info.entries == 0:
                reasons.append(f"backlog of {cursor.name}")
            else:
                reasons.append(f"ack hole of {cursor.name}")
        if not reasons:
            if index == len(infos) - 1:
                reasons.append("last ledger")
            elif info.ledger_id not in trimmed:
                reasons.append("retention")
        out.append(KeptLedger(info.ledger_id, info.size_bytes, tuple(reasons)))
    return out
