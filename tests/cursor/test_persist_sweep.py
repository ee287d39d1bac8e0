"""The shared persist sweep: one timer for every cursor of a loop; a cursor is swept at its due
time (rounded down to the grid), cursors due together are swept together, and many cursors
acked at different moments ride a few group transactions."""

from __future__ import annotations

import asyncio
import math

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
        self.swept_s.append(self.sweep.loop.time())


def test_sweep_bound_grouping_and_cancel():
    async def go():
        loop = asyncio.get_running_loop()
        sweep = PersistSweep(loop, INTERVAL_S)
        cursors = [_Recorder(sweep) for _ in range(50)]
        gone = _Recorder(sweep)
        sweep.add(gone)
        sweep.cancel(gone)
        for _ in range(3):
            due_s = loop.time() + INTERVAL_S          # persisted just now: due one interval later
            for c in cursors:
                c.joined_s.append(due_s)
                sweep.add(c, due_s)
                sweep.add(c, due_s + 1)                # twice: still one place, the first due time
            await asyncio.sleep(INTERVAL_S * 3)
        assert not sweep.due and gone.swept_s == []
        for c in cursors:
            assert len(c.swept_s) == 3
            # never before the due time rounded down to the grid, and at most the slack after it
            assert all(due - sweep.grid_s <= at <= due + SLACK_S for due, at in zip(c.joined_s, c.swept_s))
        assert sweep.sweeps == 3                       # due together: swept together
        sweep.add(gone)
        sweep.cancel(gone)                             # the last one leaves: no timer stays behind
        assert sweep._handle is None
    asyncio.run(go())


def test_a_change_with_no_recent_persist_is_swept_at_once():
    async def go():
        loop = asyncio.get_running_loop()
        sweep = PersistSweep(loop, 60.0)
        c = _Recorder(sweep)
        sweep.add(c, -math.inf)                        # never persisted
        await asyncio.sleep(0.2)
        assert len(c.swept_s) == 1
    asyncio.run(go())


def test_one_sweep_per_loop_and_interval():
    async def go():
        loop = asyncio.get_running_loop()
        assert sweep_for(loop, 1.0) is sweep_for(loop, 1.0)
        assert sweep_for(loop, 1.0) is not sweep_for(loop, 2.0)
    asyncio.run(go())


def test_many_cursors_acked_apart_ride_few_transactions(tmp_path):
    """200 cursors, each acked at its own moment over one interval: every ack is persisted, and
    the saves ride one transaction per sweep, not one or a few each."""
    store = metadata.open_store(f"sqlite:///{tmp_path}/meta.db")
    interval_ms = 200

    async def go():
        view = MemoryLedgerView([[(100, 1, i) for i in range(10)]])
        writer = CursorWriter(AsyncMetadataStore(store))
        config = default_config(cursor_persist_interval_ms=interval_ms)
        loop = asyncio.get_running_loop()
        started_s = loop.time()
        stores = [CursorStore(ToThreadStore(store), f"t{i}", writer) for i in range(200)]
        cursors = [await s.open_cursor(view, "s", start=EARLIEST, config=config) for s in stores]
        transactions_before = writer.transactions
        for i, cursor in enumerate(cursors):
            cursor.ack_cumulative(Position(1, 3))
            if i % 20 == 0:
                await asyncio.sleep(interval_ms / 1000 / 10)
        deadline = loop.time() + interval_ms / 1000 + 30
        while any(c.persistence.dirty or c.persistence.write_scheduled for c in cursors):
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        await asyncio.gather(*(c.flush() for c in cursors))   # waits for writes under way
        # at most one sweep per grid slot (an eighth of the interval) over the time the opens
        # and acks spanned, each one transaction: far fewer than the 200 saves
        slots = (loop.time() - started_s) / (interval_ms / 1000 / 8) + 2
        assert writer.transactions - transactions_before <= min(slots, 40), \
            (writer.transactions - transactions_before, slots)
        again = await CursorStore(ToThreadStore(store), "t199").load_cursor(view, "s")
        assert again is not None and again.mark_delete_position == Position(1, 3)
    try:
        asyncio.run(go())
    finally:
        store.close()
