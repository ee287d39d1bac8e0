"""LedgerListView answers every LedgerView question exactly like the brute-force model in
tests/support/ledger_view.py, over random ledger lists (seeded), Kafka offsets included."""

from __future__ import annotations

import random

import pytest

from common.errors import InvalidPosition, OffsetOutOfRange
from ledger.entry_index import EntryIndex
from ledger.position import Position
from ledger.trim import trimmable
from ledger.types import LedgerState
from ledger.view import KeptLedger, LedgerListView
from tests.support.ledger_view import MemoryLedgerView


def _build(rng: random.Random, first_offset: int = 0):
    shape = [[(rng.randrange(1, 500), rng.randrange(1, 5), rng.randrange(1000, 1100))
              for _ in range(rng.choice([0, 0, 1, 3, 7]))] for _ in range(rng.randrange(1, 6))]
    model = MemoryLedgerView(shape, first_ledger_id=3, first_offset=first_offset)
    view = _view_of(model)
    return model, view


def _view_of(model: MemoryLedgerView) -> LedgerListView:
    shape = model.ledgers()
    view = LedgerListView("t")
    first = model.log_start_offset
    for i, info in enumerate(model.ledgers()):
        idx = EntryIndex()
        for e in range(info.entries):
            m = model.entry_meta(Position(info.ledger_id, e))
            idx.append(m.size_bytes, m.messages, m.publish_time_ms)
        state = LedgerState.OPEN if i == len(shape) - 1 else LedgerState.CLOSED
        view.add(KeptLedger(info.ledger_id, state, 0, idx, first_offset=first))
        first += info.messages
    return view


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


def _check_offsets(model: MemoryLedgerView, view: LedgerListView) -> None:
    assert (view.log_start_offset, view.end_offset) == (model.log_start_offset, model.end_offset)
    for position in model.all_positions():
        offset = view.offset_of(position)
        assert offset == model.offset_of(position), position
        messages = model.entry_meta(position).messages
        for inside in range(offset, offset + messages):          # first, middle and last of a batch
            assert view.entry_for_offset(inside) == position, (inside, position)
    assert view.entry_for_offset(model.end_offset) == model.next_position(model.last_confirmed)
    for outside in (model.log_start_offset - 1, model.end_offset + 1, model.end_offset + 1000):
        if outside < 0:
            continue
        with pytest.raises(OffsetOutOfRange) as raised:
            view.entry_for_offset(outside)
        assert raised.value.details == {"offset": outside, "start": model.log_start_offset,
                                        "end": model.end_offset}
    lid = model.ledgers()[-1].ledger_id
    with pytest.raises(InvalidPosition):
        view.offset_of(Position(lid + 1, 0))


def test_offsets_match_model_and_survive_trims(seed):
    """Random batch sizes and empty ledgers (seeded): offset_of / entry_for_offset round-trip on
    every message, end_offset maps to the next position, out of range raises; a trim keeps every
    kept entry's offset."""
    rng = random.Random(seed)
    for _ in range(200):
        model, view = _build(rng, first_offset=rng.choice([0, 0, 7, 12_345]))
        _check_offsets(model, view)
        before_trim = {p: view.offset_of(p) for p in model.all_positions()}
        ids = [info.ledger_id for info in model.ledgers()]
        before = Position(rng.choice(ids), rng.randrange(-1, 8))
        view.remove(set(model.trim(before)))
        _check_offsets(model, view)
        assert all(view.offset_of(p) == before_trim[p] for p in model.all_positions())


def test_offsets_with_a_gap_between_ledgers_map_to_the_next_entry():
    """Gaps are allowed (none is made today): an offset in one maps to the first entry after it."""
    view = LedgerListView("t")
    for ledger_id, first, entries in ((1, 0, 3), (2, 10, 2)):
        idx = EntryIndex()
        for _ in range(entries):
            idx.append(10, 2, 0)
        view.add(KeptLedger(ledger_id, LedgerState.CLOSED if ledger_id == 1 else LedgerState.OPEN, 0, idx,
                            first_offset=first))
    assert [view.offset_of(Position(1, e)) for e in range(3)] == [0, 2, 4]
    assert view.entry_for_offset(5) == Position(1, 2)
    assert view.entry_for_offset(6) == view.entry_for_offset(9) == Position(2, 0)
    assert view.entry_for_offset(13) == Position(2, 1)
    assert view.end_offset == 14 and view.entry_for_offset(14) == Position(2, 2)


def test_entry_index_message_counts_follow_append_truncate_and_blob():
    idx = EntryIndex()
    for messages in (3, 1, 5, 2):
        idx.append(10, messages, 0)
    assert list(idx.msg_end) == [3, 4, 9, 11]
    assert [idx.messages_before(i) for i in range(5)] == [0, 3, 4, 9, 11]
    assert [idx.entry_of_message(n) for n in range(12)] == [0, 0, 0, 1, 2, 2, 2, 2, 2, 3, 3, 4]
    assert list(EntryIndex.from_blob(idx.to_blob()).msg_end) == [3, 4, 9, 11]   # derived, not stored
    idx.truncate(2)
    assert list(idx.msg_end) == [3, 4] and idx.entry_of_message(4) == 2
    idx.append(10, 2, 0)
    assert list(idx.msg_end) == [3, 4, 6]
