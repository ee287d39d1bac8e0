"""A ledger writer whose metadata lease has lapsed sends no add to a bookie: the add fails with
LeaseLost and the writer takes no more. Real bookie process, real SQLite store; the store runs
on a manual clock with its keeper stopped, so the test decides when the lease lapses."""

from __future__ import annotations

import random
import time

import pytest

import metadata
from common.clock import ManualClock
from common.errors import LeaseLost
from ledger.client import LedgerClient
from ledger.handle import WriterState
from metadata.aio import AsyncMetadataStore
from tests.ledger.conftest import run, shutdown

LEASE_MS = 60_000  # long in real time: the bookies' reapers (real clock) must not reap us


def test_no_add_reaches_a_bookie_once_the_lease_has_lapsed(env):
    env.start_bookies(1)
    clock = ManualClock(start_wall_ms=time.time_ns() // 1_000_000)
    config = env.config(metadata_session_lease_ms=LEASE_MS)

    async def body():
        store = AsyncMetadataStore(metadata.open_store(env.metadata_url, config=config, clock=clock))
        store.sync._keeper.stop()  # nobody renews: the lease lapses when the clock says so
        client = LedgerClient(store, config, rng=random.Random(0))
        h = await client.create_ledger(1, 1, 1)
        assert await h.add(b"first") == 0
        bookie = client.pool.get(h.metadata.last_ensemble[0])
        clock.advance_s(LEASE_MS / 1000)
        assert not store.lease_valid()
        with pytest.raises(LeaseLost):
            await h.add(b"after the lease")
        assert h.state is WriterState.FAILED and isinstance(h.error, LeaseLost)
        with pytest.raises(LeaseLost):
            await h.add(b"and again")
        assert (await bookie.read_lac(h.ledger_id))[1] == 0  # the bookie never saw entry 1
        assert [p for _, p in await bookie.read(h.ledger_id, 0, 0, allow_past_lac=True)] == [b"first"]
        await shutdown(store, client)

    run(body())
