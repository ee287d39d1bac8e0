"""Kafka offsets of a managed ledger on real bookies (tests/ledger/conftest.py): one message
index per managed ledger, continuous across rollovers, kept by trims, the same after a clean
reopen and after a takeover without close (the old owner never closed: recovery seals its
ledger), and assigned from the trimmed totals to a record written before first offsets existed."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from common.errors import InvalidPosition, OffsetOutOfRange
from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import ManagedLedgerMetadata, ml_path
from ledger.position import Position
from tests.ledger.conftest import run, shutdown

NAME = "public/default/persistent/ml-offsets"
QUORUM = {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}


def _entry(messages: int, i: int) -> bytes:
    return b"%d:%d:payload-%d" % (messages, 10_000 + i, i)


def _meta_hook(data: bytes) -> tuple[int, int]:
    messages, publish, _ = data.split(b":", 2)
    return int(messages), int(publish)


async def _append(ml: ManagedLedger, sizes: list[int], first: int = 0) -> list[Position]:
    return list(await asyncio.gather(*(ml.append(_entry(n, first + i), messages=n, publish_time_ms=10_000 + i)
                                       for i, n in enumerate(sizes))))


def _check(ml: ManagedLedger, expected: dict[Position, int], end: int) -> None:
    """Every kept entry has its expected offset, each of its offsets maps back to it, and the end
    is where it should be."""
    assert ml.end_offset == end
    for position, offset in expected.items():
        assert ml.offset_of(position) == offset, position
        assert ml.entry_for_offset(offset) == position
    assert ml.entry_for_offset(end) == ml.next_position(ml.last_confirmed)
    with pytest.raises(OffsetOutOfRange):
        ml.entry_for_offset(end + 1)


async def _record(store) -> ManagedLedgerMetadata:
    got = await store.get(ml_path(NAME))
    return ManagedLedgerMetadata.from_json(got.value, got.version)


def test_offsets_are_continuous_across_rollover_trim_reopen_and_takeover(env, seed):
    env.start_bookies(1)
    rng = random.Random(seed)

    async def body() -> None:
        config = env.config(managed_ledger_rollover_entries=7, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, meta_from_entry=_meta_hook, **QUORUM)
        assert (ml.log_start_offset, ml.end_offset) == (0, 0)
        sizes = [rng.randrange(1, 9) for _ in range(30)]
        positions = await _append(ml, sizes)
        assert len({p.ledger_id for p in positions}) >= 4                    # several rollovers
        expected, offset = {}, 0
        for position, n in zip(positions, sizes, strict=True):
            expected[position] = offset
            offset += n
        end = offset
        _check(ml, expected, end)
        assert ml.log_start_offset == 0
        # right when an append resolves, its offset is known and the end includes it
        future = ml.append_future(_entry(4, 99), messages=4)
        last = await future
        assert ml.offset_of(last) == end and ml.end_offset == end + 4
        expected[last] = end
        end += 4
        sizes.append(4)
        positions.append(last)

        trimmed = await ml.trim(positions[15])                               # whole ledgers before it
        assert trimmed
        kept = {p: o for p, o in expected.items() if p.ledger_id not in trimmed}
        _check(ml, kept, end)                                                # kept offsets unchanged
        start = min(kept.values())
        assert ml.log_start_offset == start == ml.trimmed_totals.messages
        with pytest.raises(OffsetOutOfRange) as raised:
            ml.entry_for_offset(start - 1)
        assert raised.value.details == {"offset": start - 1, "start": start, "end": end}
        with pytest.raises(InvalidPosition):
            ml.offset_of(positions[0])

        await ml.close()                                                     # clean restart
        ml = await ManagedLedger.open(NAME, store, client, config, meta_from_entry=_meta_hook, **QUORUM)
        _check(ml, kept, end)
        more = await _append(ml, [3, 1, 2], 200)
        for position, n in zip(more, [3, 1, 2], strict=True):
            kept[position] = end
            end += n
        _check(ml, kept, end)

        # takeover without close: another owner opens while this one still has its ledger open
        store2, client2 = await env.open(config, seed=5)
        ml2 = await ManagedLedger.open(NAME, store2, client2, config, meta_from_entry=_meta_hook, **QUORUM)
        _check(ml2, kept, end)
        after = await _append(ml2, [5, 1], 300)
        assert ml2.offset_of(after[0]) == end and ml2.offset_of(after[1]) == end + 5
        record = await _record(store2)
        assert record.ledgers[0].first_offset == record.trimmed.messages == start
        await ml2.close()
        await ml.close()
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())


def test_a_record_written_before_first_offsets_gets_them_from_the_trimmed_totals(env):
    """A managed ledger whose record lacks first_offset (written before this field existed) gets
    offsets on open: the earliest kept ledger starts at trimmed.messages, each next one after the
    previous one's messages; they are persisted by open's compare-and-set."""
    env.start_bookies(1)

    async def body() -> None:
        config = env.config(managed_ledger_rollover_entries=5, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, **QUORUM)
        sizes = [1 + i % 4 for i in range(23)]
        positions = await _append(ml, sizes)
        await ml.trim(positions[12])
        await ml.close()
        # strip first_offset from every ledger: the record as an older broker wrote it
        got = await store.get(ml_path(NAME))
        doc = json.loads(got.value)
        for ledger in doc["ledgers"]:
            ledger.pop("first_offset")
        await store.put(ml_path(NAME), json.dumps(doc).encode(), expected_version=got.version)
        old = await _record(store)
        assert all(r.first_offset == -1 for r in old.ledgers) and old.trimmed.messages > 0

        ml = await ManagedLedger.open(NAME, store, client, config, **QUORUM)
        trimmed_messages = old.trimmed.messages
        assert trimmed_messages == sum(n for p, n in zip(positions, sizes, strict=True)
                                       if p.ledger_id < old.ledgers[0].ledger_id)
        expected, offset = {}, 0
        for position, n in zip(positions, sizes, strict=True):
            if position.ledger_id >= old.ledgers[0].ledger_id:
                expected[position] = offset
            offset += n
        _check(ml, expected, offset)
        assert ml.log_start_offset == trimmed_messages
        record = await _record(store)
        firsts = [r.first_offset for r in record.ledgers]
        assert firsts[0] == trimmed_messages and all(f >= 0 for f in firsts)
        assert all(b.first_offset == a.first_offset + a.messages for a, b in zip(record.ledgers, record.ledgers[1:]))
        await ml.close()
        await shutdown(store, client)
    run(body())
