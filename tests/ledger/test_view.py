"""LedgerListView answers every LedgerView question exactly like the brute-force model in
tests/support/ledger_view.py, over random ledger lists (seeded)."""

from __future__ import annotations

import random

import pytest

from common.errors import InvalidPosition
from ledger.entry_index import EntryIndex
from ledger.position import Position
from ledger.trim import trimmable
from ledger.types import LedgerState
from ledger.view import KeptLedger, LedgerListView
from tests.support.ledger_view import MemoryLedgerView


def _build(rng: random.Random):
    shape = [[(rng.randrange(1, 500), rng.randrange(1, 5), rng.randrange(1000, 1100))
              for _ in range(rng.choice([0, 0, 1, 3, 7]))] for _ in range(rng.randrange(1, 6))]
    model = MemoryLedgerView(shape, first_ledger_id=3)
    view = LedgerListView("t")
    for i, info in enumerate(model.ledgers()):
        idx = EntryIndex()
        for e in range(info.entries):
            m = model.entry_meta(Position(info.ledger_id, e))
            idx.append(m.size_bytes, m.messages, m.publish_time_ms)
        state = LedgerState.OPEN if i == len(shape) - 1 else LedgerState.CLOSED
        view.add(KeptLedger(info.ledger_id, state, 0, idx))
    return model, view


def test_view_matches_model(seed):
    rng = random.Random(seed)
    for _ in range(200):
        model, view = _build(rng)
        assert view.ledgers() == model.ledgers()
        assert view.last_confirmed == model.last_confirmed
        assert view.first_position == model.first_position
        ids = [info.ledger_id for info in model.ledgers()]
        probes = [Position(lid, e) for lid in range(min(ids) - 1, max(ids) + 2) for e in range(-1, 9)]
        for p in probes:
            assert view.next_position(p) == model.next_position(p), p
            try:
                expected = model.entry_meta(p)
            except InvalidPosition:
                with pytest.raises(InvalidPosition):
                    view.entry_meta(p)
            else:
                assert view.entry_meta(p) == expected
        for _ in range(30):
            a, b = rng.choice(probes), rng.choice(probes)
            assert view.entries_between(a, b) == model.entries_between(a, b)
        for t in (999, 1000, 1050, 1099, 1100):
            assert view.position_for_publish_time(t) == model.position_for_publish_time(t)
        before = rng.choice(probes)
        assert trimmable(view.kept, before) == model.trim(before)
