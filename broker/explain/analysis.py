"""Why a topic's storage is bigger than its backlog: every kept ledger, what keeps it, when it goes.

`explain(view, cursors, facts, now_ms)` is a plain function of a managed ledger (its
`LedgerView`), the durable subscriptions' cursors and the facts the admin handler read for it
(effective policies, config, each ledger's record and bookie ensemble); `explain_topic` applies
it to a loaded `PersistentTopic`; `to_json` gives the REST answer
(`GET /admin/v2/persistent/{t}/{ns}/{topic}/explain-storage`, `broker.admin.explain`).

Per ledger, oldest first: entries, bytes, state, where it lives (the bookies of its ensembles,
and for an offloaded ledger its object `s3://bucket/key`), its publish-time span, what keeps it
(`keptBy`: the open ledger ("open ledger (empty)" when it has no entry: no subscription has
anything to ack there), the last ledger, each durable subscription whose mark-delete sits in or
before it with its unacked entries there and its ack-hole count, the retention policy, the
offload deletion lag for the bookie copy of an offloaded ledger, or nothing: trimmed at the next
retention pass), and when it goes if nothing changes (`goesAtMs`, null = not by itself: it waits
for an ack, a rollover, or never; `goes` says which). Ledgers go only as a prefix, so a ledger
goes no earlier than the one before it. Times are the earliest moment the condition holds; the
deletion happens at the retention pass after it (every `broker_retention_check_interval_ms`).

Per durable subscription: its backlog (exact, as its stats), its ack holes and oldest unacked
entry, the closed ledgers it pins and, to say what acting on it would do, what its acking
(skipping, expiring) every entry it has not acked would release and free at the next retention
pass with every other subscription and the policies as they are (`freeableSize`: 0 when another
subscription also keeps those ledgers), the other subscriptions keeping ledgers it pins
(`coKeepers`) and what it and they acting together would free. These ask `cursor.retention`
itself, with a cursor at the last confirmed entry standing for the subscription that acted.

Two backlogs, and the words say which: `backlogSize` is Pulsar's, the LARGEST durable
subscription's backlog bytes (the CLI header reads "largest subscription backlog 56 B (sub-x)");
the decomposition's unconsumedBacklog is what SOME subscription has not acked, the union over
subscriptions (labelled "unconsumed by some subscription"). Both count the exact stored bytes of
the entries (the entry index's sizes, as `cursor.stats`), so with one subscription they are
equal, and with several the union is at least the largest, more when subscriptions are behind
at different places.

The decomposition splits `storageSize` (the bytes of every kept ledger, offloaded ones
included; `cursor.stats.storage_size_bytes`) into six parts, ledger by ledger:
- unconsumedBacklog: entries some durable subscription has not acked (the union over
  subscriptions, so with several it can exceed the topic's backlogSize, the largest one's);
- the rest of the ledger (acked by every durable subscription) goes to the first that applies:
  openLedger (the open ledger, or a closed last ledger: never trimmed), offloaded (state
  offloaded), ackedButPinned (a subscription's mark-delete is before the ledger's end: an ack
  hole, or a partly consumed ledger, since ledgers are deleted whole), retainedByPolicy (the
  retention policy keeps it), awaitingTrim (nothing keeps it: the next retention pass trims it).
A ledger split between the backlog and another part gives the backlog the exact bytes of its
unacked entries (from the ledger's entry index: no entry is read back) and the other part the
remainder.

What must hold: for every ledger its parts sum to its size_bytes, hence the decomposition sums
exactly to storage_size_bytes (checked by `invariant`); the analysis reads nothing, awaits
nothing and changes nothing, so one call sees one consistent state of the topic.

The values are in `broker.explain.model`; the advice lines and the words in `broker.explain.advice`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from broker.explain.advice import advice, count, duration, iso, retention_text, retention_words, rollover_text
from broker.explain.model import (
    AWAITING_TRIM,
    CATEGORIES,
    COMPACTED,
    COMPACTED_CATEGORY,
    OFFLOADED,
    OPEN,
    PINNED,
    RETAINED,
    UNCONSUMED,
    CoKeeper,
    Keeper,
    LedgerExplanation,
    Part,
    Settings,
    StorageExplanation,
    StorageFacts,
    SubscriptionExplanation,
)
from common.errors import InvalidPosition
from common.invariant import invariant
from cursor.managed_cursor import ManagedCursor
from cursor.retention import MIB, MS_PER_MINUTE, ledgers_to_trim, passes, trim_candidates
from cursor.stats import backlog, storage_size_bytes
from ledger.position import Position
from ledger.types import LedgerInfo, LedgerState, LedgerView

if TYPE_CHECKING:
    from broker.topics.topic import PersistentTopic

__all__ = ["AWAITING_TRIM", "CATEGORIES", "OFFLOADED", "OPEN", "PINNED", "RETAINED", "UNCONSUMED", "Keeper",
           "LedgerExplanation", "Part", "Settings", "StorageExplanation", "StorageFacts", "SubscriptionExplanation",
           "advice", "duration", "explain", "explain_topic", "iso", "retention_text", "to_json"]

# --- the analysis ----------------------------------------------------------------------------------

def explain_topic(topic: PersistentTopic, facts: StorageFacts, now_ms: int) -> StorageExplanation:
    """`explain` over a loaded topic: its managed ledger and its durable, open subscriptions
    (a reader's non-durable cursor pins nothing, as in the retention pass)."""
    cursors = [sub.cursor for sub in list(topic.subscriptions.values()) if sub.durable and not sub.closed]
    return with_compacted(explain(str(topic.name), topic.ml, cursors, facts, now_ms), topic)


def with_compacted(e: StorageExplanation, topic: PersistentTopic) -> StorageExplanation:
    """`e` with the topic's compacted ledger (`broker.compaction`) as one more row, kept by
    "compaction", its bytes in storageSize and in the decomposition's compactedLedger part."""
    record, view = topic.compaction.record, topic.compaction.view
    if record is None or record.ledger_id < 0:
        return e
    handle = view.handle if view is not None else None
    row = LedgerExplanation(
        ledger_id=record.ledger_id, entries=record.entries, size_bytes=record.size_bytes, state="compacted",
        created_ms=record.compacted_ms, first_publish_ms=0, last_publish_ms=0,
        bookies=tuple(sorted(handle.metadata.all_bookies())) if handle is not None else (), bookie_copy=True,
        s3_key=None, offloaded_ms=None, unacked_entries=0,
        kept_by=(Keeper("compaction", f"the topic's compacted view up to {record.horizon} ({record.keys} keys), "
                                      "read by read_compacted readers; replaced by the next compaction"),),
        goes_at_ms=None, goes="when the next compaction replaces it, or with the topic",
        bookie_copy_goes_at_ms=None, parts={COMPACTED: record.size_bytes} if record.size_bytes else {})
    total = e.storage_size_bytes + record.size_bytes
    decomposition = decompose([*e.ledgers, row], total, (*CATEGORIES, COMPACTED_CATEGORY))
    return replace(e, storage_size_bytes=total, decomposition=decomposition, compacted=row)


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
    released_bytes: int                             # of the ledgers every subscription has passed
    total_bytes: int


def explain(topic_name: str, view: LedgerView, cursors: Sequence[ManagedCursor], facts: StorageFacts,
            now_ms: int) -> StorageExplanation:
    """The whole explanation of one managed ledger as it is now (see the module docstring)."""
    infos = view.ledgers()
    lac = view.last_confirmed
    unacked = {c.name: unacked_by_ledger(c, infos, lac) for c in cursors}
    walk = _Walk(view, cursors, facts, now_ms, unacked,
                 {c.name: ack_holes(c, unacked[c.name]) for c in cursors},
                 frozenset(ledgers_to_trim(view, cursors, facts.retention, now_ms)),
                 sum(info.size_bytes for info in trim_candidates(view, cursors)), storage_size_bytes(view))
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
    largest = max(subscriptions, key=lambda s: s.backlog_bytes, default=None)
    explanation = StorageExplanation(
        topic=topic_name, now_ms=now_ms, storage_size_bytes=walk.total_bytes,
        backlog_size_bytes=largest.backlog_bytes if largest is not None else 0,
        backlog_subscription=largest.name if largest is not None else None,
        retention=facts.retention, ttl_seconds=facts.ttl_seconds,
        offload_deletion_lag_ms=facts.offload.deletion_lag_ms, settings=facts.settings,
        ledgers=tuple(ledgers), subscriptions=subscriptions, decomposition=decomposition, advice=())
    return replace(explanation, advice=tuple(advice(explanation)))


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


def entries_bytes(view: LedgerView, info: LedgerInfo, entry_ids: BitMap64 | None) -> int:
    """The exact stored bytes of some entries of one ledger, from the ledger's entry index (no
    entry is read): the sizes of the entries, or the ledger's size minus the sizes of the others,
    whichever asks the index less (at most half the ledger's entries)."""
    if not entry_ids:
        return 0
    if len(entry_ids) <= info.entries - len(entry_ids):
        return sum(view.entry_meta(Position(info.ledger_id, entry_id)).size_bytes for entry_id in entry_ids)
    others = BitMap64()
    others.add_range(0, info.entries)
    others -= entry_ids
    return info.size_bytes - sum(view.entry_meta(Position(info.ledger_id, entry_id)).size_bytes
                                 for entry_id in others)


def _union_unacked(walk: _Walk, ledger_id: int) -> BitMap64:
    """The entries of the ledger some subscription has not acked."""
    union = BitMap64()
    for maps in walk.unacked.values():
        bitmap = maps.get(ledger_id)
        if bitmap is not None:
            union |= bitmap
    return union


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
    backlog_bytes = entries_bytes(walk.view, info, union)
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
        offloaded_ms=cold.completed_ms if cold is not None else None, unacked_entries=len(union),
        kept_by=tuple(_keepers(walk, info, is_last, blocking, copy_goes, bookie_copy and cold is not None)),
        goes_at_ms=goes_at, goes=goes, bookie_copy_goes_at_ms=copy_goes, parts=parts)


