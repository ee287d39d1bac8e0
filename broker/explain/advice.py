"""`explain-storage`'s words for people: the advice lines, and the phrases its ledger rows use.

`advice(e)` gives one line per culprit of a `StorageExplanation`, ordered by the bytes acting on
that culprit would free (`advice_items` gives each line with those bytes):
- a subscription: what it holds (its unacked messages, the data it acknowledged they pin, its ack
  holes) and what acting on it ALONE frees at the next retention pass (`freeable_bytes`): when
  another subscription also keeps those ledgers, the line names it ("also held by sub-b's
  backlog") and says what acting on both frees; when retention would keep what it releases, the
  line says so;
- retention keeping acknowledged (or, with no subscription, unread) ledgers: the retained bytes;
- offloaded ledgers and their bookie copies (they free nothing of storageSize: 0);
- the open (or last) ledger (never trimmed: 0);
- ledgers nothing keeps: the next retention pass trims them by itself (their bytes).
Ties keep that order (subscriptions among themselves by the acknowledged bytes they pin, then
their backlog).

The words: counts agree with their nouns and verbs ("1 ledger is", "2 ledgers are"); a policy of
(0, 0) reads "no retention (time 0, size 0)", (-1, -1) "unlimited retention (time -1, size -1)".
What must hold: the advice only reads the explanation; it states bytes the analysis computed.
"""

from __future__ import annotations

import datetime

from broker.explain.model import (
    AWAITING_TRIM,
    OFFLOADED,
    OPEN,
    RETAINED,
    CoKeeper,
    Part,
    Settings,
    StorageExplanation,
    SubscriptionExplanation,
)
from common.human import human_bytes
from cursor.retention import MS_PER_MINUTE, RetentionPolicy

OFFLOADED_STATE = "offloaded"    # LedgerExplanation.state of an offloaded ledger


# --- advice --------------------------------------------------------------------------------------------

def advice(e: StorageExplanation) -> list[str]:
    """One line per culprit, the one freeing the most bytes first."""
    return [line for _, line in advice_items(e)]


def advice_items(e: StorageExplanation) -> list[tuple[int, str]]:
    """(bytes acting on the culprit frees, its line), most bytes first (a stable sort)."""
    parts = {part.category: part for part in e.decomposition}
    items = _subscription_advice(e)
    items += _retention_advice(e, parts[RETAINED])
    items += [(0, line) for line in _offload_advice(e, parts[OFFLOADED])]
    items += _open_advice(e, parts[OPEN])
    items += _awaiting_advice(e, parts[AWAITING_TRIM])
    if not items:
        items.append((0, "nothing is stored" if not e.storage_size_bytes
                      else "storage is the backlog: nothing else is kept"))
    return sorted(items, key=lambda item: item[0], reverse=True)


def _subscription_advice(e: StorageExplanation) -> list[tuple[int, str]]:
    out = []
    for sub in sorted(e.subscriptions, key=lambda s: (s.pinned_acked_bytes, s.backlog_bytes), reverse=True):
        oldest = ""
        if sub.oldest_unacked is not None:
            oldest = f", the oldest {sub.oldest_unacked}"
            if sub.oldest_unacked_publish_ms:
                oldest += (f" from {duration(e.now_ms - sub.oldest_unacked_publish_ms)} ago "
                           f"({iso(sub.oldest_unacked_publish_ms)})")
        them = "it" if sub.backlog_messages == 1 else "them"
        if sub.pinned_acked_bytes:
            holes = f"{count(sub.ack_holes, 'ack hole')}" if sub.ack_holes else "no ack hole: a partly consumed ledger"
            line = (f"subscription {sub.name} has {count(sub.backlog_messages, 'unacked message')}{oldest} pinning "
                    f"{human_bytes(sub.pinned_acked_bytes)} it has acknowledged in "
                    f"{count(sub.pinned_ledgers, 'ledger')} ({holes})")
            line += _frees(e, sub, f": ack, skip or expire {them} to free", f"acking, skipping or expiring {them}")
        elif sub.backlog_entries:
            line = (f"subscription {sub.name} has a backlog of {count(sub.backlog_entries, 'entry')} "
                    f"({human_bytes(sub.backlog_bytes)}){oldest}: it goes as {sub.name} consumes")
            if sub.pinned_ledgers or sub.co_keepers:
                line += _frees(e, sub, "; consuming it frees", "consuming it")
            else:
                line += " (it is all in the last ledger: consuming it frees no ledger until that rolls over)"
        else:
            continue
        out.append((sub.freeable_bytes, line + _ttl_words(e, sub)))
    return out


