"""Unit tests of the ledger's pure parts: striping, quorum/ack logic, metadata state machine,
entry index, cache bounds, rollover policy, managed-ledger metadata and name encoding."""

from __future__ import annotations

import random

import pytest

from common.config import default_config
from common.errors import IllegalTransition, InvariantViolation, LimitExceeded, NotEnoughBookies
from ledger.cache import EntryCache
from ledger.entry_index import EntryIndex
from ledger.ledger_metadata import Fragment, LedgerMetadata, LedgerStatus, ledger_path
from ledger.ml_metadata import LedgerRecord, ManagedLedgerMetadata, encode_name, ml_path
from ledger.pending import AddPipeline
from ledger.placement import BookieInfo, choose
from ledger.rollover import RolloverPolicy
from ledger.striping import absent_decided, coverage_met, holds, read_chunks, write_set

# --- striping -------------------------------------------------------------------------------

def test_write_set_starts_at_entry_mod_ensemble():
    assert write_set(0, 3, 2) == [0, 1]
    assert write_set(2, 3, 2) == [2, 0]
    assert write_set(7, 5, 3) == [2, 3, 4]
    assert write_set(9, 5, 3) == [4, 0, 1]


@pytest.mark.parametrize("e,qw", [(1, 1), (3, 2), (3, 3), (5, 3), (4, 2)])
def test_holds_matches_write_set_and_chunks_cover_range(e, qw):
    for entry in range(40):
        ws = write_set(entry, e, qw)
        assert [i for i in range(e) if holds(i, entry, e, qw)] == sorted(ws)
    chunks = read_chunks(3, 37, e, qw)
    covered = []
    for bookie, first, last in chunks:
        for entry in range(first, last + 1):
            assert holds(bookie, entry, e, qw)
            covered.append(entry)
    assert covered == list(range(3, 38))
    assert read_chunks(5, 4, e, qw) == []


def test_recovery_rules():
    # E=3 Qw=2 Qa=2: every write set needs 1 responder -> two bookies cover, one does not
    assert coverage_met({0, 1}, 3, 2, 2)
    assert not coverage_met({0}, 3, 2, 2)
    # E=3 Qw=3 Qa=2: need 2 of 3 in the (only) write set
    assert coverage_met({0, 2}, 3, 3, 2) and not coverage_met({1}, 3, 3, 2)
    # E=Qw=Qa=3: one responder is enough (any unacked entry lacks at least one copy)
    assert coverage_met({2}, 3, 3, 3)
    assert absent_decided(1, 2, 2) and not absent_decided(1, 3, 2) and absent_decided(2, 3, 2)


# --- quorum ack logic -----------------------------------------------------------------------

def _pipeline(e=3, qw=2, qa=2, in_flight=100, queued=100):
    return AddPipeline(e, qw, qa, in_flight_max=in_flight, queued_max=queued)


def test_add_completes_at_ack_quorum_and_in_order():
    p = _pipeline()
    adds = [p.add(b"x" * i, None, 0.0) for i in range(3)]
    assert [a.entry_id for a in adds] == [0, 1, 2]
    assert p.on_ack(1, 1) == [] and p.on_ack(1, 2) == []       # entry 1 has Qa but 0 does not
    assert p.on_ack(0, 0) == [] and p.lac == -1
    done = p.on_ack(0, 1)
    assert [a.entry_id for a in done] == [0, 1] and p.lac == 1
    assert p.confirmed_bytes == 0 + 1


def test_ack_from_outside_write_set_is_ignored():
    p = _pipeline()
    p.add(b"a", None, 0.0)                 # write set {0, 1}
    assert p.on_ack(0, 2) == [] and p.on_ack(0, 0) == []
    assert p.oldest().acked == {0}


def test_in_flight_bound_queues_in_order_and_queue_is_bounded():
    p = _pipeline(in_flight=2, queued=2)
    sent = [p.add(b"a", None, 0.0) for _ in range(2)]
    assert all(a is not None for a in sent)
    assert p.add(b"b", None, 0.0) is None and p.add(b"c", None, 0.0) is None
    with pytest.raises(LimitExceeded):
        p.add(b"d", None, 0.0)
    p.on_ack(0, 0)
    p.on_ack(0, 1)
    released = p.release()
    assert [a.entry_id for a in released] == [2]


def test_forget_index_drops_acks_and_lists_resends():
    p = _pipeline()
    for _ in range(3):
        p.add(b"a", None, 0.0)
    p.on_ack(1, 2)                             # entry 1: write set {1, 2}
    p.on_ack(2, 2)                             # entry 2: write set {2, 0}
    resend = p.forget_index(2)
    assert [a.entry_id for a in resend] == [1, 2]
    assert all(2 not in a.acked for a in resend)


# --- ledger metadata state machine ----------------------------------------------------------

def _meta(**kw):
    return LedgerMetadata(ledger_id=42, ensemble_size=3, write_quorum=2, ack_quorum=2,
                          fragments=(Fragment(0, ("a:1", "b:1", "c:1")),), created_ms=5, **kw)


