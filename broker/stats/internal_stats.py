"""Pulsar's PersistentTopicInternalStats (`GET /admin/v2/persistent/{t}/{ns}/{topic}/internalStats`).

Fields, each filled from the managed ledger and the cursors as they are now (Pulsar's names):
- `numberOfEntries`, `totalSize`: entries and bytes of every kept ledger, offloaded ones included;
- `entriesAddedCounter`: entries ever added to the managed ledger = `numberOfEntries` + the
  entries of every ledger trimmed since it was created (`ManagedLedger.trimmed_totals`, kept in
  its record). Pulsar's counts only since the managed ledger was last opened; Strata's survives
  restarts and trims, so it equals the topic's `msgInCounter` when producers do not batch;
- `currentLedgerEntries`, `currentLedgerSize`: the last ledger's entries and bytes (the open
  ledger's so far; between a rollover's seal and its new ledger, the sealed one's);
- `lastLedgerCreatedTimestamp`: when the last ledger was created (ISO 8601 with offset, as
  Pulsar's DateFormatter), `lastLedgerCreationFailureTimestamp`: null (Strata keeps no such time);
- `lastConfirmedEntry` "L:E"; `state` (Pulsar's ManagedLedger state names, below);
- `ledgers[]`: `{ledgerId, entries, size, offloaded, underReplicated}` oldest first. The
  open ledger is listed as Pulsar lists it, with entries 0 and size 0: its real figures are in
  `currentLedgerEntries`/`currentLedgerSize` (pulsar-admin and pulsar-spark read them there).
  `underReplicated`: the ledger has a copy on a bookie no longer registered, as the ledger
  auditor (`ledger.auditor`) found at its last scan; a top-level `underReplicated` is true when
  any of the topic's ledgers is (Strata's; the auditor re-replicates them);
- `cursors{name}`: `markDeletePosition`, `readPosition` (the next entry the subscription's
  dispatcher reads; right after the mark-delete position without one), `state` "Open",
  `active` (consumers attached), `numberOfEntriesSinceFirstNotAckedMessage` (kept entries in
  (markDelete, readPosition]), `individuallyDeletedMessagesCount` (Strata's: entries acked
  above the mark-delete position), `individuallyDeletedMessages`: those entries as Pulsar
  prints its ack ranges, "[(L:E..L:E], ...]", each open below and closed above, one range per
  run of consecutive acked entries of a ledger ("[]" when none); the members acked inside a
  partially acked batch are not in it (Pulsar lists them separately, Strata does not report them);
- `schemaLedgers` [] and `compactedLedger` `{ledgerId, entries, size, offloaded}` of the topic's
  compacted view (`broker.compaction`; -1s and false when it has none).

- `pendingAddEntriesCount`: appends accepted and not yet confirmed (on the ledger or waiting for
  a rollover); `waitingCursorsCount`: subscriptions whose dispatcher has read everything stored
  and waits for new entries (a cursor's `waitingReadOp`); per cursor `pendingReadOps` (1 while a
  dispatch pass reads and sends, else 0) and `subscriptionHavePendingRead` (the same as a bool),
  `totalNonContiguousDeletedMessagesRange` (the ranges `individuallyDeletedMessages` prints),
  `cursorLedger`/`cursorLedgerLastEntry` -1 (a cursor's state lives in the metadata store, not a
  ledger, as Pulsar reports a cursor without a ledger).

Not reported, because Strata does not count them: a cursor's `messagesConsumedCounter`,
`lastLedgerSwitchTimestamp` and `subscriptionHavePendingReplayRead`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from common.human import iso_ms
from cursor.stats import subscription_stats
from ledger import auditor
from ledger.types import LedgerState

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic

# ManagedLedger state (ledger.managed_ledger.MLState values) -> Pulsar's ManagedLedgerImpl.State
_ML_STATE_NAMES = {"ready": "LedgerOpened", "rolling": "ClosingLedger", "no_ledger": "ClosedLedger",
                   "fenced": "Fenced", "failed": "Fenced", "closed": "Closed", "terminated": "Terminated"}


def ack_ranges(acked_ledgers: Mapping[int, BitMap64]) -> list[tuple[int, int, int]]:
    """(ledger, first, last) per run of consecutive acked entries, in order. Walks whichever is
    smaller, the acked entries or the gaps between them, so the cost follows the number of
    ranges, not the number of entries acked."""
    ranges: list[tuple[int, int, int]] = []
    for ledger_id in sorted(acked_ledgers):
        acked = acked_ledgers[ledger_id]
        if not acked:
            continue
        low, high = acked.min(), acked.max()
        gaps = BitMap64()
        gaps.add_range(low, high + 1)
        gaps -= acked
        runs: list[tuple[int, int]] = []
        if len(acked) <= len(gaps):
            for entry_id in acked:
                if runs and runs[-1][1] == entry_id - 1:
                    runs[-1] = (runs[-1][0], entry_id)
                else:
                    runs.append((entry_id, entry_id))
        else:
            first = low
            for gap in gaps:
                if gap > first:
                    runs.append((first, gap - 1))
                first = gap + 1
            runs.append((first, high))
        ranges += [(ledger_id, first, last) for first, last in runs]
    return ranges


def ack_ranges_text(acked_ledgers: Mapping[int, BitMap64]) -> str:
    """Pulsar's individuallyDeletedMessages: "[(L:first-1..L:last], ...]" per run of acked entries."""
    return "[" + ", ".join(f"({lid}:{first - 1}..{lid}:{last}]" for lid, first, last in ack_ranges(acked_ledgers)) + "]"


