"""The managed ledger on real bookies: append/read across ledgers, rollover, trim freeing bookie
disk, reopen after a crash (index rebuilt through the meta_from_entry hook), two owners, and an
add failure (a hung bookie) failing every append behind it, also during a rollover."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from common.errors import InvalidArgument, InvalidPosition, InvariantViolation, ManagedLedgerFenced, StrataError
from ledger.managed_ledger import ManagedLedger, MLState
from ledger.ml_metadata import ManagedLedgerMetadata, ml_path
from ledger.position import EARLIEST, Position
from ledger.types import LedgerState
from tests.ledger.conftest import frozen, run, shutdown
from tests.support.waiting import until

NAME = "public/default/persistent/ml-test"


def _meta_hook(data: bytes) -> tuple[int, int]:
    # test entries are b"<messages>:<publish_ms>:..." so the hook can recompute their facts
    messages, publish, _ = data.split(b":", 2)
    return int(messages), int(publish)


ENTRY_PAD = b"x" * 1024     # so trimmed ledgers hold enough bytes to see the bookies free them


def _entry(i: int) -> bytes:
    return b"%d:%d:payload-%d:" % (1 + i % 3, 10_000 + i, i) + ENTRY_PAD


async def _disk_used(client, env) -> dict[str, int]:
    return {b.address: (await client.pool.get(b.address).info()).disk_used_bytes for b in env.bookies}


async def _wait_disk_below(client, env, limits: dict[str, int], timeout_s: float) -> None:
    """Poll GetInfo until every bookie's disk use is at most its limit (checkpoint + GC)."""
    async def freed() -> dict[str, int] | None:
        used = await _disk_used(client, env)
        return None if any(used[a] > limits[a] for a in limits) else used
    await until(freed, timeout_s, what=f"every bookie's disk use at most {limits}", interval_s=0.2)


async def _append_all(ml: ManagedLedger, first: int, count: int) -> list[Position]:
    return list(await asyncio.gather(*(
        ml.append(_entry(i), messages=1 + i % 3, publish_time_ms=10_000 + i)
        for i in range(first, first + count))))


def test_rollover_read_trim_and_disk_freed(env):
    env.set_bookie_config(bookie_checkpoint_interval_ms=500)   # seal segments so GC can free them
    env.start_bookies(3)

    async def body():
        config = env.config(managed_ledger_rollover_entries=100, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2, ack_quorum=2)
        seen: list[Position] = []
        ml.add_append_listener(seen.append)
        positions = await _append_all(ml, 0, 450)
        assert positions == sorted(positions) and seen == positions
        infos = ml.ledgers()
        assert [i.entries for i in infos] == [100, 100, 100, 100, 50]
        assert [i.state for i in infos] == [LedgerState.CLOSED] * 4 + [LedgerState.OPEN]
        assert infos[0].messages == sum(1 + i % 3 for i in range(100))
        assert infos[0].size_bytes == sum(len(_entry(i)) for i in range(100))
        assert ml.last_confirmed == positions[-1] and ml.first_position == positions[0]
        assert ml.entries_between(positions[10], positions[210]) == 200
        assert ml.position_for_publish_time(10_250) == positions[250]
        assert ml.entry_meta(positions[7]).messages == 1 + 7 % 3
        client.entry_cache.invalidate_owner(ml.name)          # force reads from the bookies
        got = await ml.read(EARLIEST, 1000)
        assert [e.data for e in got] == [_entry(i) for i in range(450)]
        got = await ml.read(positions[95], 10, max_bytes=len(_entry(95)) * 3)
        assert [e.position for e in got] == positions[95:98]
        assert await ml.read(ml.next_position(ml.last_confirmed), 10) == []

        used_before = await _disk_used(client, env)
        holders = {i.ledger_id: (await client.ledger_metadata(i.ledger_id)).all_bookies() for i in infos[:4]}
        trimmed_ids = [i.ledger_id for i in infos[:2]]
        assert await ml.trim(positions[250]) == trimmed_ids
        assert [i.ledger_id for i in ml.ledgers()] == [i.ledger_id for i in infos[2:]]
        assert ml.first_position == positions[200]
        with pytest.raises(InvalidPosition):
            ml.entry_meta(positions[0])
        assert (await ml.read(EARLIEST, 1))[0].position == positions[200]
        assert await ml.trim(Position(10**12, 0)) == [i.ledger_id for i in infos[2:4]]   # never the open one
        assert ml.ledgers()[-1].state is LedgerState.OPEN
        await ml.wait_trimmed(30)
        for bookie in env.bookies:
            on_disk = {s.ledger_id for s in await client.pool.get(bookie.address).list_ledgers()}
            assert not on_disk & {i.ledger_id for i in infos[:4]}
            assert await client.ledger_metadata(infos[0].ledger_id) is None
        # ...and the disk really shrinks: the segments that held the 400 trimmed entries are
        # sealed by a checkpoint and deleted or compacted by GC. Qw=E: every bookie of a ledger's
        # ensemble held all of it; each must give back at least half of the bytes it held.
        limits = {}
        for address, before in used_before.items():
            held_bytes = sum(i.size_bytes for i in infos[:4] if address in holders[i.ledger_id])
            if held_bytes:
                limits[address] = before - held_bytes // 2
        assert limits
        await _wait_disk_below(client, env, limits, timeout_s=60)
        await ml.close()
        await shutdown(store, client)
    run(body())