def test_state_machine_refuses_illegal_transitions():
    m = _meta()
    closed = m.with_state(LedgerStatus.CLOSED, last_entry_id=9, length_bytes=100)
    with pytest.raises(IllegalTransition):
        closed.with_state(LedgerStatus.OPEN)
    with pytest.raises(IllegalTransition):
        closed.with_state(LedgerStatus.IN_RECOVERY)
    rec = m.with_state(LedgerStatus.IN_RECOVERY)
    assert rec.with_state(LedgerStatus.IN_RECOVERY).state is LedgerStatus.IN_RECOVERY
    with pytest.raises(IllegalTransition):
        rec.with_state(LedgerStatus.OPEN)
    with pytest.raises(InvariantViolation):
        m.with_state(LedgerStatus.CLOSED)          # close must say where the ledger ends


def test_fragments_and_json_round_trip():
    m = _meta(properties={"k": "v"}).with_fragment(10, ("a:1", "d:1", "c:1"))
    assert m.ensemble_for(0) == ("a:1", "b:1", "c:1")
    assert m.ensemble_for(9) == ("a:1", "b:1", "c:1")
    assert m.ensemble_for(10) == m.ensemble_for(1000) == ("a:1", "d:1", "c:1")
    m2 = m.with_fragment(10, ("a:1", "d:1", "e:1"))     # same start: replaces, no empty fragment
    assert len(m2.fragments) == 2
    back = LedgerMetadata.from_json(m2.to_json(), version=7)
    assert back.fragments == m2.fragments and back.properties == {"k": "v"} and back.version == 7
    assert ledger_path(42) == "/ledgers/00000000000000000042"
    with pytest.raises(InvariantViolation):
        _meta().with_fragment(0, ("a:1", "a:1", "c:1"))


# --- entry index ----------------------------------------------------------------------------

def test_entry_index_publish_time_search_and_blob():
    idx = EntryIndex()
    times = [100, 105, 103, 110, 110, 120]
    for i, t in enumerate(times):
        idx.append(10 + i, 1 + i % 3, t)
    assert idx.total_bytes == sum(10 + i for i in range(6))
    assert idx.first_at_or_after(104) == 1       # 105 is the first >= 104
    assert idx.first_at_or_after(106) == 3
    assert idx.first_at_or_after(121) == 6
    back = EntryIndex.from_blob(idx.to_blob())
    assert list(back.sizes) == list(idx.sizes) and list(back.publish_ms) == times
    assert back.total_messages == idx.total_messages
    idx.truncate(2)
    assert len(idx) == 2 and idx.total_bytes == 21


def test_entry_index_blob_is_compact():
    idx = EntryIndex()
    for i in range(50_000):
        idx.append(1024, 1, 1_700_000_000_000 + i)
    assert len(idx.to_blob()) < 50_000 * 2


# --- cache ----------------------------------------------------------------------------------

def test_cache_stays_within_bound_and_evicts_lru():
    c = EntryCache(100)
    for i in range(20):
        c.put("t", 1, i, bytes(10))
        assert c.size_bytes <= 100
    assert c.get("t", 1, 0) is None and c.get("t", 1, 19) is not None
    c.get("t", 1, 10)                      # touch: survives the next eviction
    c.put("t", 1, 99, bytes(10))
    assert c.get("t", 1, 10) is not None and c.get("t", 1, 11) is None
    c.put("t", 1, 100, bytes(101))         # bigger than the cache: not kept
    assert c.get("t", 1, 100) is None
    c.invalidate_ledger("t", 1)
    assert c.size_bytes == 0 and len(c) == 0


# --- rollover -------------------------------------------------------------------------------

def test_rollover_policy_defaults_like_pulsar():
    p = RolloverPolicy.from_config(default_config())
    minute = 60_000
    assert not p.should_roll(60_000, 0, 5 * minute)          # under min age: nothing rolls
    assert p.should_roll(50_000, 0, 10 * minute)
    assert p.should_roll(1, 2 * 1024**3, 10 * minute)
    assert p.should_roll(1, 0, 240 * minute) and not p.should_roll(0, 0, 500 * minute)
    assert not p.should_roll(49_999, 0, 239 * minute)


# --- managed ledger metadata ----------------------------------------------------------------

def test_name_encoding_is_path_safe_and_injective():
    assert encode_name("public/default/persistent/my-topic") == "public%2Fdefault%2Fpersistent%2Fmy-topic"
    assert encode_name("a%2F") != encode_name("a/")
    assert ml_path("t é") == "/managed-ledgers/t%20%C3%A9"


def test_ml_metadata_round_trip_and_invariants():
    m = ManagedLedgerMetadata((LedgerRecord(1, True, 5, 3, 30, 3), LedgerRecord(4, False, 6)), "o")
    back = ManagedLedgerMetadata.from_json(m.to_json(), 3)
    assert back.ledgers == m.ledgers and back.owner == "o" and back.version == 3
    with pytest.raises(InvariantViolation):
        ManagedLedgerMetadata((LedgerRecord(4, False, 6), LedgerRecord(5, False, 6)))
    with pytest.raises(InvariantViolation):
        ManagedLedgerMetadata((LedgerRecord(4, True, 6), LedgerRecord(4, False, 6)))


# --- placement ------------------------------------------------------------------------------

def test_placement_skips_read_only_and_excluded():
    bookies = [BookieInfo("a:1", 10, False), BookieInfo("b:1", 10, True), BookieInfo("c:1", 10, False),
               BookieInfo("d:1", 10, False)]
    rng = random.Random(1)
    got = choose(bookies, 2, rng, exclude={"a:1"})
    assert sorted(got) == ["c:1", "d:1"]
    with pytest.raises(NotEnoughBookies) as info:
        choose(bookies, 3, rng, exclude={"a:1"})
    assert info.value.retriable
