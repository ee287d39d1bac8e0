"""The shared persist sweep: one timer for every cursor of a loop; a change is persisted within
the interval, sweeps (so one cursor's background writes) are at least the interval apart, and a
thousand cursors acked at different moments ride a few group transactions."""

from __future__ import annotations

import asyncio
import itertools

import metadata
from common.config import default_config
from cursor.cursor_store import CursorStore
from cursor.cursor_writer import CursorWriter
from cursor.persist_sweep import PersistSweep, sweep_for
from ledger.position import EARLIEST, Position
from metadata.aio import AsyncMetadataStore, ToThreadStore
from tests.support.ledger_view import MemoryLedgerView

INTERVAL_S = 0.05
SLACK_S = 0.5   # a loaded CI machine runs a due timer late


class _Recorder:
    """A cursor stand-in that notes when it joined and when its sweep began."""

    def __init__(self, sweep: PersistSweep) -> None:
        self.sweep = sweep
        self.joined_s: list[float] = []
        self.swept_s: list[float] = []

    def swept(self) -> None:
        self.swept_s.append(self.sweep.last_s)


def test_sweep_bound_spacing_and_cancel():
    async def go():
        loop = asyncio.get_running_loop()
        sweep = PersistSweep(loop, INTERVAL_S)
        cursors = [_Recorder(sweep) for _ in range(50)]
        gone = _Recorder(sweep)
        sweep.add(gone)
        sweep.cancel(gone)
        started_s = loop.time()
        for _ in range(3):
            for c in cursors:
                c.joined_s.append(loop.time())
                sweep.add(c)
                sweep.add(c)                   # twice: still one place, one sweep
                await asyncio.sleep(INTERVAL_S / 40)
            await asyncio.sleep(INTERVAL_S * 3)
        assert not sweep.due and gone.swept_s == []
        times = sorted({t for c in cursors for t in c.swept_s})
        assert all(b - a >= INTERVAL_S * 0.99 for a, b in itertools.pairwise(times)), times
        for c in cursors:
            assert len(c.swept_s) == 3
            assert all(0 <= s - j <= INTERVAL_S + SLACK_S for j, s in zip(c.joined_s, c.swept_s))
        # one sweep per interval while cursors wait (+1 per round: the first after a quiet gap)
        assert sweep.sweeps <= (loop.time() - started_s) / INTERVAL_S + 3
        sweep.add(gone)
        sweep.cancel(gone)                     # the last one leaves: no timer stays behind
        assert sweep._handle is None
    asyncio.run(go())


def test_one_sweep_per_loop_and_interval():
    async def go():
        loop = asyncio.get_running_loop()
        assert sweep_for(loop, 1.0) is sweep_for(loop, 1.0)
        assert sweep_for(loop, 1.0) is not sweep_for(loop, 2.0)
    asyncio.run(go())


def test_many_cursors_acked_apart_ride_few_transactions(tmp_path):
    """200 cursors, each acked at its own moment over one interval: each ack is persisted
    within the interval, and the saves ride a handful of transactions (one per sweep),
    not one or a few each."""
    store = metadata.open_store(f"sqlite:///{tmp_path}/meta.db")
    interval_ms = 200

    async def go():
        view = MemoryLedgerView([[(100, 1, i) for i in range(10)]])
        writer = CursorWriter(AsyncMetadataStore(store))
        config = default_config(cursor_persist_interval_ms=interval_ms)
        stores = [CursorStore(ToThreadStore(store), f"t{i}", writer) for i in range(200)]
        cursors = [await s.open_cursor(view, "s", start=EARLIEST, config=config) for s in stores]
        transactions_before = writer.transactions
        for i, cursor in enumerate(cursors):
            cursor.ack_cumulative(Position(1, 3))
            if i % 20 == 0:
                await asyncio.sleep(interval_ms / 1000 / 10)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + interval_ms / 1000 + 30
        while any(c.persistence.dirty or c.persistence.write_scheduled for c in cursors):
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        await asyncio.gather(*(c.flush() for c in cursors))   # waits for writes under way
        assert writer.transactions - transactions_before <= 6, writer.transactions - transactions_before
        again = await CursorStore(ToThreadStore(store), "t199").load_cursor(view, "s")
        assert again is not None and again.mark_delete_position == Position(1, 3)
    try:
        asyncio.run(go())
    finally:
        store.close()
