"""Message deduplication per topic: producer name + sequence id (docs/protocol.md §8.2).

How it works
- `DedupState` (pure, no IO) keeps, per producer name, two high marks: `pushed` (the highest
  sequence id accepted for storing, stored or still in flight) and `persisted` (the highest one
  durably stored). A SEND is checked with its lowest sequence id:
    seq <= persisted           -> DUPLICATE: answered with a receipt for (-1, -1), nothing stored;
    persisted < seq <= pushed  -> IN_FLIGHT: answered with SEND_ERROR, the client retries;
    otherwise                  -> ACCEPT: `pushed` becomes the entry's high mark.
  The high mark of an entry is max(highest_sequence_id, sequence_id) and, for a batch, at least
  sequence_id + members - 1 (the C++ client leaves highest_sequence_id unset but numbers batch
  members consecutively, so this never over-estimates). Only the LAST chunk of a chunked message
  is checked and recorded; the other chunks are plain entries (Pulsar does the same).
- `persisted` moves only after the entry is durably stored (`on_persisted`), so a retry after a
  failed write is never dropped (apache/pulsar#5218); a failed write rolls `pushed` back to
  `persisted` (`on_failed`) so the retry is accepted.
- `persisted` never moves past a sequence id whose write failed (`failed`, the lowest such id per
  producer, until an entry holding it is stored or the producer's next session sends its first
  accepted SEND). The producer and the managed ledger already
  make sure nothing is stored after a failed entry of the same producer; should a later entry be
  stored anyway (or reported stored before the failure), its mark is held below the failed id
  (and a mark already past it is taken back), so the failed one's retry is stored: a duplicate
  at worst, never a loss. Each such hold is counted in `held_marks`.
- `Deduplication` (one per topic) adds the switch and durability: while enabled, every stored
  entry updates the state; a snapshot `{position, marks}` goes to the metadata store at
  `<managed ledger path>/dedup` every `broker_dedup_snapshot_interval_entries` entries (or after
  `interval_s` with entries pending: `broker_dedup_snapshot_interval_ms`, or the topic's
  deduplicationSnapshotInterval policy set by `broker.topics.storage_policies`, inf for none by
  time) and when the topic closes. Loading a
  topic with dedup enabled restores the snapshot and replays the entries after its position
  (producer names and sequence ids read with `entries.entry`), so the marks survive a
  restart and a kill -9.

Switching (the namespace policy, or the topic policy that overrides it):
- ON mid-stream: the state starts empty at the current end of the topic (a snapshot is written
  at once at `last_confirmed`), as Pulsar's dedup cursor does. Connected producers keep
  producing; from their next SEND on, their sequence ids are tracked. Duplicates of messages
  stored before the switch are not detected; no new message is ever dropped because of marks
  from a time dedup was off. Producers created later get `last_sequence_id` = their mark.
- OFF mid-stream: enforcement stops at once (every SEND is stored), the marks are dropped and
  the snapshot deleted. Nothing stored is touched in either direction.

What must hold: `persisted[name] <= ` the high mark of some durably stored entry of `name`; a
DUPLICATE verdict is given only for a sequence id at or below a durably stored high mark; the
snapshot position never runs ahead of the entries its marks reflect.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import json
import logging
from collections.abc import Callable, Coroutine

from broker.limits.persistence import StorageCounters
from common import retry
from common.clock import Clock
from common.config import Config
from common.errors import BadVersion, NotFound, StrataError
from entries.entry import EntryInfo, parse_entry
from ledger.managed_ledger import ManagedLedger
from ledger.ml_metadata import ml_path
from ledger.position import Position
from metadata.api import AsyncStore

log = logging.getLogger(__name__)

REPLAY_BATCH_ENTRIES = 100
REPLAY_BATCH_BYTES_MAX = 16 * 1024 * 1024
NO_MARK = -1
# A snapshot write that lost its compare-and-set (written or deleted behind us): re-read the
# version and write once more; a second failure is raised.
_SNAPSHOT_RETRY = retry.Retry("broker.dedup_snapshot", retry_on=(BadVersion, NotFound), wait=retry.no_wait(),
                              attempts_max=2, log_level=logging.WARNING)


class Verdict(enum.Enum):
    ACCEPT = "accept"          # store it; its high mark is now pushed
    DUPLICATE = "duplicate"    # already durably stored: receipt (-1, -1), store nothing
    IN_FLIGHT = "in_flight"    # an entry with this sequence id is being stored: SEND_ERROR, retry
    UNCHECKED = "unchecked"    # dedup off, or not the last chunk: store it, record nothing


def entry_high_mark(info: EntryInfo) -> int:
    """The sequence id an entry records as its producer's high mark."""
    mark = info.highest_sequence_id
    if info.is_batch and not info.metadata.HasField("highest_sequence_id"):
        mark = max(mark, info.sequence_id + info.num_messages - 1)
    return mark


