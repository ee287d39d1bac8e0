"""Losing a bookie does not stop writes, on real bookie processes:
- a managed ledger at 3/2/2 on exactly three bookies loses one mid-write: there is no replacement,
  so the writer hands its unconfirmed appends back, the ledger is sealed at its LAC and the next
  ledger has a smaller ensemble (2, recorded in its metadata); every append succeeds, in order,
  none twice, and all read back;
- with fewer than Qw bookies left (2/2/2 on two) appends fail, retriably, with NotEnoughBookies,
  well before the add timeout, and no empty ledger is made on the dead (still registered) bookie;
- the auditor finds a ledger with a copy on an unregistered bookie, re-replicates it (a closed one,
  and the final fragment of an OPEN one, whose writer then closes it over the moved fragment),
  and the copies it wrote to a bookie new to the ledger carry the writer's token: the writer's
  later adds to that bookie are taken. One auditor of two leads; the other takes over when it
  closes.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from common.clock import SYSTEM_CLOCK
from common.errors import NotEnoughBookies
from ledger import auditor as auditor_mod
from ledger import placement
from ledger.auditor import Auditor
from ledger.managed_ledger import ManagedLedger
from ledger.position import EARLIEST
from tests.ledger.conftest import run, shutdown
from tests.support.waiting import until

NAME = "public/default/persistent/bookie-loss"


def _entry(i: int) -> bytes:
    return b"1:%d:entry-%d:" % (10_000 + i, i) + bytes(200)


def _meta_hook(data: bytes) -> tuple[int, int]:
    messages, publish, _ = data.split(b":", 2)
    return int(messages), int(publish)


async def _unregistered(store, address: str) -> None:
    async def gone() -> bool:
        return address not in placement.registered_addresses(await placement.available_bookies(store))
    await until(gone, 30, what=f"{address} unregistered", interval_s=0.1)


def test_three_of_three_losing_one_goes_on_in_a_smaller_ensemble(env):
    env.start_bookies(3)
    config = env.config(ledger_add_timeout_ms=10_000)

    async def body():
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=3, write_quorum=2,
                                      ack_quorum=2, meta_from_entry=_meta_hook)
        first = await asyncio.gather(*(ml.append(_entry(i)) for i in range(200)))
        ledger = first[0].ledger_id
        victim = (await client.ledger_metadata(ledger)).last_ensemble[1]
        pending = [asyncio.ensure_future(ml.append(_entry(i))) for i in range(200, 400)]
        env.by_address(victim).kill9()
        started = time.monotonic()
        pending += [asyncio.ensure_future(ml.append(_entry(i))) for i in range(400, 600)]
        positions = list(first) + list(await asyncio.wait_for(asyncio.gather(*pending), 30))
        took_s = time.monotonic() - started
        assert took_s < config.ledger_add_timeout_ms / 1000 / 2, took_s   # no add timeout waited out
        assert ml.append_failures == 0
        assert positions == sorted(positions) and len(set(positions)) == 600
        sealed = await client.ledger_metadata(ledger)
        assert sealed.is_closed and sealed.ensemble_size == 3
        later = sorted({p.ledger_id for p in positions} - {ledger})
        assert later, "the appends after the loss went to a new ledger"
        for ledger_id in later:
            meta = await client.ledger_metadata(ledger_id)
            assert meta.ensemble_size == 2 and victim not in meta.all_bookies()
            assert (meta.write_quorum, meta.ack_quorum) == (2, 2)
        got = await ml.read(EARLIEST, 1_000)
        assert [e.data for e in got] == [_entry(i) for i in range(600)]
        assert [e.position for e in got] == positions
        await ml.close()
        await shutdown(store, client)
    run(body())


def test_below_write_quorum_appends_fail_retriably_and_soon(env):
    env.start_bookies(2)
    config = env.config(ledger_add_timeout_ms=10_000)

    async def body():
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2,
                                      ack_quorum=2, meta_from_entry=_meta_hook)
        await asyncio.gather(*(ml.append(_entry(i)) for i in range(50)))
        env.bookies[0].kill9()
        started = time.monotonic()
        outcomes = await asyncio.wait_for(asyncio.gather(
            *(ml.append(_entry(i)) for i in range(50, 100)), return_exceptions=True), 30)
        assert all(isinstance(o, NotEnoughBookies) and o.retriable for o in outcomes), outcomes
        assert time.monotonic() - started < config.ledger_add_timeout_ms / 1000 / 2
        for i in range(100, 120):                          # and so on, while the bookie is gone
            with pytest.raises(NotEnoughBookies) as again:
                await asyncio.wait_for(ml.append(_entry(i)), 30)
            assert again.value.retriable
        assert "do not answer" in again.value.message or "at least 2" in again.value.message
        # the dead bookie, still registered, is probed rather than put in new ledgers that fail
        assert len(ml.ledgers()) <= 3, [info.ledger_id for info in ml.ledgers()]
        got = await ml.read(EARLIEST, 1_000)
        assert [e.data for e in got] == [_entry(i) for i in range(50)]
        await ml.close()
        await shutdown(store, client)
    run(body())


def test_auditor_restores_copies_of_closed_and_open_ledgers(env):
    env.start_bookies(4)
    config = env.config(ledger_auditor_interval_ms=60_000)

    async def body():
        store, client = await env.open(config)
        closed = await client.create_ledger(3, 2, 2)
        await asyncio.gather(*(closed.add_future(_entry(i)) for i in range(100)))
        await closed.close()
        writer = await client.create_ledger(2, 2, 2)
        await asyncio.gather(*(writer.add_future(_entry(i)) for i in range(100)))
        # the victim holds copies of both ledgers (2 of 4 bookies and 3 of 4 always share one), so
        # the closed ledger's restore below runs whatever ensembles the placement drew
        slot = next(i for i, b in enumerate(writer.metadata.last_ensemble) if b in closed.metadata.all_bookies())
        victim = writer.metadata.last_ensemble[slot]
        survivor = writer.metadata.last_ensemble[1 - slot]
        env.by_address(victim).kill9()
        await asyncio.gather(*(writer.add_future(_entry(i)) for i in range(100, 200)))
        spare = writer.metadata.last_ensemble[slot]          # the writer's replacement
        assert len(writer.metadata.fragments) == 2 and spare != victim
        auditor = Auditor(client, config, SYSTEM_CLOCK, owner="test")
        assert (await auditor.audit_once()).under_replicated == frozenset()  # still registered

        await _unregistered(store, victim)
        # the fourth bookie is the one new to the writer's ledger: make re-replication pick it
        others = {b.address for b in env.bookies} - {victim, survivor, spare}
        client.health.failed(spare)
        report = await auditor.audit_once()
        assert report.leader and report.failed == 0
        assert report.under_replicated == frozenset()
        assert auditor_mod.STATE.under_replicated == frozenset() and auditor_mod.STATE.rereplicated_total >= 1
        moved = await client.ledger_metadata(writer.ledger_id)
        assert moved.fragments[0].ensemble[slot] in others and moved.fragments[1] == writer.metadata.fragments[1]
        assert victim not in (await client.ledger_metadata(closed.ledger_id)).all_bookies()

        # the writer goes on: its next loss is replaced by the bookie re-replication wrote to
        # (the copies carried its token, so its adds there are taken), and it closes over the
        # fragment the auditor moved (compare-and-set lost, change adopted)
        env.by_address(survivor).kill9()
        await asyncio.wait_for(asyncio.gather(*(writer.add_future(_entry(i)) for i in range(200, 300))), 30)
        await writer.close()
        final = await client.ledger_metadata(writer.ledger_id)
        assert final.is_closed and final.last_entry_id == 299
        assert final.fragments[0] == moved.fragments[0]
        copy = client.pool.get(final.fragments[0].ensemble[slot])   # the bookie re-replication wrote to
        frag0_last = final.fragments[1].first_entry_id - 1
        got = await copy.read(writer.ledger_id, 0, frag0_last, allow_past_lac=True)
        assert got == [(e, _entry(e)) for e in range(frag0_last + 1)]
        reader = await client.open_ledger(writer.ledger_id, recover=False)
        assert [p for _, p in await reader.read(0, 299)] == [_entry(i) for i in range(300)]
        await auditor.close()
        await shutdown(store, client)
    run(body())


def test_one_auditor_of_two_leads_and_the_other_takes_over(env):
    env.start_bookies(2)
    config = env.config()

    async def body():
        store_a, client_a = await env.open(config)
        store_b, client_b = await env.open(config, seed=1)
        a = Auditor(client_a, config, SYSTEM_CLOCK, owner="a")
        b = Auditor(client_b, config, SYSTEM_CLOCK, owner="b")
        assert (await a.audit_once()).leader
        assert not (await b.audit_once()).leader
        assert (await a.audit_once()).leader                  # it stays the leader
        await a.close()                                       # gives the key up
        assert (await b.audit_once()).leader
        await b.close()
        await shutdown(store_a, client_a)
        await shutdown(store_b, client_b)
    run(body())