def test_reopen_after_crash_recovers_and_rebuilds_index(env):
    env.start_bookies(3)

    async def body():
        config = env.config(managed_ledger_rollover_entries=200, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=3, write_quorum=2, ack_quorum=2)
        positions = await _append_all(ml, 0, 300)
        # "crash": never close ml; a new owner (another client) opens with the broker's hook
        store2, client2 = await env.open(config, seed=7)
        ml2 = await ManagedLedger.open(NAME, store2, client2, config, ensemble_size=3, write_quorum=2,
                                       ack_quorum=2, meta_from_entry=_meta_hook)
        assert ml2.last_confirmed == positions[-1]
        for i in (0, 199, 200, 299):                         # closed-by-owner and recovered ledgers
            meta = ml2.entry_meta(positions[i])
            assert (meta.messages, meta.publish_time_ms, meta.size_bytes) == (1 + i % 3, 10_000 + i, len(_entry(i)))
        more = await _append_all(ml2, 300, 50)
        assert more[0] > positions[-1] and more[0].ledger_id > positions[-1].ledger_id
        with pytest.raises(ManagedLedgerFenced):
            await ml.append(b"stale owner")
        got = await ml2.read(EARLIEST, 1000)
        assert [e.data for e in got] == [_entry(i) for i in range(350)]
        await ml2.close()
        await ml.close()
        ml3 = await ManagedLedger.open(NAME, store2, client2, config)
        assert [e.data for e in await ml3.read(EARLIEST, 1000)] == [_entry(i) for i in range(350)]
        await ml3.delete()
        assert await store2.get("/managed-ledgers/" + NAME.replace("/", "%2F")) is None
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())


def test_a_trim_interrupted_before_the_bookie_deletes_is_finished_by_the_next_owner(env):
    """Trim moves ledgers to the record's `deleting` list in the same compare-and-set that drops
    them; if the owner dies before the bookies deleted them, the next owner deletes them."""
    bookies = env.start_bookies(2)

    async def body():
        config = env.config(managed_ledger_rollover_entries=50, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2, ack_quorum=2)
        positions = await _append_all(ml, 0, 160)
        doomed_ids = [i.ledger_id for i in ml.ledgers()[:2]]
        for bookie in bookies:                 # the deletes cannot reach the bookies...
            bookie.kill9()
        assert await ml.trim(positions[120]) == doomed_ids
        record = ManagedLedgerMetadata.from_json((await store.get(ml_path(NAME))).value, 0)
        assert list(record.deleting) == doomed_ids
        await ml._deleter.close()              # ...and the owner dies before they could
        for bookie in bookies:
            bookie.restart()
        store2, client2 = await env.open(config, seed=3)
        ml2 = await ManagedLedger.open(NAME, store2, client2, config, ensemble_size=2, write_quorum=2,
                                       ack_quorum=2)
        await ml2.wait_trimmed(30)
        for bookie in bookies:
            on_disk = {s.ledger_id for s in await client2.pool.get(bookie.address).list_ledgers()}
            assert not on_disk & set(doomed_ids)
        for ledger_id in doomed_ids:
            assert await client2.ledger_metadata(ledger_id) is None
        await ml2.close()                      # its next compare-and-set clears the to-do list
        record = ManagedLedgerMetadata.from_json((await store2.get(ml_path(NAME))).value, 0)
        assert record.deleting == ()
        await shutdown(store2, client2)
        await shutdown(store, client)
    run(body())


