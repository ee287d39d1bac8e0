"""Deduplication state (broker.topics.dedup): verdicts, high marks only after durability, chunks, batches,
snapshots every N entries or after a time (ManualClock), restore by snapshot + replay, switching."""

from __future__ import annotations

import asyncio

import pytest

from broker.topics.dedup import Deduplication, DedupState, Verdict, entry_high_mark, snapshot_path
from common.clock import ManualClock
from common.config import default_config
from common.errors import BadVersion, NotFound
from entries.entry import build_entry, parse_entry
from ledger.position import Position
from ledger.types import Entry
from proto import pulsar_api_pb2 as pb


def entry(name: str, seq: int, *, batch: int | None = None, chunk: tuple[int, int] | None = None,
          highest: int | None = None) -> bytes:
    md = pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=1)
    if batch is not None:
        md.num_messages_in_batch = batch
    if highest is not None:
        md.highest_sequence_id = highest
    if chunk is not None:
        md.uuid = f"{name}-{seq}"
        md.chunk_id, md.num_chunks_from_msg = chunk
        md.total_chunk_msg_size = 10
    return build_entry(md, b"payload")


def info(*args, **kwargs):
    return parse_entry(entry(*args, **kwargs))


class FakeStore:
    """The few AsyncMetadataStore calls dedup makes, in memory, with compare-and-set."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.versions: dict[str, int] = {}
        self.puts = 0

    async def get(self, path):
        value = self.values.get(path)
        return None if value is None else type("V", (), {"value": value, "version": self.versions[path]})()

    async def put(self, path, value, expected_version=None):
        current = self.versions.get(path)
        if expected_version == -1 and current is not None:
            raise BadVersion("exists", path=path)
        if expected_version is not None and expected_version >= 0:
            if current is None:
                raise NotFound("absent", path=path)
            if current != expected_version:
                raise BadVersion("version mismatch", path=path)
        self.values[path] = value
        self.versions[path] = (current or 0) + 1
        self.puts += 1
        return self.versions[path]

    async def delete(self, path, expected_version=None):
        self.versions.pop(path, None)
        if self.values.pop(path, None) is None:
            raise NotFound("absent")


class FakeLedger:
    """An append-only list of entries in ledger 1."""

    name = "public/default/persistent/t"

    def __init__(self) -> None:
        self.entries: list[bytes] = []

    @property
    def last_confirmed(self) -> Position:
        return Position(1, len(self.entries) - 1)

    def next_position(self, p: Position) -> Position:
        return Position(1, p.entry_id + 1)

    async def read(self, start: Position, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        first = max(0, start.entry_id)
        return [Entry(Position(1, i), self.entries[i])
                for i in range(first, min(len(self.entries), first + max_entries))]

    def store(self, data: bytes) -> Position:
        self.entries.append(data)
        return self.last_confirmed


def test_verdicts_follow_pushed_and_persisted_marks() -> None:
    s = DedupState(100)
    assert s.check("p", 0, 0) is Verdict.ACCEPT
    assert s.check("p", 0, 0) is Verdict.IN_FLIGHT      # not yet durable: the client must retry
    s.on_persisted("p", 0)
    assert s.check("p", 0, 0) is Verdict.DUPLICATE
    assert s.check("p", 1, 1) is Verdict.ACCEPT
    assert s.check("q", 0, 0) is Verdict.ACCEPT         # names are independent
    assert s.last_sequence_id("p") == 0 and s.last_sequence_id("nobody") == -1


def test_failed_write_rolls_back_pushed_so_the_retry_is_stored() -> None:
    s = DedupState(100)
    s.check("p", 0, 0)
    s.on_persisted("p", 0)
    assert s.check("p", 1, 1) is Verdict.ACCEPT
    s.on_failed("p")                                    # the write of 1 failed (apache/pulsar#5218)
    assert s.check("p", 1, 1) is Verdict.ACCEPT
    s.on_persisted("p", 1)
    assert s.check("p", 1, 1) is Verdict.DUPLICATE


def test_the_mark_never_passes_a_failed_sequence_id() -> None:
    # 5 and 6 accepted; 5 fails, then 6 is reported stored anyway (an entry stored behind a
    # failed one: the producer and managed ledger must prevent it; this is the last guard).
    s = DedupState(100)
    s.check("p", 4, 4)
    s.on_persisted("p", 4, 4)
    assert s.check("p", 5, 5) is Verdict.ACCEPT and s.check("p", 6, 6) is Verdict.ACCEPT
    s.on_failed("p", 5)
    s.on_persisted("p", 6, 6)
    assert s.last_sequence_id("p") == 4 and s.held_marks == 1
    assert s.check("p", 5, 5) is Verdict.ACCEPT        # the retry is stored, not dropped...
    s.on_persisted("p", 5, 5)
    assert s.check("p", 6, 6) is Verdict.ACCEPT        # ...and 6 again: a duplicate, not a loss
    s.on_persisted("p", 6, 6)
    assert s.last_sequence_id("p") == 6 and s.check("p", 6, 6) is Verdict.DUPLICATE


def test_a_mark_reported_before_the_failure_is_taken_back() -> None:
    s = DedupState(100)
    s.check("p", 5, 5)
    s.check("p", 6, 6)
    s.on_persisted("p", 6, 6)                           # 6 reported first...
    s.on_failed("p", 5)                                 # ...then 5 failed
    assert s.last_sequence_id("p") == 4 and s.held_marks == 1
    assert s.check("p", 5, 5) is Verdict.ACCEPT


def test_a_failed_batch_is_retried_whole_and_settles_the_failure() -> None:
    s = DedupState(100)
    assert s.check("p", 10, 14) is Verdict.ACCEPT      # a batch of 10..14
    s.on_failed("p", 10)
    assert s.check("p", 10, 14) is Verdict.ACCEPT      # the client resends the same batch
    s.on_persisted("p", 14, 10)
    assert s.last_sequence_id("p") == 14 and not s.failed and s.held_marks == 0
    assert s.check("p", 12, 12) is Verdict.DUPLICATE


def test_a_client_that_gave_up_on_a_failed_id_is_not_held_back() -> None:
    # The application dropped message 5 after its failure; the next session starts at 7.
    s = DedupState(100)
    s.check("p", 5, 5)
    s.on_failed("p", 5)
    assert s.check("p", 7, 7) is Verdict.ACCEPT
    s.on_persisted("p", 7, 7)
    assert s.last_sequence_id("p") == 7 and s.held_marks == 0
    assert s.check("p", 7, 7) is Verdict.DUPLICATE


def test_failures_are_bounded_like_the_marks() -> None:
    s = DedupState(2)
    for name in ("a", "b", "c"):
        s.check(name, 1, 1)
        s.on_failed(name, 1)
    assert set(s.failed) == {"b", "c"}


def test_marks_are_bounded_least_recently_used_first() -> None:
    s = DedupState(2)
    for name in ("a", "b", "c"):
        s.check(name, 5, 5)
        s.on_persisted(name, 5)
    assert set(s.persisted) == {"b", "c"} and set(s.pushed) == {"b", "c"}


def test_high_mark_of_batches_chunks_and_explicit_highest() -> None:
    assert entry_high_mark(info("p", 10)) == 10
    assert entry_high_mark(info("p", 10, batch=5)) == 14       # C++ numbers members consecutively
    assert entry_high_mark(info("p", 10, batch=5, highest=20)) == 20
    assert entry_high_mark(info("p", 10, chunk=(2, 3))) == 10


SNAPSHOT_WORK_S = 10.0   # bound on waiting for scheduled snapshot work (in memory: instant)


class Spawned:
    """The `spawn` Deduplication is given: starts each coroutine as a task and keeps it, so a test
    waits for the snapshot work scheduled so far (`settle`) instead of sleeping and hoping."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Future] = []

    def __call__(self, coro) -> asyncio.Future:
        task = asyncio.ensure_future(coro)
        self.tasks.append(task)
        return task

    async def settle(self, timeout_s: float = SNAPSHOT_WORK_S) -> None:
        """Every task spawned so far has finished (its exception, if any, is raised here)."""
        await asyncio.wait_for(asyncio.gather(*self.tasks), timeout_s)


