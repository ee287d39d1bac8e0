"""Recovery of a ledger whose writer crashed while a bookie of its last fragment is dead, on real
bookie processes: the recoverer replaces the dead bookie (ensemble change by compare-and-set on
the IN_RECOVERY metadata) and re-replicates the tail there; with no bookie to replace it, recovery
fails with the retriable NotEnoughBookies and leaves the ledger IN_RECOVERY until it can finish;
a managed ledger whose owner crashed gets its topic back."""

from __future__ import annotations

import asyncio
import random

import pytest

from common.errors import BookieUnavailable, NotEnoughBookies
from ledger import placement, recovery
from ledger.ledger_metadata import LedgerStatus
from ledger.managed_ledger import ManagedLedger
from ledger.position import EARLIEST
from ledger.striping import write_set
from tests.ledger.conftest import run, shutdown

TOTAL = 300
BURST, SEQUENTIAL = 250, 40        # then TOTAL - BURST - SEQUENTIAL adds sent together
FENCED_LAC = BURST + SEQUENTIAL - 1   # the LAC the last burst carries to the bookies
BOUND_S = 45.0                     # generous bound on one recovery with a dead bookie


def _payload(i: int) -> bytes:
    return b"entry-%d-" % i + bytes(100)


async def _write_and_crash(env, config, *, burst: int = BURST) -> tuple[int, tuple[str, ...]]:
    """Write TOTAL acknowledged entries so the bookies' LAC is FENCED_LAC (-1 with burst=TOTAL:
    all sent at once), then "crash" the writer (its client goes away, the ledger is never
    closed). Returns (ledger id, ensemble)."""
    store, client = await env.open(config, seed=11)
    h = await client.create_ledger(3, 2, 2)
    assert await asyncio.gather(*(h.add_future(_payload(i)) for i in range(burst))) == list(range(burst))
    if burst == TOTAL:
        ensemble = h.metadata.last_ensemble
        await shutdown(store, client)
        return h.ledger_id, ensemble
    for i in range(BURST, BURST + SEQUENTIAL):       # each add carries the previous one's LAC
        assert await h.add(_payload(i)) == i
    tail = await asyncio.gather(*(h.add_future(_payload(i)) for i in range(BURST + SEQUENTIAL, TOTAL)))
    assert tail == list(range(BURST + SEQUENTIAL, TOTAL))
    ensemble = h.metadata.last_ensemble
    await shutdown(store, client)
    return h.ledger_id, ensemble


async def _wait_unregistered(store, address: str, bound_s: float = 30.0) -> None:
    async def poll():
        # ASYNC110 waived: this polls the metadata store; there is no in-process event to wait on
        while address in placement.registered_addresses(await placement.available_bookies(store)):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    await asyncio.wait_for(poll(), bound_s)


async def _assert_copies(client, meta, entries: range, dead: str) -> None:
    """Each entry has a copy on every bookie of its write set in its fragment, none of them dead."""
    for entry_id in entries:
        ensemble = meta.ensemble_for(entry_id)
        for index in write_set(entry_id, meta.ensemble_size, meta.write_quorum):
            assert ensemble[index] != dead
            got = await client.pool.get(ensemble[index]).read(meta.ledger_id, entry_id, entry_id,
                                                              allow_past_lac=True)
            assert got == [(entry_id, _payload(entry_id))]


