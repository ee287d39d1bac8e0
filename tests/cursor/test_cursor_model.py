"""ManagedCursor against a naive model: a plain set of acked positions plus per-entry batch
bitsets, over random sequences of append, roll, ack, cumulative ack, batch ack, seek (reset),
reset by time, skip, expire, clear, retention trim and persist + reload."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cursor import codec
from cursor.ack_state import full_words, to_signed
from cursor.managed_cursor import ManagedCursor
from cursor.retention import RetentionPolicy, trim_position
from cursor.stats import subscription_stats
from ledger.position import EARLIEST, LATEST, Position
from tests.support.ledger_view import MemoryLedgerView


class CursorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.view = MemoryLedgerView([[(10, 2, 0)]])
        self.now_ms = 1
        self.cursor = ManagedCursor.starting_at("sub", self.view, EARLIEST, durable=False)
        self.acked: set[Position] = set()           # model: fully acked entries
        self.batches: dict[Position, list[int]] = {}  # model: remaining-unacked words

    # ---- helpers ------------------------------------------------------------------------------

    def kept(self) -> list[Position]:
        return self.view.all_positions()

    def pick(self, data: st.DataObject, extra_invalid: bool = True) -> Position:
        choices = self.kept()
        lac = self.view.last_confirmed
        if extra_invalid:
            choices = choices + [Position(lac[0], lac[1] + 1), Position(lac[0] + 5, 0),
                                 Position(0, 3)]
        return data.draw(st.sampled_from(choices))

    def model_ack(self, position: Position) -> None:
        if position in set(self.kept()):
            self.acked.add(position)
            self.batches.pop(position, None)

    # ---- rules --------------------------------------------------------------------------------

    @rule(count=st.integers(1, 6), messages=st.integers(1, 70))
    def append(self, count: int, messages: int) -> None:
        for _ in range(count):
            self.now_ms += 1
            self.view.append(size_bytes=messages * 10 + 1, messages=messages, publish_time_ms=self.now_ms)

    @rule()
    def roll(self) -> None:
        self.view.roll(created_ms=self.now_ms)

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        positions = [self.pick(data) for _ in range(data.draw(st.integers(0, 8)))]
        self.cursor.ack(positions)
        for p in positions:
            self.model_ack(p)

    @rule(data=st.data())
    def ack_cumulative(self, data: st.DataObject) -> None:
        target = self.pick(data)
        self.cursor.ack_cumulative(target)
        if target in set(self.kept()):
            for p in self.kept():
                if p <= target:
                    self.model_ack(p)

    @rule(data=st.data())
    def ack_batch(self, data: st.DataObject) -> None:
        kept = self.kept()
        if not kept:
            return
        position = data.draw(st.sampled_from(kept))
        size = self.view.entry_meta(position).messages
        members = data.draw(st.sets(st.integers(0, size - 1), max_size=size))
        words = full_words(size)
        for m in members:
            words[m // 64] &= ~(1 << (m % 64))
        done = self.cursor.ack_batch_indexes(position, to_signed(words), size)
        if position in self.acked:
            assert not done
            return
        remaining = [a & b for a, b in zip(self.batches.get(position, full_words(size)), words)]
        if any(remaining):
            self.batches[position] = remaining
            assert not done
        else:
            self.model_ack(position)
            assert done

    @rule(data=st.data())
    def seek(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.kept() + [EARLIEST, LATEST]))
        self.cursor.seek(target)
        kept = self.kept()
        if target == EARLIEST:
            target = kept[0] if kept else LATEST
        self.acked = {p for p in kept if p < target}
        self.batches = {}
        assert self.cursor.read_position == (target if target != LATEST else
                                             self.view.next_position(self.view.last_confirmed))

    @rule(back_ms=st.integers(0, 20))
    def reset_to_time(self, back_ms: int) -> None:
        when = self.now_ms - back_ms
        self.cursor.reset_to_publish_time(when)
        self.acked = {p for p in self.kept() if self.view.entry_meta(p).publish_time_ms < when}
        self.batches = {}

    @rule(n=st.integers(0, 5))
    def skip(self, n: int) -> None:
        unacked = [p for p in self.kept() if p not in self.acked]
        assert self.cursor.skip(n) == min(n, len(unacked))
        for p in unacked[:n]:
            self.model_ack(p)

    @rule(ttl_ms=st.integers(0, 20))
    def expire(self, ttl_ms: int) -> None:
        # TTL is in seconds: move "now" so that now - ttl lands ttl_ms after our publish clock.
        ttl_s = 1
        now = self.now_ms + 1000 - ttl_ms
        self.cursor.expire(ttl_s, now)
        cutoff = now - 1000
        for p in self.kept():
            if self.view.entry_meta(p).publish_time_ms < cutoff:
                self.model_ack(p)

    @rule()
    def clear_backlog(self) -> None:
        self.cursor.clear_backlog()
        for p in self.kept():
            self.model_ack(p)

    @rule()
    def trim(self) -> None:
        before = trim_position(self.view, [self.cursor], RetentionPolicy(0, 0), self.now_ms)
        if before is not None:
            dropped = self.view.trim(before)
            assert dropped
        kept = set(self.kept())
        self.acked &= kept

    @rule()
    def persist_and_reload(self) -> None:
        value = codec.encode(self.cursor.snapshot())
        snapshot = codec.decode(value)
        self.cursor = ManagedCursor("sub", self.view, mark_delete_position=snapshot.mark_delete,
                                    durable=False, snapshot=snapshot)

    @rule()
    def rewind(self) -> None:
        self.cursor.rewind()

    # ---- checks -------------------------------------------------------------------------------

    @invariant()
    def acked_sets_agree(self) -> None:
        for p in self.kept():
            assert self.cursor.is_acked(p) == (p in self.acked), p
            expected = self.batches.get(p)
            got = self.cursor.batch_ack_set(p)
            assert got == (None if expected is None else to_signed(expected)), p

    @invariant()
    def mark_delete_is_maximal(self) -> None:
        md = self.cursor.mark_delete_position
        lac = self.view.last_confirmed
        following = self.view.next_position(md)
        if following <= lac:
            assert following not in self.acked
        unacked = [p for p in self.kept() if p not in self.acked]
        first_unacked = unacked[0] if unacked else self.view.next_position(lac)
        assert self.cursor.next_unacked_from(Position(0, 0)) == first_unacked
        assert self.cursor.read_position > md

    @invariant()
    def stats_match_recount(self) -> None:
        unacked = [p for p in self.kept() if p not in self.acked]
        messages = sum(self.view.entry_meta(p).messages for p in unacked)
        for p, words in self.batches.items():
            size = self.view.entry_meta(p).messages
            messages -= size - sum(w.bit_count() for w in words)
        stats = subscription_stats(self.cursor, self.view)
        assert stats.backlog_entries == len(unacked)
        assert stats.backlog_messages == messages
        assert stats.backlog_bytes == sum(self.view.entry_meta(p).size_bytes for p in unacked)


CursorMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("STRATA_HYPOTHESIS_EXAMPLES", "150")), stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestCursorModel = CursorMachine.TestCase
