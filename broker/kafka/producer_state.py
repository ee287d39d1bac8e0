"""Durability of a partition's Kafka idempotent-producer state: snapshot + replay.

Why: a broker that forgets producer state on restart or ownership move answers the next batch
of a librdkafka producer OUT_OF_ORDER on its oldest in-flight batch, which librdkafka treats as
fatal (KAFKA-FACTS §7). So the state is rebuilt from the log, as Kafka does and as
`broker.topics.dedup` does for Pulsar dedup (same approach, same shape of code).

How it works
- A snapshot `{position, producers, taken_ms}` lives at `<managed ledger path>/kafka-producers`
  (`snapshot_path`), written by compare-and-set on its version, so a stale owner cannot
  overwrite the new one's unnoticed. `producers` is `PartitionProducers.to_doc()`.
- `load()` restores the snapshot and replays every entry after its position through the
  `last_confirmed` it saw at the start, in chunks of REPLAY_BATCH_ENTRIES entries (at most
  REPLAY_BATCH_BYTES_MAX bytes); with no snapshot, from the first kept entry. An entry counts
  when its outer MessageMetadata carries `kafka.pid` (>= 0), `kafka.epoch` and `kafka.seq`
  (`broker.kafka.idempotence.PID_PROPERTY` ...): its records are `num_messages_in_batch` (or
  1), its first offset `ml.offset_of(position)`, its timestamp and last write time its
  publish time. Anything else (Pulsar producers, non-idempotent Kafka producers, entries that do
  not parse) is skipped. A snapshot is written after a load that replayed entries.
- While serving, the state's `listener` tells this store of every append and failure. A
  snapshot is scheduled after `kafka_producer_snapshot_interval_entries` idempotent appends, or
  `kafka_producer_snapshot_interval_ms` after the first append it does not hold yet, and by
  `snapshot_now()` / `close()`; never more than one is written at a time (`_worker`).
- The snapshot position never runs ahead of the state: a snapshot reads `last_confirmed` (P),
  notes the newest accepted batch's serial, and waits (bounded by SNAPSHOT_BARRIER_WAIT_S) until
  every batch accepted up to then is folded or dropped. Every idempotent entry at or before P was
  accepted before P was read (accept comes before the append is submitted), so the state then
  reflects all of them; it may also reflect entries after P, which replay skips (folding is
  idempotent by offset, see `broker.kafka.idempotence`).
- Expiry: pids idle past `kafka_producer_id_expiry_ms` are dropped after load, before every
  snapshot, and every EXPIRY_CHECK_INTERVAL_S (Kafka's producer.id.expiration.check.interval.ms).

What must hold: the snapshot's position P is such that the state it holds reflects every
idempotent entry at or before P; positions of successive snapshots never go back.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Protocol

from broker.kafka.idempotence import (
    EPOCH_MAX,
    EPOCH_PROPERTY,
    PID_PROPERTY,
    PRODUCER_ID_MAX,
    SEQ_PROPERTY,
    SEQUENCE_MAX,
    PartitionProducers,
    last_seq_of,
)
from common import retry
from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config
from common.errors import BadVersion, NotFound, StrataError, TimeoutExpired
from common.invariant import invariant, present
from entries.entry import parse_entry
from ledger.ml_metadata import ml_path
from ledger.position import Position
from ledger.types import Entry
from metadata.api import AsyncStore

log = logging.getLogger(__name__)

REPLAY_BATCH_ENTRIES = 100
REPLAY_BATCH_BYTES_MAX = 16 * 1024 * 1024
SNAPSHOT_BARRIER_WAIT_S = 30.0      # longest a snapshot waits for batches in flight to resolve
EXPIRY_CHECK_INTERVAL_S = 600.0     # Kafka's producer.id.expiration.check.interval.ms
# A snapshot write that lost its compare-and-set (written or deleted behind us): re-read the
# version and write once more; a second failure is raised.
_SNAPSHOT_RETRY = retry.Retry("broker.kafka_producer_snapshot", retry_on=(BadVersion, NotFound),
                              wait=retry.no_wait(), attempts_max=2, log_level=logging.WARNING)


class ProducerLog(Protocol):
    """What the store reads of a partition's managed ledger (`ledger.managed_ledger.ManagedLedger`)."""

    name: str

    @property
    def last_confirmed(self) -> Position: ...

    @property
    def first_position(self) -> Position: ...

    def next_position(self, position: Position) -> Position: ...

    async def read(self, start: Position, max_entries: int, *, max_bytes: int | None = None) -> list[Entry]: ...

    def offset_of(self, position: Position) -> int: ...


