"""The cursor moves behind the admin API's subscription operations: the n-th unacked entry (peek)
and expiring what was published before a time (expireMessages), checked against a brute-force
walk over the entries."""

from __future__ import annotations

import random

import pytest

from common.errors import InvalidArgument
from cursor.managed_cursor import ManagedCursor
from ledger.position import EARLIEST, Position
from tests.support.ledger_view import MemoryLedgerView

P = Position


def make(sizes=(5, 0, 4, 3)) -> tuple[MemoryLedgerView, ManagedCursor]:
    """Ledgers of `sizes` entries; publish time = global entry index (1, 2, ...)."""
    spec, t = [], 0
    for entries in sizes:
        spec.append([(10, 1, (t := t + 1)) for _ in range(entries)])
    view = MemoryLedgerView(spec)
    return view, ManagedCursor.starting_at("s", view, EARLIEST, durable=False)


def every_entry(view: MemoryLedgerView) -> list[Position]:
    out, position = [], view.first_position
    while position <= view.last_confirmed:
        out.append(position)
        position = view.next_position(position)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_nth_unacked_matches_a_walk(seed: int) -> None:
    rng = random.Random(seed)
    view, cursor = make()
    entries = every_entry(view)
    cursor.ack(rng.sample(entries, rng.randrange(len(entries))))
    unacked = [p for p in entries if not cursor.is_acked(p)]
    for n in range(1, len(entries) + 2):
        assert cursor.nth_unacked(n) == (unacked[n - 1] if n <= len(unacked) else None)
    with pytest.raises(InvalidArgument):
        cursor.nth_unacked(0)


def test_expire_before_acks_what_is_older_and_never_moves_back() -> None:
    _view, cursor = make()
    cursor.ack([P(3, 0)])
    assert cursor.expire_before(4)                     # entries published at 1, 2, 3
    assert cursor.mark_delete_position == P(1, 2)
    assert not cursor.expire_before(2)                 # earlier: nothing to do
    assert cursor.mark_delete_position == P(1, 2)
    assert cursor.expire_before(10**9)                 # everything
    assert cursor.stats.backlog_entries == 0
    assert cursor.nth_unacked(1) is None
