"""A bit rots in one stored copy of an entry (issue 27), on real bookie processes: a ledger at
Qw=2 on two bookies, one payload bit of one entry flipped on one bookie's disk. The bookie's
CRC catches it, the reader goes to the other copy and gets every byte right, the bookie lists
the entry in its registration, and the auditor's leader writes it back from the other copy:
the bookie serves the right bytes again and its report empties. A report for a deleted ledger
is simply forgotten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.clock import SYSTEM_CLOCK
from common.errors import ChecksumMismatch
from ledger import auditor as auditor_mod
from ledger.auditor import Auditor
from ledger.placement import AVAILABLE_PATH
from tests.bookie.test_corrupt_entries import _flip
from tests.ledger.conftest import run, shutdown
from tests.support.waiting import until


def _entry(i: int) -> bytes:
    return b"entry-%d:" % i + bytes(range(256)) * 2


async def _reported(store, address: str) -> list[list[int]]:
    got = await store.get(f"{AVAILABLE_PATH}/{address}")
    return [] if got is None else json.loads(got.value).get("corrupt", [])


def test_a_flipped_bit_is_read_around_and_repaired_by_the_auditor(env):
    env.set_bookie_config(bookie_registration_refresh_interval_ms=200)
    env.start_bookies(2)
    config = env.config(ledger_auditor_interval_ms=60_000)

    async def body():
        store, client = await env.open(config)
        handle = await client.create_ledger(2, 2, 2)
        for i in range(20):
            await handle.add(_entry(i))
        await handle.close()
        ledger = handle.ledger_id
        other = await client.create_ledger(2, 2, 2)      # a ledger about to be deleted
        await other.add(_entry(0))
        await other.close()
        victim = handle.metadata.last_ensemble[0]      # a read of 0..19 goes to it first
        segments = Path(env.by_address(victim).data_dir) / "segments"
        _flip(segments, other.ledger_id, 0)            # the later record first: the scan stops
        _flip(segments, ledger, 7)                     # at the first bad one

        reader = await client.open_ledger(ledger, recover=False)
        assert [p for _, p in await reader.read(0, 19)] == [_entry(i) for i in range(20)]
        for ledger_id, entry_id in ((ledger, 7), (other.ledger_id, 0), (ledger, 7)):
            with pytest.raises(ChecksumMismatch):      # caught, then not served any more
                await client.pool.get(victim).read(ledger_id, entry_id, entry_id, allow_past_lac=True)
        # the second ledger's metadata goes, its copy on the bookie stays: nothing to repair
        await store.delete(f"/ledgers/{other.ledger_id:020d}")

        async def listed():
            return await _reported(store, victim) == [[ledger, 7], [other.ledger_id, 0]]
        await until(listed, 10, what="the bookie reports both entries", interval_s=0.05)

        auditor = Auditor(client, config, SYSTEM_CLOCK, owner="test")
        report = await auditor.audit_once()
        assert report.leader and report.failed == 0
        assert report.corrupt is not None and (report.corrupt.repaired, report.corrupt.forgotten) == (1, 1)
        assert auditor_mod.STATE.corrupt_repaired_total >= 1
        got = await client.pool.get(victim).read(ledger, 0, 19, allow_past_lac=True)
        assert got == [(i, _entry(i)) for i in range(20)]

        async def cleared():
            return await _reported(store, victim) == []
        await until(cleared, 10, what="the bookie's report empties", interval_s=0.05)
        assert (await client.ledger_metadata(ledger)).fragments == handle.metadata.fragments
        await auditor.close()
        await shutdown(store, client)
    run(body())