@dataclass(frozen=True)
class StoredBatch:
    """The Kafka producer fields of one stored entry."""
    pid: int
    epoch: int
    first_seq: int
    records: int
    publish_time_ms: int


def snapshot_path(ml_name: str) -> str:
    return f"{ml_path(ml_name)}/kafka-producers"


def stored_batch(data: bytes) -> StoredBatch | None:
    """The idempotent-producer fields of a stored entry; None if it has none (or they are bad)."""
    try:
        info = parse_entry(data)
    except StrataError:
        return None
    props = {kv.key: kv.value for kv in info.metadata.properties}
    if PID_PROPERTY not in props:
        return None
    try:
        batch = StoredBatch(int(props[PID_PROPERTY]), int(props[EPOCH_PROPERTY]), int(props[SEQ_PROPERTY]),
                            info.num_messages, info.publish_time_ms)
    except (KeyError, ValueError):
        log.warning("kafka producer properties that do not parse: %r", props)
        return None
    if batch.pid < 0:
        return None                      # not an idempotent producer
    if batch.pid > PRODUCER_ID_MAX or not 0 <= batch.epoch <= EPOCH_MAX \
            or not 0 <= batch.first_seq <= SEQUENCE_MAX or batch.records < 1:
        log.warning("kafka producer properties out of range: %r", batch)
        return None
    return batch