@pytest.mark.parametrize("unregistered", [False, True], ids=["still-registered", "unregistered"])
def test_recovery_replaces_a_dead_bookie_of_the_last_fragment(env, unregistered):
    """E=3 Qw=2 Qa=2 on 4 bookies; the writer crashes and a bookie holding tail entries is
    kill -9'd (its registration still there, or already expired): recovery still closes the
    ledger with every acknowledged entry, the tail re-replicated on a replacement."""
    env.start_bookies(4)

    async def body():
        ledger_id, ensemble = await _write_and_crash(env, env.config())
        victim = ensemble[write_set(TOTAL - 1, 3, 2)[1]]       # holds the last entry
        env.by_address(victim).kill9()
        # A dead bookie is "no answer" at once, long before the call deadline.
        store, client = await env.open(env.config(ledger_add_timeout_ms=120_000,
                                                  ledger_read_timeout_ms=120_000), seed=12)
        if unregistered:
            await _wait_unregistered(store, victim)
        with pytest.raises(BookieUnavailable):
            await asyncio.wait_for(client.pool.get(victim).fence(ledger_id), BOUND_S)
        handle = await asyncio.wait_for(client.open_ledger(ledger_id, recover=True), BOUND_S)
        meta = handle.metadata
        assert meta.state is LedgerStatus.CLOSED and meta.last_entry_id == TOTAL - 1
        assert meta.length_bytes == sum(len(_payload(i)) for i in range(TOTAL))
        assert [p for _, p in await handle.read(0, TOTAL - 1)] == [_payload(i) for i in range(TOTAL)]
        # The tail past the fenced LAC moved to a new fragment without the dead bookie...
        assert victim not in meta.last_ensemble
        assert meta.fragments[-1].first_entry_id == FENCED_LAC + 1
        assert victim in meta.fragments[0].ensemble and len(meta.fragments) == 2
        assert sum(a != b for a, b in zip(meta.fragments[0].ensemble, meta.last_ensemble)) == 1
        # ...where each recovered entry has Qw copies on live bookies.
        await _assert_copies(client, meta, range(FENCED_LAC + 1, TOTAL), victim)
        stored = await client.ledger_metadata(ledger_id)
        assert stored.is_closed and stored.fragments == meta.fragments
        await shutdown(store, client)
    run(body())


def test_recovery_without_a_replacement_fails_retriably_then_finishes(env):
    """E=3 on 3 bookies, one dead: no replacement exists, so recovery raises NotEnoughBookies
    and the ledger stays IN_RECOVERY (never closed short); once the bookie is back, it closes."""
    env.start_bookies(3)

    async def body():
        ledger_id, ensemble = await _write_and_crash(env, env.config())
        victim = env.by_address(ensemble[write_set(TOTAL - 1, 3, 2)[1]])
        victim.kill9()
        store, client = await env.open(env.config(), seed=13)
        with pytest.raises(NotEnoughBookies) as info:
            await asyncio.wait_for(client.open_ledger(ledger_id, recover=True), BOUND_S)
        assert info.value.retriable
        meta = await client.ledger_metadata(ledger_id)
        assert meta.state is LedgerStatus.IN_RECOVERY and meta.last_ensemble == ensemble
        victim.restart()
        await client.pool.get(victim.address).wait_reachable(30)
        handle = None
        for _ in range(60):                    # bounded: the restarted bookie reconnects in ~1 s
            try:
                handle = await asyncio.wait_for(client.open_ledger(ledger_id, recover=True), BOUND_S)
                break
            except NotEnoughBookies:
                await asyncio.sleep(0.5)
        assert handle is not None, "recovery did not finish after the bookie came back"
        meta = handle.metadata
        assert meta.is_closed and meta.last_entry_id == TOTAL - 1
        assert meta.last_ensemble == ensemble  # the bookie came back: nothing to replace
        assert [p for _, p in await handle.read(0, TOTAL - 1)] == [_payload(i) for i in range(TOTAL)]
        await _assert_copies(client, meta, range(FENCED_LAC + 1, TOTAL), dead="")
        await shutdown(store, client)
    run(body())


