"""Kafka idempotent-producer state (broker.kafka.idempotence): Kafka's sequence and epoch rules,
the last 5 batches as duplicates, batches in flight and rollback after a failed append, expiry,
the per-partition bound, the durable document; and a seeded randomized run against a naive model."""

from __future__ import annotations

import random

import pytest

from broker.kafka.idempotence import (
    SEQUENCE_MAX,
    BatchMark,
    Check,
    PartitionProducers,
    Verdict,
    last_seq_of,
    next_seq,
)
from common.errors import InvalidArgument, InvariantViolation, LimitExceeded

A, D, F, OOO, E = Verdict.APPEND, Verdict.DUPLICATE, Verdict.IN_FLIGHT, Verdict.OUT_OF_ORDER, Verdict.INVALID_EPOCH


class Log:
    """Offsets handed out in append order, as a partition's log would."""

    def __init__(self) -> None:
        self.end = 0

    def take(self, records: int) -> tuple[int, int]:
        first, self.end = self.end, self.end + records
        return first, self.end - 1


def produce(s: PartitionProducers, log: Log, pid: int, epoch: int, first: int, records: int = 1,
            wall_ms: int = 1_000) -> BatchMark:
    """check + accept + on_appended of one batch; returns its mark."""
    last = last_seq_of(first, records)
    assert s.check(pid, epoch, first, last).verdict is A
    s.accept(pid, epoch, first, last, token=object())
    fo, lo = log.take(records)
    s.on_appended(pid, epoch, first, last, fo, lo, timestamp_ms=wall_ms, wall_ms=wall_ms)
    return BatchMark(first, last, fo, lo, wall_ms)


def seed(s: PartitionProducers, log: Log, pid: int, epoch: int, last: int) -> None:
    """A durable batch ending at `last`, as replayed from the log, so the pid's next batch may
    start at next_seq(last) (a pid never seen must start at 0)."""
    fo, lo = log.take(1)
    s.replay(pid, epoch, last, last, fo, lo, 0, 1_000)


def test_a_new_pid_starts_at_zero_then_needs_the_next() -> None:
    s, log = PartitionProducers(), Log()
    assert s.check(7, 0, 42, 44) == Check(OOO)              # earlier batches are not stored here
    assert s.check(7, 3, 0, 2) == Check(A)
    seed(s, log, 7, 0, 41)
    produce(s, log, 7, 0, 42, 3)
    assert s.check(7, 0, 46, 46).verdict is OOO             # a gap
    assert s.check(7, 0, 44, 44).verdict is OOO             # overlaps, not a kept batch
    assert s.check(7, 0, 45, 45).verdict is A
    assert s.check(8, 0, 9, 9).verdict is OOO and s.check(8, 0, 0, 0).verdict is A   # pids are independent
    assert len(s) == 1


def test_epoch_rules() -> None:
    s, log = PartitionProducers(), Log()
    produce(s, log, 1, 3, 0, 2)
    assert s.check(1, 2, 2, 2).verdict is E               # fenced: an older epoch
    assert s.check(1, 2, 0, 1).verdict is E               # even a "duplicate" from the old epoch
    assert s.check(1, 4, 5, 5).verdict is OOO               # a new epoch must start at 0
    assert s.check(1, 4, 0, 0).verdict is A
    produce(s, log, 1, 4, 0, 1)
    assert s.check(1, 3, 2, 2).verdict is E               # the bump is durable: 3 is fenced
    assert s.check(1, 4, 0, 0).verdict is D               # old epoch's batches no longer count


def test_sequences_wrap_after_int32_max() -> None:
    assert next_seq(SEQUENCE_MAX) == 0 and last_seq_of(SEQUENCE_MAX - 1, 4) == 1
    s, log = PartitionProducers(), Log()
    seed(s, log, 1, 0, SEQUENCE_MAX - 2)
    produce(s, log, 1, 0, SEQUENCE_MAX - 1, 2)           # MAX-1, MAX
    assert s.check(1, 0, SEQUENCE_MAX, SEQUENCE_MAX).verdict is OOO
    assert s.check(1, 0, 1, 1).verdict is OOO
    assert s.check(1, 0, 0, 2).verdict is A               # after MAX comes 0
    produce(s, log, 1, 0, 0, 3)
    assert s.check(1, 0, 3, 3).verdict is A


def test_wrapping_batch_is_in_sequence() -> None:
    s, log = PartitionProducers(), Log()
    seed(s, log, 1, 0, SEQUENCE_MAX - 4)
    produce(s, log, 1, 0, SEQUENCE_MAX - 3, 2)            # ..MAX-2
    mark = produce(s, log, 1, 0, SEQUENCE_MAX - 1, 4)     # MAX-1, MAX, 0, 1
    assert (mark.first_seq, mark.last_seq) == (SEQUENCE_MAX - 1, 1)
    assert s.check(1, 0, SEQUENCE_MAX - 1, 1) == Check(D, mark=mark)
    assert s.check(1, 0, 2, 2).verdict is A
    assert s.check(1, 0, 0, 0).verdict is OOO