def _frees(e: StorageExplanation, sub: SubscriptionExplanation, alone: str, acting: str) -> str:
    """What acting on the subscription alone frees, who else keeps those ledgers, what retention
    keeps of what it releases. `alone`: the words before the bytes; `acting`: the verb phrase."""
    freed = human_bytes(sub.freeable_bytes)
    if sub.co_keepers:
        names = [keeper.name for keeper in sub.co_keepers]
        held = ", ".join(co_keeper_words(keeper) for keeper in sub.co_keepers)
        return (f"; also held by {held}: {acting} alone frees {freed} "
                f"({human_bytes(sub.freeable_with_co_keepers_bytes)} once {_and(names)} "
                f"{'lets' if len(names) == 1 else 'let'} go too)")
    kept = sub.released_bytes - sub.freeable_bytes
    if kept > 0:
        return (f"{alone} {freed} now ({retention_words(e.retention)} keeps the {human_bytes(kept)} "
                f"that releases)")
    return f"{alone} {freed}"


def co_keeper_words(keeper: CoKeeper) -> str:
    """"sub-b's backlog" (nothing acked after what it has not acked) or "sub-b's 2 ack holes"."""
    if keeper.ack_holes:
        return f"{keeper.name}'s {count(keeper.ack_holes, 'ack hole')}"
    return f"{keeper.name}'s backlog"


def _ttl_words(e: StorageExplanation, sub: SubscriptionExplanation) -> str:
    """When the message TTL acks the subscription's oldest unacked entry ("" without a TTL)."""
    if e.ttl_seconds <= 0 or not sub.oldest_unacked_publish_ms:
        return ""
    at_ms = sub.oldest_unacked_publish_ms + e.ttl_seconds * 1000
    when = "at the next retention pass" if at_ms <= e.now_ms else f"at {iso(at_ms)}"
    return f" (the message TTL, {duration(e.ttl_seconds * 1000)}, expires it {when})"


def _data(e: StorageExplanation) -> str:
    """What the kept bytes are: consumed by every subscription, or read by none."""
    return "consumed data" if e.subscriptions else "data no subscription reads"


def _retention_advice(e: StorageExplanation, part: Part) -> list[tuple[int, str]]:
    retained = [ledger for ledger in e.ledgers if RETAINED in ledger.parts]
    if not retained:
        return []
    first = retained[0]
    when = (", forever" if first.goes_at_ms is None and first.goes.startswith("never")
            else f"; {'it' if len(retained) == 1 else 'the oldest'} goes {first.goes}")
    return [(part.size_bytes, f"{retention_words(e.retention)} keeps {human_bytes(part.size_bytes)} of {_data(e)} "
                              f"in {count(len(retained), 'ledger')}{when}")]


def _open_advice(e: StorageExplanation, part: Part) -> list[tuple[int, str]]:
    if not part.size_bytes:
        return []
    last = e.ledgers[-1]
    which = "open" if last.state == "open" else "last"
    return [(0, f"the {which} ledger {last.ledger_id} holds {human_bytes(part.size_bytes)} of {_data(e)} "
                f"({count(last.entries, 'entry')} in all); it goes {last.goes}")]


