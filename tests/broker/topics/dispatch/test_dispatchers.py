"""Unit tests of the Shared and Key_Shared dispatchers over a storage fake that can hold or fail
reads (`tests.broker.topics.dispatch_harness`): per-key order while consumers leave mid-read (PIP-379),
no lost delivery on a read error, the replay-set bound, parked keys costing no reads, permits and
the unacked limit counted in messages; each Key_Shared consumer's stream in position order while consumers join.
"""

from __future__ import annotations

import asyncio
import collections
import random

import pytest

from broker.topics.dispatch.key_selector import AutoSplitSelector, key_slot
from ledger.position import Position
from tests.broker.topics.dispatch_harness import KEY_SHARED, SETTLE_DEADLINE_S, SHARED, Harness
from tests.support.waiting import until

LOW = [(0, 32767)]
HIGH = [(32768, 65535)]


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 120))


def entries_of(h: Harness, name: str) -> list[Position]:
    return [d.position for d in h.sent if d.consumer == name]


def read_held_or_idle(h: Harness) -> bool:
    """A read waits at a gate, or no dispatch pass is running (so none will reach the gate now)."""
    d = h.dispatcher
    return h.ml.waiting > 0 or d is None or not d._running


def key_with_slot_in(lo: int, hi: int, prefix: str = "k") -> str:
    i = 0
    while not lo <= key_slot(f"{prefix}{i}".encode()) <= hi:
        i += 1
    return f"{prefix}{i}"


# --- item 1: PIP-379 while a read is in flight -----------------------------------------------

def test_key_shared_consumer_closing_during_a_new_read_keeps_key_order() -> None:
    """The audit's repro: A closes while the pass waits for entry 1 of the same key; entry 0
    (A's, unacked) must reach B before entry 1."""
    async def go() -> None:
        h = Harness(KEY_SHARED)
        a = h.consumer("A", permits=1)
        e0 = h.produce("k")
        await h.settle()
        h.consumer("B", permits=10)
        await h.settle()
        gate = h.ml.hold_next_read()
        e1 = h.produce("k")
        await h.until_read_waits()
        h.close(a)
        gate.set()
        await h.settle()
        assert [(d.consumer, d.position) for d in h.sent] == [("A", e0), ("B", e0), ("B", e1)]
    run(go())


def test_key_shared_consumer_closing_during_a_replay_read_keeps_key_order() -> None:
    """A pass reads a replayed entry (e1, nacked) while its holder closes and gives back the
    older e0 of the same key: e0 must still go first."""
    async def go() -> None:
        h = Harness(KEY_SHARED)
        a = h.consumer("A", permits=2, sticky_ranges=LOW)
        h.consumer("B", permits=10, sticky_ranges=HIGH)   # keeps the dispatcher alive
        key = key_with_slot_in(*LOW[0])
        e0, e1 = h.produce(key), h.produce(key)
        await h.settle()
        h.nack(a, [e1])                  # e1 back in the replay set, uncached; A has no permits
        await h.settle()
        gate = h.ml.hold_next_read()
        h.flow(a, 1)                     # the pass reads e1 for A ...
        await h.until_read_waits()
        h.close(a)                       # ... while A leaves with e0 unacked
        c = h.consumer("C", permits=10, sticky_ranges=LOW)
        gate.set()
        await h.settle()
        assert entries_of(h, "C") == [e0, e1]
        h.ack(c, [e0, e1])
        await h.settle()
        assert not h.dispatcher.replay
    run(go())