def test_two_owners_never_interleave(env):
    """Owner A appends continuously; owner B opens mid-way. After B's open, A's appends fail;
    every entry acknowledged to either reads back in position order with no gap."""
    env.start_bookies(3)

    async def body():
        config = env.config(managed_ledger_rollover_entries=150, managed_ledger_rollover_min_age_ms=0)
        store_a, client_a = await env.open(config, seed=1)
        store_b, client_b = await env.open(config, seed=2)
        a = await ManagedLedger.open(NAME, store_a, client_a, config, ensemble_size=3, write_quorum=2, ack_quorum=2)
        acked: dict[Position, bytes] = {}
        unknown: set[bytes] = set()                          # appends failed by the fencing
        stop = asyncio.Event()

        async def writer_a():
            i = 0
            while not stop.is_set():
                batch = [(b"A%d" % (i + k)) for k in range(20)]
                outcomes = await asyncio.gather(*(a.append(d) for d in batch), return_exceptions=True)
                for d, out in zip(batch, outcomes):
                    if isinstance(out, Position):
                        acked[out] = d
                    else:
                        assert isinstance(out, ManagedLedgerFenced), out
                        unknown.add(d)
                if unknown:
                    return
                i += 20

        task = asyncio.ensure_future(writer_a())
        await until(lambda: acked or task.done(), 30, what="owner A acking an append")
        assert acked and not task.done(), task               # A has written something, still writing
        b = await ManagedLedger.open(NAME, store_b, client_b, config, ensemble_size=3, write_quorum=2, ack_quorum=2)
        await asyncio.wait_for(task, 30)                     # A stops: fenced
        a_last = max(acked)
        with pytest.raises(ManagedLedgerFenced):
            await a.append(b"after takeover")
        for i in range(100):
            pos = await b.append(b"B%d" % i)
            assert pos > a_last
            acked[pos] = b"B%d" % i
        got = await b.read(EARLIEST, 100_000)
        positions = [e.position for e in got]
        assert positions == sorted(positions) and set(acked) <= set(positions)  # every ack, in order
        # An add failed by the fencing has an unknown outcome: B's recovery may keep it.
        assert all(acked[e.position] == e.data if e.position in acked else e.data in unknown
                   for e in got)
        assert b.entries_between(Position(-1, -1), b.last_confirmed) == len(got)  # no gap
        stop.set()
        await b.close()
        await a.close()
        await shutdown(store_a, client_a)
        await shutdown(store_b, client_b)
    run(body())


def test_an_invariant_failing_in_the_add_callback_fails_the_append_and_stops_appends(env):
    env.start_bookies(2)

    async def body():
        config = env.config()
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2, ack_quorum=2)
        first = await ml.append(b"first")
        ml._last_position = Position(first.ledger_id + 1, 0)   # a bug: the next add looks stale
        with pytest.raises(InvariantViolation):
            await asyncio.wait_for(ml.append(b"second"), 10)   # fails, does not hang
        with pytest.raises(InvariantViolation):
            await ml.append(b"third")                          # refused: the ML stopped appending
        await ml.close()
        await shutdown(store, client)
    run(body())


