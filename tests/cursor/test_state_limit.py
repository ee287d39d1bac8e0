"""The cursor state limit: no silent memory-only fallback.

A persist that finds the state over `cursor_state_bytes_max` is an error, a metric and a stats
field; from then on (or as soon as the estimate between persists says so) a durable cursor refuses
acks that would add ack holes, and keeps taking those that do not (extending or joining runs,
cumulative acks), so a consumer can always get back under the limit. The run arithmetic the
estimate rests on is checked against a brute-force count."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

import metadata
from common.config import default_config
from common.errors import CursorStateTooLarge
from cursor import metrics
from cursor.cursor_store import CursorStore
from cursor.managed_cursor import ManagedCursor
from cursor.state_limit import admit, run_delta
from ledger.position import EARLIEST, Position
from metadata.aio import ToThreadStore
from tests.support.ledger_view import MemoryLedgerView

P = Position
QUIET = default_config(cursor_persist_interval_ms=60_000)  # no background persist: tests flush


@pytest.fixture
def store(tmp_path):
    s = metadata.open_store(f"sqlite:///{tmp_path}/meta.db")
    yield s
    s.close()


def view_with(entries: int) -> MemoryLedgerView:
    return MemoryLedgerView([[(100, 1, i) for i in range(entries)]])


def refused_by(call, *args) -> CursorStateTooLarge:
    with pytest.raises(CursorStateTooLarge) as info:
        call(*args)
    return info.value


def test_over_the_limit_at_persist_is_an_error_a_metric_and_refuses_new_holes(store, seed):
    async def go():
        view = view_with(50_000)
        cursor = await CursorStore(ToThreadStore(store), "t").open_cursor(view, "s", start=EARLIEST, config=QUIET)
        rng = random.Random(seed)
        cursor.ack([P(1, e) for e in rng.sample(range(1, 49_000), 20_000)])
        cursor.ack([P(1, e) for e in range(49_000, 49_010)])
        await cursor.flush()                       # fits the default 4 MiB
        cursor.state_bytes_max = 1024              # the operator lowered the limit
        cursor.set_properties({"changed": "yes"})
        too_large = metrics.CURSOR_STATE_TOO_LARGE_TOTAL
        with pytest.raises(CursorStateTooLarge):
            await cursor.flush()
        assert metrics.CURSOR_STATE_TOO_LARGE_TOTAL == too_large + 1
        assert isinstance(cursor.state_error, CursorStateTooLarge)
        assert isinstance(cursor.persist_error, CursorStateTooLarge)
        stats = cursor.stats
        assert stats.state_error is not None and stats.state_bytes > 1024
        assert stats.persisted_bytes < stats.state_bytes  # the store still has the older state

        refused = metrics.CURSOR_ACKS_REFUSED_TOTAL
        alone = next(e for e in range(49_100, 50_000, 3))
        error = refused_by(cursor.ack, [P(1, alone)])             # a new hole: refused
        assert error.details["refused"] == 1 and not cursor.is_acked(P(1, alone))
        assert metrics.CURSOR_ACKS_REFUSED_TOTAL == refused + 1

        error = refused_by(cursor.ack, [P(1, 49_010), P(1, alone), P(1, 49_011)])
        assert error.details["refused"] == 1                      # only the lone one
        assert cursor.is_acked(P(1, 49_010)) and cursor.is_acked(P(1, 49_011))
        assert not cursor.is_acked(P(1, alone))

        hole = next(e for e in range(2, 49_000) if not cursor.is_acked(P(1, e))
                    and cursor.is_acked(P(1, e - 1)) and cursor.is_acked(P(1, e + 1)))
        cursor.ack([P(1, hole)])                                  # joins two runs: taken
        assert cursor.is_acked(P(1, hole))
        cursor.ack([P(1, 0)])                                     # the front: md moves, taken
        assert cursor.mark_delete_position >= P(1, 0)

        refused_by(cursor.ack_batch_indexes, P(1, alone), [0b10], 2)  # a new partial batch
        assert cursor.batch_ack_set(P(1, alone)) is None
        front = view.next_position(cursor.mark_delete_position)
        assert cursor.ack_batch_indexes(front, [0b10], 2) is False    # at the front: taken
        assert cursor.batch_ack_set(front) == [0b10]

        cursor.ack_cumulative(P(1, 48_999))                       # cumulative: always taken
        await cursor.flush()                                      # now it fits again
        assert cursor.state_error is None and cursor.persist_error is None
        cursor.ack([P(1, alone)])                                 # and holes are taken again
        await cursor.flush()
        again = await CursorStore(ToThreadStore(store), "t").load_cursor(view, "s")
        assert again.mark_delete_position == P(1, 49_011) and again.is_acked(P(1, alone))
    asyncio.run(go())


def test_the_estimate_refuses_holes_before_a_persist_would_be_over_the_limit(store, seed):
    """Stand-alone acks one by one at the smallest limit: refused once the estimate is full,
    and every persist in between fits (the estimate is conservative), so a durable cursor
    never holds acks it cannot persist."""
    async def go():
        view = view_with(60_000)
        cursor = await CursorStore(ToThreadStore(store), "t").open_cursor(view, "s", start=EARLIEST, config=QUIET)
        cursor.state_bytes_max = 1024
        rng = random.Random(seed)
        lone = rng.sample(range(2, 60_000, 2), 5_000)   # even ids: never neighbours of each other
        taken = refusals = 0
        for entry in lone:
            try:
                cursor.ack([P(1, entry)])
                taken += 1
            except CursorStateTooLarge:
                refusals += 1
                measured = cursor.persistence.dirty
                await cursor.flush()                     # measures exactly; must fit
                assert cursor.persisted_bytes <= 1024
                if measured:
                    assert cursor.state_error is None
        assert refusals > 0 and taken > 100, (taken, refusals)
        assert cursor.individually_acked_count() == taken
    asyncio.run(go())


def test_group_acks_are_admitted_in_part(store):
    async def go():
        view = view_with(1_000)
        cursor = await CursorStore(ToThreadStore(store), "t").open_cursor(view, "s", start=EARLIEST, config=QUIET)
        cursor.ack([P(1, 500)])
        cursor.state_bytes_max = 1024
        cursor.state_limit.added_bytes = 1024            # the estimate is full
        # 100..102 stand alone; 497..499 touch 500 on the right; 0..2 touch the mark-delete.
        error = refused_by(cursor.ack, [P(1, e) for e in (100, 101, 102, 499, 498, 497, 2, 1, 0)])
        assert error.details["refused"] == 3
        assert [e for e in range(1_000) if cursor.is_acked(P(1, e))] == [0, 1, 2, 497, 498, 499, 500]
        assert cursor.mark_delete_position == P(1, 2)
    asyncio.run(go())


def test_readers_are_never_refused():
    view = view_with(10_000)
    reader = ManagedCursor.starting_at("r", view, EARLIEST, durable=False, state_bytes_max=1024)
    reader.ack([P(1, e) for e in range(1, 10_000, 2)])
    assert reader.individually_acked_count() == 5_000 and reader.state_error is None


def runs(ids: set[int]) -> int:
    return sum(1 for i in ids if i - 1 not in ids)


@st.composite
def ack_sets(draw):
    front = draw(st.one_of(st.none(), st.integers(0, 5)))
    low = 0 if front is None else front
    universe = list(range(low, 70))
    existing = set(draw(st.lists(st.sampled_from(universe), max_size=30)))
    new = set(draw(st.lists(st.sampled_from(universe), max_size=30))) - existing
    return front, existing, new


@settings(max_examples=300, deadline=None)
@given(case=ack_sets())
def test_run_delta_matches_a_brute_force_count(case):
    front, existing, new = case
    before = existing | ({front - 1} if front is not None else set())
    expected = runs(before | new) - runs(before)
    got = run_delta(BitMap64(existing) if existing else None, BitMap64(new), front)
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(case=ack_sets(), free_runs=st.integers(0, 4), data=st.data())
def test_admit_never_spends_more_runs_than_free_and_is_maximal(case, free_runs, data):
    front, existing, new = case
    protected = set(data.draw(st.lists(st.sampled_from(sorted(new)), max_size=3))) if new else set()
    taken, added, refused = admit(BitMap64(existing) if existing else None, sorted(new), front,
                                  protected, free_runs)
    before = existing | ({front - 1} if front is not None else set())
    after = before | set(taken)
    assert set(taken) <= new and protected <= set(taken)
    assert refused == len(new) - len(taken)
    assert added == runs(after) - runs(before)
    assert added <= free_runs + len(protected)
    for entry in new - set(taken):  # a refused ack would stand alone: nothing was refused needlessly
        assert entry - 1 not in after and entry + 1 not in after