class KeyOrderModel:
    """What the test knows: each entry's key, its acks, what each open consumer holds. Checks every
    delivery against PIP-379 (a key is unacked at one consumer at most) and per-key order (when an
    entry goes out, every older unacked entry of its key is already at that consumer)."""

    def __init__(self, h: Harness, keyed: bool) -> None:
        self.h = h
        self.keyed = keyed                                # Shared: only the entry-level rules
        self.key: dict[Position, str] = {}
        self.acked: set[Position] = set()
        self.held: dict[str, set[Position]] = {}        # open consumer -> unacked entries it got
        self.checked = 0                                  # deliveries of h.sent already checked

    def produce(self, key: str) -> None:
        self.key[self.h.produce(key)] = key

    def check(self) -> None:
        for delivery in self.h.sent[self.checked:]:
            self._check_one(delivery.consumer, delivery.position)
        self.checked = len(self.h.sent)

    def _check_one(self, name: str, position: Position) -> None:
        key = self.key[position]
        assert position not in self.acked, f"acked {position} sent again"
        for other, held in self.held.items():
            assert position not in held, f"{position} sent to {name} while {other} holds it"
        mine = self.held.setdefault(name, set())
        if not self.keyed:
            mine.add(position)
            return
        for other, held in self.held.items():
            if other != name:
                assert not any(self.key[p] == key for p in held), \
                    f"key {key} unacked at {other} while {position} goes to {name}"
        for older, older_key in self.key.items():
            if older_key == key and older < position and older not in self.acked:
                assert older in mine, f"{position} of {key} overtook unacked {older}"
        mine.add(position)

    def ack(self, consumer, positions: list[Position]) -> None:
        self.check()
        self.h.ack(consumer, positions)
        self.acked.update(positions)
        self.held[consumer.name] -= set(positions)

    def close(self, consumer) -> None:
        self.check()
        self.h.close(consumer)
        self.held.pop(consumer.name, None)


@pytest.mark.parametrize("sub_type", [SHARED, KEY_SHARED])
@pytest.mark.parametrize("replay_max", [10_000, 3])
def test_randomized_joins_leaves_acks_and_read_races_lose_nothing_and_keep_pip379(
        seed: int, replay_max: int, sub_type) -> None:
    """Seeded: consumers join and leave (also while a read is held), ack, get permits; reads fail
    now and then. Every delivery is checked as it happens (see KeyOrderModel); at the end
    everything is delivered and acked."""
    async def go() -> None:
        rng = random.Random(seed)
        h = Harness(sub_type)
        model = KeyOrderModel(h, keyed=sub_type == KEY_SHARED)
        consumers = {}
        names = iter(f"c{i}" for i in range(10_000))

        def add() -> None:
            name = next(names)
            consumers[name] = h.consumer(name, permits=rng.randint(0, 6))
            h.dispatcher.replay_entries_max = replay_max
            model.held.setdefault(name, set())

        add()
        for _ in range(120):
            action = rng.random()
            gate = h.ml.hold_next_read() if rng.random() < 0.3 else None
            if rng.random() < 0.1:
                h.ml.fail_next_reads(1)
            if action < 0.3:
                for _ in range(rng.randint(1, 4)):
                    model.produce(f"key{rng.randrange(5)}")
            elif action < 0.45 and len(consumers) < 4:
                add()
            elif action < 0.55 and consumers:
                model.close(consumers.pop(rng.choice(sorted(consumers))))
            elif action < 0.8 and consumers:
                name = rng.choice(sorted(consumers))
                held = sorted(model.held.get(name, ()))
                model.ack(consumers[name], rng.sample(held, rng.randint(0, len(held))))
            elif consumers:
                h.flow(consumers[rng.choice(sorted(consumers))], rng.randint(1, 5))
            if gate is not None:
                await until(lambda: read_held_or_idle(h), SETTLE_DEADLINE_S, what="a held read or an idle dispatcher")
                if consumers and rng.random() < 0.5:   # a consumer leaves while a read may be held
                    model.close(consumers.pop(rng.choice(sorted(consumers))))
                gate.set()
            if rng.random() < 0.5:
                await h.settle()
            model.check()
            assert len(h.dispatcher.replay) <= replay_max
        # drain: every consumer gets plenty of permits and acks everything it gets
        add()
        for consumer in consumers.values():
            h.flow(consumer, 10_000)
        for _ in range(200):
            await h.settle()
            model.check()
            for name, consumer in consumers.items():
                held = sorted(model.held.get(name, ()))
                if held:
                    model.ack(consumer, held)
            if model.acked == set(model.key):
                break
        model.check()
        assert model.acked == set(model.key), f"never delivered: {sorted(set(model.key) - model.acked)}"
    run(go())


# --- item 2: read errors --------------------------------------------------------------------