def _waiting_for_entries(sub: Subscription) -> bool:
    """The subscription's dispatcher has read everything stored and waits for new entries."""
    dispatcher = sub.dispatcher
    return dispatcher is not None and bool(sub.consumers) and dispatcher.read_position > sub.ml.last_confirmed


def _cursor_json(sub: Subscription) -> dict:
    stats = subscription_stats(sub.cursor, sub.ml)
    dispatcher = sub.dispatcher
    read_position = dispatcher.read_position if dispatcher is not None else stats.read_position
    return {
        "markDeletePosition": str(stats.mark_delete_position),
        "readPosition": str(read_position),
        "state": "Open" if not sub.closed else "Closed",
        "active": bool(sub.consumers),
        "numberOfEntriesSinceFirstNotAckedMessage": sub.ml.entries_between(stats.mark_delete_position,
                                                                           read_position),
        "individuallyDeletedMessagesCount": stats.individually_acked_entries,
        "individuallyDeletedMessages": ack_ranges_text(sub.cursor.acked_ledgers),
        "totalNonContiguousDeletedMessagesRange": len(ack_ranges(sub.cursor.acked_ledgers)),
        "waitingReadOp": _waiting_for_entries(sub),
        "pendingReadOps": 1 if dispatcher is not None and dispatcher.reading else 0,
        "subscriptionHavePendingRead": dispatcher is not None and dispatcher.reading,
        "cursorLedger": -1,            # the cursor's state is in the metadata store, not a ledger
        "cursorLedgerLastEntry": -1,
        "properties": {},
    }


def compacted_ledger_json(record) -> dict:
    """Pulsar's compactedLedger of a `broker.compaction.record.CompactionRecord` (None: -1s)."""
    if record is None or record.ledger_id < 0:
        return {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False}
    return {"ledgerId": record.ledger_id, "entries": record.entries, "size": record.size_bytes, "offloaded": False}


def internal_stats(topic: PersistentTopic) -> dict:
    ml = topic.ml
    infos = ml.ledgers()
    current = infos[-1] if infos else None     # Pulsar's current ledger: the last one
    ledgers = []
    for info in infos:
        is_open = info.state is LedgerState.OPEN
        ledgers.append({"ledgerId": info.ledger_id,
                        "entries": 0 if is_open else info.entries,
                        "size": 0 if is_open else info.size_bytes,
                        "offloaded": info.state is LedgerState.OFFLOADED,
                        "underReplicated": auditor.is_under_replicated(info.ledger_id)})
    state = ml.state.value
    return {
        "entriesAddedCounter": ml.trimmed_totals.entries + sum(i.entries for i in infos),
        "numberOfEntries": sum(i.entries for i in infos),
        "pendingAddEntriesCount": ml.pending_adds,
        "waitingCursorsCount": sum(1 for sub in list(topic.subscriptions.values()) if _waiting_for_entries(sub)),
        "totalSize": sum(i.size_bytes for i in infos),
        "currentLedgerEntries": current.entries if current is not None else 0,
        "currentLedgerSize": current.size_bytes if current is not None else 0,
        "lastLedgerCreatedTimestamp": iso_ms(current.created_ms) if current is not None else None,
        "lastLedgerCreationFailureTimestamp": None,
        "lastConfirmedEntry": str(ml.last_confirmed),
        "state": _ML_STATE_NAMES.get(state, state),
        "ledgers": ledgers,
        "underReplicated": any(entry["underReplicated"] for entry in ledgers),
        "cursors": {name: _cursor_json(sub) for name, sub in list(topic.subscriptions.items())},
        "schemaLedgers": [],
        "compactedLedger": compacted_ledger_json(topic.compaction.record),
    }
