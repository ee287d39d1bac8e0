"""The delayed-delivery index alone, driven by a manual clock (no sleeping)."""

from __future__ import annotations

import random

import pytest

from broker.topics.dispatch.delayed import DelayedDeliveryIndex
from common.clock import ManualClock
from common.errors import InvalidArgument, LimitExceeded
from ledger.position import Position

T0 = 1_700_000_000_000


def _index(capacity: int = 100, tick_ms: int = 200) -> tuple[DelayedDeliveryIndex, ManualClock]:
    clock = ManualClock(T0)
    return DelayedDeliveryIndex(capacity, tick_ms, clock), clock


def test_entries_come_out_in_due_order_and_never_early() -> None:
    index, clock = _index()
    index.add(Position(1, 0), T0 + 3_000)
    index.add(Position(1, 1), T0 + 1_000)
    index.add(Position(1, 2), T0 + 2_000)
    assert index.pop_due() == []
    clock.advance_s(0.999)
    assert index.pop_due() == []
    clock.advance_s(0.001)
    assert index.pop_due() == [Position(1, 1)]
    clock.advance_s(5)
    assert index.pop_due() == [Position(1, 2), Position(1, 0)]
    assert len(index) == 0 and index.pop_due() == []


def test_past_negative_and_missing_deliver_at_mean_deliver_now() -> None:
    index, _ = _index()
    assert not index.holds(None)
    assert not index.holds(-5_000)
    assert not index.holds(0)
    assert not index.holds(T0)          # due exactly now: not held
    assert index.holds(T0 + 1)


def test_wake_is_rounded_up_to_the_tick_and_zero_when_due() -> None:
    index, clock = _index(tick_ms=200)
    assert index.wake_in_ms() is None
    index.add(Position(1, 0), T0 + 450)
    assert index.wake_in_ms() == 600      # never before due, at most one tick late
    clock.advance_s(0.45)
    assert index.wake_in_ms() == 0
    assert index.pop_due() == [Position(1, 0)]
    assert index.wake_in_ms() is None


def test_capacity_is_backpressure_not_a_drop() -> None:
    index, clock = _index(capacity=3)
    for i in range(3):
        index.add(Position(1, i), T0 + 1_000)
    assert index.room() == 0
    with pytest.raises(LimitExceeded):
        index.add(Position(1, 3), T0 + 1_000)
    index.add(Position(1, 2), T0 + 500)   # updating a known entry needs no room
    clock.advance_s(0.5)
    assert index.pop_due() == [Position(1, 2)]
    assert index.room() == 1
    clock.advance_s(0.5)
    assert index.pop_due() == [Position(1, 0), Position(1, 1)]


def test_removed_entries_never_come_out_and_stale_items_are_compacted() -> None:
    index, clock = _index(capacity=10_000)
    for i in range(1_000):
        index.add(Position(1, i), T0 + 1_000 + i)
    for i in range(0, 1_000, 2):
        index.remove(Position(1, i))
    index.remove(Position(9, 9))          # unknown: ignored
    index.remove_through(Position(1, 99))
    assert len(index) == 450
    assert len(index._heap) <= 2 * len(index) + 64
    clock.advance_s(10)
    assert index.pop_due() == [Position(1, i) for i in range(101, 1_000, 2)]


def test_readding_updates_the_due_time_and_pops_once() -> None:
    index, clock = _index()
    index.add(Position(1, 0), T0 + 100)
    index.add(Position(1, 0), T0 + 2_000)
    clock.advance_s(1)
    assert index.pop_due() == []
    assert index.next_due_ms() == T0 + 2_000
    clock.advance_s(1)
    assert index.pop_due() == [Position(1, 0)]
    assert index.pop_due() == []


def test_random_schedule_matches_a_model(seed: int) -> None:
    rng = random.Random(seed)
    index, clock = _index(capacity=500)
    model: dict[Position, int] = {}
    for step in range(2_000):
        roll = rng.random()
        if roll < 0.5 and index.room() > 0:
            position = Position(1, rng.randrange(1_000))
            due = clock.wall_ms() + rng.randrange(-100, 3_000)
            index.add(position, due)
            model[position] = due
        elif roll < 0.6 and model:
            position = rng.choice(list(model))
            index.remove(position)
            del model[position]
        else:
            clock.advance_s(rng.randrange(0, 300) / 1000)
            now = clock.wall_ms()
            got = index.pop_due()
            expected = sorted((due, p) for p, due in model.items() if due <= now)
            assert got == [p for _, p in expected], f"seed {seed} step {step}"
            for p in got:
                del model[p]
        assert len(index) == len(model) <= 500, f"seed {seed}"


def test_bad_construction_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        DelayedDeliveryIndex(0, 200, ManualClock())
    with pytest.raises(InvalidArgument):
        DelayedDeliveryIndex(10, 0, ManualClock())