def make_dedup(ml: FakeLedger, store: FakeStore, clock: ManualClock, spawned: Spawned | None = None,
               **settings) -> Deduplication:
    config = default_config(**settings)
    return Deduplication(ml, store, config, clock, spawned if spawned is not None else Spawned())


async def publish(d: Deduplication, ml: FakeLedger, data: bytes) -> Verdict:
    meta = parse_entry(data)
    verdict = d.check(meta)
    if verdict in (Verdict.ACCEPT, Verdict.UNCHECKED):
        d.on_stored(meta, ml.store(data))
    # Not a wait: one turn of the event loop between two publishes, as a broker has, so snapshot
    # work scheduled by this publish may start before the next (tests wait with Spawned.settle).
    await asyncio.sleep(0)
    return verdict


def test_only_the_last_chunk_is_checked_and_recorded() -> None:
    async def run() -> None:
        ml, store, clock = FakeLedger(), FakeStore(), ManualClock()
        d = make_dedup(ml, store, clock)
        await d.load(True)
        assert await publish(d, ml, entry("p", 0, chunk=(0, 2))) is Verdict.UNCHECKED
        assert d.last_sequence_id("p") == -1
        assert await publish(d, ml, entry("p", 0, chunk=(1, 2))) is Verdict.ACCEPT
        assert d.last_sequence_id("p") == 0
        assert await publish(d, ml, entry("p", 0, chunk=(0, 2))) is Verdict.UNCHECKED  # a resend
        assert await publish(d, ml, entry("p", 0, chunk=(1, 2))) is Verdict.DUPLICATE
    asyncio.run(run())


