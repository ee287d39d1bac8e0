"""`placement.replace`: the ensemble change shared by the writer and recovery (pure, no bookies),
and `with_fragment` on an IN_RECOVERY ledger (a recoverer's ensemble change)."""

from __future__ import annotations

import random

import pytest

from common.errors import InvariantViolation, NotEnoughBookies
from ledger import placement
from ledger.ledger_metadata import Fragment, LedgerMetadata, LedgerStatus
from ledger.placement import BookieInfo


def _bookies(*names: str, read_only: tuple[str, ...] = ()) -> list[BookieInfo]:
    return [BookieInfo(n, 1 << 30, n in read_only) for n in names]


def test_replace_keeps_other_indexes_and_skips_ensemble_avoided_and_read_only():
    candidates = _bookies("a:1", "b:1", "c:1", "d:1", "e:1", "f:1", read_only=("f:1",))
    for seed in range(20):
        out = placement.replace(candidates, ("a:1", "b:1", "c:1"), [1], random.Random(seed),
                                avoid={"d:1"})
        assert out == ("a:1", "e:1", "c:1")
    out = placement.replace(candidates, ("a:1", "b:1", "c:1"), [0, 2], random.Random(1))
    assert out[1] == "b:1" and {out[0], out[2]} == {"d:1", "e:1"}
    with pytest.raises(NotEnoughBookies) as info:
        placement.replace(candidates, ("a:1", "b:1", "c:1"), [0], random.Random(1), avoid={"d:1", "e:1"})
    assert info.value.retriable
    assert placement.registered_addresses(candidates) == {"a:1", "b:1", "c:1", "d:1", "e:1", "f:1"}


def test_a_recoverer_may_change_the_ensemble_but_not_of_a_closed_ledger():
    meta = LedgerMetadata(ledger_id=1, ensemble_size=3, write_quorum=2, ack_quorum=2,
                          fragments=(Fragment(0, ("a:1", "b:1", "c:1")),), created_ms=0)
    recovering = meta.with_state(LedgerStatus.IN_RECOVERY)
    changed = recovering.with_fragment(5, ("a:1", "d:1", "c:1"))
    assert changed.state is LedgerStatus.IN_RECOVERY and changed.ensemble_for(4) == ("a:1", "b:1", "c:1")
    assert changed.ensemble_for(5) == ("a:1", "d:1", "c:1")
    closed = changed.with_state(LedgerStatus.CLOSED, last_entry_id=9, length_bytes=10)
    with pytest.raises(InvariantViolation):
        closed.with_fragment(10, ("a:1", "e:1", "c:1"))


def test_rereplication_repoints_a_fragment_of_a_closed_ledger():
    meta = LedgerMetadata(ledger_id=1, ensemble_size=3, write_quorum=2, ack_quorum=2,
                          fragments=(Fragment(0, ("a:1", "b:1", "c:1")),), created_ms=0)
    meta = meta.with_fragment(7, ("a:1", "d:1", "c:1"))
    assert meta.fragment_last_entry_id(0) == 6 and meta.fragment_last_entry_id(1) is None
    closed = meta.with_state(LedgerStatus.CLOSED, last_entry_id=9, length_bytes=10)
    assert closed.fragment_last_entry_id(1) == 9
    moved = closed.with_fragment_ensemble(0, ("a:1", "e:1", "c:1"))
    assert moved.fragments[0] == Fragment(0, ("a:1", "e:1", "c:1")) and moved.fragments[1] == meta.fragments[1]
    assert moved.is_closed and moved.last_entry_id == 9
    with pytest.raises(InvariantViolation):
        closed.with_fragment_ensemble(0, ("a:1", "a:1", "c:1"))
