"""Durability of the Kafka producer state (broker.kafka.producer_state): the fields read off stored
entries, and on a real managed ledger (real bookie processes, tests/ledger/conftest.py) with a
real SQLite metadata store: snapshots every N appends, after a time and on close, never ahead of
the appends they reflect; a restart (new store, new managed ledger owner) restores the state from
snapshot + replay, or from the whole log when no snapshot was written.

`ml.offset_of` comes from the storage branch (koffsets); while ManagedLedger lacks it, `offsets`
adds it over the real managed ledger (messages of the entries before a position)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from broker.kafka.idempotence import EPOCH_PROPERTY, PID_PROPERTY, SEQ_PROPERTY, BatchMark, Check, Verdict
from broker.kafka.producer_state import ProducerStateStore, StoredBatch, snapshot_path, stored_batch
from broker.service import _entry_meta  # what the broker opens topics' ledgers with
from common.clock import SYSTEM_CLOCK
from entries.batch import BatchMessage, build_batch
from entries.entry import build_entry
from ledger.managed_ledger import ManagedLedger
from ledger.position import Position
from tests.ledger.conftest import LedgerEnv, run, shutdown
from tests.ledger.conftest import env as env  # the fixture: real bookie processes
from tests.support.waiting import until

NAME = "public/default/persistent/kafka-producers-t"
QUORUM = {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}


def kafka_entry(
    pid: int | None, epoch: int = 0, seq: int = 0, records: int = 1, publish_ms: int | None = None
) -> bytes:
    publish_ms = SYSTEM_CLOCK.wall_ms() if publish_ms is None else publish_ms
    md, payload = build_batch(
        [BatchMessage(b"r%d" % i) for i in range(records)],
        producer_name="kafka",
        sequence_id=0,
        publish_time_ms=publish_ms,
    )
    if pid is not None:
        for key, value in ((PID_PROPERTY, pid), (EPOCH_PROPERTY, epoch), (SEQ_PROPERTY, seq)):
            md.properties.add(key=key, value=str(value))
    return build_entry(md, payload)


class Offsets:
    """A real ManagedLedger plus `offset_of` while it lacks one (koffsets adds it): the offsets
    of the entries appended through it, kept in `log` (shared by the owners of one test)."""

    def __init__(self, ml: ManagedLedger, log: dict[Position, int]) -> None:
        self.ml, self.log = ml, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ml, name)

    async def append(self, data: bytes, *, messages: int = 1) -> Position:
        position = await self.ml.append(data, messages=messages)
        self.log[position] = self.log.get(Position(-1, -1), 0)
        self.log[Position(-1, -1)] = self.log[position] + messages  # the next offset
        return position

    def offset_of(self, position: Position) -> int:
        return self.log[position]


def offsets(ml: ManagedLedger, log: dict[Position, int]) -> Any:
    return ml if hasattr(ml, "offset_of") else Offsets(ml, log)


class Producer:
    """What the Kafka front end does per batch: check, accept, append, on_appended."""

    def __init__(self, ml: Any, store: ProducerStateStore) -> None:
        self.ml, self.store = ml, store
        self.clock_ms = SYSTEM_CLOCK.wall_ms()  # pids expire a day after their last batch

    async def send(self, pid: int, epoch: int, seq: int, records: int = 1) -> BatchMark:
        state = self.store.state
        last = (seq + records - 1) % 2**31
        assert state.check(pid, epoch, seq, last).verdict is Verdict.APPEND
        state.accept(pid, epoch, seq, last, token=None)
        position = await self.ml.append(kafka_entry(pid, epoch, seq, records, self.clock_ms), messages=records)
        first = self.ml.offset_of(position)
        state.on_appended(pid, epoch, seq, last, first, first + records - 1, self.clock_ms, self.clock_ms)
        return BatchMark(seq, last, first, first + records - 1, self.clock_ms)


async def opened(env: LedgerEnv, log: dict[Position, int] | None = None, **settings: int) -> tuple[Any, Any, Any, Any]:
    config = env.config(**settings)
    astore, client = await env.open(config)
    ml = offsets(
        await ManagedLedger.open(NAME, astore, client, config, meta_from_entry=_entry_meta, **QUORUM),
        {} if log is None else log,
    )
    return config, astore, client, ml


async def snapshot(astore: Any) -> dict:
    found = await astore.get(snapshot_path(NAME))
    assert found is not None
    return json.loads(found.value)


def test_stored_batch_reads_the_outer_properties() -> None:
    assert stored_batch(kafka_entry(7, 2, 40, records=3, publish_ms=9)) == StoredBatch(7, 2, 40, 3, 9)
    assert stored_batch(kafka_entry(None)) is None  # not from an idempotent producer
    assert stored_batch(kafka_entry(-1)) is None
    assert stored_batch(kafka_entry(7, 70_000)) is None  # epoch out of range
    assert stored_batch(b"not an entry") is None


def test_offsets_of_a_recovered_ledger_are_those_its_first_owner_gave(env) -> None:
    env.start_bookies(1)

    async def body() -> None:
        config, astore, client, ml = await opened(env)
        positions = [await ml.append(kafka_entry(1, 0, i, records=2), messages=2) for i in range(3)]
        first = [ml.offset_of(p) for p in positions]
        astore2, client2 = await env.open(config, seed=1)  # crash: a new owner recovers ledger 1
        ml2 = await ManagedLedger.open(NAME, astore2, client2, config, meta_from_entry=_entry_meta, **QUORUM)
        assert [ml2.offset_of(p) for p in positions] == first == [0, 2, 4]
        await ml2.close()
        await shutdown(astore2, client2)
        await shutdown(astore, client)

    run(body())


def test_restart_restores_from_snapshot_and_replay(env) -> None:
    env.start_bookies(1)

    async def body() -> None:
        log: dict[Position, int] = {}
        config, astore, client, ml = await opened(env, log, kafka_producer_snapshot_interval_entries=3)
        store = ProducerStateStore(config)
        await store.load(ml, astore)
        assert (await snapshot(astore))["producers"]["producers"] == []  # first load: an empty snapshot
        p = Producer(ml, store)
        await p.send(1, 0, 0, 2)
        await ml.append(kafka_entry(None), messages=1)  # not idempotent
        await p.send(2, 5, 0)
        await ml.append(kafka_entry(-1), messages=1)
        marks = [await p.send(1, 0, 2 + i, 1) for i in range(6)]  # 8 idempotent appends in all
        await until(lambda: store._worker is not None and store._worker.done(), timeout_s=10)
        marks.append(await p.send(1, 0, 8))  # after the snapshot
        await ml.append(kafka_entry(None), messages=1)
        snap = await snapshot(astore)
        assert Position(*snap["position"]) < ml.last_confirmed  # the last two are replayed
        before = store.state.to_doc()
        # crash: no close; a new owner with a new metadata store object
        astore2, client2 = await env.open(config, seed=1)
        ml2 = offsets(
            await ManagedLedger.open(NAME, astore2, client2, config, meta_from_entry=_entry_meta, **QUORUM), log
        )
        store2 = ProducerStateStore(config)
        state = await store2.load(ml2, astore2)
        assert state.to_doc() == before and len(state) == 2
        assert state.check(1, 0, 8, 8) == Check(Verdict.DUPLICATE, mark=marks[-1])  # original offsets
        assert state.check(1, 0, 3, 3).verdict is Verdict.OUT_OF_ORDER  # the 6th oldest
        assert state.check(1, 0, 4, 4).verdict is Verdict.DUPLICATE
        assert state.check(1, 0, 9, 9).verdict is Verdict.APPEND
        assert state.check(2, 4, 1, 1).verdict is Verdict.INVALID_EPOCH
        assert Position(*(await snapshot(astore2))["position"]) == ml2.last_confirmed  # written after replay
        await store2.close()
        await ml2.close()
        await shutdown(astore2, client2)
        await shutdown(astore, client)

    run(body())


def test_whole_log_replayed_without_snapshot_and_close_snapshots(env) -> None:
    env.start_bookies(1)

    async def body() -> None:
        config, astore, client, ml = await opened(env)
        for i in range(250):  # more than one replay chunk
            await ml.append(kafka_entry(3, 1, (2**31 - 100 + 2 * i) % 2**31, records=2), messages=2)
        store = ProducerStateStore(config)
        state = await store.load(ml, astore)
        last = (2**31 - 100 + 2 * 249 + 1) % 2**31
        assert state.check(3, 1, (last - 1) % 2**31, last).verdict is Verdict.DUPLICATE
        assert state.check(3, 1, last + 1, last + 1).verdict is Verdict.APPEND
        assert Position(*(await snapshot(astore))["position"]) == ml.last_confirmed
        p = Producer(ml, store)
        await p.send(3, 1, last + 1)
        assert store.position < ml.last_confirmed  # interval not reached
        await store.close()
        assert store.position == ml.last_confirmed
        store2 = ProducerStateStore(config)
        assert (await store2.load(ml, astore)).to_doc() == store.state.to_doc()
        await ml.close()
        await shutdown(astore, client)

    run(body())


def test_a_first_use_replays_nothing_and_snapshots_at_the_end(env) -> None:
    """`none_stored`: the partition's first idempotent producer does not read the log back (the
    front end knows no idempotent entry exists); the empty snapshot at the end makes later loads
    replay only what comes after it."""
    env.start_bookies(1)

    async def body() -> None:
        config, astore, client, ml = await opened(env)
        for _ in range(30):
            await ml.append(kafka_entry(None), messages=1)     # a Pulsar topic's history
        store = ProducerStateStore(config)
        state = await store.load(ml, astore, none_stored=True)
        assert len(state) == 0
        assert Position(*(await snapshot(astore))["position"]) == ml.last_confirmed
        mark = await Producer(ml, store).send(5, 0, 0, 3)
        await store.close()
        again = await ProducerStateStore(config).load(ml, astore)
        assert again.check(5, 0, 0, 2) == Check(Verdict.DUPLICATE, mark=mark)
        await ml.close()
        await shutdown(astore, client)

    run(body())


def test_snapshot_after_the_interval_and_never_ahead_of_appends(env) -> None:
    env.start_bookies(1)

    async def body() -> None:
        config, astore, client, ml = await opened(env, kafka_producer_snapshot_interval_ms=100)
        store = ProducerStateStore(config)
        await store.load(ml, astore)
        first = store.position
        p = Producer(ml, store)
        await p.send(1, 0, 0)
        await until(lambda: store.position is not None and store.position > first, timeout_s=10)
        assert store.position == ml.last_confirmed  # the time trigger
        # A batch accepted, not yet appended: a snapshot waits for it, at the position read before.
        state = store.state
        state.accept(1, 0, 1, 1, token=None)
        before = ml.last_confirmed
        taking = asyncio.ensure_future(store.snapshot_now())
        await asyncio.sleep(0.2)
        assert not taking.done()
        position = await ml.append(kafka_entry(1, 0, 1), messages=1)
        offset = ml.offset_of(position)
        state.on_appended(1, 0, 1, 1, offset, offset, 0, 0)
        await taking
        snap = await snapshot(astore)
        assert Position(*snap["position"]) == before < position  # reflects more, never less
        assert snap["producers"] == state.to_doc()
        store2 = ProducerStateStore(config)
        assert (await store2.load(ml, astore)).to_doc() == state.to_doc()  # replaying it again: no change
        await store.close()
        await ml.close()
        await shutdown(astore, client)

    run(body())