class ProducerStateStore:
    """One partition's producer state: load, snapshots, close (see the module docstring)."""

    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.interval_entries = config.kafka_producer_snapshot_interval_entries
        self.interval_s = config.kafka_producer_snapshot_interval_ms / 1000
        self.expiry_ms = config.kafka_producer_id_expiry_ms
        self._ml: ProducerLog | None = None          # set by load
        self._astore: AsyncStore | None = None
        self.path = ""
        self.state = PartitionProducers(expiry_ms=self.expiry_ms)
        self.position: Position | None = None        # of the last snapshot written or loaded; None = none
        self._appended_at_snapshot = 0               # state.appended_batches the last snapshot covers
        self._want = False                           # a snapshot is wanted after the running one
        self._worker: asyncio.Task | None = None     # writes snapshots, one at a time
        self._timer: asyncio.TimerHandle | None = None   # the time trigger; None = not armed
        self._expiry: asyncio.TimerHandle | None = None
        self._resolved: asyncio.Future | None = None     # a snapshot waits on it for batches to resolve
        # Version of the snapshot key as last read or written; -1 = absent; None = not read yet.
        self._snapshot_version: int | None = None
        self.closed = False

    # --- loading ---------------------------------------------------------------------------------

    async def load(self, ml: ProducerLog, astore: AsyncStore, *, none_stored: bool = False) -> PartitionProducers:
        """Restore the snapshot, replay the entries after it; the state, ready to serve.
        `none_stored`: the caller knows no idempotent entry was ever stored (the partition's first
        idempotent producer): with no snapshot, nothing is replayed (a long Pulsar topic is not
        read back for nothing) and an empty snapshot is written at the current end."""
        self._ml, self._astore, self.path = ml, astore, snapshot_path(ml.name)
        found = await astore.get(self.path)
        self._snapshot_version = -1 if found is None else found.version
        end = ml.last_confirmed
        if found is None and none_stored:
            start = ml.next_position(end)
        elif found is None:
            start = ml.first_position
        else:
            snap = json.loads(found.value)
            self.state = PartitionProducers.from_doc(snap["producers"], expiry_ms=self.expiry_ms)
            self.position = Position(*snap["position"])
            start = ml.next_position(self.position)
        replayed = await self._replay(start, end)
        self.state.expire(self.clock.wall_ms())
        log.info("kafka producer state of %s: %d producers, %d entries replayed",
                 ml.name, len(self.state), replayed)
        if replayed or found is None:
            await self._write_snapshot(end, self.state.to_doc())
        self.state.listener = self._on_change
        self._arm_expiry()
        return self.state

    async def _replay(self, start: Position, end: Position) -> int:
        """Fold every idempotent entry from `start` through `end`; returns entries read."""
        ml = present(self._ml, "loaded")
        replayed = 0
        while start <= end:
            entries = await ml.read(start, REPLAY_BATCH_ENTRIES, max_bytes=REPLAY_BATCH_BYTES_MAX)
            entries = [e for e in entries if e.position <= end]
            if not entries:
                return replayed
            for entry in entries:
                batch = stored_batch(entry.data)
                if batch is not None:
                    first_offset = ml.offset_of(entry.position)
                    self.state.replay(batch.pid, batch.epoch, batch.first_seq,
                                      last_seq_of(batch.first_seq, batch.records), first_offset,
                                      first_offset + batch.records - 1, batch.publish_time_ms,
                                      batch.publish_time_ms)
                replayed += 1
            start = ml.next_position(entries[-1].position)
        return replayed

    # --- triggers --------------------------------------------------------------------------------

    def _on_change(self) -> None:
        """The state's listener: an append or failure happened."""
        if self._resolved is not None and not self._resolved.done():
            self._resolved.set_result(None)
        pending = self.state.appended_batches - self._appended_at_snapshot
        if pending <= 0 or self.closed:
            return
        if pending >= self.interval_entries:
            self._schedule()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._schedule)

    def _schedule(self) -> None:
        self._cancel_timer()
        self._want = True
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        while self._want:
            self._want = False
            try:
                await self._snapshot()
            except StrataError as exc:
                log.warning("kafka producer snapshot of %s failed: %s", self.path, exc)
                if not self.closed and self._timer is None:
                    self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._schedule)

    def _arm_expiry(self) -> None:
        def expire() -> None:
            gone = self.state.expire(self.clock.wall_ms())
            if gone:
                log.info("kafka producer state of %s: %d producer ids expired", self.path, gone)
            self._arm_expiry()
        if not self.closed:
            self._expiry = asyncio.get_running_loop().call_later(EXPIRY_CHECK_INTERVAL_S, expire)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- snapshots -------------------------------------------------------------------------------

    async def snapshot_now(self) -> None:
        """Write a snapshot now (after the one being written, if any)."""
        if self._worker is not None and not self._worker.done():
            await asyncio.gather(self._worker, return_exceptions=True)
        await self._snapshot()

    async def _snapshot(self) -> None:
        ml = present(self._ml, "loaded")
        appended = self.state.appended_batches
        position = ml.last_confirmed
        await self._wait_resolved(self.state.accepted_serial)
        self.state.expire(self.clock.wall_ms())
        doc = self.state.to_doc()        # no await since the wait: the state reflects `position`
        await self._write_snapshot(position, doc)
        self._appended_at_snapshot = max(self._appended_at_snapshot, appended)
        if self.state.appended_batches > self._appended_at_snapshot:
            self._on_change()            # appended during the write: the time trigger again

    async def _wait_resolved(self, barrier: int) -> None:
        """Until every batch accepted with serial <= `barrier` is folded or dropped (bounded)."""
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + SNAPSHOT_BARRIER_WAIT_S
        while (oldest := self.state.unresolved_serial_min()) is not None and oldest <= barrier:
            self._resolved = loop.create_future()
            try:
                await asyncio.wait_for(self._resolved, max(0.0, deadline_s - loop.time()))
            except TimeoutError:
                raise TimeoutExpired("batches in flight did not resolve; snapshot skipped",
                                     path=self.path, waited_s=SNAPSHOT_BARRIER_WAIT_S) from None
            finally:
                self._resolved = None

    async def _write_snapshot(self, position: Position, producers: dict) -> None:
        astore = present(self._astore, "loaded")
        invariant(self.position is None or position >= self.position,
                  "snapshot positions never go back", position=str(position), last=str(self.position))
        data = json.dumps({"position": list(position), "producers": producers,
                           "taken_ms": self.clock.wall_ms()}, separators=(",", ":")).encode()
        reload = self._snapshot_version is None

        async def attempt() -> None:
            nonlocal reload
            if reload:
                found = await astore.get(self.path)
                self._snapshot_version = -1 if found is None else found.version
            reload = True                # a retry follows a lost compare-and-set: re-read first
            self._snapshot_version = await astore.put(self.path, data, expected_version=self._snapshot_version)

        await _SNAPSHOT_RETRY.call_async(attempt, about=self.path)
        self.position = position

    async def close(self) -> None:
        """Stop the timers, wait for a snapshot being written, then write a last one if the
        state has appends no snapshot holds."""
        if self.closed:
            return
        self.closed = True
        self._cancel_timer()
        if self._expiry is not None:
            self._expiry.cancel()
        if self._worker is not None and not self._worker.done():
            await asyncio.gather(self._worker, return_exceptions=True)
        if self._ml is not None and self.state.appended_batches > self._appended_at_snapshot:
            try:
                await self._snapshot()
            except StrataError as exc:
                log.warning("last kafka producer snapshot of %s failed: %s", self.path, exc)
