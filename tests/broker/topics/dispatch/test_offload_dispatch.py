"""A read from the cold tier that fails with ColdTierUnavailable (S3 down, retriable) is retried
by every dispatcher with bounded backoff: nothing is skipped, nothing is delivered twice, the
order is kept, and the dispatcher keeps running once S3 answers again.

Storage is the dispatcher harness's in-memory ledger; its reads raise ColdTierUnavailable the
first `n` times, as `ManagedLedger.read` does for an offloaded ledger whose bookie copy is gone
while S3 is unreachable.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.topics.dispatch.base import READ_RETRY_DELAY_MAX_S
from common.errors import ColdTierUnavailable
from ledger.position import Position
from tests.broker.topics.dispatch.test_dispatchers import entries_of, run
from tests.broker.topics.dispatch_harness import EXCLUSIVE, FAILOVER, KEY_SHARED, SHARED, Harness

OUTAGE_READS = 4


def _cold_outage(h: Harness, failures: int) -> list[int]:
    """Make the next `failures` reads raise ColdTierUnavailable; returns the live failure count."""
    left = [failures]
    read = h.ml.read

    async def cold_read(start: Position, max_entries: int):
        h.ml.reads += 1
        if left[0] > 0:
            left[0] -= 1
            raise ColdTierUnavailable("S3 unreachable", position=str(start))
        h.ml.reads -= 1                  # counted again by the real read
        return await read(start, max_entries)

    h.ml.read = cold_read  # type: ignore[method-assign]
    return left


@pytest.mark.parametrize("sub_type", [EXCLUSIVE, FAILOVER, SHARED, KEY_SHARED])
def test_an_s3_outage_during_reads_delays_delivery_and_skips_nothing(sub_type) -> None:
    async def go() -> None:
        h = Harness(sub_type)
        produced = [h.produce(f"k{i % 3}") for i in range(5)]
        h.ml.roll()
        produced += [h.produce(f"k{i % 3}") for i in range(5)]
        left = _cold_outage(h, OUTAGE_READS)
        h.consumer("A", permits=100)
        await h.settle()
        assert left[0] == 0, "every failing read was retried"
        assert entries_of(h, "A") == produced       # all, once each, in order
        assert h.dispatcher._retry is None
        assert h.dispatcher._retry_delay_s <= READ_RETRY_DELAY_MAX_S
    run(go())


def test_a_long_outage_is_retried_with_backoff_and_ends_in_delivery() -> None:
    async def go() -> None:
        h = Harness(SHARED)
        e0 = h.produce("k")
        left = _cold_outage(h, 1_000_000)
        a = h.consumer("A", permits=10)
        await asyncio.sleep(1.0)              # the outage itself: retries at 0.1, 0.2, 0.4 s ...
        for _ in range(20):
            h.flow(a, 1)                      # triggers wait for the scheduled retry
        reads_during_outage = h.ml.reads
        assert 2 <= reads_during_outage <= 5, reads_during_outage
        assert entries_of(h, "A") == []
        left[0] = 0                           # S3 answers again
        await h.settle()
        assert entries_of(h, "A") == [e0]
    run(go())
