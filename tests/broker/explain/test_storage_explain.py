"""`broker.explain.analysis` over managed-ledger state (the `LedgerView` value model the cursor
tests use, and real `ManagedCursor`s): each culprit's diagnosis, when ledgers go, the advice, and
that the decomposition sums exactly to storageSize (also under hypothesis, over random ledgers,
acks and policies); and once over a real `ManagedLedger` on real bookie processes, with the facts
the admin handler reads from the metadata store (records, ensembles). The same analysis against a
real standalone, culprit by culprit: tests/acceptance/test_explain_storage.py.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.admin.explain import ledger_bookies, ledger_records
from broker.explain.advice import count, retention_words
from broker.explain.analysis import (
    AWAITING_TRIM,
    OPEN,
    PINNED,
    RETAINED,
    UNCONSUMED,
    Settings,
    StorageExplanation,
    StorageFacts,
    duration,
    explain,
    retention_text,
    to_json,
)
from broker.retention.offload import OffloadPolicy
from common.human import human_bytes
from cursor.managed_cursor import ManagedCursor
from cursor.retention import MIB, RetentionPolicy
from cursor.stats import storage_size_bytes
from ledger.managed_ledger import ManagedLedger
from ledger.position import EARLIEST, Position
from tests.ledger.conftest import LedgerEnv, run, shutdown
from tests.ledger.conftest import env as env  # the fixture: real bookie processes
from tests.support.ledger_view import MemoryLedgerView
from tests.support.waiting import until

P = Position
MINUTE_MS = 60_000
DAY_MS = 1_440 * MINUTE_MS
NOW_MS = 10 * DAY_MS
SETTINGS = Settings(rollover_entries=50_000, rollover_bytes=2 << 30, rollover_age_ms=4 * 60 * MINUTE_MS,
                    rollover_min_age_ms=10 * MINUTE_MS, retention_check_interval_ms=60_000, s3_bucket="")
NO_OFFLOAD = OffloadPolicy(-1, -1, 14_400_000)


def facts(time_minutes: int = 0, size_mb: int = 0, ttl_seconds: int = 0) -> StorageFacts:
    return StorageFacts(RetentionPolicy(time_minutes, size_mb), ttl_seconds, NO_OFFLOAD, SETTINGS)


def view_of(ledgers: int, entries: int = 4, size: int = 1000, start_ms: int = 3 * DAY_MS) -> MemoryLedgerView:
    """`ledgers` ledgers of `entries` entries (the last one open), published a minute apart
    from `start_ms` on, entry k of the topic `size + k` bytes (so exact bytes differ from a share by entries)."""
    spec = []
    k = 0
    for _ in range(ledgers):
        row = []
        for _ in range(entries):
            row.append((size + k, 1, start_ms + k * MINUTE_MS))
            k += 1
        spec.append(row)
    return MemoryLedgerView(spec)


def cursor(view: MemoryLedgerView, name: str = "sub", md: Position = EARLIEST) -> ManagedCursor:
    return ManagedCursor(name, view, mark_delete_position=md, durable=False)


def parts(e: StorageExplanation) -> dict[str, int]:
    return {p.category: p.size_bytes for p in e.decomposition}


def assert_sums(e: StorageExplanation, view: MemoryLedgerView) -> None:
    assert e.storage_size_bytes == storage_size_bytes(view)
    assert sum(parts(e).values()) == e.storage_size_bytes
    for ledger in e.ledgers:
        assert sum(ledger.parts.values()) == ledger.size_bytes


def test_one_unacked_old_message_pins_the_consumed_ledgers_after_it() -> None:
    view = view_of(4)
    sub = cursor(view)
    sub.ack([p for p in view.all_positions() if p != P(1, 0)])
    e = explain("t", view, [sub], facts(), NOW_MS)
    assert_sums(e, view)
    [s] = e.subscriptions
    assert (s.backlog_entries, s.ack_holes, s.oldest_unacked) == (1, 1, P(1, 0))
    assert s.oldest_unacked_publish_ms == 3 * DAY_MS
    sizes = [ledger.size_bytes for ledger in e.ledgers]
    assert parts(e)[UNCONSUMED] == 1000 == s.backlog_bytes     # entry 1:0's exact bytes (not 4006 // 4)
    assert parts(e)[PINNED] == sizes[0] - 1000 + sizes[1] + sizes[2]
    assert parts(e)[OPEN] == sizes[3]
    assert s.pinned_ledgers == 3 and s.pinned_bytes == sum(sizes[:3])
    assert s.pinned_acked_bytes == parts(e)[PINNED]
    assert e.ledgers[1].kept_by[0].kind == "subscription" and e.ledgers[1].kept_by[0].ack_holes == 1
    assert e.ledgers[0].goes_at_ms is None
    assert e.ledgers[0].goes == "when sub acks up to 1:3 (its oldest unacked entry is 1:0)"
    assert e.ledgers[1].goes == "when sub acks up to 2:3 (its oldest unacked entry is 1:0)"
    assert e.ledgers[3].goes.startswith("at rollover (after 50000 entries")
    line = e.advice[0]
    assert line.startswith("subscription sub has 1 unacked message, the oldest 1:0 from 7d ago")
    assert "pinning" in line and "in 3 ledgers (1 ack hole)" in line


def test_ack_holes_are_counted_below_the_highest_ack_only() -> None:
    view = view_of(3)
    sub = cursor(view)
    sub.ack([P(1, 1), P(1, 3), P(2, 0), P(2, 2)])         # unacked: 1:0 1:2 2:1 2:3 and ledger 3
    e = explain("t", view, [sub], facts(), NOW_MS)
    assert_sums(e, view)
    [s] = e.subscriptions
    assert s.ack_holes == 3                               # 1:0, 1:2, 2:1 (2:3 is above the last ack)
    assert s.backlog_entries == 4 + 4
    assert e.ledgers[0].unacked_entries == 2 and e.ledgers[1].unacked_entries == 2


def test_ttl_says_when_a_pinned_ledger_goes() -> None:
    view = view_of(3)
    sub = cursor(view)
    sub.ack([p for p in view.all_positions() if p != P(1, 0)])
    e = explain("t", view, [sub], facts(ttl_seconds=3600), NOW_MS)
    first = e.ledgers[0]
    assert first.goes_at_ms == first.last_publish_ms + 3_600_000 < NOW_MS
    assert first.goes.startswith("at the next retention pass (when sub acks up to 1:3 (its oldest unacked "
                                 "entry is 1:0), or when the TTL (1h) expires it")
    assert e.ledgers[1].goes_at_ms == e.ledgers[1].last_publish_ms + 3_600_000
    [s] = e.subscriptions
    freed = e.ledgers[0].size_bytes + e.ledgers[1].size_bytes      # acking 1:0 releases both closed ledgers
    assert (s.released_bytes, s.freeable_bytes, s.co_keepers) == (freed, freed, ())
    assert e.advice[0].endswith(f"ack, skip or expire it to free {human_bytes(freed)} "
                                "(the message TTL, 1h, expires it at the next retention pass)")


def test_retention_by_time_keeps_consumed_ledgers_until_it_expires() -> None:
    view = view_of(4, start_ms=NOW_MS - 30 * MINUTE_MS)
    sub = cursor(view)
    sub.ack(view.all_positions())
    e = explain("t", view, [sub], facts(time_minutes=7 * 1440, size_mb=-1), NOW_MS)
    assert_sums(e, view)
    assert parts(e)[RETAINED] == sum(ledger.size_bytes for ledger in e.ledgers[:3])
    assert parts(e)[UNCONSUMED] == 0 and parts(e)[OPEN] == e.ledgers[3].size_bytes
    for ledger in e.ledgers[:3]:
        assert [k.kind for k in ledger.kept_by] == ["retention"]
        assert ledger.goes_at_ms == ledger.last_publish_ms + 7 * DAY_MS
    assert any(line.startswith("retention 7d keeps ") and "of consumed data in 3 ledgers" in line
               for line in e.advice)


def test_retention_by_size_keeps_the_newest_ledgers_under_the_bound() -> None:
    view = MemoryLedgerView([[(MIB // 2, 1, 0)] * 2] * 4)  # four 1 MiB ledgers
    sub = cursor(view)
    sub.ack(view.all_positions())
    e = explain("t", view, [sub], facts(time_minutes=-1, size_mb=2), NOW_MS)
    assert_sums(e, view)
    assert [ledger.parts for ledger in e.ledgers[:3]] == [{AWAITING_TRIM: MIB}, {AWAITING_TRIM: MIB}, {RETAINED: MIB}]
    assert e.ledgers[2].goes == "when the topic grows past the retention size (2 MB)"
    assert e.ledgers[0].goes.startswith("at the next retention pass")


def test_no_subscription_leaves_closed_ledgers_to_the_next_retention_pass() -> None:
    view = view_of(3)
    e = explain("t", view, [], facts(), NOW_MS)
    assert_sums(e, view)
    assert parts(e)[AWAITING_TRIM] == e.ledgers[0].size_bytes + e.ledgers[1].size_bytes
    assert [k.kind for k in e.ledgers[0].kept_by] == ["nothing"]
    assert e.backlog_size_bytes == 0 and parts(e)[UNCONSUMED] == 0
    assert any(line.startswith("no subscription: nothing reads the topic; 2 ledgers") and "are trimmed" in line
               and "every 1m" in line for line in e.advice)
    assert not any("consumed" in line for line in e.advice)             # nothing consumed anything


def test_ledgers_go_oldest_first() -> None:
    # ledger 2 was published before ledger 1 (publish times are the producers'): it waits for 1
    view = MemoryLedgerView([[(100, 1, NOW_MS - 50 * MINUTE_MS)], [(100, 1, NOW_MS - 80 * MINUTE_MS)], []])
    sub = cursor(view)
    sub.ack(view.all_positions())
    e = explain("t", view, [sub], facts(time_minutes=60, size_mb=-1), NOW_MS)
    assert e.ledgers[0].goes_at_ms == NOW_MS + 10 * MINUTE_MS
    assert e.ledgers[1].goes_at_ms == NOW_MS + 10 * MINUTE_MS
    assert e.ledgers[1].goes == "with ledger 1 (ledgers go oldest first)"


def test_two_subscriptions_backlog_is_the_union() -> None:
    view = view_of(3)
    fast, slow = cursor(view, "fast"), cursor(view, "slow")
    fast.ack(view.all_positions())
    slow.ack([p for p in view.all_positions() if p[0] == 1])
    e = explain("t", view, [fast, slow], facts(), NOW_MS)
    assert_sums(e, view)
    assert e.ledgers[1].parts == {UNCONSUMED: e.ledgers[1].size_bytes}
    assert [k.subscription for k in e.ledgers[1].kept_by] == ["slow"]
    assert e.backlog_size_bytes == {s.name: s.backlog_bytes for s in e.subscriptions}["slow"]
    assert any(line.startswith("subscription slow has a backlog of 8 entries") for line in e.advice)


def test_a_culprit_co_pinned_by_another_subscription_frees_nothing_alone() -> None:
    # the trial: sub-excl has consumed nothing (its backlog holds every ledger); sub-shared acked all
    # but one old message. Acking that message alone frees 0 B: sub-excl still holds the ledgers.
    view = view_of(4)
    excl, shared = cursor(view, "sub-excl"), cursor(view, "sub-shared")
    shared.ack([p for p in view.all_positions() if p != P(1, 0)])
    e = explain("t", view, [excl, shared], facts(), NOW_MS)
    assert_sums(e, view)
    closed = sum(ledger.size_bytes for ledger in e.ledgers[:3])
    subs = {s.name: s for s in e.subscriptions}
    assert subs["sub-shared"].pinned_acked_bytes > 0
    for name, other in (("sub-shared", "sub-excl"), ("sub-excl", "sub-shared")):
        s = subs[name]
        assert (s.released_bytes, s.freeable_bytes, s.freeable_with_co_keepers_bytes) == (0, 0, closed)
        assert [k.name for k in s.co_keepers] == [other]
    assert subs["sub-shared"].co_keepers[0].ack_holes == 0 and subs["sub-excl"].co_keepers[0].ack_holes == 1
    shared_line = next(line for line in e.advice if line.startswith("subscription sub-shared"))
    assert shared_line.endswith(f"; also held by sub-excl's backlog: acking, skipping or expiring it alone frees 0 B "
                                f"({human_bytes(closed)} once sub-excl lets go too)")
    assert "to free" not in shared_line
    excl_line = next(line for line in e.advice if line.startswith("subscription sub-excl"))
    assert "also held by sub-shared's 1 ack hole: consuming it alone frees 0 B" in excl_line
    doc = to_json(e)["subscriptions"]["sub-shared"]
    assert (doc["freeableSize"], doc["freeableWithCoKeepersSize"]) == (0, closed)
    assert doc["coKeepers"] == [{"subscription": "sub-excl", "unackedEntries": 16, "ackHoles": 0}]


def test_advice_is_ordered_by_the_bytes_acting_alone_frees() -> None:
    # b has consumed nothing; a acked all but 3:0. Acting on a alone frees nothing (b holds every
    # ledger); b consuming alone frees ledgers 1-2 (a has passed them), though a pins more acked data.
    view = view_of(5)
    a, b = cursor(view, "a"), cursor(view, "b")
    a.ack([p for p in view.all_positions() if p != P(3, 0)])
    e = explain("t", view, [a, b], facts(), NOW_MS)
    assert_sums(e, view)
    sizes = [ledger.size_bytes for ledger in e.ledgers]
    subs = {s.name: s for s in e.subscriptions}
    assert subs["a"].pinned_acked_bytes > 0 == subs["b"].pinned_acked_bytes
    assert (subs["a"].freeable_bytes, subs["b"].freeable_bytes) == (0, sizes[0] + sizes[1])
    assert subs["a"].freeable_with_co_keepers_bytes == subs["b"].freeable_with_co_keepers_bytes == sum(sizes[:4])
    assert e.advice[0].startswith("subscription b has a backlog of 20 entries")
    assert f"also held by a's 1 ack hole: consuming it alone frees {human_bytes(sizes[0] + sizes[1])}" in e.advice[0]
    assert e.advice[1].startswith("subscription a has 1 unacked message")
    assert "also held by b's backlog: acking, skipping or expiring it alone frees 0 B" in e.advice[1]


def test_freed_ledgers_retention_keeps_are_not_said_to_be_freed() -> None:
    view = view_of(4, start_ms=NOW_MS - 30 * MINUTE_MS)
    sub = cursor(view)
    sub.ack([p for p in view.all_positions() if p != P(1, 0)])
    e = explain("t", view, [sub], facts(time_minutes=60, size_mb=-1), NOW_MS)
    [s] = e.subscriptions
    closed = sum(ledger.size_bytes for ledger in e.ledgers[:3])
    assert (s.released_bytes, s.freeable_bytes) == (closed, 0)
    assert e.advice[0].endswith(f"ack, skip or expire it to free 0 B now (retention 1h keeps the "
                                f"{human_bytes(closed)} that releases)")


def test_an_empty_open_ledger_reads_open_ledger_empty() -> None:
    view = MemoryLedgerView([[(100, 1, NOW_MS - 50 * MINUTE_MS)] * 2, [(100, 1, NOW_MS - 40 * MINUTE_MS)], []])
    a, b = cursor(view, "a"), cursor(view, "b")
    a.ack(view.all_positions())
    b.ack(view.all_positions())
    e = explain("t", view, [a, b], facts(), NOW_MS)
    assert_sums(e, view)
    empty = e.ledgers[-1]
    assert (empty.state, empty.entries) == ("open", 0)
    assert [(k.kind, k.detail) for k in empty.kept_by] == [("open", "open ledger (empty): it takes appends, "
                                                                    "never trimmed")]
    assert not any("acked by" in k.detail for ledger in e.ledgers for k in ledger.kept_by)


def test_counts_agree_with_their_words() -> None:
    view = view_of(3)
    sub = cursor(view)
    sub.ack([p for p in view.all_positions() if p[0] <= 2])
    e = explain("t", view, [sub], facts(), NOW_MS)           # ledgers 1-2 passed, 3 the open one
    assert e.ledgers[0].kept_by[0].kind == "nothing"
    assert any(line.startswith("every subscription has passed them; 2 ledgers (") and ") are trimmed" in line
               for line in e.advice)
    view = view_of(2)
    sub = cursor(view)
    sub.ack([p for p in view.all_positions() if p[0] == 1])
    e = explain("t", view, [sub], facts(), NOW_MS)
    assert any(line.startswith("every subscription has passed it; 1 ledger (") and ") is trimmed" in line
               for line in e.advice)
    assert e.ledgers[1].kept_by[1].detail == "sub has not acked any of its 4 entries (mark-delete 1:3)"
    e = explain("t", view, [], facts(time_minutes=-1, size_mb=-1), NOW_MS)
    assert e.advice[0] == (f"unlimited retention (time -1, size -1) keeps {human_bytes(e.ledgers[0].size_bytes)} "
                           "of data no subscription reads in 1 ledger, forever")
    assert [k.detail for k in e.ledgers[0].kept_by] == ["unlimited retention (time -1, size -1) keeps it"]
    e = explain("t", view, [], facts(), NOW_MS)
    assert "none (0, 0)" not in " ".join([*e.advice, *(ledger.goes for ledger in e.ledgers)])
    assert e.ledgers[1].goes.endswith("then as soon as nothing else keeps it (there is no retention: time 0, size 0)")


def test_json_shape() -> None:
    view = view_of(2)
    sub = cursor(view)
    doc = to_json(explain("persistent://t/ns/x", view, [sub], facts(), NOW_MS))
    assert set(doc) == {"topic", "nowMs", "storageSize", "backlogSize", "backlogSubscription", "policies",
                        "ledgers", "subscriptions", "decomposition", "advice"}
    assert doc["backlogSubscription"] == "sub"
    assert [p["category"] for p in doc["decomposition"]] == [UNCONSUMED, PINNED, RETAINED, OPEN, "offloaded",
                                                             AWAITING_TRIM]
    ledger = doc["ledgers"][0]
    assert set(ledger) == {"ledgerId", "entries", "size", "state", "createdMs", "firstPublishMs", "lastPublishMs",
                           "location", "unackedEntries", "keptBy", "goesAtMs", "goes", "bookieCopyGoesAtMs",
                           "parts"}
    assert doc["subscriptions"]["sub"]["oldestUnacked"] == "1:0"
    assert set(doc["subscriptions"]["sub"]) >= {"releasedSize", "freeableSize", "coKeepers",
                                                "freeableWithCoKeepersSize"}
    assert doc["subscriptions"]["sub"]["coKeepers"] == []


def test_words() -> None:
    assert duration(14_400_000) == "4h" and duration(93_600_000) == "1d 2h" and duration(250) == "250ms"
    assert retention_text(RetentionPolicy(10_080, -1)) == "7d"
    assert retention_text(RetentionPolicy(-1, 10)) == "10 MB"
    assert retention_text(RetentionPolicy(-1, -1)) == "unlimited (-1, -1)"
    assert retention_words(RetentionPolicy(0, 0)) == "no retention (time 0, size 0)"
    assert retention_words(RetentionPolicy(-1, -1)) == "unlimited retention (time -1, size -1)"
    assert retention_words(RetentionPolicy(60, 10)) == "retention 1h or 10 MB"
    assert [count(n, "entry") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
    assert count(1, "ack hole") == "1 ack hole" and count(0, "ledger") == "0 ledgers"


@settings(max_examples=150, deadline=None)
@given(ledgers=st.lists(st.lists(st.integers(0, 5000), min_size=0, max_size=6), min_size=1, max_size=5),
       acks=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), max_size=20),
       subscriptions=st.integers(0, 2),
       retention=st.sampled_from([(0, 0), (-1, -1), (60, -1), (-1, 1), (30, 1)]))
def test_decomposition_always_sums_to_storage_size(ledgers, acks, subscriptions, retention) -> None:
    view = MemoryLedgerView([[(size, 1, NOW_MS - 90 * MINUTE_MS + i * MINUTE_MS) for i, size in enumerate(row)]
                             for row in ledgers])
    positions = view.all_positions()
    cursors = []
    for n in range(subscriptions):
        c = cursor(view, f"s{n}")
        chosen = [positions[(a * 7 + b + n) % len(positions)] for a, b in acks] if positions else []
        if chosen:
            c.ack(chosen)
        cursors.append(c)
    e = explain("t", view, cursors, facts(*retention), NOW_MS)
    assert_sums(e, view)
    assert all(0.0 <= p.percent <= 100.0 for p in e.decomposition)
    assert e.advice
    # the union of the backlogs: the one backlog exactly, or at least the largest
    if len(cursors) == 1:
        assert parts(e)[UNCONSUMED] == e.backlog_size_bytes == e.subscriptions[0].backlog_bytes
    assert parts(e)[UNCONSUMED] >= e.backlog_size_bytes
    for sub in e.subscriptions:      # acting alone frees no more than it releases, nor than acting with the others
        assert 0 <= sub.freeable_bytes <= min(sub.released_bytes, sub.freeable_with_co_keepers_bytes)
        assert sub.freeable_with_co_keepers_bytes <= e.storage_size_bytes


def test_over_a_real_managed_ledger_with_its_bookies(env: LedgerEnv) -> None:
    bookies = sorted(b.address for b in env.start_bookies(2))

    async def body() -> None:
        config = env.config(managed_ledger_rollover_entries=3, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open("public/default/persistent/explain", store, client, config,
                                      ensemble_size=2, write_quorum=2, ack_quorum=2)
        try:
            positions = [await ml.append(b"x" * (100 + i), publish_time_ms=NOW_MS - (9 - i) * MINUTE_MS)
                         for i in range(8)]
            await until(lambda: len(ml.ledgers()) == 3, 10.0, "two rollovers")
            sub = ManagedCursor.starting_at("sub", ml, EARLIEST, durable=False)
            sub.ack(positions[1:])
            ids = [info.ledger_id for info in ml.ledgers()]
            real = StorageFacts(RetentionPolicy(0, 0), 0, NO_OFFLOAD, SETTINGS,
                                await ledger_records(store, ml.name), await ledger_bookies(store, ids))
            e = explain("persistent://public/default/explain", ml, [sub], real, NOW_MS)
        finally:
            await ml.close()
            await shutdown(store, client)
        assert e.storage_size_bytes == sum(100 + i for i in range(8))
        assert sum(parts(e).values()) == e.storage_size_bytes
        assert [ledger.state for ledger in e.ledgers] == ["closed", "closed", "open"]
        assert all(ledger.bookies == tuple(bookies) and ledger.bookie_copy for ledger in e.ledgers)
        sizes = [100 + 101 + 102, 103 + 104 + 105, 106 + 107]
        assert [ledger.size_bytes for ledger in e.ledgers] == sizes
        assert parts(e)[UNCONSUMED] == 100 and parts(e)[PINNED] == sizes[0] - 100 + sizes[1]   # entry 0: 100 B
        assert parts(e)[OPEN] == sizes[2]
        [s] = e.subscriptions
        assert (s.oldest_unacked, s.ack_holes, s.oldest_unacked_publish_ms) == (positions[0], 1, NOW_MS - 9 * MINUTE_MS)

    run(body())