def test_last_five_batches_are_duplicates_the_sixth_oldest_is_out_of_order() -> None:
    s, log = PartitionProducers(), Log()
    marks = [produce(s, log, 1, 0, 2 * i, 2, wall_ms=100 + i) for i in range(6)]
    for m in marks[1:]:
        assert s.check(1, 0, m.first_seq, m.last_seq) == Check(D, mark=m)   # original offsets, timestamp
    assert s.check(1, 0, 0, 1).verdict is OOO
    assert s.check(1, 0, 2, 2).verdict is OOO               # same first, other last: no duplicate


def test_in_flight_duplicate_gets_the_token_and_the_next_batch_pipelines() -> None:
    s = PartitionProducers()
    s.accept(1, 0, 0, 4, token="t0")
    assert s.check(1, 0, 0, 4) == Check(F, token="t0")
    assert s.check(1, 0, 5, 9).verdict is A               # checked against the accepted one
    s.accept(1, 0, 5, 9, token="t1")
    assert s.check(1, 0, 5, 9) == Check(F, token="t1")
    assert s.check(1, 0, 12, 12).verdict is OOO
    s.on_appended(1, 0, 0, 4, 0, 4, 1, 1)
    assert s.check(1, 0, 0, 4).verdict is D
    assert s.in_flight() == 1


def test_pipelined_five_batches_appended_in_order() -> None:
    s = PartitionProducers()
    for i in range(5):
        assert s.check(1, 0, i, i).verdict is A
        s.accept(1, 0, i, i, token=i)
    assert s.to_doc()["producers"] == []                  # nothing durable yet
    for i in range(5):
        s.on_appended(1, 0, i, i, 10 + i, 10 + i, 0, 0)
    assert [b[0] for b in s.to_doc()["producers"][0][3]] == [0, 1, 2, 3, 4]
    assert s.check(1, 0, 5, 5).verdict is A and s.in_flight() == 0


def test_an_append_reported_before_an_earlier_one_waits_for_it() -> None:
    s = PartitionProducers()
    s.accept(1, 0, 0, 0, token="a")
    s.accept(1, 0, 1, 1, token="b")
    s.on_appended(1, 0, 1, 1, 11, 11, 0, 0)
    assert s.to_doc()["producers"] == []                  # not folded ahead of 0
    assert s.check(1, 0, 1, 1) == Check(D, mark=BatchMark(1, 1, 11, 11, 0))
    assert s.unresolved_serial_min() == 1
    s.on_appended(1, 0, 0, 0, 10, 10, 0, 0)
    assert [b[0] for b in s.to_doc()["producers"][0][3]] == [0, 1]
    assert s.unresolved_serial_min() is None


def test_failed_append_rolls_back_so_the_retry_is_accepted_and_later_ones_are_out_of_order() -> None:
    s, log = PartitionProducers(), Log()
    produce(s, log, 1, 0, 0, 1)
    for i in (1, 2, 3):
        s.accept(1, 0, i, i, token=i)
    s.on_failed(1, 0, 2)                                  # 2 fails; 3 (behind it) is dropped too
    assert s.check(1, 0, 1, 1) == Check(F, token=1)       # 1 still in flight
    assert s.check(1, 0, 3, 3).verdict is OOO               # Kafka: rejected until 2 is retried
    assert s.check(1, 0, 2, 2).verdict is A
    s.on_failed(1, 0, 3)                                  # its own failure arrives: nothing left to do
    s.accept(1, 0, 2, 2, token="retry")
    s.on_appended(1, 0, 1, 1, 1, 1, 0, 0)
    s.on_appended(1, 0, 2, 2, 2, 2, 0, 0)
    assert s.check(1, 0, 3, 3).verdict is A
    assert s.in_flight() == 0


def test_failure_of_the_first_batch_of_a_new_pid_forgets_it() -> None:
    s = PartitionProducers()
    s.accept(5, 0, 0, 3, token=None)
    assert s.check(5, 0, 4, 4).verdict is A               # pipelined behind it
    s.on_failed(5, 0, 0)
    assert len(s) == 0 and s.check(5, 0, 0, 3).verdict is A
    # the batch behind the failed one must not be stored before it (librdkafka would take its
    # success as proof that the failed batch was stored: an "implicit ack")
    assert s.check(5, 0, 4, 4).verdict is OOO