def test_managed_ledger_of_a_crashed_owner_comes_back_with_a_dead_bookie(env):
    env.start_bookies(4)
    name = "public/default/persistent/ml-dead-bookie"

    async def body():
        config = env.config(managed_ledger_rollover_entries=10_000, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config, seed=21)
        ml = await ManagedLedger.open(name, store, client, config, ensemble_size=3, write_quorum=2,
                                      ack_quorum=2)
        data = [b"m%d" % i for i in range(200)]
        positions = await asyncio.gather(*(ml.append(d) for d in data))   # sent together: all tail
        ledger_id = positions[-1].ledger_id
        ensemble = (await client.ledger_metadata(ledger_id)).last_ensemble
        await shutdown(store, client)          # the owner "crashes": ml is never closed
        victim = ensemble[write_set(199, 3, 2)[0]]
        env.by_address(victim).kill9()

        store2, client2 = await env.open(config, seed=22)
        ml2 = await asyncio.wait_for(ManagedLedger.open(name, store2, client2, config, ensemble_size=3,
                                                        write_quorum=2, ack_quorum=2), BOUND_S)
        assert ml2.last_confirmed == positions[-1]
        assert [e.data for e in await ml2.read(EARLIEST, 1000)] == data
        meta = await client2.ledger_metadata(ledger_id)
        assert meta.is_closed and meta.last_entry_id == 199 and victim not in meta.last_ensemble
        more = await asyncio.wait_for(ml2.append(b"after"), BOUND_S)    # the topic takes appends
        assert more > positions[-1]
        assert [e.data for e in await ml2.read(EARLIEST, 1000)] == data + [b"after"]
        await ml2.close()
        await shutdown(store2, client2)
    run(body())


def test_a_bookie_filled_in_by_a_recoverer_is_no_witness_for_the_next_one(env):
    """Recoverer A replaced the dead bookie (the whole ledger is tail: nothing was confirmed to
    the bookies) and died before copying the tail there. Recoverer B must not take the
    replacement's "no such entry" as proof that the tail was never acknowledged: with the other
    holder of those entries down too it cannot decide (NotEnoughBookies) instead of closing the
    ledger short; once that holder is back it recovers every entry."""
    env.start_bookies(4)

    async def body():
        ledger_id, ensemble = await _write_and_crash(env, env.config(), burst=TOTAL)
        dead_index = write_set(TOTAL - 1, 3, 2)[1]
        env.by_address(ensemble[dead_index]).kill9()
        store, client = await env.open(env.config(), seed=31)
        meta = await client.ledger_metadata(ledger_id)
        meta = await recovery.write_metadata(store, meta.with_state(LedgerStatus.IN_RECOVERY))
        meta = await recovery._replace_bookies(store, meta, {dead_index}, 0,
                                               {ensemble[dead_index]}, random.Random(1))
        assert len(meta.fragments) == 1 and meta.fragments[0].recovery_indexes == (dead_index,)
        await shutdown(store, client)          # A dies here, before any recovery add
        other_index = next(i for i in write_set(TOTAL - 1, 3, 2) if i != dead_index)
        other = env.by_address(ensemble[other_index])   # the other holder of the tail it lacks
        other.kill9()

        store, client = await env.open(env.config(), seed=32)
        with pytest.raises(NotEnoughBookies):
            await asyncio.wait_for(client.open_ledger(ledger_id, recover=True), BOUND_S)
        assert (await client.ledger_metadata(ledger_id)).state is LedgerStatus.IN_RECOVERY
        other.restart()
        await client.pool.get(other.address).wait_reachable(30)
        handle = None
        for _ in range(60):                    # bounded: the restarted bookie reconnects in ~1 s
            try:
                handle = await asyncio.wait_for(client.open_ledger(ledger_id, recover=True), BOUND_S)
                break
            except NotEnoughBookies:
                await asyncio.sleep(0.5)
        assert handle is not None, "recovery did not finish after the bookie came back"
        meta = handle.metadata
        assert meta.is_closed and meta.last_entry_id == TOTAL - 1
        assert [p for _, p in await handle.read(0, TOTAL - 1)] == [_payload(i) for i in range(TOTAL)]
        await _assert_copies(client, meta, range(TOTAL), ensemble[dead_index])
        await shutdown(store, client)
    run(body())
