"""The replicated ledger client on real bookie processes and a real SQLite metadata store:
striping, reads with failover, close, ensemble change after kill -9, bounded failure when too
few bookies are left, fencing, and recovery (including two recoverers racing)."""

from __future__ import annotations

import asyncio
import time

import pytest

from common.errors import AddOutcomeUnknown, LedgerFenced, NotEnoughBookies, TimeoutExpired
from ledger.ledger_metadata import LedgerStatus
from ledger.rereplication import WRITER_TOKEN_PROPERTY
from ledger.striping import holds
from tests.ledger.conftest import run, shutdown


def test_add_read_close_and_striping(env):
    env.start_bookies(3)

    async def body():
        store, client = await env.open(env.config())
        h = await client.create_ledger(3, 2, 2, properties={"owner": "test"})
        ids = await asyncio.gather(*(h.add_future(b"e%d" % i) for i in range(300)))
        assert ids == list(range(300))
        got = await h.read(0, 299)
        assert [p for _, p in got] == [b"e%d" % i for i in range(300)]
        ensemble = h.metadata.last_ensemble
        await h.close()
        meta = await client.ledger_metadata(h.ledger_id)
        assert meta.state is LedgerStatus.CLOSED and meta.last_entry_id == 299
        assert meta.length_bytes == sum(len(b"e%d" % i) for i in range(300))
        assert meta.properties == {"owner": "test", WRITER_TOKEN_PROPERTY: h.writer_token.hex()}
        for index, address in enumerate(ensemble):       # each bookie holds exactly its stripes
            summary = [s for s in await client.pool.get(address).list_ledgers() if s.ledger_id == h.ledger_id]
            held = [e for e in range(300) if holds(index, e, 3, 2)]
            assert summary and summary[0].last_entry_id == max(held)
            mine = await client.pool.get(address).read(h.ledger_id, held[0], held[0], allow_past_lac=True)
            assert mine[0][1] == b"e%d" % held[0]
        reader = await client.open_ledger(h.ledger_id, recover=False)
        env.by_address(ensemble[0]).kill9()               # reads fail over to the other replica
        got = await reader.read(0, 299)
        assert [p for _, p in got] == [b"e%d" % i for i in range(300)]
        await shutdown(store, client)
    run(body())


def test_kill9_mid_write_changes_ensemble_and_loses_nothing(env):
    """E=3 Qw=2 Qa=2, 50k pipelined adds, one bookie kill -9'd part way, a 4th replaces it."""
    env.start_bookies(4)
    total = 50_000

    async def body():
        store, client = await env.open(env.config())
        h = await client.create_ledger(3, 2, 2)
        victim = env.by_address(h.metadata.last_ensemble[1])
        window: list[asyncio.Future] = []
        acked = 0
        for i in range(total):
            window.append(h.add_future(i.to_bytes(4, "big") * 64))
            if i == total // 3:
                victim.kill9()
            if len(window) >= 1000:
                assert await window.pop(0) == acked
                acked += 1
        for fut in window:
            assert await fut == acked
            acked += 1
        assert len(h.metadata.fragments) >= 2 and victim.address not in h.metadata.last_ensemble
        await h.close()
        reader = await client.open_ledger(h.ledger_id, recover=False)
        assert reader.last_add_confirmed == total - 1
        for first in range(0, total, 5000):
            got = await reader.read(first, first + 4999)
            assert [p[:4] for _, p in got] == [i.to_bytes(4, "big") for i in range(first, first + 5000)]
        await shutdown(store, client)
    run(body())


def test_too_few_bookies_fails_adds_in_bounded_time(env):
    env.start_bookies(2)

    async def body():
        store, client = await env.open(env.config(ledger_add_timeout_ms=1_500))
        h = await client.create_ledger(2, 2, 2)
        assert await h.add(b"first") == 0
        env.by_address(h.metadata.last_ensemble[0]).kill9()
        started = time.monotonic()
        with pytest.raises((NotEnoughBookies, TimeoutExpired)) as info:
            await h.add(b"second")
        assert info.value.retriable and time.monotonic() - started < 6.0
        with pytest.raises((NotEnoughBookies, TimeoutExpired)):
            await h.add(b"third")                      # the handle stays failed: no gaps
        await h.close()
        assert (await client.ledger_metadata(h.ledger_id)).last_entry_id == 0
        await shutdown(store, client)
    run(body())


def test_recovery_fences_writer_and_finds_every_acked_entry(env):
    env.start_bookies(3)

    async def body():
        store, client = await env.open(env.config())
        h = await client.create_ledger(3, 2, 2)
        acked = await asyncio.gather(*(h.add_future(b"x%d" % i) for i in range(500)))
        in_flight = [h.add_future(b"y%d" % i) for i in range(200)]   # not awaited yet
        store2, client2 = await env.open(env.config(), seed=1)
        recovered = await client2.open_ledger(h.ledger_id, recover=True)
        last = recovered.metadata.last_entry_id
        assert recovered.metadata.is_closed and last >= acked[-1]
        outcomes = await asyncio.gather(*in_flight, return_exceptions=True)
        for _i, outcome in enumerate(outcomes):
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, AddOutcomeUnknown)
            else:
                assert outcome <= last                 # acknowledged => inside the closed ledger
        with pytest.raises((LedgerFenced, AddOutcomeUnknown)):
            await h.add(b"late")
        got = await recovered.read(0, last)
        assert [p for _, p in got][:500] == [b"x%d" % i for i in range(500)]
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())


def test_concurrent_recoverers_agree(env):
    env.start_bookies(3)

    async def body():
        store, client = await env.open(env.config())
        h = await client.create_ledger(3, 3, 2)
        await asyncio.gather(*(h.add_future(b"z%d" % i) for i in range(400)))
        for i in range(50):
            h.add_future(b"tail%d" % i).add_done_callback(lambda f: f.exception())
        others = [await env.open(env.config(), seed=s) for s in (2, 3, 4)]
        results = await asyncio.gather(*(c.open_ledger(h.ledger_id, recover=True) for _, c in others))
        lasts = {r.metadata.last_entry_id for r in results}
        lengths = {r.metadata.length_bytes for r in results}
        assert len(lasts) == 1 and len(lengths) == 1 and lasts.pop() >= 399
        for s, c in others:
            await shutdown(s, c)
        await shutdown(store, client)
    run(body())