def _awaiting_advice(e: StorageExplanation, part: Part) -> list[tuple[int, str]]:
    if not part.size_bytes:
        return []
    who = ("no subscription: nothing reads the topic" if not e.subscriptions
           else "every subscription has passed them" if part.ledgers > 1 else "every subscription has passed it")
    return [(part.size_bytes, f"{who}; {count(part.ledgers, 'ledger')} ({human_bytes(part.size_bytes)}) "
                              f"{'is' if part.ledgers == 1 else 'are'} trimmed at the next retention pass "
                              f"(every {duration(e.settings.retention_check_interval_ms)})")]


def _offload_advice(e: StorageExplanation, part: Part) -> list[str]:
    offloaded = [ledger for ledger in e.ledgers if ledger.state == OFFLOADED_STATE]
    if not offloaded:
        return []
    size = human_bytes(sum(ledger.size_bytes for ledger in offloaded))
    with_copy = [ledger for ledger in offloaded if ledger.bookie_copy]
    where = f"s3://{e.settings.s3_bucket}" if e.settings.s3_bucket else "the cold tier"
    if not with_copy:
        one = len(offloaded) == 1
        return [f"{count(len(offloaded), 'offloaded ledger')} ({size}) {'lives' if one else 'live'} only in "
                f"{where}; {human_bytes(part.size_bytes)} of {'it' if one else 'them'} is {_data(e)} kept until "
                f"{'it is' if one else 'they are'} trimmed"]
    keep = "keeps a bookie copy" if len(with_copy) == 1 else "keep a bookie copy"
    their = "its object" if len(with_copy) == 1 else "their objects"
    if e.offload_deletion_lag_ms < 0:
        return [f"{count(len(with_copy), 'offloaded ledger')} {keep} forever (offloadDeletionLagMs -1) "
                f"besides {their} in {where}"]
    next_ms = min(ledger.bookie_copy_goes_at_ms or 0 for ledger in with_copy)
    return [f"{count(len(with_copy), 'offloaded ledger')} ({size}) {keep} for offloadDeletionLagMs "
            f"({duration(e.offload_deletion_lag_ms)}) besides {their} in {where}; the next copy goes "
            f"{'at the next retention pass' if next_ms <= e.now_ms else 'at ' + iso(next_ms)}"]


# --- words for people ------------------------------------------------------------------------------------

def count(number: int, noun: str) -> str:
    """"1 ledger", "2 ledgers", "0 entries", "1 entry", "3 entries"."""
    if number == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number} {plural}"


def _and(names: list[str]) -> str:
    """["a"] -> "a"; ["a", "b"] -> "a and b"; ["a", "b", "c"] -> "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


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
    """The bounds: (10080, -1) -> "7d"; (-1, 10) -> "10 MB"; (60, 10) -> "1h or 10 MB";
    (-1, -1) -> "unlimited (-1, -1)"; (0, 0) -> "time 0, size 0"."""
    if policy.time_minutes == 0 and policy.size_mb == 0:
        return "time 0, size 0"
    words = []
    if policy.time_minutes >= 0:
        words.append(duration(policy.time_minutes * MS_PER_MINUTE))
    if policy.size_mb >= 0:
        words.append(f"{policy.size_mb} MB")
    return " or ".join(words) if words else "unlimited (-1, -1)"


def retention_words(policy: RetentionPolicy) -> str:
    """The policy as the subject of a sentence: "retention 7d", "retention 1h or 10 MB",
    "no retention (time 0, size 0)", "unlimited retention (time -1, size -1)"."""
    if policy.time_minutes == 0 and policy.size_mb == 0:
        return "no retention (time 0, size 0)"
    if policy.time_minutes < 0 and policy.size_mb < 0:
        return "unlimited retention (time -1, size -1)"
    return f"retention {retention_text(policy)}"


def rollover_text(settings: Settings) -> str:
    return (f"after {settings.rollover_entries} entries, {human_bytes(settings.rollover_bytes)} or "
            f"{duration(settings.rollover_age_ms)}, not before {duration(settings.rollover_min_age_ms)}")