@pytest.mark.parametrize("sub_type", [SHARED, KEY_SHARED])
def test_a_failed_replay_read_keeps_the_entry_and_retries(sub_type) -> None:
    """The audit's repro: A closes with e0 unacked, the read of e0 for B fails once; e0 must
    still reach B (it used to be dropped from the replay set for good)."""
    async def go() -> None:
        h = Harness(sub_type)
        a = h.consumer("A", permits=1)
        e0 = h.produce("k")
        await h.settle()
        h.ml.fail_next_reads(2)
        b = h.consumer("B", permits=10)
        h.close(a)
        await h.settle()
        assert entries_of(h, "B") == [e0]
        assert b.pending == {e0: 1}
        assert not h.dispatcher.replay
    run(go())


def test_read_errors_back_off_and_the_backoff_resets() -> None:
    async def go() -> None:
        h = Harness(SHARED)
        a = h.consumer("A", permits=10)
        h.ml.fail_next_reads(3)
        e0 = h.produce("k")
        d = h.dispatcher
        await until(lambda: h.ml.reads >= 1 and d._retry is not None, SETTLE_DEADLINE_S,
                    what="the first read failed and a retry is scheduled")
        assert h.ml.reads == 1 and entries_of(h, "A") == []
        reads = h.ml.reads
        for _ in range(20):
            h.flow(a, 1)                 # triggers during the backoff wait for the retry
        assert h.ml.reads == reads
        await h.settle()
        assert entries_of(h, "A") == [e0]
        assert h.ml.reads == 4           # three failures, one success
        assert d._retry_delay_s == 0.1   # a clean pass resets the backoff
    run(go())


def test_an_entry_no_longer_kept_leaves_the_replay_set_even_when_its_read_fails() -> None:
    async def go() -> None:
        h = Harness(SHARED)
        a = h.consumer("A", permits=1)
        h.produce("k")
        await h.settle()
        h.ml.roll()
        e1 = h.produce("k")
        h.ml.trim(e1)                    # e0's ledger is gone (as after a TTL + trim)
        h.ml.fail_next_reads(1)
        h.consumer("B", permits=10)
        h.close(a)
        await h.settle()
        assert entries_of(h, "B") == [e1]
        assert not h.dispatcher.replay
    run(go())


# --- item 3: the replay-set bound ---------------------------------------------------------------

def test_shared_replay_bound_loses_nothing() -> None:
    async def go() -> None:
        h = Harness(SHARED)
        a = h.consumer("A", permits=10)
        sent = [h.produce("k") for _ in range(10)]
        await h.settle()
        h.dispatcher.replay_entries_max = 3
        b = h.consumer("B", permits=0)
        h.close(a)                       # ten entries come back; three fit
        assert sorted(h.dispatcher.replay) == sent[:3]
        assert h.dispatcher.read_position == sent[3]
        h.flow(b, 100)
        await h.settle()
        assert entries_of(h, "B") == sent
        assert len(set(entries_of(h, "B"))) == 10
    run(go())


def test_key_shared_replay_bound_stops_reading_ahead_and_loses_nothing() -> None:
    async def go() -> None:
        h = Harness(KEY_SHARED)
        slow = h.consumer("slow", permits=0, sticky_ranges=LOW)
        fast = h.consumer("fast", permits=1000, sticky_ranges=HIGH)
        h.dispatcher.replay_entries_max = 4
        low, high = key_with_slot_in(*LOW[0]), key_with_slot_in(*HIGH[0])
        lows, highs = [], []
        for _ in range(10):
            lows.append(h.produce(low))
            highs.append(h.produce(high))
        await h.settle()
        assert len(h.dispatcher.replay) == 4
        assert entries_of(h, "fast") == highs[:4]   # bounded look-ahead: reading stops when full
        h.flow(slow, 100)
        await h.settle()
        assert entries_of(h, "slow") == lows
        assert entries_of(h, "fast") == highs
        h.ack(fast, highs)
        h.ack(slow, lows)
        await h.settle()
        assert not h.dispatcher.replay
    run(go())


# --- item 4: parked keys cost no reads ----------------------------------------------------------

def test_parked_keys_are_skipped_without_reading() -> None:
    async def go() -> None:
        h = Harness(KEY_SHARED)
        slow = h.consumer("slow", permits=20, sticky_ranges=LOW)
        fast = h.consumer("fast", permits=1000, sticky_ranges=HIGH)
        low, high = key_with_slot_in(*LOW[0]), key_with_slot_in(*HIGH[0])
        lows = [h.produce(low) for _ in range(20)]
        await h.settle()
        before = h.ml.reads
        h.nack(slow, lows)               # twenty uncached replay entries of a parked key
        await h.settle()
        assert sorted(h.dispatcher.replay) == lows
        for _ in range(10):
            position = h.produce(high)
            await h.settle()
            h.ack(fast, [position])
            await h.settle()
        assert h.ml.reads - before <= 10   # one read per new entry, none for the parked key
        assert len(entries_of(h, "fast")) == 10
        h.flow(slow, 20)
        await h.settle()
        assert entries_of(h, "slow") == lows + lows
    run(go())