def counts_for_dedup(info: EntryInfo) -> bool:
    """False for the chunks of a chunked message before the last one."""
    return not info.is_chunk or info.is_last_chunk


class DedupState:
    """Per-producer-name high marks; bounded to `producers_max` names (least recently used go)."""

    def __init__(self, producers_max: int) -> None:
        self.producers_max = producers_max
        self.pushed: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.persisted: collections.OrderedDict[str, int] = collections.OrderedDict()
        # Lowest sequence id whose write failed and is not settled yet (no stored entry holds
        # it, no later session's SEND accepted), per name; absent = none. At most
        # `producers_max` names (oldest failure dropped first); a name evicted from the marks
        # goes from here too.
        self.failed: dict[str, int] = {}
        self.held_marks = 0          # times a mark was held below a failed sequence id (a bug
                                     # further up: an entry stored after a failed one)

    def check(self, name: str, sequence_id: int, high_mark: int) -> Verdict:
        persisted = self.persisted.get(name, NO_MARK)
        if sequence_id <= persisted:
            return Verdict.DUPLICATE
        if sequence_id <= self.pushed.get(name, NO_MARK):
            return Verdict.IN_FLIGHT
        # After a failure the producer refuses every SEND until the client reconnects, so an
        # accepted SEND is the new session's first: its retry of the failed id, or (the client
        # gave up on it) a later one. Either way the failure is settled.
        self.failed.pop(name, None)
        self._put(self.pushed, name, max(high_mark, sequence_id))
        return Verdict.ACCEPT

    def on_persisted(self, name: str, high_mark: int, sequence_id: int | None = None) -> None:
        """An entry of `name` holding sequence ids `sequence_id`..`high_mark` is durable
        (`sequence_id` None: only its high mark is known, as when restoring a snapshot)."""
        mark = max(high_mark, self.persisted.get(name, NO_MARK))
        failed = self.failed.get(name)
        if failed is not None and mark >= failed:
            if sequence_id is not None and sequence_id <= failed:
                del self.failed[name]        # the failed entry's retry is stored
            else:
                self._hold(name, failed, high_mark)
                mark = failed - 1
        self._put(self.persisted, name, mark)
        if self.pushed.get(name, NO_MARK) < mark:
            self._put(self.pushed, name, mark)

    def on_failed(self, name: str, sequence_id: int | None = None) -> None:
        """A write of `name` (its lowest sequence id `sequence_id`) failed: forget what was
        pushed but not stored, so retries pass, and never let the mark pass `sequence_id`."""
        if sequence_id is not None:
            failed = min(sequence_id, self.failed.pop(name, sequence_id))
            self.failed[name] = failed
            while len(self.failed) > self.producers_max:
                del self.failed[next(iter(self.failed))]     # oldest failure first
            persisted = self.persisted.get(name, NO_MARK)
            if persisted >= failed:          # something after it was reported stored first
                self._hold(name, failed, persisted)
                self.persisted[name] = failed - 1
        kept = self.persisted.get(name)
        if kept is None:
            self.pushed.pop(name, None)
        else:
            self.pushed[name] = kept

    def _hold(self, name: str, failed: int, mark: int) -> None:
        self.held_marks += 1
        log.error("dedup: an entry of producer %r up to sequence id %d was stored after its "
                  "write of %d failed; holding the mark at %d so the retry is stored",
                  name, mark, failed, failed - 1)

    def last_sequence_id(self, name: str) -> int:
        return self.persisted.get(name, NO_MARK)

    def _put(self, marks: collections.OrderedDict, name: str, value: int) -> None:
        marks[name] = value
        marks.move_to_end(name)
        while len(marks) > self.producers_max:
            gone, _ = marks.popitem(last=False)
            (self.pushed if marks is self.persisted else self.persisted).pop(gone, None)
            self.failed.pop(gone, None)

    def clear(self) -> None:
        self.pushed.clear()
        self.persisted.clear()
        self.failed.clear()

    def marks(self) -> dict[str, int]:
        return dict(self.persisted)

    def restore(self, marks: dict[str, int]) -> None:
        self.clear()
        for name, mark in marks.items():
            self.on_persisted(str(name), int(mark))


