"""Seeded chaos on real bookies: 5 bookie processes, a managed ledger at E=3 Qw=2 Qa=2 with
quick rollover, appends, a tailing reader and an independent reader running while bookies are
kill -9'd and restarted (at most two down at once).

Checks: no acknowledged entry lost, no gap, nothing unacknowledged kept; and an independent
reader — a second ledger client that learns the ledger list from the metadata store and opens
each ledger with recover=False, reading only up to the LAC it learns from the bookies — never
returns an entry past what it learned, nor one that was not acknowledged (by the end of the
run) with the same bytes. The seed is printed on failure (`STRATA_SEED=<n>` reruns it): the
appender, the chaos monkey and the quick settings each draw from their own `random.Random`, so
the kill/restart schedule does not depend on how many appends happened to run.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time

import pytest

from common.errors import StrataError
from ledger.handle import ReadHandle
from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import ManagedLedgerMetadata, ml_path
from ledger.position import EARLIEST, Position
from tests.ledger.conftest import run, shutdown

NAME = "public/default/persistent/chaos"
BOOKIES_BACK_S = 60.0       # bound for restarted bookies to be reachable again
FINAL_READ_S = 120.0        # bound for the final read-back (retried while bookies settle)
READ_BATCH_ENTRIES = 200


class IndependentReader:
    """Reads the managed ledger's ledgers through its own client, as a second broker would."""

    def __init__(self, store, client) -> None:
        self.store = store
        self.client = client
        self.next_entry: dict[int, int] = {}             # ledger id -> next entry id to read
        self.closed: dict[int, ReadHandle] = {}          # handles of closed ledgers, final
        self.seen: list[tuple[Position, bytes, int]] = []  # (position, data, LAC learned)
        self.violations: list[str] = []

    async def ledger_ids(self) -> list[int]:
        found = await self.store.get(ml_path(NAME))
        if found is None:
            return []
        return [r.ledger_id for r in ManagedLedgerMetadata.from_json(found.value, found.version).ledgers]

    async def handle(self, ledger_id: int) -> ReadHandle:
        if ledger_id in self.closed:
            return self.closed[ledger_id]
        handle = await self.client.open_ledger(ledger_id, recover=False)
        if handle.metadata.is_closed:
            self.closed[ledger_id] = handle
        return handle

    async def poll(self) -> None:
        for ledger_id in await self.ledger_ids():
            handle = await self.handle(ledger_id)
            learned = handle.last_add_confirmed
            first = self.next_entry.get(ledger_id, 0)
            if learned < first:
                continue
            last = min(learned, first + READ_BATCH_ENTRIES - 1)
            for entry_id, data in await handle.read(first, last):
                if entry_id > learned:
                    self.violations.append(f"read {ledger_id}:{entry_id} past the LAC {learned} it learned")
                self.seen.append((Position(ledger_id, entry_id), data, learned))
            self.next_entry[ledger_id] = last + 1

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                await self.poll()
            except StrataError:
                pass                                     # bookies down: try again later
            await asyncio.sleep(0.05)

    def check(self, acked: dict[Position, bytes]) -> None:
        assert not self.violations, self.violations[:5]
        for position, data, learned in self.seen:
            assert position in acked, f"independent reader saw {position} (LAC {learned}), never acknowledged"
            assert acked[position] == data, f"independent reader saw other bytes at {position}"
        assert self.seen, "the independent reader read nothing"


async def _wait_bookies_back(env, client) -> None:
    for bookie in env.bookies:
        if not bookie.alive():
            await asyncio.to_thread(bookie.restart)
    for bookie in env.bookies:
        await client.pool.get(bookie.address).wait_reachable(BOOKIES_BACK_S)


