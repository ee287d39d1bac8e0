"""Rates from sampled cumulative counters (broker.topics.rates.RateWindow), driven by a manual clock."""

from __future__ import annotations

import asyncio
import itertools

from broker.stats.topic_stats import partitioned_stats
from broker.topics.rates import RateWindow
from broker.topics.subscription import SubType
from common.clock import ManualClock
from tests.broker.topics.dispatch_harness import Harness


def test_rate_over_the_window_then_decays_to_zero() -> None:
    clock = ManualClock()
    window = RateWindow(window_s=5.0, samples_max=20)
    assert window.rate() == 0.0
    counter = 0
    for _ in range(10):                  # 100 per second for 10 s
        window.sample(clock.monotonic_s(), counter)
        clock.advance_s(1)
        counter += 100
    assert window.rate() == 100.0
    assert len(window.samples) <= 7      # old samples leave the window
    for _ in range(6):                   # then silence
        window.sample(clock.monotonic_s(), counter)
        clock.advance_s(1)
    assert window.rate() == 0.0


def test_a_consumer_leaving_keeps_its_counts_and_the_rate_steady() -> None:
    """The subscription's out counter keeps what a closed consumer received (Pulsar's
    msgOutFromRemovedConsumer), so its rate neither drops below zero nor spikes when it leaves.
    Real Subscription, dispatcher and Consumer (tests/broker/topics/dispatch_harness.py)."""
    async def body() -> None:
        h = Harness(SubType.SHARED)
        clock = ManualClock()
        window = RateWindow(window_s=10.0, samples_max=20)
        consumer = h.consumer("A", permits=1000)
        for second in range(6):          # 10 messages per second; "A" leaves after 3 s, "B" takes over
            if second == 3:
                received, size = consumer.msg_out_counter, consumer.bytes_out_counter
                h.close(consumer)
                assert (h.sub.msg_out_counter, h.sub.bytes_out_counter) == (received, size) == (30, size)
                consumer = h.consumer("B", permits=1000)
            window.sample(clock.monotonic_s(), h.sub.msg_out_counter)
            for _ in range(10):
                h.produce()
            await h.settle()
            h.ack(consumer, list(consumer.pending))   # nothing left to redeliver when "A" goes
            clock.advance_s(1)
        window.sample(clock.monotonic_s(), h.sub.msg_out_counter)
        assert h.sub.msg_out_counter == 60 and h.sub.msg_out_from_removed_consumers == 30
        assert [b - a for (_, a), (_, b) in itertools.pairwise(window.samples)] == [10] * 6
        assert window.rate() == 10.0
    asyncio.run(asyncio.wait_for(body(), 30))


def test_samples_are_bounded() -> None:
    window = RateWindow(window_s=1e9, samples_max=5)
    for t in range(100):
        window.sample(float(t), t)
    assert len(window.samples) == 5 and window.rate() == 1.0


def test_partitioned_stats_sums_and_merges() -> None:
    def part(n: int) -> dict:
        sub = {"msgBacklog": n, "msgBacklogNoDelayed": n, "backlogSize": 10 * n, "unackedMessages": 0,
               "msgRateOut": 1.0, "msgThroughputOut": 2.0, "msgOutCounter": n, "bytesOutCounter": n,
               "type": "Shared", "isDurable": True, "consumers": [{"consumerName": f"c{n}"}]}
        return {"msgRateIn": 1.5, "msgThroughputIn": 3.0, "msgRateOut": 1.0, "msgThroughputOut": 2.0,
                "msgInCounter": n, "bytesInCounter": 10 * n, "msgOutCounter": n, "bytesOutCounter": n,
                "msgBacklog": n, "backlogSize": 10 * n, "storageSize": 100 * n,
                "offloadedStorageSize": 50 * n, "lastOffloadLedgerId": n, "lastOffloadSuccessTimeStamp": n,
                "lastOffloadFailureTimeStamp": 0,
                "publishers": [{"producerName": f"p{n}"}], "subscriptions": {"s": sub}}
    out = partitioned_stats(2, {"t-partition-0": part(1), "t-partition-1": part(2)}, True)
    assert out["msgInCounter"] == 3 and out["storageSize"] == 300 and out["msgRateIn"] == 3.0
    assert out["subscriptions"]["s"]["msgBacklog"] == 3
    assert len(out["subscriptions"]["s"]["consumers"]) == 2 and len(out["publishers"]) == 2
    assert out["metadata"] == {"partitions": 2} and set(out["partitions"]) == {"t-partition-0", "t-partition-1"}
