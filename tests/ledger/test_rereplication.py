"""Re-replication (`LedgerClient.rereplicate`) on real bookie processes: a bookie dies for good
mid-write, the writer moves on to a replacement and closes; the entries the dead bookie held in
the first fragment have one copy until re-replication copies them to a live bookie and re-points
the fragment. Without a bookie to copy to it fails retriably and changes nothing."""

from __future__ import annotations

import asyncio

import pytest

from common.errors import NotEnoughBookies
from ledger import placement
from ledger.striping import write_set
from tests.ledger.conftest import run, shutdown


def _payload(i: int) -> bytes:
    return b"r%d-" % i + bytes(64)


async def _wait_unregistered(store, address: str, bound_s: float = 30.0) -> None:
    async def poll():
        # ASYNC110 waived: this polls the metadata store; there is no in-process event to wait on
        while address in placement.registered_addresses(await placement.available_bookies(store)):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    await asyncio.wait_for(poll(), bound_s)


def test_rereplicate_copies_a_dead_bookies_entries_and_repoints_the_fragment(env):
    env.start_bookies(4)

    async def body():
        store, client = await env.open(env.config())
        h = await client.create_ledger(3, 2, 2)
        await asyncio.gather(*(h.add_future(_payload(i)) for i in range(200)))
        victim = h.metadata.last_ensemble[1]
        env.by_address(victim).kill9()
        await asyncio.gather(*(h.add_future(_payload(i)) for i in range(200, 300)))
        await h.close()
        meta = await client.ledger_metadata(h.ledger_id)
        assert len(meta.fragments) == 2 and victim in meta.fragments[0].ensemble
        assert victim not in meta.last_ensemble
        await _wait_unregistered(store, victim)

        result = await client.rereplicate(h.ledger_id)
        frag0_last = meta.fragments[1].first_entry_id - 1
        held = [e for e in range(frag0_last + 1) if 1 in write_set(e, 3, 2)]
        assert result.skipped is None and result.fragments_moved == 1
        assert result.entries_copied == len(held)
        after = await client.ledger_metadata(h.ledger_id)
        assert after.fragments == result.metadata.fragments
        assert victim not in after.all_bookies()
        assert [f.first_entry_id for f in after.fragments] == [f.first_entry_id for f in meta.fragments]
        assert after.fragments[1] == meta.fragments[1]
        assert (after.last_entry_id, after.length_bytes) == (meta.last_entry_id, meta.length_bytes)
        for entry_id in range(300):                  # Qw copies, all on live bookies
            ensemble = after.ensemble_for(entry_id)
            for index in write_set(entry_id, 3, 2):
                got = await client.pool.get(ensemble[index]).read(h.ledger_id, entry_id, entry_id,
                                                                  allow_past_lac=True)
                assert got == [(entry_id, _payload(entry_id))]
        again = await client.rereplicate(h.ledger_id)         # nothing left to do
        assert (again.fragments_moved, again.entries_copied) == (0, 0)

        store2, client2 = await env.open(env.config(), seed=5)  # a fresh reader reads everything
        reader = await client2.open_ledger(h.ledger_id, recover=False)
        assert [p for _, p in await reader.read(0, 299)] == [_payload(i) for i in range(300)]
        await client2.delete_ledger(h.ledger_id)                # no longer blocked by the dead bookie
        assert await client2.ledger_metadata(h.ledger_id) is None
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())


def test_rereplicate_without_a_replacement_fails_retriably_and_leaves_a_writers_fragment(env):
    env.start_bookies(3)

    async def body():
        store, client = await env.open(env.config())
        h = await client.create_ledger(3, 2, 2)
        await asyncio.gather(*(h.add_future(_payload(i)) for i in range(50)))
        open_meta = await client.ledger_metadata(h.ledger_id)
        result = await client.rereplicate(h.ledger_id)      # the only fragment is the writer's
        assert (result.skipped, result.fragments_moved, result.entries_copied) == (None, 0, 0)
        assert await client.ledger_metadata(h.ledger_id) == open_meta
        await h.close()
        before = await client.ledger_metadata(h.ledger_id)
        victim = before.last_ensemble[0]
        env.by_address(victim).kill9()
        await _wait_unregistered(store, victim)
        with pytest.raises(NotEnoughBookies) as info:
            await client.rereplicate(h.ledger_id)
        assert info.value.retriable
        assert (await client.ledger_metadata(h.ledger_id)) == before
        await shutdown(store, client)
    run(body())