def snapshot_path(ml_name: str) -> str:
    return f"{ml_path(ml_name)}/dedup"


class Deduplication:
    """One topic's dedup switch, state, snapshots and replay."""

    def __init__(self, ml: ManagedLedger, astore: AsyncStore, config: Config, clock: Clock,
                 spawn: Callable[[Coroutine], asyncio.Task]) -> None:
        self.ml = ml
        self.astore = astore
        self.clock = clock
        self.spawn = spawn
        self.path = snapshot_path(ml.name)
        self.enabled = False
        self.state = DedupState(config.broker_dedup_producers_max)
        self.interval_entries = config.broker_dedup_snapshot_interval_entries
        self.interval_s = config.broker_dedup_snapshot_interval_ms / 1000   # policy may change it; inf: never by time
        self.position: Position | None = None   # last stored entry the marks reflect
        self.entries_since_snapshot = 0
        self.snapshot_at_s = clock.monotonic_s()
        self._want: str | None = None            # "write" | "delete": snapshot work still to do
        self._worker: asyncio.Task | None = None
        # Version of the snapshot key as last read or written (compare-and-set, so a stale owner
        # cannot overwrite the new one's marks unnoticed); -1 = absent; None = not read yet.
        self._snapshot_version: int | None = None
        self.counters = StorageCounters()        # the broker's, once its storage policies are applied

    # --- loading ---------------------------------------------------------------------------------

    async def load(self, enabled: bool) -> None:
        """Topic load: restore snapshot + replay when enabled; drop a stale snapshot when not."""
        self.enabled = enabled
        if not enabled:
            await self._delete_snapshot()
            return
        found = await self.astore.get(self.path)
        self._snapshot_version = -1 if found is None else found.version
        if found is None:
            self.position = self.ml.last_confirmed
            await self._write_snapshot()
            return
        snap = json.loads(found.value)
        self.state.restore(snap["marks"])
        self.position = position = Position(*snap["position"])
        replayed = await self._replay(position)
        log.info("dedup of %s restored %d producers, replayed %d entries",
                 self.ml.name, len(snap["marks"]), replayed)
        if replayed:
            await self._write_snapshot()

    async def _replay(self, after: Position) -> int:
        """Apply every stored entry after `after` (the snapshot position) to the marks."""
        replayed = 0
        while True:
            entries = await self.ml.read(self.ml.next_position(after), REPLAY_BATCH_ENTRIES,
                                         max_bytes=REPLAY_BATCH_BYTES_MAX)
            if not entries:
                return replayed
            for entry in entries:
                try:
                    info = parse_entry(entry.data)
                except StrataError:
                    info = None
                if info is not None and counts_for_dedup(info):
                    self.state.on_persisted(info.producer_name, entry_high_mark(info), info.sequence_id)
                self.position = after = entry.position
                replayed += 1

    # --- switching -------------------------------------------------------------------------------

    def set_enabled(self, enabled: bool) -> None:
        """Switch mid-stream (see the module docstring for what that means)."""
        if enabled == self.enabled:
            return
        self.enabled = enabled
        self.state.clear()
        self.entries_since_snapshot = 0
        if enabled:
            self.position = self.ml.last_confirmed
            self._schedule("write")
        else:
            self.position = None
            self._schedule("delete")

    # --- the publish path ------------------------------------------------------------------------

    def check(self, info: EntryInfo) -> Verdict:
        if not self.enabled or not counts_for_dedup(info):
            return Verdict.UNCHECKED
        return self.state.check(info.producer_name, info.sequence_id, entry_high_mark(info))

    def on_stored(self, info: EntryInfo, position: Position) -> None:
        """An entry is durable at `position` (called in position order)."""
        if not self.enabled:
            return
        if counts_for_dedup(info):
            self.state.on_persisted(info.producer_name, entry_high_mark(info), info.sequence_id)
        if self.position is None or position > self.position:
            self.position = position
        self.entries_since_snapshot += 1
        now = self.clock.monotonic_s()
        if (self.entries_since_snapshot >= self.interval_entries
                or now - self.snapshot_at_s >= self.interval_s):
            self._schedule("write")

    def on_failed(self, info: EntryInfo) -> None:
        if self.enabled and counts_for_dedup(info):
            self.state.on_failed(info.producer_name, info.sequence_id)

    def last_sequence_id(self, producer_name: str) -> int:
        """For PRODUCER_SUCCESS: the persisted high mark, -1 if none or dedup is off."""
        return self.state.last_sequence_id(producer_name) if self.enabled else NO_MARK

    # --- snapshots -------------------------------------------------------------------------------

    def _schedule(self, what: str) -> None:
        self._want = what
        if what == "write":
            self.entries_since_snapshot = 0
            self.snapshot_at_s = self.clock.monotonic_s()
        if self._worker is None or self._worker.done():
            self._worker = self.spawn(self._work())

    async def _work(self) -> None:
        """Write or delete the snapshot until nothing more is wanted (one at a time)."""
        while self._want is not None:
            what, self._want = self._want, None
            try:
                if what == "write" and self.enabled:
                    await self._write_snapshot()
                elif what == "delete" and not self.enabled:
                    await self._delete_snapshot()
            except StrataError as exc:
                self.counters.dedup_snapshot_failures += 1
                log.warning("dedup snapshot of %s failed: %s", self.ml.name, exc)

    async def _write_snapshot(self) -> None:
        position = self.position if self.position is not None else self.ml.last_confirmed
        data = json.dumps({"position": list(position), "marks": self.state.marks(),
                           "taken_ms": self.clock.wall_ms()}).encode()
        reload = self._snapshot_version is None

        async def attempt() -> None:
            nonlocal reload
            if reload:
                await self._reload_snapshot_version()
            reload = True  # a retry follows a lost compare-and-set: re-read first
            self._snapshot_version = await self.astore.put(
                self.path, data, expected_version=self._snapshot_version)

        await _SNAPSHOT_RETRY.call_async(attempt, about=self.ml.name)
        self.counters.dedup_snapshots += 1
        log.debug("dedup snapshot of %s at %s", self.ml.name, position)

    async def _reload_snapshot_version(self) -> None:
        found = await self.astore.get(self.path)
        self._snapshot_version = -1 if found is None else found.version

    async def _delete_snapshot(self) -> None:
        try:
            await self.astore.delete(self.path)
        except NotFound:
            pass
        self._snapshot_version = -1

    async def close(self) -> None:
        """Topic close: wait for snapshot work, then take a last snapshot if enabled."""
        if self._worker is not None and not self._worker.done():
            await asyncio.gather(self._worker, return_exceptions=True)
        if self.enabled and self.entries_since_snapshot:
            try:
                await self._write_snapshot()
            except StrataError as exc:
                self.counters.dedup_snapshot_failures += 1
                log.warning("final dedup snapshot of %s failed: %s", self.ml.name, exc)