async def _read_all(ml: ManagedLedger) -> list:
    """Everything from the start; retried (bounded) while the restarted bookies settle."""
    deadline = time.monotonic() + FINAL_READ_S
    while True:
        try:
            return await ml.read(EARLIEST, 10**7)
        except StrataError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def _chaos(env, seed: int, duration_s: float) -> None:
    settings_rng = random.Random(f"{seed}-settings")
    append_rng = random.Random(f"{seed}-append")
    chaos_rng = random.Random(f"{seed}-chaos")
    config = env.config(managed_ledger_rollover_entries=settings_rng.choice([200, 500, 1000]),
                        managed_ledger_rollover_min_age_ms=0, ledger_add_timeout_ms=3_000)
    store, client = await env.open(config, seed=seed)
    store2, client2 = await env.open(config, seed=seed + 1)
    ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=3, write_quorum=2, ack_quorum=2)
    independent = IndependentReader(store2, client2)
    acked: dict[Position, bytes] = {}
    violations: list[str] = []
    deadline = time.monotonic() + duration_s

    async def appender() -> None:
        n = 0
        while time.monotonic() < deadline:
            batch = [b"%d-%d" % (seed, n + k) for k in range(append_rng.randrange(1, 60))]
            n += len(batch)
            outcomes = await asyncio.gather(*(ml.append(d) for d in batch), return_exceptions=True)
            for data, out in zip(batch, outcomes):
                if isinstance(out, Position):
                    acked[out] = data
                elif not (isinstance(out, StrataError) and out.retriable):
                    violations.append(f"non-retriable append failure: {out!r}")
                    return
                else:
                    await asyncio.sleep(0.05)

    async def tail_reader() -> None:
        position = EARLIEST
        while time.monotonic() < deadline:
            try:
                entries = await ml.read(position, 100)
            except StrataError:
                await asyncio.sleep(0.05)
                continue
            for a, b in itertools.pairwise(entries):
                if ml.next_position(a.position) != b.position:
                    violations.append(f"tail reader: gap between {a.position} and {b.position}")
            if entries:
                position = ml.next_position(entries[-1].position)
            else:
                await asyncio.sleep(0.02)

    kills: list[str] = []

    async def chaos_monkey() -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(chaos_rng.uniform(0.3, 1.2))
            dead = [b for b in env.bookies if not b.alive()]
            if dead and (len(dead) >= 2 or chaos_rng.random() < 0.5):
                await asyncio.to_thread(chaos_rng.choice(dead).restart)
            else:
                victim = chaos_rng.choice([b for b in env.bookies if b.alive()])
                await asyncio.to_thread(victim.kill9)
                kills.append(victim.address)

    await asyncio.gather(appender(), tail_reader(), chaos_monkey(), independent.run(deadline))
    await _wait_bookies_back(env, client)
    assert len(kills) >= 3, f"too little chaos to check anything: {kills}"   # one every 0.3-1.2 s
    assert not violations, violations[:5]
    assert acked, "no append succeeded"
    got = await _read_all(ml)
    assert [e.position for e in got] == sorted(acked), "lost, extra or reordered entries"
    assert all(acked[e.position] == e.data for e in got)
    for a, b in itertools.pairwise(got):            # no gap: each entry is the next position of the last
        assert ml.next_position(a.position) == b.position
    independent.check(acked)
    print(f"chaos seed={seed}: {len(acked)} acked, {len(ml.ledgers())} ledgers, "
          f"{len(independent.seen)} read independently, "
          f"{sum(b.starts for b in env.bookies) - len(env.bookies)} bookie restarts")
    await ml.close()
    await shutdown(store2, client2)
    await shutdown(store, client)


def test_chaos_short(env, seed):
    """The same checks as the slow soak below, in `make test`, over 12 s of bookie kills and restarts."""
    env.start_bookies(5)
    run(_chaos(env, seed, duration_s=12.0), timeout_s=300.0)


@pytest.mark.slow
@pytest.mark.timeout(660)    # above the run's own 600 s bound
def test_chaos_long(env, seed):
    env.start_bookies(5)
    run(_chaos(env, seed, duration_s=120.0), timeout_s=600.0)