def test_failed_epoch_bump_rolls_back_to_the_old_epoch() -> None:
    s, log = PartitionProducers(), Log()
    produce(s, log, 1, 0, 0, 3)
    s.accept(1, 1, 0, 0, token=None)
    assert s.check(1, 0, 3, 3).verdict is E
    s.on_failed(1, 1, 0)
    assert s.check(1, 0, 3, 3).verdict is A and s.check(1, 1, 0, 0).verdict is A


def test_accept_without_append_verdict_is_a_bug() -> None:
    s, log = PartitionProducers(), Log()
    produce(s, log, 1, 0, 0)
    with pytest.raises(InvariantViolation):
        s.accept(1, 0, 5, 5, token=None)
    with pytest.raises(InvalidArgument):
        s.check(-1, 0, 0, 0)
    with pytest.raises(InvalidArgument):
        s.check(1, 0, SEQUENCE_MAX + 1, 0)


def test_expiry_drops_idle_pids_but_not_ones_in_flight() -> None:
    s, log = PartitionProducers(expiry_ms=1_000), Log()
    produce(s, log, 1, 0, 0, wall_ms=10_000)
    produce(s, log, 2, 0, 0, wall_ms=10_500)
    s.accept(2, 0, 1, 1, token=None)
    assert s.expire(10_999) == 0
    assert s.expire(11_000) == 1                          # pid 1; pid 2 has a batch in flight
    assert s.check(1, 0, 77, 77).verdict is A             # expired: any sequence again
    s.on_appended(2, 0, 1, 1, 5, 5, 0, wall_ms=10_600)
    assert s.expire(11_599) == 0 and s.expire(11_600) == 1 and len(s) == 0


def test_bound_evicts_the_least_recently_used_idle_pid() -> None:
    s, log = PartitionProducers(producers_max=3), Log()
    for pid in (1, 2, 3):
        produce(s, log, pid, 0, 0)
    produce(s, log, 1, 0, 1)                              # 1 is used again: 2 is now the oldest
    s.accept(2, 0, 1, 1, token=None)                      # ... but 2 has a batch in flight
    produce(s, log, 4, 0, 0)
    assert len(s) == 3 and s.evicted == 1
    assert s.check(3, 0, 50, 50).verdict is A             # 3 went: no state
    assert s.check(1, 0, 50, 50).verdict is OOO
    s.accept(4, 0, 1, 1, token=None)
    s.accept(1, 0, 2, 2, token=None)
    with pytest.raises(LimitExceeded):                    # all three have batches in flight
        s.accept(9, 0, 0, 0, token=None)


def test_doc_round_trip_keeps_durable_state_only() -> None:
    s, log = PartitionProducers(), Log()
    marks = [produce(s, log, 1, 2, i, wall_ms=50 + i) for i in range(7)]
    produce(s, log, 9, 0, 0, 5)
    s.accept(1, 2, 7, 7, token="in flight")
    back = PartitionProducers.from_doc(s.to_doc())
    assert back.to_doc() == s.to_doc() and len(back) == 2 and back.in_flight() == 0
    assert back.check(1, 2, 7, 7).verdict is A            # the in-flight one is not in the doc
    assert back.check(1, 2, 6, 6) == Check(D, mark=marks[6])
    assert back.check(1, 2, 1, 1).verdict is OOO            # only 5 kept
    assert back.check(1, 1, 7, 7).verdict is E
    small = PartitionProducers.from_doc(s.to_doc(), batches_kept=2, producers_max=1)
    assert len(small) == 1 and small.check(1, 2, 5, 5).verdict is D   # the most recently used pid
    assert small.check(1, 2, 4, 4).verdict is OOO
    assert small.check(9, 0, 7, 7).verdict is A           # dropped by the bound: remembered as expired
    with pytest.raises(InvalidArgument):
        PartitionProducers.from_doc({"version": 99, "producers": []})


def test_replay_is_idempotent_over_what_the_state_already_has() -> None:
    s, log = PartitionProducers(), Log()
    marks = [produce(s, log, 1, 0, i) for i in range(7)]
    before = s.to_doc()
    for m in marks:                                       # a replay from before the snapshot
        s.replay(1, 0, m.first_seq, m.last_seq, m.first_offset, m.last_offset, m.timestamp_ms, 1_000)
    assert s.to_doc() == before
    s.replay(1, 0, 7, 7, 100, 100, 0, 2_000)
    assert s.check(1, 0, 8, 8).verdict is A


def test_listener_hears_appends_and_failures() -> None:
    s, heard = PartitionProducers(), []
    s.listener = lambda: heard.append(s.in_flight())
    s.accept(1, 0, 0, 0, token=None)
    s.accept(1, 0, 1, 1, token=None)
    s.on_appended(1, 0, 0, 0, 0, 0, 0, 0)
    s.on_failed(1, 0, 1)
    assert heard == [1, 0] and s.appended_batches == 1


# --- randomized, against a naive model -----------------------------------------------------------