def _keepers(walk: _Walk, info: LedgerInfo, is_last: bool, blocking: Sequence[ManagedCursor],
             copy_goes_ms: int | None, has_bookie_and_cold: bool) -> list[Keeper]:
    out: list[Keeper] = []
    if info.state is LedgerState.OPEN:
        out.append(Keeper("open", "open ledger (empty): it takes appends, never trimmed" if not info.entries
                          else "the open ledger takes appends: never trimmed"))
    elif is_last:
        out.append(Keeper("lastLedger", "the last ledger is never trimmed (a position after it must stay defined)"))
    if not (info.state is LedgerState.OPEN and not info.entries):     # nothing to ack in an empty open ledger
        out += [_subscription_keeper(walk, info, cursor) for cursor in blocking]
    if not out:
        if info.ledger_id in walk.trimmable:
            out.append(Keeper("nothing", "nothing keeps it: the next retention pass trims it"))
        else:
            out.append(Keeper("retention", f"{retention_words(walk.facts.retention)} keeps it"))
    if has_bookie_and_cold:
        lag_ms = walk.facts.offload.deletion_lag_ms
        detail = (f"its bookie copy stays until {iso(copy_goes_ms)} (offloadDeletionLagMs {duration(lag_ms)})"
                  if copy_goes_ms is not None else "its bookie copy stays: offloadDeletionLagMs is -1 (never)")
        out.append(Keeper("offloadDeletionLag", detail))
    return out