def test_snapshot_every_n_entries_and_after_the_interval() -> None:
    async def run() -> None:
        ml, store, clock, work = FakeLedger(), FakeStore(), ManualClock(), Spawned()
        d = make_dedup(ml, store, clock, work, broker_dedup_snapshot_interval_entries=3,
                       broker_dedup_snapshot_interval_ms=5_000)
        await d.load(True)
        base = store.puts                                    # the snapshot taken when enabled
        for seq in range(2):
            await publish(d, ml, entry("p", seq))
        await work.settle()                                  # whatever was scheduled has run
        assert store.puts == base
        await publish(d, ml, entry("p", 2))
        await work.settle()
        assert store.puts == base + 1
        await publish(d, ml, entry("p", 3))
        clock.advance_s(6)
        await publish(d, ml, entry("p", 4))
        await work.settle()
        assert store.puts == base + 2
    asyncio.run(run())


def test_restart_restores_snapshot_and_replays_the_tail() -> None:
    async def run() -> None:
        ml, store, clock, work = FakeLedger(), FakeStore(), ManualClock(), Spawned()
        d = make_dedup(ml, store, clock, work, broker_dedup_snapshot_interval_entries=4)
        await d.load(True)
        for seq in range(10):
            await publish(d, ml, entry("p", seq))
        await publish(d, ml, entry("q", 100, batch=3))
        await work.settle()                                  # the snapshots taken so far are written
        # "kill -9": no close(), the snapshot is behind the stored entries
        again = make_dedup(ml, store, clock)
        await again.load(True)
        assert again.last_sequence_id("p") == 9
        assert again.last_sequence_id("q") == 102
        assert again.check(parse_entry(entry("p", 9))) is Verdict.DUPLICATE
        assert again.check(parse_entry(entry("p", 10))) is Verdict.ACCEPT
    asyncio.run(run())


def test_switching_off_drops_marks_and_snapshot_on_starts_at_the_end() -> None:
    async def run() -> None:
        ml, store, clock, work = FakeLedger(), FakeStore(), ManualClock(), Spawned()
        d = make_dedup(ml, store, clock, work)
        await d.load(False)
        assert await publish(d, ml, entry("p", 0)) is Verdict.UNCHECKED
        d.set_enabled(True)                                  # mid-stream: starts at the end
        await work.settle()
        assert store.values[snapshot_path(ml.name)]
        assert d.last_sequence_id("p") == -1
        assert await publish(d, ml, entry("p", 0)) is Verdict.ACCEPT   # stored before: not known
        assert await publish(d, ml, entry("p", 0)) is Verdict.DUPLICATE
        d.set_enabled(False)
        await work.settle()
        assert snapshot_path(ml.name) not in store.values
        assert await publish(d, ml, entry("p", 0)) is Verdict.UNCHECKED  # off: everything stored
        assert d.last_sequence_id("p") == -1
        await d.close()
    asyncio.run(run())


def test_snapshot_is_compare_and_set_and_retried_once_after_a_write_behind_it() -> None:
    async def run() -> None:
        ml, store, clock, work = FakeLedger(), FakeStore(), ManualClock(), Spawned()
        d = make_dedup(ml, store, clock, work, broker_dedup_snapshot_interval_entries=1)
        await d.load(True)
        path = snapshot_path(ml.name)
        await store.put(path, store.values[path])            # another writer bumps the version
        await publish(d, ml, entry("p", 0))
        await work.settle()
        assert b'"p": 0' in store.values[path] and store.versions[path] == 3
        calls = []

        async def always_loses(path_, value, expected_version=None):
            calls.append(expected_version)
            raise BadVersion("someone else keeps writing", path=path_)
        store.put = always_loses
        with pytest.raises(BadVersion):                      # surfaced, after one retry
            await d._write_snapshot()
        assert calls == [3, 3]
    asyncio.run(run())


@pytest.mark.parametrize("enabled", [True, False])
def test_load_without_snapshot(enabled: bool) -> None:
    async def run() -> None:
        ml, store, clock = FakeLedger(), FakeStore(), ManualClock()
        ml.store(entry("p", 7))
        d = make_dedup(ml, store, clock)
        await d.load(enabled)
        assert d.last_sequence_id("p") == -1                 # history before enabling is not known
        assert (snapshot_path(ml.name) in store.values) is enabled
    asyncio.run(run())


def test_topic_publish_reaches_the_managed_ledger_without_an_await_before_it() -> None:
    """Producer._publish reads the managed ledger's `append_failures` and relies on the append
    being accepted in the same step (no failure can slip in between): Topic.publish must not
    await anything before the managed ledger takes the entry. It is a plain function (no task
    per entry) that hands the entry to `self.ml.append_future`, which assigns it at once."""
    import ast
    import inspect
    import textwrap

    from broker.topics.topic import PersistentTopic

    assert not inspect.iscoroutinefunction(PersistentTopic.publish)
    tree = ast.parse(textwrap.dedent(inspect.getsource(PersistentTopic.publish)))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Await, ast.AsyncFor, ast.AsyncWith))]
    calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert "self.ml.append_future" in calls, calls
