"""Why a topic's storage is bigger than its backlog: every kept ledger, what keeps it, when it goes.

`explain(view, cursors, facts, now_ms)` is a plain function of a managed ledger (its
`LedgerView`), the durable subscriptions' cursors and the facts the admin handler read for it
(effective policies, config, each ledger's record and bookie ensemble); `explain_topic` applies
it to a loaded `PersistentTopic`; `to_json` gives the REST answer
(`GET /admin/v2/persistent/{t}/{ns}/{topic}/explain-storage`, `broker.admin.explain`).

Per ledger, oldest first: entries, bytes, state, where it lives (the bookies of its ensembles,
and for an offloaded ledger its object `s3://bucket/key`), its publish-time span, what keeps it
(`keptBy`: the open ledger, the last ledger, each durable subscription whose mark-delete sits in
or before it with its unacked entries there and its ack-hole count, the retention policy, the
offload deletion lag for the bookie copy of an offloaded ledger, or nothing: trimmed at the next
retention pass), and when it goes if nothing changes (`goesAtMs`, null = not by itself: it waits
for an ack, a rollover, or never; `goes` says which). Ledgers go only as a prefix, so a ledger
goes no earlier than the one before it. Times are the earliest moment the condition holds; the
deletion happens at the retention pass after it (every `broker_retention_check_interval_ms`).

The decomposition splits `storageSize` (the bytes of every kept ledger, offloaded ones
included; `cursor.stats.storage_size_bytes`) into six parts, ledger by ledger:
- unconsumedBacklog: entries some durable subscription has not acked (the union over
  subscriptions, so with several it can exceed the topic's backlogSize, the largest one's);
- the rest of the ledger (acked by every durable subscription) goes to the first that applies:
  openLedger (the open ledger, or a closed last ledger: never trimmed), offloaded (state
  offloaded), ackedButPinned (a subscription's mark-delete is before the ledger's end: an ack
  hole, or a partly consumed ledger, since ledgers are deleted whole), retainedByPolicy (the
  retention policy keeps it), awaitingTrim (nothing keeps it: the next retention pass trims it).
A ledger split between the backlog and another part is apportioned BY ENTRIES (bytes * unacked
entries // entries; the other part gets the remainder), so no entry is read back.

What must hold: for every ledger its parts sum to its size_bytes, hence the decomposition sums
exactly to storage_size_bytes (checked by `invariant`); the analysis reads nothing, awaits
nothing and changes nothing, so one call sees one consistent state of the topic.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from broker.offload_policy import OffloadPolicy
from common.errors import InvalidPosition
from common.human import human_bytes
from common.invariant import invariant
from cursor.retention import MIB, MS_PER_MINUTE, RetentionPolicy, ledgers_to_trim, passes
from cursor.stats import backlog, storage_size_bytes
from ledger.ml_metadata import LedgerRecord
from ledger.position import Position
from ledger.types import LedgerInfo, LedgerState, LedgerView

if TYPE_CHECKING:
    from broker.topic import PersistentTopic
    from cursor.managed_cursor import ManagedCursor

# The decomposition's parts, in the order they are shown (JSON name, label for people).
UNCONSUMED = "unconsumedBacklog"
PINNED = "ackedButPinned"
RETAINED = "retainedByPolicy"
OPEN = "openLedger"
OFFLOADED = "offloaded"
AWAITING_TRIM = "awaitingTrim"
CATEGORIES: tuple[tuple[str, str], ...] = (
    (UNCONSUMED, "unconsumed backlog"),
    (PINNED, "acked but pinned (ack holes, partly consumed ledgers)"),
    (RETAINED, "retained by policy"),
    (OPEN, "open ledger"),
    (OFFLOADED, "offloaded"),
    (AWAITING_TRIM, "awaiting the next retention pass"),
)


# --- inputs ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """The broker settings the explanation quotes (from `common.config.Config`)."""
    rollover_entries: int            # managed_ledger_rollover_entries
    rollover_bytes: int              # managed_ledger_rollover_bytes
    rollover_age_ms: int             # managed_ledger_rollover_age_ms
    rollover_min_age_ms: int         # managed_ledger_rollover_min_age_ms
    retention_check_interval_ms: int  # broker_retention_check_interval_ms
    s3_bucket: str                   # offload_s3_bucket ("" when there is no cold tier)

    @classmethod
    def of(cls, config) -> Settings:
        return cls(config.managed_ledger_rollover_entries, config.managed_ledger_rollover_bytes,
                   config.managed_ledger_rollover_age_ms, config.managed_ledger_rollover_min_age_ms,
                   config.broker_retention_check_interval_ms,
                   config.offload_s3_bucket if config.offload_driver else "")


@dataclass(frozen=True)
class StorageFacts:
    """What the admin handler read for the analysis (effective policies, records, ensembles)."""
    retention: RetentionPolicy
    ttl_seconds: int                                  # effective message TTL; 0 = off
    offload: OffloadPolicy
    settings: Settings
    records: Mapping[int, LedgerRecord] = field(default_factory=dict)   # ledger id -> its ML record
    bookies: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # ledger id -> its bookies


# --- outputs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Keeper:
    """One reason a ledger (or, for "offloadDeletionLag", its bookie copy) is kept."""
    kind: str                  # open | lastLedger | subscription | retention | offloadDeletionLag | nothing
    detail: str                # one line for people
    subscription: str | None = None   # kind "subscription": its name
    unacked_entries: int = 0   # kind "subscription": its unacked entries in this ledger
    ack_holes: int = 0         # kind "subscription": its ack holes over the whole topic


@dataclass(frozen=True)
class LedgerExplanation:
    ledger_id: int
    entries: int
    size_bytes: int
    state: str                         # open | closed | offloaded
    created_ms: int
    first_publish_ms: int              # 0 when empty
    last_publish_ms: int               # 0 when empty
    bookies: tuple[str, ...]           # bookies of its ensembles; () when the bookie copy is gone
    bookie_copy: bool                  # False once the deletion lag removed it (read from S3)
    s3_key: str | None                 # offloaded: the object's key; None otherwise
    offloaded_ms: int | None           # offloaded: when the upload completed
    unacked_entries: int               # entries some durable subscription has not acked
    kept_by: tuple[Keeper, ...]
    goes_at_ms: int | None             # earliest time it can go; None: waits for an ack/rollover/never
    goes: str                          # when it goes, for people
    bookie_copy_goes_at_ms: int | None  # offloaded, bookie copy still there, lag >= 0: when it goes
    parts: Mapping[str, int]           # category -> bytes; sums to size_bytes


@dataclass(frozen=True)
class SubscriptionExplanation:
    name: str
    mark_delete: Position
    backlog_entries: int               # msgBacklog (exact)
    backlog_messages: int              # messages of those entries (batch members acked on their own excluded)
    backlog_bytes: int                 # backlogSize (exact)
    ack_holes: int                     # unacked entries below its highest individually acked one
    oldest_unacked: Position | None    # the entry after its mark-delete; None: nothing unacked
    oldest_unacked_publish_ms: int | None
    pinned_ledgers: int                # closed ledgers it has not passed (its mark-delete is before their end)
    pinned_bytes: int                  # their bytes
    pinned_acked_bytes: int            # the part of them it has acked (apportioned by entries)


@dataclass(frozen=True)
class Part:
    category: str
    label: str
    size_bytes: int
    percent: float                     # of storage_size_bytes, rounded to 0.01
    ledgers: int                       # ledgers with bytes in this part


@dataclass(frozen=True)
class StorageExplanation:
    topic: str
    now_ms: int
    storage_size_bytes: int
    backlog_size_bytes: int            # the topic's backlogSize: the largest durable subscription's
    retention: RetentionPolicy
    ttl_seconds: int
    offload_deletion_lag_ms: int
    settings: Settings
    ledgers: tuple[LedgerExplanation, ...]
    subscriptions: tuple[SubscriptionExplanation, ...]
    decomposition: tuple[Part, ...]
    advice: tuple[str, ...]


# --- the analysis ----------------------------------------------------------------------------------

def explain_topic(topic: PersistentTopic, facts: StorageFacts, now_ms: int) -> StorageExplanation:
    """`explain` over a loaded topic: its managed ledger and its durable, open subscriptions
    (a reader's non-durable cursor pins nothing, as in the retention pass)."""
    cursors = [sub.cursor for sub in list(topic.subscriptions.values()) if sub.durable and not sub.closed]
    return explain(str(topic.name), topic.ml, cursors, facts, now_ms)


@dataclass(frozen=True)
class _Walk:
    """What every ledger's explanation needs, computed once per call."""
    view: LedgerView
    cursors: Sequence[ManagedCursor]
    facts: StorageFacts
    now_ms: int
    unacked: Mapping[str, Mapping[int, BitMap64]]   # subscription -> ledger id -> unacked entry ids
    holes: Mapping[str, int]                        # subscription -> its ack holes
    trimmable: frozenset[int]                       # ledgers the next retention pass trims
    total_bytes: int


def explain(topic_name: str, view: LedgerView, cursors: Sequence[ManagedCursor], facts: StorageFacts,
            now_ms: int) -> StorageExplanation:
    """The whole explanation of one managed ledger as it is now (see the module docstring)."""
    infos = view.ledgers()
    lac = view.last_confirmed
    unacked = {c.name: unacked_by_ledger(c, infos, lac) for c in cursors}
    walk = _Walk(view, cursors, facts, now_ms, unacked,
                 {c.name: ack_holes(c, unacked[c.name]) for c in cursors},
                 frozenset(ledgers_to_trim(view, cursors, facts.retention, now_ms)), storage_size_bytes(view))
    ledgers: list[LedgerExplanation] = []
    bytes_before = 0
    previous: LedgerExplanation | None = None
    for index, info in enumerate(infos):
        ledger = _explain_ledger(walk, info, index == len(infos) - 1, bytes_before, previous)
        ledgers.append(ledger)
        bytes_before += info.size_bytes
        previous = ledger
    subscriptions = tuple(_explain_subscription(walk, c, infos) for c in cursors)
    decomposition = decompose(ledgers, walk.total_bytes)
    explanation = StorageExplanation(
        topic=topic_name, now_ms=now_ms, storage_size_bytes=walk.total_bytes,
        backlog_size_bytes=max((s.backlog_bytes for s in subscriptions), default=0),
        retention=facts.retention, ttl_seconds=facts.ttl_seconds,
        offload_deletion_lag_ms=facts.offload.deletion_lag_ms, settings=facts.settings,
        ledgers=tuple(ledgers), subscriptions=subscriptions, decomposition=decomposition, advice=())
    return _with_advice(explanation)


def unacked_by_ledger(cursor: ManagedCursor, infos: Sequence[LedgerInfo], lac: Position) -> dict[int, BitMap64]:
    """Ledger id -> the confirmed entry ids of it the cursor has not acked (ledgers with none left out)."""
    md = cursor.mark_delete_position
    out: dict[int, BitMap64] = {}
    for info in infos:
        if info.ledger_id < md[0] or info.ledger_id > lac[0]:
            continue
        count = min(info.entries, lac[1] + 1) if info.ledger_id == lac[0] else info.entries
        start = md[1] + 1 if info.ledger_id == md[0] else 0
        if start >= count:
            continue
        entries = BitMap64()
        entries.add_range(start, count)
        acked = cursor.acked_ledgers.get(info.ledger_id)
        if acked is not None:
            entries -= acked
        if entries:
            out[info.ledger_id] = entries
    return out


def ack_holes(cursor: ManagedCursor, unacked: Mapping[int, BitMap64]) -> int:
    """Unacked entries below the cursor's highest individually acked entry: the holes that keep
    its mark-delete (and every ledger from there on) back."""
    acked = {ledger_id: bitmap for ledger_id, bitmap in cursor.acked_ledgers.items() if bitmap}
    if not acked:
        return 0
    top_ledger = max(acked)
    top_entry = acked[top_ledger].max()
    holes = sum(len(bitmap) for ledger_id, bitmap in unacked.items() if ledger_id < top_ledger)
    in_top = unacked.get(top_ledger)
    return holes + (in_top.rank(top_entry) if in_top is not None else 0)


def apportion(size_bytes: int, part_entries: int, entries: int) -> int:
    """The bytes of `part_entries` of a ledger's `entries`, by entries (floor; the whole size
    when the part is the whole ledger)."""
    return size_bytes * part_entries // entries if entries else 0


def _union_unacked(walk: _Walk, ledger_id: int) -> int:
    union = BitMap64()
    for maps in walk.unacked.values():
        bitmap = maps.get(ledger_id)
        if bitmap is not None:
            union |= bitmap
    return len(union)


def _rest_category(info: LedgerInfo, is_last: bool, blocking: Sequence[ManagedCursor], trimmable: bool) -> str:
    """The part the acked-by-every-subscription rest of a ledger goes to (first that applies)."""
    if info.state is LedgerState.OPEN or is_last:
        return OPEN
    if info.state is LedgerState.OFFLOADED:
        return OFFLOADED
    if blocking:
        return PINNED
    return AWAITING_TRIM if trimmable else RETAINED


def _explain_ledger(walk: _Walk, info: LedgerInfo, is_last: bool, bytes_before: int,
                    previous: LedgerExplanation | None) -> LedgerExplanation:
    blocking = [c for c in walk.cursors if not passes(c, info)]
    union = _union_unacked(walk, info.ledger_id)
    backlog_bytes = apportion(info.size_bytes, union, info.entries)
    parts = {UNCONSUMED: backlog_bytes,
             _rest_category(info, is_last, blocking, info.ledger_id in walk.trimmable): info.size_bytes - backlog_bytes}
    parts = {category: size for category, size in parts.items() if size}
    invariant(sum(parts.values()) == info.size_bytes, "a ledger's parts sum to its size", ledger=info.ledger_id)
    record = walk.facts.records.get(info.ledger_id)
    cold = record.cold if record is not None else None
    bookie_copy = not (record is not None and record.bookie_deleted)
    lag_ms = walk.facts.offload.deletion_lag_ms
    copy_goes = (cold.completed_ms + lag_ms if cold is not None and bookie_copy and lag_ms >= 0 else None)
    goes_at, goes = _after_previous(_own_goes(walk, info, is_last, blocking, bytes_before), previous)
    if goes_at is not None and goes_at <= walk.now_ms:
        goes = f"at the next retention pass ({goes})"
    return LedgerExplanation(
        ledger_id=info.ledger_id, entries=info.entries, size_bytes=info.size_bytes, state=info.state.value,
        created_ms=info.created_ms, first_publish_ms=info.first_publish_ms, last_publish_ms=info.last_publish_ms,
        bookies=tuple(sorted(walk.facts.bookies.get(info.ledger_id, ()))) if bookie_copy else (),
        bookie_copy=bookie_copy, s3_key=cold.key if cold is not None else None,
        offloaded_ms=cold.completed_ms if cold is not None else None, unacked_entries=union,
        kept_by=tuple(_keepers(walk, info, is_last, blocking, copy_goes, bookie_copy and cold is not None)),
        goes_at_ms=goes_at, goes=goes, bookie_copy_goes_at_ms=copy_goes, parts=parts)


def _keepers(walk: _Walk, info: LedgerInfo, is_last: bool, blocking: Sequence[ManagedCursor],
             copy_goes_ms: int | None, has_bookie_and_cold: bool) -> list[Keeper]:
    out: list[Keeper] = []
    if info.state is LedgerState.OPEN:
        out.append(Keeper("open", "the open ledger takes appends: never trimmed"))
    elif is_last:
        out.append(Keeper("lastLedger", "the last ledger is never trimmed (a position after it must stay defined)"))
    for cursor in blocking:
        bitmap = walk.unacked[cursor.name].get(info.ledger_id)
        unacked = len(bitmap) if bitmap is not None else 0
        holes = walk.holes[cursor.name]
        md = cursor.mark_delete_position
        if unacked:
            detail = f"{cursor.name} has not acked {unacked} of its entries (mark-delete {md})"
        else:
            detail = (f"acked by {cursor.name}, but its mark-delete {md} is before it "
                      f"({holes} ack hole{_s(holes)})")
        out.append(Keeper("subscription", detail, cursor.name, unacked, holes))
    if not out:
        if info.ledger_id in walk.trimmable:
            out.append(Keeper("nothing", "nothing keeps it: the next retention pass trims it"))
        else:
            out.append(Keeper("retention", f"retention ({retention_text(walk.facts.retention)}) keeps it"))
    if has_bookie_and_cold:
        lag_ms = walk.facts.offload.deletion_lag_ms
        detail = (f"its bookie copy stays until {iso(copy_goes_ms)} (offloadDeletionLagMs {duration(lag_ms)})"
                  if copy_goes_ms is not None else "its bookie copy stays: offloadDeletionLagMs is -1 (never)")
        out.append(Keeper("offloadDeletionLag", detail))
    return out


# --- when a ledger goes ------------------------------------------------------------------------------

Goes = tuple[int | None, str]     # (earliest time in ms, None: not by itself; for people)


def _own_goes(walk: _Walk, info: LedgerInfo, is_last: bool, blocking: Sequence[ManagedCursor],
              bytes_before: int) -> Goes:
    """When the ledger could go, ignoring the ledgers before it."""
    if info.state is LedgerState.OPEN:
        _, rest = _closed_goes(walk, info, blocking, bytes_before)
        return None, f"at rollover ({rollover_text(walk.facts.settings)}), then {rest}"
    if is_last:
        return None, "not while it is the last ledger (it can go once a newer ledger exists)"
    return _closed_goes(walk, info, blocking, bytes_before)


def _closed_goes(walk: _Walk, info: LedgerInfo, blocking: Sequence[ManagedCursor], bytes_before: int) -> Goes:
    last = Position(info.ledger_id, info.entries - 1)
    ttl_ms = walk.facts.ttl_seconds * 1000
    constraints: list[Goes] = []
    for cursor in blocking:
        oldest = cursor.next_unacked_from(cursor.mark_delete_position)
        acks = (f"when {cursor.name} acks up to {last} (its oldest unacked entry is {oldest})" if info.entries
                else f"when {cursor.name}'s mark-delete passes it")
        if ttl_ms > 0 and info.entries:
            at_ms = info.last_publish_ms + ttl_ms
            constraints.append((at_ms, f"{acks}, or when the TTL ({duration(ttl_ms)}) expires it at {iso(at_ms)}"))
        else:
            constraints.append((None, acks))
    constraints.append(_retention_goes(walk, info, bytes_before))
    unknown = [c for c in constraints if c[0] is None]
    if unknown:
        return None, unknown[0][1]
    return max(constraints, key=lambda c: c[0] or 0)


def _retention_goes(walk: _Walk, info: LedgerInfo, bytes_before: int) -> Goes:
    """When retention lets the ledger go, once every subscription has passed it."""
    policy = walk.facts.retention
    if info.ledger_id in walk.trimmable:
        return walk.now_ms, "nothing keeps it"
    at_ms: list[int] = []
    if policy.time_minutes >= 0:
        stamp_ms = info.last_publish_ms if info.entries else info.created_ms
        at_ms.append(stamp_ms + policy.time_minutes * MS_PER_MINUTE)
    size_bytes = policy.size_mb * MIB
    if policy.size_mb >= 0 and (size_bytes == 0 or walk.total_bytes - bytes_before > size_bytes):
        at_ms.append(walk.now_ms)
    if at_ms:
        when = min(at_ms)
        return when, f"when retention ({retention_text(policy)}) lets it go, at {iso(when)}"
    if policy.size_mb >= 0:
        return None, f"when the topic grows past the retention size ({policy.size_mb} MB)"
    return None, f"never: retention ({retention_text(policy)}) keeps consumed data forever"


def _after_previous(own: Goes, previous: LedgerExplanation | None) -> Goes:
    """Ledgers go oldest first: none goes before the one before it."""
    own_ms, _ = own
    if previous is None or own_ms is None:
        return own
    if previous.goes_at_ms is None:
        return None, f"after ledger {previous.ledger_id} (ledgers go oldest first)"
    if previous.goes_at_ms > own_ms:
        return previous.goes_at_ms, f"with ledger {previous.ledger_id} (ledgers go oldest first)"
    return own


# --- subscriptions and the decomposition -------------------------------------------------------------

def _explain_subscription(walk: _Walk, cursor: ManagedCursor, infos: Sequence[LedgerInfo]) -> SubscriptionExplanation:
    entries, messages, size = backlog(cursor, walk.view)
    oldest: Position | None = cursor.next_unacked_from(cursor.mark_delete_position)
    oldest_ms = None
    if oldest is not None and oldest <= walk.view.last_confirmed:
        try:
            oldest_ms = walk.view.entry_meta(oldest).publish_time_ms
        except InvalidPosition:
            oldest_ms = None
    else:
        oldest = None
    unacked = walk.unacked[cursor.name]
    pinned = [info for info in infos[:-1] if info.state is not LedgerState.OPEN and not passes(cursor, info)]
    pinned_acked = 0
    for info in pinned:
        bitmap = unacked.get(info.ledger_id)
        pinned_acked += info.size_bytes - apportion(info.size_bytes, len(bitmap) if bitmap else 0, info.entries)
    return SubscriptionExplanation(
        name=cursor.name, mark_delete=cursor.mark_delete_position, backlog_entries=entries, backlog_messages=messages,
        backlog_bytes=size,
        ack_holes=walk.holes[cursor.name], oldest_unacked=oldest, oldest_unacked_publish_ms=oldest_ms,
        pinned_ledgers=len(pinned), pinned_bytes=sum(info.size_bytes for info in pinned),
        pinned_acked_bytes=pinned_acked)


def decompose(ledgers: Sequence[LedgerExplanation], storage_bytes: int) -> tuple[Part, ...]:
    """Every category, in CATEGORIES order, with its bytes, percent and ledger count; the bytes
    sum exactly to `storage_bytes`."""
    out = []
    for category, label in CATEGORIES:
        size = sum(ledger.parts.get(category, 0) for ledger in ledgers)
        count = sum(1 for ledger in ledgers if ledger.parts.get(category, 0))
        percent = round(100.0 * size / storage_bytes, 2) if storage_bytes else 0.0
        out.append(Part(category, label, size, percent, count))
    invariant(sum(part.size_bytes for part in out) == storage_bytes, "the decomposition sums to storageSize",
              parts=[p.size_bytes for p in out], storage=storage_bytes)
    return tuple(out)


# --- advice --------------------------------------------------------------------------------------------

def _with_advice(explanation: StorageExplanation) -> StorageExplanation:
    return replace(explanation, advice=tuple(advice(explanation)))


def advice(e: StorageExplanation) -> list[str]:
    """One line per culprit, biggest first within its kind."""
    parts = {part.category: part for part in e.decomposition}
    out = _subscription_advice(e)
    retained = [ledger for ledger in e.ledgers if RETAINED in ledger.parts]
    if retained:
        out.append(f"retention {retention_text(e.retention)} keeps {human_bytes(parts[RETAINED].size_bytes)} "
                   f"of consumed data in {_n(len(retained), 'ledger')}; the oldest goes {retained[0].goes}")
    out += _offload_advice(e, parts[OFFLOADED])
    if parts[OPEN].size_bytes:
        last = e.ledgers[-1]
        out.append(f"the {'open' if last.state == 'open' else 'last'} ledger {last.ledger_id} holds "
                   f"{human_bytes(parts[OPEN].size_bytes)} of consumed data ({_n(last.entries, 'entry')} in all); "
                   f"it goes {last.goes}")
    awaiting = parts[AWAITING_TRIM]
    if awaiting.size_bytes:
        who = "no subscription" if not e.subscriptions else "every subscription has passed them"
        out.append(f"{who}: {_n(awaiting.ledgers, 'ledger')} ({human_bytes(awaiting.size_bytes)}) of consumed "
                   f"data are trimmed at the next retention pass (every "
                   f"{duration(e.settings.retention_check_interval_ms)})")
    if not out:
        out.append("nothing is stored" if not e.storage_size_bytes else "storage is the backlog: nothing else is kept")
    return out


def _subscription_advice(e: StorageExplanation) -> list[str]:
    out = []
    for sub in sorted(e.subscriptions, key=lambda s: (s.pinned_acked_bytes, s.backlog_bytes), reverse=True):
        oldest = ""
        if sub.oldest_unacked is not None:
            oldest = f", the oldest {sub.oldest_unacked}"
            if sub.oldest_unacked_publish_ms:
                oldest += (f" from {duration(e.now_ms - sub.oldest_unacked_publish_ms)} ago "
                           f"({iso(sub.oldest_unacked_publish_ms)})")
        if sub.pinned_acked_bytes:
            out.append(f"subscription {sub.name} has {_n(sub.backlog_messages, 'unacked message')}{oldest} pinning "
                       f"{human_bytes(sub.pinned_acked_bytes)} of acknowledged data in "
                       f"{_n(sub.pinned_ledgers, 'ledger')} ({_n(sub.ack_holes, 'ack hole')}): ack, skip or "
                       f"expire {'it' if sub.backlog_messages == 1 else 'them'} to free it{_ttl_words(e, sub)}")
        elif sub.backlog_entries:
            out.append(f"subscription {sub.name} has a backlog of {_n(sub.backlog_entries, 'entry')} "
                       f"({human_bytes(sub.backlog_bytes)}){oldest}: it goes as {sub.name} consumes")
    return out


def _ttl_words(e: StorageExplanation, sub: SubscriptionExplanation) -> str:
    """When the message TTL acks the subscription's oldest unacked entry ("" without a TTL)."""
    if e.ttl_seconds <= 0 or not sub.oldest_unacked_publish_ms:
        return ""
    at_ms = sub.oldest_unacked_publish_ms + e.ttl_seconds * 1000
    when = "at the next retention pass" if at_ms <= e.now_ms else f"at {iso(at_ms)}"
    return f" (the message TTL, {duration(e.ttl_seconds * 1000)}, expires it {when})"


def _offload_advice(e: StorageExplanation, part: Part) -> list[str]:
    offloaded = [ledger for ledger in e.ledgers if ledger.state == LedgerState.OFFLOADED.value]
    if not offloaded:
        return []
    size = human_bytes(sum(ledger.size_bytes for ledger in offloaded))
    with_copy = [ledger for ledger in offloaded if ledger.bookie_copy]
    where = f"s3://{e.settings.s3_bucket}" if e.settings.s3_bucket else "the cold tier"
    if not with_copy:
        return [f"{_n(len(offloaded), 'offloaded ledger')} ({size}) live only in {where}; "
                f"{human_bytes(part.size_bytes)} of them is consumed data kept until they are trimmed"]
    if e.offload_deletion_lag_ms < 0:
        return [f"{_n(len(with_copy), 'offloaded ledger')} keep a bookie copy forever "
                f"(offloadDeletionLagMs -1) besides their object in {where}"]
    next_ms = min(ledger.bookie_copy_goes_at_ms or 0 for ledger in with_copy)
    return [f"{_n(len(with_copy), 'offloaded ledger')} ({size}) keep a bookie copy for offloadDeletionLagMs "
            f"({duration(e.offload_deletion_lag_ms)}) besides their object in {where}; the next copy goes "
            f"{'at the next retention pass' if next_ms <= e.now_ms else 'at ' + iso(next_ms)}"]


# --- words for people ------------------------------------------------------------------------------------

def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _n(count: int, noun: str) -> str:
    """"1 ledger", "2 ledgers", "1 entry", "3 entries"."""
    if count == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{count} {plural}"


_DURATION_UNITS_MS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


def duration(ms: int) -> str:
    """14_400_000 -> "4h", 93_600_000 -> "1d 2h" (two largest units), 250 -> "250ms"."""
    ms = max(0, int(ms))
    if ms < 1_000:
        return f"{ms}ms"
    words = []
    for unit, unit_ms in _DURATION_UNITS_MS:
        if ms >= unit_ms:
            words.append(f"{ms // unit_ms}{unit}")
            ms %= unit_ms
        if len(words) == 2 or (words and not ms):
            break
    return " ".join(words)


def iso(ms: int | None) -> str:
    """Wall time in ms -> "2026-11-24T08:00:00Z" (UTC)."""
    if ms is None:
        return "never"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def retention_text(policy: RetentionPolicy) -> str:
    """(10080, -1) -> "7d"; (-1, 10) -> "10 MB"; (60, 10) -> "1h or 10 MB"; (-1, -1) -> "unlimited"."""
    if policy.time_minutes == 0 and policy.size_mb == 0:
        return "none (0, 0)"
    words = []
    if policy.time_minutes >= 0:
        words.append(duration(policy.time_minutes * MS_PER_MINUTE))
    if policy.size_mb >= 0:
        words.append(f"{policy.size_mb} MB")
    return " or ".join(words) if words else "unlimited (-1, -1)"


def rollover_text(settings: Settings) -> str:
    return (f"after {settings.rollover_entries} entries, {human_bytes(settings.rollover_bytes)} or "
            f"{duration(settings.rollover_age_ms)}, not before {duration(settings.rollover_min_age_ms)}")


# --- JSON ------------------------------------------------------------------------------------------------

def to_json(e: StorageExplanation) -> dict:
    """The REST answer (field names in Pulsar's camelCase; sizes in bytes, times in ms)."""
    return {
        "topic": e.topic,
        "nowMs": e.now_ms,
        "storageSize": e.storage_size_bytes,
        "backlogSize": e.backlog_size_bytes,
        "policies": {
            "retentionTimeInMinutes": e.retention.time_minutes,
            "retentionSizeInMB": e.retention.size_mb,
            "messageTtlInSeconds": e.ttl_seconds,
            "offloadDeletionLagMs": e.offload_deletion_lag_ms,
            "retentionCheckIntervalMs": e.settings.retention_check_interval_ms,
            "rolloverEntries": e.settings.rollover_entries,
            "rolloverBytes": e.settings.rollover_bytes,
            "rolloverAgeMs": e.settings.rollover_age_ms,
            "rolloverMinAgeMs": e.settings.rollover_min_age_ms,
        },
        "ledgers": [_ledger_json(ledger, e.settings.s3_bucket) for ledger in e.ledgers],
        "subscriptions": {sub.name: _subscription_json(sub) for sub in e.subscriptions},
        "decomposition": [{"category": p.category, "label": p.label, "size": p.size_bytes,
                           "percent": p.percent, "ledgers": p.ledgers} for p in e.decomposition],
        "advice": list(e.advice),
    }


def _ledger_json(ledger: LedgerExplanation, bucket: str) -> dict:
    s3 = None
    if ledger.s3_key is not None:
        s3 = {"bucket": bucket, "key": ledger.s3_key, "offloadedMs": ledger.offloaded_ms}
    return {
        "ledgerId": ledger.ledger_id,
        "entries": ledger.entries,
        "size": ledger.size_bytes,
        "state": ledger.state,
        "createdMs": ledger.created_ms,
        "firstPublishMs": ledger.first_publish_ms,
        "lastPublishMs": ledger.last_publish_ms,
        "location": {"bookies": list(ledger.bookies), "bookieCopy": ledger.bookie_copy, "s3": s3},
        "unackedEntries": ledger.unacked_entries,
        "keptBy": [_keeper_json(k) for k in ledger.kept_by],
        "goesAtMs": ledger.goes_at_ms,
        "goes": ledger.goes,
        "bookieCopyGoesAtMs": ledger.bookie_copy_goes_at_ms,
        "parts": dict(ledger.parts),
    }


def _keeper_json(keeper: Keeper) -> dict:
    out: dict[str, object] = {"kind": keeper.kind, "detail": keeper.detail}
    if keeper.subscription is not None:
        out.update(subscription=keeper.subscription, unackedEntries=keeper.unacked_entries,
                   ackHoles=keeper.ack_holes)
    return out


def _subscription_json(sub: SubscriptionExplanation) -> dict:
    return {
        "markDeletePosition": str(sub.mark_delete),
        "msgBacklog": sub.backlog_entries,
        "backlogMessages": sub.backlog_messages,
        "backlogSize": sub.backlog_bytes,
        "ackHoles": sub.ack_holes,
        "oldestUnacked": str(sub.oldest_unacked) if sub.oldest_unacked is not None else None,
        "oldestUnackedPublishMs": sub.oldest_unacked_publish_ms,
        "pinnedLedgers": sub.pinned_ledgers,
        "pinnedSize": sub.pinned_bytes,
        "pinnedAckedSize": sub.pinned_acked_bytes,
    }