def _subscription_keeper(walk: _Walk, info: LedgerInfo, cursor: ManagedCursor) -> Keeper:
    """A subscription whose mark-delete is before the ledger's end: what it has not acked there."""
    bitmap = walk.unacked[cursor.name].get(info.ledger_id)
    unacked = len(bitmap) if bitmap is not None else 0
    holes = walk.holes[cursor.name]
    md = cursor.mark_delete_position
    if not info.entries:
        detail = f"empty; {cursor.name}'s mark-delete {md} passes it once {cursor.name} acks an entry after it"
    elif unacked == info.entries:
        detail = (f"{cursor.name} has not acked its only entry (mark-delete {md})" if unacked == 1
                  else f"{cursor.name} has not acked any of its {unacked} entries (mark-delete {md})")
    elif unacked:
        detail = f"{cursor.name} has not acked {unacked} of its {info.entries} entries (mark-delete {md})"
    else:
        detail = f"acked by {cursor.name}, but its mark-delete {md} is before it ({count(holes, 'ack hole')})"
    return Keeper("subscription", detail, cursor.name, unacked, holes)


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
        if policy.time_minutes == 0 and policy.size_mb == 0:
            return when, "as soon as nothing else keeps it (there is no retention: time 0, size 0)"
        return when, f"when {retention_words(policy)} lets it go, at {iso(when)}"
    if policy.size_mb >= 0:
        return None, f"when the topic grows past the retention size ({policy.size_mb} MB)"
    return None, f"never: {retention_words(policy)} keeps it forever"


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
    pinned = [info for info in infos[:-1] if info.state is not LedgerState.OPEN and not passes(cursor, info)]
    # its unacked entries lie in the ledgers it has not passed: the pinned ones and the last one
    in_last = entries_bytes(walk.view, infos[-1], walk.unacked[cursor.name].get(infos[-1].ledger_id)) if infos else 0
    pinned_bytes = sum(info.size_bytes for info in pinned)
    pinned_acked = pinned_bytes - (size - in_last)
    invariant(0 <= pinned_acked <= pinned_bytes, "a subscription's acked bytes in the ledgers it pins",
              subscription=cursor.name, pinned=pinned_bytes, backlog=size, in_last=in_last)
    # another subscription keeps some ledger this one pins iff it has not passed the newest of them
    # (a subscription that passed a ledger passed every older one)
    co_keepers = [other for other in walk.cursors if other is not cursor and pinned and not passes(other, pinned[-1])]
    released, freeable = _release(walk, [cursor])
    return SubscriptionExplanation(
        name=cursor.name, mark_delete=cursor.mark_delete_position, backlog_entries=entries, backlog_messages=messages,
        backlog_bytes=size,
        ack_holes=walk.holes[cursor.name], oldest_unacked=oldest, oldest_unacked_publish_ms=oldest_ms,
        pinned_ledgers=len(pinned), pinned_bytes=pinned_bytes,
        pinned_acked_bytes=pinned_acked, released_bytes=released, freeable_bytes=freeable,
        co_keepers=tuple(CoKeeper(other.name, sum(len(b) for b in walk.unacked[other.name].values()),
                                  walk.holes[other.name]) for other in co_keepers),
        freeable_with_co_keepers_bytes=_release(walk, [cursor, *co_keepers])[1] if co_keepers else freeable)


