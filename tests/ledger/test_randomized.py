"""Seeded chaos on real bookies: 5 bookie processes, a managed ledger at E=3 Qw=2 Qa=2 with
quick rollover, appends and a tailing reader running while bookies are kill -9'd and restarted
(at most two down at once). Checks: no acknowledged entry lost, no gap, nothing unacknowledged
kept, and the reader never sees past the last confirmed entry. The seed is printed on failure
(`STRATA_SEED=<n>` reruns it)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from common.errors import StrataError
from ledger.managed_ledger import ManagedLedger
from ledger.position import EARLIEST, Position
from tests.ledger.conftest import run, shutdown

NAME = "public/default/persistent/chaos"


async def _chaos(env, seed: int, duration_s: float) -> None:
    rng = random.Random(seed)
    config = env.config(managed_ledger_rollover_entries=rng.choice([200, 500, 1000]),
                        managed_ledger_rollover_min_age_ms=0, ledger_add_timeout_ms=3_000)
    store, client = await env.open(config, seed=seed)
    ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=3, write_quorum=2, ack_quorum=2)
    acked: dict[Position, bytes] = {}
    violations: list[str] = []
    deadline = time.monotonic() + duration_s

    async def appender() -> None:
        n = 0
        while time.monotonic() < deadline:
            batch = [b"%d-%d" % (seed, n + k) for k in range(rng.randrange(1, 60))]
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
            limit = ml.last_confirmed
            for entry in entries:
                if entry.position > limit:
                    violations.append(f"reader saw {entry.position} past LAC {limit}")
            if entries:
                position = ml.next_position(entries[-1].position)
            else:
                await asyncio.sleep(0.02)

    async def chaos_monkey() -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(rng.uniform(0.3, 1.2))
            dead = [b for b in env.bookies if not b.alive()]
            if dead and (len(dead) >= 2 or rng.random() < 0.5):
                await asyncio.to_thread(rng.choice(dead).restart)
            else:
                await asyncio.to_thread(rng.choice([b for b in env.bookies if b.alive()]).kill9)

    await asyncio.gather(appender(), tail_reader(), chaos_monkey())
    for bookie in env.bookies:
        if not bookie.alive():
            await asyncio.to_thread(bookie.restart)
    assert not violations, violations[:5]
    assert acked, "no append succeeded"
    got = []
    for _ in range(20):                       # bookies just restarted: retry reads briefly
        try:
            got = await ml.read(EARLIEST, 10**7)
            break
        except StrataError:
            await asyncio.sleep(0.5)
    assert [e.position for e in got] == sorted(acked), "lost, extra or reordered entries"
    assert all(acked[e.position] == e.data for e in got)
    for a, b in zip(got, got[1:]):            # no gap: each entry is the next position of the last
        assert ml.next_position(a.position) == b.position
    print(f"chaos seed={seed}: {len(acked)} acked, {len(ml.ledgers())} ledgers, "
          f"{sum(b.starts for b in env.bookies) - len(env.bookies)} bookie restarts")
    await ml.close()
    await shutdown(store, client)


def test_chaos_short(env, seed):
    env.start_bookies(5)
    run(_chaos(env, seed, duration_s=12.0))


@pytest.mark.slow
def test_chaos_long(env, seed):
    env.start_bookies(5)
    run(_chaos(env, seed, duration_s=120.0), timeout_s=600.0)