class Model:
    """Kafka's rules spelled out naively: the whole durable history per pid, and what is in flight."""

    def __init__(self) -> None:
        self.history: dict[int, list[tuple[int, BatchMark]]] = {}    # pid -> (epoch, mark), log order
        self.flight: dict[int, list[tuple[int, int, int, object]]] = {}  # pid -> (epoch, first, last, token)

    def verdict(self, pid: int, epoch: int, first: int, last: int) -> Check:
        hist, flight = self.history.get(pid, []), self.flight.get(pid, [])
        if not hist and not flight:
            return Check(A if first == 0 else OOO)
        now_epoch, now_last = (flight[-1][0], flight[-1][2]) if flight else (hist[-1][0], hist[-1][1].last_seq)
        if epoch == now_epoch:
            for e, f, la, token in flight:
                if (e, f, la) == (epoch, first, last):
                    return Check(F, token=token)
            kept = [m for e, m in hist if hist and e == hist[-1][0]][-5:]
            if hist and hist[-1][0] == epoch:
                for m in kept:
                    if (m.first_seq, m.last_seq) == (first, last):
                        return Check(D, mark=m)
            return Check(A if first == (now_last + 1) % 2**31 else OOO)
        if epoch < now_epoch:
            return Check(E)
        return Check(A if first == 0 else OOO)


def test_randomized_against_the_model(seed: int) -> None:
    rng = random.Random(seed)
    s, model, log = PartitionProducers(), Model(), Log()
    queue: list[tuple[int, int, int, int]] = []          # submitted appends, in log order
    client: dict[int, list[int]] = {pid: [0, rng.choice([0, SEQUENCE_MAX - 20])] for pid in (1, 2, 3)}
    for pid, (_, start) in client.items():
        if start:                                         # a pid near the wrap: its history is in the log
            fo, lo = log.take(1)
            s.replay(pid, 0, start - 1, start - 1, fo, lo, 0, 0)
            model.history[pid] = [(0, BatchMark(start - 1, start - 1, fo, lo, 0))]
    serial, seen = 0, set()
    for step in range(3_000):
        roll = rng.random()
        if roll < 0.5:
            pid = rng.choice((1, 2, 3))
            epoch, seq = client[pid]
            records = rng.randint(1, 3)
            kind = rng.random()
            if kind < 0.1:
                epoch, seq = epoch + 1, 0                 # bump
            elif kind < 0.15:
                epoch = max(0, epoch - 1)                 # a stale epoch
            elif kind < 0.35:
                seq = (seq - rng.randint(1, 12)) % 2**31  # a retry of something older
            elif kind < 0.4:
                seq = (seq + rng.randint(1, 5)) % 2**31   # a gap
            first, last = seq, last_seq_of(seq, records)
            if model.flight.get(pid) and rng.random() < 0.1:   # a resend of a batch in flight
                epoch, first, last, _ = rng.choice(model.flight[pid])
            got, want = s.check(pid, epoch, first, last), model.verdict(pid, epoch, first, last)
            assert got == want, f"step {step}: {pid=} {epoch=} {first=} {last=}"
            seen.add(got.verdict)
            if got.verdict is A:
                serial += 1
                s.accept(pid, epoch, first, last, token=serial)
                model.flight.setdefault(pid, []).append((epoch, first, last, serial))
                queue.append((pid, epoch, first, last))
                client[pid] = [epoch, next_seq(last)]
        elif queue and roll < 0.9:                        # the oldest append completes
            pid, epoch, first, last = queue.pop(0)
            records = (last - first) % 2**31 + 1
            fo, lo = log.take(records)
            s.on_appended(pid, epoch, first, last, fo, lo, step, step)
            model.flight[pid].pop(0)
            model.history.setdefault(pid, []).append((epoch, BatchMark(first, last, fo, lo, step)))
        elif queue:                                       # it fails, and everything behind it
            failed, queue = queue, []
            for pid, epoch, first, _ in failed:
                s.on_failed(pid, epoch, first)
                at = [i for i, r in enumerate(model.flight[pid]) if (r[0], r[1]) == (epoch, first)]
                if at:                                    # else dropped with an earlier failure
                    del model.flight[pid][at[0]:]
            for pid in client:                            # the client resends from what it knows stored
                hist = model.history.get(pid)
                if hist and rng.random() < 0.8:
                    client[pid] = [hist[-1][0], next_seq(hist[-1][1].last_seq)]
    assert seen == set(Verdict), f"verdicts never seen: {set(Verdict) - seen}"
    assert s.in_flight() == len(queue)
    back = PartitionProducers.from_doc(s.to_doc())
    for pid, hist in model.history.items():
        kept = [m for e, m in hist if e == hist[-1][0]][-5:]
        assert back.check(pid, hist[-1][0], kept[-1].first_seq, kept[-1].last_seq) == Check(D, mark=kept[-1])