def _release(walk: _Walk, acting: Sequence[ManagedCursor]) -> tuple[int, int]:
    """If the `acting` subscriptions acked every entry they have not acked (every other one and
    the policies as they are): (bytes of the ledgers no subscription would keep any more, the
    bytes of those the next retention pass would trim), beyond what is released and trimmed now.
    Asks the retention rule itself (`cursor.retention`), with a cursor at the last confirmed
    entry (not durable: it changes nothing) standing for each acting subscription."""
    view = walk.view
    caught_up = [ManagedCursor(c.name, view, mark_delete_position=view.last_confirmed, durable=False)
                 for c in acting]
    cursors = [c for c in walk.cursors if all(c is not a for a in acting)] + caught_up
    candidates = trim_candidates(view, cursors)
    released = sum(info.size_bytes for info in candidates) - walk.released_bytes
    sizes = {info.ledger_id: info.size_bytes for info in candidates}
    trimmed = ledgers_to_trim(view, cursors, walk.facts.retention, walk.now_ms)
    freeable = sum(sizes[ledger_id] for ledger_id in trimmed if ledger_id not in walk.trimmable)
    return released, freeable


def decompose(ledgers: Sequence[LedgerExplanation], storage_bytes: int,
              categories: Sequence[tuple[str, str]] = CATEGORIES) -> tuple[Part, ...]:
    """Every category, in CATEGORIES order, with its bytes, percent and ledger count; the bytes
    sum exactly to `storage_bytes`."""
    out = []
    for category, label in categories:
        size = sum(ledger.parts.get(category, 0) for ledger in ledgers)
        count = sum(1 for ledger in ledgers if ledger.parts.get(category, 0))
        percent = round(100.0 * size / storage_bytes, 2) if storage_bytes else 0.0
        out.append(Part(category, label, size, percent, count))
    invariant(sum(part.size_bytes for part in out) == storage_bytes, "the decomposition sums to storageSize",
              parts=[p.size_bytes for p in out], storage=storage_bytes)
    return tuple(out)


# --- JSON ------------------------------------------------------------------------------------------------

def to_json(e: StorageExplanation) -> dict:
    """The REST answer (field names in Pulsar's camelCase; sizes in bytes, times in ms)."""
    return {
        "topic": e.topic,
        "nowMs": e.now_ms,
        "storageSize": e.storage_size_bytes,
        "backlogSize": e.backlog_size_bytes,
        "backlogSubscription": e.backlog_subscription,
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
        "ledgers": [_ledger_json(ledger, e.settings.s3_bucket)
                    for ledger in (*e.ledgers, *((e.compacted,) if e.compacted is not None else ()))],
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
        "releasedSize": sub.released_bytes,
        "freeableSize": sub.freeable_bytes,
        "coKeepers": [{"subscription": k.name, "unackedEntries": k.unacked_entries, "ackHoles": k.ack_holes}
                      for k in sub.co_keepers],
        "freeableWithCoKeepersSize": sub.freeable_with_co_keepers_bytes,
    }
