"""Index checkpoints of the open ledger: a new owner after a crash reads back only the entries
after the last checkpoint, and ends with the same index and ledger length as a full read."""

from __future__ import annotations

import asyncio

from ledger import index_checkpoint
from ledger.entry_index import EntryIndex
from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import index_path
from ledger.position import Position
from tests.ledger.conftest import run, shutdown
from tests.support.waiting import until

NAME = "public/default/persistent/checkpoint-test"


def _entry(i: int) -> bytes:
    return b"%d:%d:payload-%d:" % (1 + i % 3, 10_000 + i, i) + b"y" * (100 + i % 50)


def _meta_hook(data: bytes) -> tuple[int, int]:
    messages, publish, _ = data.split(b":", 2)
    return int(messages), int(publish)


async def _append(ml: ManagedLedger, first: int, count: int) -> None:
    await asyncio.gather(*(ml.append(_entry(i), messages=1 + i % 3, publish_time_ms=10_000 + i)
                           for i in range(first, first + count)))


def test_a_takeover_reads_back_only_the_entries_after_the_checkpoint(env):
    env.start_bookies(3)

    async def body():
        config = env.config(managed_ledger_index_checkpoint_entries=100,
                            managed_ledger_index_checkpoint_interval_ms=50)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=3, write_quorum=2, ack_quorum=2)
        await _append(ml, 0, 400)
        ledger_id = ml.ledgers()[-1].ledger_id

        async def checkpointed() -> EntryIndex | None:   # the timer covers the quiet ledger too
            index = await index_checkpoint.load(store, NAME, ledger_id)
            return index if index is not None and len(index) == 400 else None
        await until(checkpointed, 10, what="a checkpoint of all 400 entries", interval_s=0.05)
        await _append(ml, 400, 30)                        # a tail after the last checkpoint

        # "crash": ml is never closed; a new owner counts what it reads from the bookies
        store2, client2 = await env.open(config, seed=3)
        read_entries = 0
        original_read = client2.pool.get

        wrapped: set[str] = set()

        def counting_get(address: str):
            bookie = original_read(address)
            if address in wrapped:
                return bookie
            wrapped.add(address)
            inner = bookie.read

            async def read(ledger: int, first: int, last: int, *args, **kwargs):
                nonlocal read_entries
                got = await inner(ledger, first, last, *args, **kwargs)
                read_entries += len(got) if isinstance(got, list) else 0
                return got
            bookie.read = read
            return bookie
        client2.pool.get = counting_get
        ml2 = await ManagedLedger.open(NAME, store2, client2, config, meta_from_entry=_meta_hook)
        client2.pool.get = original_read
        print(f"takeover read {read_entries} entries back")
        assert read_entries < 200, f"the takeover read {read_entries} entries back (checkpoint at 400 of 430)"

        kept = ml2.ledgers()[0]
        assert kept.entries == 430 and kept.size_bytes == sum(len(_entry(i)) for i in range(430))
        for i in (0, 399, 400, 429):                    # from the checkpoint, and read back
            meta = ml2.entry_meta(Position(ledger_id, i))
            assert (meta.messages, meta.publish_time_ms, meta.size_bytes) == (1 + i % 3, 10_000 + i, len(_entry(i)))
        closed = await client2.ledger_metadata(ledger_id)
        assert closed is not None and closed.length_bytes == sum(len(_entry(i)) for i in range(430))
        final = EntryIndex.from_blob((await store2.get(index_path(NAME, ledger_id))).value)
        assert len(final) == 430 and final.total_bytes == closed.length_bytes
        await ml2.close()
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())


def test_a_checkpoint_longer_than_the_recovered_ledger_is_ignored(env):
    env.start_bookies(2)

    async def body():
        config = env.config()
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2, ack_quorum=2)
        await _append(ml, 0, 20)
        ledger_id = ml.ledgers()[-1].ledger_id
        bogus = EntryIndex()
        for _ in range(50):                          # says 50 entries; the ledger has 20
            bogus.append(7, 1, 1)
        await store.put(index_path(NAME, ledger_id), bogus.to_blob())
        store2, client2 = await env.open(config, seed=5)
        ml2 = await ManagedLedger.open(NAME, store2, client2, config, meta_from_entry=_meta_hook)
        assert ml2.ledgers()[0].entries == 20
        closed = await client2.ledger_metadata(ledger_id)
        assert closed is not None and closed.length_bytes == sum(len(_entry(i)) for i in range(20))
        await ml2.close()
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())
