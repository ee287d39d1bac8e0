"""Pure parts of surviving a dead bookie: placement with quarantine and smaller ensembles,
which fragments re-replication may move, and the rate-limited log (no bookies, no loop)."""

from __future__ import annotations

import logging
import random

import pytest

from common.errors import NotEnoughBookies
from common.ratelimited_log import RateLimitedLog
from ledger import placement
from ledger.ledger_metadata import Fragment, LedgerMetadata, LedgerStatus
from ledger.placement import BookieHealth, BookieInfo
from ledger.rereplication import final_fragments, under_replicated


def _bookies(*names: str, read_only: tuple[str, ...] = ()) -> list[BookieInfo]:
    return [BookieInfo(n, 1 << 30, n in read_only) for n in names]


def test_a_new_ledger_avoids_quarantined_bookies_and_shrinks_to_the_live_ones():
    three = _bookies("a:1", "b:1", "c:1")
    for seed in range(20):
        rng = random.Random(seed)
        assert sorted(placement.choose_ensemble(three, 3, 2, rng)) == ["a:1", "b:1", "c:1"]
        # one of three just failed (still registered): a smaller ensemble of the two others
        assert sorted(placement.choose_ensemble(three, 3, 2, rng, quarantined={"b:1"})) == ["a:1", "c:1"]
        # E=2 on three, one quarantined: the two healthy ones, never the suspect
        assert sorted(placement.choose_ensemble(three, 2, 2, rng, quarantined={"a:1"})) == ["b:1", "c:1"]
        # too few healthy for Qw: suspects fill up to E rather than stop
        got = placement.choose_ensemble(three, 3, 2, rng, quarantined={"a:1", "b:1"})
        assert sorted(got) == ["a:1", "b:1", "c:1"] and got[0] == "c:1"
    # gone (unregistered) rather than suspect: E' = what is there, never below Qw
    assert sorted(placement.choose_ensemble(_bookies("a:1", "b:1"), 3, 2, random.Random(1))) == ["a:1", "b:1"]
    with pytest.raises(NotEnoughBookies) as info:
        placement.choose_ensemble(_bookies("a:1", "b:1", read_only=("b:1",)), 2, 2, random.Random(1))
    assert info.value.retriable and "at least 2" in info.value.message


def test_replacement_takes_a_quarantined_bookie_only_when_nothing_else_is_left():
    candidates = _bookies("a:1", "b:1", "c:1", "d:1")
    for seed in range(20):
        out = placement.replace(candidates, ("a:1", "b:1"), [0], random.Random(seed), avoid={"a:1"},
                                quarantined={"c:1"})
        assert out == ("d:1", "b:1")
    out = placement.replace(candidates, ("a:1", "b:1"), [0], random.Random(3), avoid={"a:1", "d:1"},
                            quarantined={"c:1"})
    assert out == ("c:1", "b:1")


def test_bookie_health_forgets_a_failure_after_the_quarantine():
    now = [100.0]
    health = BookieHealth(30.0, lambda: now[0])
    health.failed("a:1")
    now[0] += 10
    health.failed("b:1")
    assert health.quarantined() == {"a:1", "b:1"}
    now[0] += 25
    assert health.quarantined() == {"b:1"}
    now[0] += 10
    assert health.quarantined() == set()


def _meta(state: LedgerStatus) -> LedgerMetadata:
    meta = LedgerMetadata(ledger_id=7, ensemble_size=2, write_quorum=2, ack_quorum=2,
                          fragments=(Fragment(0, ("a:1", "b:1")),), created_ms=0)
    meta = meta.with_fragment(10, ("c:1", "b:1"))
    if state is LedgerStatus.CLOSED:
        return meta.with_state(state, last_entry_id=20, length_bytes=21)
    return meta if state is LedgerStatus.OPEN else meta.with_state(state)


def test_final_fragments_and_under_replication():
    assert final_fragments(_meta(LedgerStatus.CLOSED)) == 2
    assert final_fragments(_meta(LedgerStatus.OPEN)) == 1       # the last one is its writer's
    assert final_fragments(_meta(LedgerStatus.IN_RECOVERY)) == 0
    meta = _meta(LedgerStatus.OPEN)
    assert under_replicated(meta, {"b:1", "c:1"})                # a:1 is gone
    assert not under_replicated(meta, {"a:1", "b:1", "c:1"})
    assert under_replicated(meta, {"a:1", "b:1"})                # the writer's fragment counts too


def test_rate_limited_log_says_how_many_it_dropped(caplog):
    now = [0.0]
    logger = logging.getLogger("tests.ratelimited")
    limited = RateLimitedLog(logger, interval_s=5.0, keys_max=2, monotonic=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="tests.ratelimited"):
        assert limited.warning("t1", "append to %s failed: %s", "t1", "need 2")
        for _ in range(999):
            assert not limited.warning("t1", "append to %s failed: %s", "t1", "need 2")
        assert limited.warning("t2", "other key")                # keys are separate
        assert limited.suppressed("t1") == 999
        now[0] = 5.0
        assert limited.warning("t1", "append to %s failed: %s", "t1", "need 2")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["append to t1 failed: need 2", "other key",
                     "append to t1 failed: need 2 (999 similar suppressed in 5.0 s)"]
    limited.warning("t3", "x")                                   # keys_max=2: the oldest goes
    assert limited.suppressed("t1") == 0 and len(limited._seen) == 2
