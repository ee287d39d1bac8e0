"""Decision tables for retention and TTL, kept-ledger reasons, and stats against a brute-force
recount."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import InvalidRetention
from cursor.managed_cursor import ManagedCursor
from cursor.retention import MIB, RetentionPolicy, apply_retention, ledgers_to_trim, trim_position
from cursor.stats import kept_ledgers, storage_size_bytes, subscription_stats
from ledger.position import EARLIEST, Position
from perf import cursor as perf_cursor
from tests.support.ledger_view import MemoryLedgerView

P = Position
MINUTE_MS = 60_000
NOW_MS = 100 * MINUTE_MS


def four_ledgers() -> MemoryLedgerView:
    """Ledgers 1-3 closed, 1 MiB each, last published 90, 60 and 30 minutes ago; 4 open."""
    view = MemoryLedgerView([[(MIB, 1, (100 - 90) * MINUTE_MS)], [(MIB, 1, (100 - 60) * MINUTE_MS)],
                             [(MIB, 1, (100 - 30) * MINUTE_MS)], [(MIB, 1, NOW_MS)]])
    return view


def cursor_at(view, md: Position, name: str = "s") -> ManagedCursor:
    return ManagedCursor(name, view, mark_delete_position=md, durable=False)


@pytest.mark.parametrize("time_minutes, size_mb, cursor_md, expected", [
    (0, 0, P(3, 0), [1, 2, 3]),        # delete as soon as every cursor has passed
    (0, 0, P(2, 0), [1, 2]),           # ...only what every cursor passed
    (0, 0, P(1, -1), []),
    (-1, -1, P(3, 0), []),             # keep forever
    (45, -1, P(3, 0), [1, 2]),         # time only: 90 and 60 minutes old go, 30 stays
    (60, -1, P(3, 0), [1, 2]),         # exactly at the bound expires
    (61, -1, P(3, 0), [1]),
    (-1, 2, P(3, 0), [1, 2]),          # size only: 4 MiB total, keep <= 2 MiB
    (-1, 3, P(3, 0), [1]),
    (-1, 4, P(3, 0), []),
    (100, 1, P(3, 0), [1, 2, 3]),      # both: either bound trims
    (10, 100, P(3, 0), [1, 2, 3]),
    (1000, 100, P(3, 0), []),
    (1, 1, P(3, 0), [1, 2, 3]),        # the smallest bounds: both expired
    (-1, 1, P(1, 0), [1]),             # size only, but never past the slowest cursor
])
def test_retention_decision_table(time_minutes, size_mb, cursor_md, expected):
    view = four_ledgers()
    policy = RetentionPolicy(time_minutes, size_mb)
    assert ledgers_to_trim(view, [cursor_at(view, cursor_md)], policy, NOW_MS) == expected
    position = trim_position(view, [cursor_at(view, cursor_md)], policy, NOW_MS)
    assert position == (P(expected[-1] + 1, 0) if expected else None)


def test_without_subscriptions_only_retention_keeps_data_and_never_the_open_ledger():
    view = four_ledgers()
    assert ledgers_to_trim(view, [], RetentionPolicy(0, 0), NOW_MS) == [1, 2, 3]
    assert ledgers_to_trim(view, [], RetentionPolicy(45, -1), NOW_MS) == [1, 2]
    assert ledgers_to_trim(view, [cursor_at(view, P(4, 0))], RetentionPolicy(0, 0), NOW_MS) == [1, 2, 3]


def test_slowest_cursor_bounds_trimming():
    view = four_ledgers()
    cursors = [cursor_at(view, P(3, 0), "fast"), cursor_at(view, P(1, 0), "slow")]
    assert ledgers_to_trim(view, cursors, RetentionPolicy(0, 0), NOW_MS) == [1]


@pytest.mark.parametrize("time_minutes, size_mb", [
    (0, 5), (5, 0),            # 0 with a positive value: "keep nothing" and "keep some"
    (0, -1), (-1, 0),          # 0 with -1: "keep nothing" and "keep forever"
    (-2, 1), (1, -7), (-2, -2),  # below -1
    (1.5, 1), (1, "2"), (None, 1),  # not ints
])
def test_invalid_retention(time_minutes, size_mb):
    with pytest.raises(InvalidRetention):
        RetentionPolicy(time_minutes, size_mb)


@pytest.mark.parametrize("time_minutes, size_mb", [(0, 0), (-1, -1), (-1, 1), (1, -1), (1, 1)])
def test_valid_retention(time_minutes, size_mb):
    assert RetentionPolicy(time_minutes, size_mb).time_minutes == time_minutes


def test_apply_retention_calls_trim_with_the_first_kept_position():
    class Ledger:
        def __init__(self, view):
            self.view, self.calls = view, []

        async def trim(self, before):
            self.calls.append(before)
            self.view.trim(before)

    view = four_ledgers()
    ledger = Ledger(view)
    chosen = asyncio.run(apply_retention(ledger, view, [cursor_at(view, P(3, 0))], RetentionPolicy(0, 0), NOW_MS))
    assert chosen == [1, 2, 3] and ledger.calls == [P(4, 0)]
    assert [info.ledger_id for info in view.ledgers()] == [4]


@pytest.mark.parametrize("ttl_s, now_ms, acked_before, expected_md", [
    (0, 10_000, None, P(1, -1)),           # TTL off
    (5, 5_000 + 3, None, P(1, 1)),         # published at 1, 2 expire (< now - ttl = 3)
    (5, 5_000 + 4, None, P(2, -1)),        # all of ledger 1: "before (2, 0)"
    (5, 5_000 + 100, None, P(2, 1)),       # all expire
    (5, 5_000 + 1, None, P(1, -1)),        # nothing older than the cutoff
    (5, 5_000 + 3, P(1, 2), P(1, 2)),      # never moves md back
])
def test_ttl_decision_table(ttl_s, now_ms, acked_before, expected_md):
    view = MemoryLedgerView([[(10, 1, 1), (10, 1, 2), (10, 1, 3)], [(10, 1, 4), (10, 1, 5)]])
    c = ManagedCursor.starting_at("s", view, EARLIEST, durable=False)
    if acked_before is not None:
        c.ack_cumulative(acked_before)
    c.ack([P(2, 1)])  # a hole at (2, 0) before an acked entry
    c.expire(ttl_s, now_ms)
    assert c.mark_delete_position == expected_md
    assert len(view.all_positions()) == 5  # TTL deletes nothing


def test_kept_ledger_reasons():
    view = MemoryLedgerView([[(100, 1, 1)] * 3, [(200, 1, 2)] * 2, [(300, 1, 3)] * 2, [(400, 1, 4)]])
    a = ManagedCursor.starting_at("a", view, EARLIEST, durable=False)
    a.ack([P(1, 1), P(1, 2), P(2, 0), P(2, 1), P(3, 0)])  # hole at (1, 0)
    b = ManagedCursor.starting_at("b", view, EARLIEST, durable=False)
    b.ack_cumulative(P(3, 1))
    kept = kept_ledgers(view, [a, b], RetentionPolicy(-1, -1), NOW_MS)
    assert kept == [
        (1, 300, ("backlog of a",)),
        (2, 400, ("ack hole of a",)),
        (3, 600, ("backlog of a",)),
        (4, 400, ("open", "backlog of a", "backlog of b")),
    ]
    a.ack([P(1, 0)])
    kept = kept_ledgers(view, [a, b], RetentionPolicy(-1, -1), NOW_MS)
    assert [k.reasons for k in kept[:2]] == [("retention",), ("retention",)]
    kept = kept_ledgers(view, [a, b], RetentionPolicy(0, 0), NOW_MS)
    assert [k.reasons for k in kept[:2]] == [(), ()]  # the next retention pass trims them
    assert storage_size_bytes(view) == sum(k.size_bytes for k in kept) == 1700


entries = st.lists(st.lists(st.tuples(st.integers(1, 500), st.integers(1, 70)), max_size=6),
                   min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(ledgers=entries, data=st.data())
def test_stats_match_brute_force(ledgers, data):
    """The oracle is the test's own bookkeeping (a plain set of acked entries and the entries
    with one batch member acked), never the cursor's answers."""
    view = MemoryLedgerView([[(size, n, 0) for size, n in ledger] for ledger in ledgers])
    positions = view.all_positions()
    c = ManagedCursor.starting_at("s", view, EARLIEST, durable=False)
    acked: set[Position] = set()         # model: fully acked entries
    one_member_acked: set[Position] = set()  # model: batches with member 0 acked, the rest not
    read_position = P(1, 0)
    if positions:
        upto = data.draw(st.sampled_from(positions + [P(1, -1)]))
        c.ack_cumulative(upto)
        acked |= {p for p in positions if p <= upto}
        individual = data.draw(st.lists(st.sampled_from(positions), max_size=10))
        c.ack(individual)
        acked |= set(individual)
        for p in data.draw(st.lists(st.sampled_from(positions), max_size=3)):
            n = view.entry_meta(p).messages
            c.ack_batch_indexes(p, [(1 << n) - 2 if n < 64 else -2] + [-1] * ((n - 1) // 64), n)
            if n == 1:                   # its only member: the whole entry
                acked.add(p)
            elif p not in acked:
                one_member_acked.add(p)
        read_position = data.draw(st.sampled_from(positions))
        c.read_position = read_position
    unacked = [p for p in positions if p not in acked]
    stats = subscription_stats(c, view)
    assert stats.backlog_entries == len(unacked)
    partly = sum(1 for p in unacked if p in one_member_acked)
    assert stats.backlog_messages == sum(view.entry_meta(p).messages for p in unacked) - partly
    assert stats.backlog_bytes == sum(view.entry_meta(p).size_bytes for p in unacked)
    assert stats.unacked_entries == sum(1 for p in unacked if p < read_position)


def test_perf_cursor_smoke(capsys):
    assert perf_cursor.main(["--json", "--ack-entries", "20000", "--alternating-entries", "20000",
                             "--holes-entries", "200000", "--holes", "50", "--ledger-entries", "5000"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("acks_per_s", "persisted_bytes_alternating_1m", "persisted_bytes_100m_1000_holes",
                "persist_ms_alternating_1m", "restore_ms_100m_1000_holes"):
        assert out[key] > 0
    assert out["persisted_bytes_100m_1000_holes"] < 16 * 1024