def test_a_publish_time_the_index_cannot_hold_is_refused_at_once_and_appends_go_on(env):
    """Found by `strata perf fuzz`: a SEND whose publish_time was 2^64-1 was written, then the
    entry index (int64) raised OverflowError in the add callback and the managed ledger stopped
    taking appends for good: one bad message broke the topic for every producer."""
    env.start_bookies(1)

    async def body():
        config = env.config()
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=1, write_quorum=1, ack_quorum=1)
        first = await ml.append(b"first", publish_time_ms=1_000)
        for wrong in (2**63, 2**64 - 1, -(2**63) - 1):
            with pytest.raises(InvalidArgument):
                ml.append_future(b"bad", publish_time_ms=wrong)
        second = await asyncio.wait_for(ml.append(b"second", publish_time_ms=2**63 - 1), 10)
        assert second > first and ml.state is MLState.READY
        assert [e.data for e in await ml.read(first, 10)] == [b"first", b"second"]
        await ml.close()
        await shutdown(store, client)
    run(body())


# --- an append failure fails everything behind it (apache/pulsar#5218) --------------------------

def _hung_bookie_env(env, add_timeout_ms: int, **overrides):
    # The hung bookie must stay registered (lease well above the hang) so the rollover can
    # create the next ledger at once: the appends behind the failed one then have a ledger to
    # go to, which is the case that must not store them.
    env.set_bookie_config(metadata_session_lease_ms=20_000)
    env.start_bookies(2)
    return env.config(ledger_add_timeout_ms=add_timeout_ms, managed_ledger_rollover_min_age_ms=0,
                      **overrides)


async def _wait_state(ml: ManagedLedger, state, timeout_s: float = 10) -> None:
    await until(lambda: ml.state is state, timeout_s, what=f"the managed ledger in state {state}")


def test_an_add_failing_during_a_rollover_fails_every_append_queued_behind_it(env):
    """The 5th entry triggers a rollover; it hangs on a stopped bookie while five more appends
    wait for the new ledger. When it times out, the five must fail too, although the bookie is
    back by then and the new ledger could take them; appends made afterwards are stored."""
    config = _hung_bookie_env(env, 1_500, managed_ledger_rollover_entries=5)

    async def body():
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2,
                                      ack_quorum=2)
        first = [await ml.append(_entry(i)) for i in range(4)]
        failures_before = ml.append_failures
        with frozen(env.bookies[0]):
            rolling = asyncio.ensure_future(ml.append(_entry(4)))
            await _wait_state(ml, MLState.ROLLING)           # sealing waits for entry 4
            queued = [asyncio.ensure_future(ml.append(_entry(i))) for i in range(5, 10)]
            await until(lambda: len(ml._waiting) == 5, 10, what="five appends waiting for the new ledger")
            assert ml.state is MLState.ROLLING
            with pytest.raises(StrataError) as failed:
                await asyncio.wait_for(rolling, 30)
            assert failed.value.retriable
        # the bookie answers again: a new ledger would take the queued appends now
        outcomes = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True), 30)
        assert all(isinstance(o, StrataError) and o.retriable for o in outcomes), outcomes
        assert ml.append_failures > failures_before
        after = await asyncio.wait_for(ml.append(_entry(10)), 30)
        assert after.ledger_id > first[-1].ledger_id
        got = await ml.read(EARLIEST, 100)
        assert [e.data for e in got] == [_entry(i) for i in (0, 1, 2, 3, 10)]
        assert [e.position for e in got] == first + [after]
        assert ml.entries_between(Position(-1, -1), ml.last_confirmed) == 5   # no gap
        await ml.close()
        await shutdown(store, client)
    run(body())


def _stored_in_the_current_epoch(ml: ManagedLedger, calls: list[tuple[int, bytes]],
                                 results: dict[int, Position | BaseException]) -> bool:
    """Some append accepted while `append_failures` had its present value has been stored."""
    epoch = ml.append_failures
    return any(e == epoch and isinstance(results.get(i), Position) for i, (e, _) in enumerate(calls))