# --- item 5 and permits: counted in messages ----------------------------------------------------

def test_permits_are_counted_in_messages() -> None:
    async def go() -> None:
        h = Harness(SHARED)
        a = h.consumer("A", permits=10)
        batches = [h.produce("k", messages=4) for _ in range(5)]
        await h.settle()
        assert entries_of(h, "A") == batches[:3]     # 4 + 4 + 4 messages: the last goes below zero
        assert a.permits == -2
        h.flow(a, 2)
        await h.settle()
        assert len(entries_of(h, "A")) == 3
        h.flow(a, 1)
        await h.settle()
        assert entries_of(h, "A") == batches[:4]
    run(go())


@pytest.mark.parametrize("sub_type", [SHARED, KEY_SHARED])
def test_unacked_limit_blocks_until_half(sub_type) -> None:
    async def go() -> None:
        h = Harness(sub_type, broker_consumer_unacked_messages_max=10)
        a = h.consumer("A", permits=1000)
        batches = [h.produce("k", messages=3) for _ in range(10)]
        await h.settle()
        assert entries_of(h, "A") == batches[:4]     # 12 messages >= 10: blocked
        assert a.blocked_on_unacked and a.unacked_messages() == 12
        h.ack(a, batches[:2])                        # 6 left: above half (5), still blocked
        await h.settle()
        assert len(entries_of(h, "A")) == 4 and a.blocked_on_unacked
        h.ack(a, batches[2:3])                       # 3 left: resumes
        await h.settle()
        assert entries_of(h, "A") == batches[:7]     # 3 + 3 batches = 12 messages: blocked again
        assert a.blocked_on_unacked and a.unacked_messages() == 12
    run(go())


def test_unacked_limit_of_one_consumer_does_not_stall_another_keys() -> None:
    async def go() -> None:
        h = Harness(KEY_SHARED, broker_consumer_unacked_messages_max=5)
        stuck = h.consumer("stuck", permits=1000, sticky_ranges=LOW)
        free = h.consumer("free", permits=1000, sticky_ranges=HIGH)
        low, high = key_with_slot_in(*LOW[0]), key_with_slot_in(*HIGH[0])
        counts = collections.Counter()
        for i in range(30):
            key = low if i % 2 else high
            h.produce(key)
            counts[key] += 1
            await h.settle()
            for d in [d for d in h.sent if d.consumer == "free" and d.position in free.pending]:
                h.ack(free, [d.position])
        await h.settle()
        assert len(entries_of(h, "stuck")) == 5 and stuck.blocked_on_unacked
        assert len(entries_of(h, "free")) == counts[high]
    run(go())


# --- a consumer joining: its stream stays in position order ----------------------------------

def test_a_joining_consumer_gets_nothing_newer_while_one_of_its_keys_drains_elsewhere() -> None:
    """B joins and takes key x, of which A still holds an entry unacked. A newer entry of another
    key of B's (y) must not reach B before x's newer entry: B's stream stays in position order (a
    producer batch holds many keys and is routed by its first: per-key order inside such batches
    needs it). Once A acks, B gets x's entry, then y's."""
    async def go() -> None:
        h = Harness(KEY_SHARED)
        a = h.consumer("A", permits=100)
        first = {f"j{i}": h.produce(f"j{i}") for i in range(40)}
        await h.settle()
        assert entries_of(h, "A") == sorted(first.values())
        b = h.consumer("B", permits=100)
        mine = [k for k in first if h.dispatcher.selector.select(key_slot(k.encode())) is b]
        assert len(mine) >= 2, "B takes some of the keys"
        x, y = mine[0], mine[1]
        h.ack(a, [first[y]])
        e1, e2 = h.produce(x), h.produce(y)
        await h.settle()
        assert entries_of(h, "B") == [], "B got a newer entry while its key x drains at A"
        h.ack(a, [first[x]])
        await h.settle()
        assert entries_of(h, "B") == [e1, e2]
    run(go())


