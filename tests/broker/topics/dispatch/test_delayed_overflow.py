"""A full delayed index never holds back other messages, and the entries it turned away (overflowed)
are still delivered: never early, about on time, each once. The real dispatchers over the fake
ledger of `dispatch_harness` (real clock, a 10 ms tick)."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.topics.dispatch.delayed_overflow import DelayedOverflow
from entries.entry import build_entry
from ledger.position import Position
from proto import pulsar_api_pb2 as pb
from tests.broker.topics.dispatch_harness import KEY_SHARED, SHARED, Harness

CAPACITY = 4
LATE_MS_MAX = 600     # a tick is 10 ms; the rest is slack for a loaded 2-core machine (measured: 10 ms)
DEADLINE_S = 20.0


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 120))


def now_ms() -> int:
    return int(time.time() * 1000)


def produce(h: Harness, key: str, deliver_at_ms: int | None = None) -> Position:
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=now_ms(), partition_key=key)
    if deliver_at_ms is not None:
        md.deliver_at_time = deliver_at_ms
    position = h.ml.append(build_entry(md, key.encode()), 1)
    h.sub.on_appended()
    return position


async def deliveries(h: Harness, count: int) -> dict[Position, int]:
    """Wall ms at which each of the first `count` deliveries was seen (polled every 2 ms), each acked."""
    seen: dict[Position, int] = {}
    end = time.monotonic() + DEADLINE_S
    while len(seen) < count:
        for delivery in h.sent[len(seen):]:
            assert delivery.position not in seen, f"{delivery.position} delivered twice"
            seen[delivery.position] = now_ms()
            consumer = next(c for c in h.dispatcher.consumers if c.label.startswith(delivery.consumer))
            h.ack(consumer, [delivery.position])
        assert time.monotonic() < end, f"only {len(seen)} of {count} delivered"
        await asyncio.sleep(0.002)
    return seen


@pytest.mark.parametrize("sub_type", [SHARED, KEY_SHARED], ids=["shared", "key_shared"])
def test_full_index_holds_back_nothing_and_overflow_is_delivered_on_time(sub_type) -> None:
    run(_full_index_holds_back_nothing(sub_type))


async def _full_index_holds_back_nothing(sub_type) -> None:
    h = Harness(sub_type, broker_delayed_delivery_entries_max=CAPACITY, broker_delayed_delivery_tick_ms=10)
    h.consumer("A", permits=1000)
    start = now_ms()
    due: dict[Position, int] = {}
    # the first CAPACITY fill the index and are due late; the next ones overflow and are due
    # earlier, so they must be found again by their due time, not only once the index drains
    for i in range(CAPACITY):
        at = start + 2_500
        due[produce(h, f"late-{i}", at)] = at
    for i in range(10):
        at = start + 800 + 50 * i
        due[produce(h, f"early-{i}", at)] = at
    plain = [produce(h, f"plain-{i}") for i in range(5)]
    await h.settle()
    assert [d.position for d in h.sent] == plain, "messages that are not delayed waited for delayed ones"
    assert h.dispatcher.overflow, "the index was full: some delayed entries overflowed"
    assert len(h.dispatcher.delayed) == CAPACITY
    got = await deliveries(h, len(plain) + len(due))
    for position, at in due.items():
        assert got[position] >= at, f"{position} came {at - got[position]} ms early"
        assert got[position] - at <= LATE_MS_MAX, f"{position} came {got[position] - at} ms late"
    await h.settle()
    assert not h.dispatcher.overflow and len(h.dispatcher.delayed) == 0
    assert len(h.sent) == len(plain) + len(due)


def test_overflowed_entries_refill_the_index_when_it_drains() -> None:
    run(_refill())


async def _refill() -> None:
    h = Harness(SHARED, broker_delayed_delivery_entries_max=CAPACITY, broker_delayed_delivery_tick_ms=10)
    h.consumer("A", permits=1000)
    start = now_ms()
    due = {}
    for i in range(3 * CAPACITY):
        at = start + 400 + 100 * i      # in position order: each overflowed one is due later
        due[produce(h, f"d{i}", at)] = at
    await h.settle()
    assert h.sent == [] and len(h.dispatcher.delayed) == CAPACITY
    got = await deliveries(h, len(due))
    assert all(got[p] >= at for p, at in due.items())
    assert h.dispatcher.overflow.scans >= 2, "the index was refilled from storage as it drained"


def test_a_seek_back_forgets_the_overflow_and_reads_it_again() -> None:
    run(_seek_back())


async def _seek_back() -> None:
    h = Harness(SHARED, broker_delayed_delivery_entries_max=2, broker_delayed_delivery_tick_ms=10)
    h.consumer("A", permits=1000)
    at = now_ms() + 60_000
    positions = [produce(h, f"d{i}", at) for i in range(5)]
    await h.settle()
    assert h.dispatcher.overflow.from_position == positions[2]
    h.dispatcher.clear()
    h.dispatcher.seek(positions[0])
    assert not h.dispatcher.overflow
    h.sub.on_appended()
    await h.settle()
    assert h.sent == [] and h.dispatcher.overflow.from_position == positions[2]


def test_overflow_bookkeeping() -> None:
    o = DelayedOverflow()
    assert not o.should_scan(index_room=10, index_capacity=10, now_ms=0)
    o.add(Position(1, 5), due_ms=1_000)
    o.add(Position(1, 3), due_ms=2_000)
    assert o.from_position == Position(1, 3) and o.due_ms == 1_000
    assert not o.should_scan(index_room=1, index_capacity=10, now_ms=999)     # neither trigger
    assert o.should_scan(index_room=1, index_capacity=10, now_ms=1_000)       # one may be due
    assert o.should_scan(index_room=5, index_capacity=10, now_ms=0)           # index half empty
    assert o.wake_in_ms(now_ms=900, tick_ms=30) == 120
    scan = o.begin_scan()
    scan.stays_out(Position(1, 5), 1_500)
    o.finish_scan()
    assert (o.from_position, o.due_ms, o.scan) == (Position(1, 5), 1_500, None)
    o.forget_from(Position(1, 6))          # read position moved back, but not past them
    assert o.from_position == Position(1, 5)
    o.forget_from(Position(1, 5))
    assert not o and o.wake_in_ms(0, 10) is None