def test_no_append_succeeds_behind_a_failed_one_of_the_same_failure_epoch(env, seed):
    """Appends every few ms while one of two bookies (E=Qw=Qa=2) hangs for a random while, a few
    times, with frequent rollovers. Contract: appends accepted while `append_failures` had one
    value succeed as a prefix — after the first failure among them, all later ones fail. So a
    caller that sees the count unchanged since its earlier appends knows none of them failed
    unseen. Everything that succeeded reads back, nothing else, with no gap."""
    rng = random.Random(seed)
    config = _hung_bookie_env(env, 1_000, managed_ledger_rollover_entries=rng.choice([7, 20, 50]))

    async def body():
        store, client = await env.open(config, seed=seed)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2,
                                      ack_quorum=2)
        calls: list[tuple[int, bytes]] = []                  # (append_failures at the call, data)
        results: dict[int, Position | BaseException] = {}

        async def one(i: int, data: bytes) -> None:
            calls.append((ml.append_failures, data))         # same step as the ML accepting it
            try:
                results[i] = await ml.append(data)
            except StrataError as exc:
                results[i] = exc

        async def appender(stop: asyncio.Event) -> list[asyncio.Task]:
            tasks, i = [], 0
            while not stop.is_set():
                tasks.append(asyncio.ensure_future(one(i, b"e%d" % i)))
                i += 1
                await asyncio.sleep(rng.uniform(0.001, 0.01))   # the load's pace, not a wait
            return tasks

        stop = asyncio.Event()
        appending = asyncio.ensure_future(appender(stop))
        # The sleeps below are the scenario (how long the bookie runs, then hangs), not waits.
        # A short hang may now be ridden out (the writer hands its appends to a new ledger once
        # the bookie answers again), so the last one outlasts the add timeout plus the probe of
        # the quarantined bookie (ledger.client): appends must fail in it.
        for hang in range(3):
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            with frozen(env.bookies[rng.randrange(2)]):
                await asyncio.sleep(rng.uniform(0.8, 2.5) if hang < 2 else rng.uniform(4.0, 5.0))
        # the bookie is back: go on until an append made since the last failure is stored
        await until(lambda: _stored_in_the_current_epoch(ml, calls, results), 60,
                    what="an append stored after the last failure", interval_s=0.05)
        stop.set()
        tasks = await appending
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert len(results) == len(calls)

        failed_epochs: set[int] = set()
        for i, (epoch, _data) in enumerate(calls):
            out = results[i]
            if isinstance(out, BaseException):
                assert out.retriable, out
                failed_epochs.add(epoch)
            else:
                assert epoch not in failed_epochs, f"append {i} stored after a failed one, epoch {epoch}"
        assert failed_epochs, "the hung bookie failed no append: the test exercised nothing"
        stored = [(results[i], data) for i, (_, data) in enumerate(calls) if isinstance(results[i], Position)]
        assert any(epoch > min(failed_epochs) and isinstance(results[i], Position)
                   for i, (epoch, _) in enumerate(calls)), "nothing was stored after the first failure"
        print(f"seed={seed}: {len(calls)} appends, {len(calls) - len(stored)} failed in "
              f"{len(failed_epochs)} epochs, {len(ml.ledgers())} ledgers")
        got = await ml.read(EARLIEST, 10**6)
        assert [(e.position, e.data) for e in got] == sorted(stored)
        for a, b in itertools.pairwise(got):
            assert ml.next_position(a.position) == b.position
        await ml.close()
        await shutdown(store, client)
    run(body(), timeout_s=240)


def test_the_deleter_retries_through_unexpected_errors(env):
    """A non-StrataError from a delete (a bug, an untranslated foreign error) is logged, counted
    and retried with backoff; the ledger still gets deleted."""
    env.start_bookies(2)

    async def body():
        config = env.config(managed_ledger_rollover_entries=20, managed_ledger_rollover_min_age_ms=0)
        store, client = await env.open(config)
        ml = await ManagedLedger.open(NAME, store, client, config, ensemble_size=2, write_quorum=2,
                                      ack_quorum=2)
        positions = await _append_all(ml, 0, 50)
        real_delete = client.delete_ledger
        attempts: list[int] = []

        async def flaky_delete(ledger_id: int) -> None:
            attempts.append(ledger_id)
            if len(attempts) <= 3:
                raise RuntimeError("injected: not a StrataError")
            await real_delete(ledger_id)

        client.delete_ledger = flaky_delete
        doomed = await ml.trim(positions[45])
        assert doomed
        await ml.wait_trimmed(60)
        assert ml._deleter.unexpected_errors == 3 and ml._deleter.retries == 3
        for ledger_id in doomed:
            assert await client.ledger_metadata(ledger_id) is None
        await ml.close()
        await shutdown(store, client)
    run(body())