def test_a_consumer_joining_mid_pass_gets_an_older_parked_entry_before_a_newer_one() -> None:
    """The pass parks p (key s, A has no permits) and waits for a read; B joins meanwhile and
    takes s and t. The read brings q (key t, B's now): it must not reach B before p does."""
    async def go() -> None:
        h = Harness(KEY_SHARED)
        a = h.consumer("A", permits=1)
        c = h.consumer("C", permits=100)     # keeps the pass going while A has no permits
        probe: AutoSplitSelector[str] = AutoSplitSelector()
        probe.add("A", a.label)
        probe.add("C", c.label)
        before = {k: probe.select(key_slot(k.encode())) for k in (f"m{i}" for i in range(400))}
        probe.add("B", f"B#{c.consumer_id + 1}")
        s = next(k for k, o in before.items() if o == "A" and probe.select(key_slot(k.encode())) == "B")
        t = next(k for k, o in before.items() if o == "C" and probe.select(key_slot(k.encode())) == "B")
        h.produce(next(k for k, o in before.items()       # A's permit goes, on a key A keeps
                       if o == "A" and probe.select(key_slot(k.encode())) == "A"))
        await h.settle()
        p = h.produce(s)
        await h.settle()
        assert p in h.dispatcher.replay
        gate = h.ml.hold_next_read()
        q = h.produce(t)
        await h.until_read_waits()
        b = h.consumer("B", permits=100)
        assert b.label == f"B#{c.consumer_id + 1}"
        gate.set()
        await h.settle()
        assert entries_of(h, "B") == [p, q]
    run(go())


@pytest.mark.parametrize("replay_max", [10_000, 3])
def test_randomized_joins_keep_every_consumer_stream_in_position_order(seed: int, replay_max: int) -> None:
    """Seeded: Key_Shared consumers only join (nothing is given back), ack, get permits, while
    reads are held or fail now and then. Besides PIP-379 (KeyOrderModel), what each consumer
    receives is strictly in position order: a producer batch holds many keys, so per-key order
    inside batches needs it. At the end everything is delivered and acked."""
    async def go() -> None:
        rng = random.Random(seed)
        h = Harness(KEY_SHARED)
        model = KeyOrderModel(h, keyed=True)
        consumers: dict = {}

        def add() -> None:
            name = f"c{len(consumers)}"
            consumers[name] = h.consumer(name, permits=rng.randint(0, 6))
            h.dispatcher.replay_entries_max = replay_max
            model.held.setdefault(name, set())

        def check_streams() -> None:
            model.check()
            for name in consumers:
                stream = entries_of(h, name)
                assert stream == sorted(set(stream)), f"{name} got {stream}"

        add()
        for _ in range(150):
            action = rng.random()
            gate = h.ml.hold_next_read() if rng.random() < 0.3 else None
            if rng.random() < 0.1:
                h.ml.fail_next_reads(1)
            if action < 0.35:
                for _ in range(rng.randint(1, 6)):
                    model.produce(f"key{rng.randrange(12)}")
            elif action < 0.45 and len(consumers) < 6:
                add()
            elif action < 0.75:
                name = rng.choice(sorted(consumers))
                held = sorted(model.held.get(name, ()))
                model.ack(consumers[name], rng.sample(held, rng.randint(0, len(held))))
            else:
                h.flow(consumers[rng.choice(sorted(consumers))], rng.randint(1, 5))
            if gate is not None:
                await until(lambda: read_held_or_idle(h), SETTLE_DEADLINE_S, what="a held read or an idle dispatcher")
                if len(consumers) < 6 and rng.random() < 0.5:   # a consumer joins while a read may be held
                    add()
                gate.set()
            if rng.random() < 0.5:
                await h.settle()
            check_streams()
        for consumer in consumers.values():
            h.flow(consumer, 10_000)
        for _ in range(200):
            await h.settle()
            check_streams()
            for name, consumer in consumers.items():
                held = sorted(model.held.get(name, ()))
                if held:
                    model.ack(consumer, held)
            if model.acked == set(model.key):
                break
        check_streams()
        assert model.acked == set(model.key), f"never delivered: {sorted(set(model.key) - model.acked)}"
    run(go())
