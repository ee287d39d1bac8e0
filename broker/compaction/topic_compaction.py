"""A topic's compaction: its compacted view, the run in progress, and its status.

`TopicCompaction` lives with the `CompactableTopic` (`topic.compaction`). On load it reads the
record (`broker.compaction.record`) and opens the compacted ledger it names, so a restarted or
new owner serves the same view. `trigger()` starts a run (`broker.compaction.compactor`) in the
background; CompactionInProgress while one runs. A run first names its new ledger in the
record's `pending` list (before writing to it), so a run cut short by a crash or restart leaves
no ledger behind: pending ledgers found at load or at the start of the next run are leftovers
(at most one run per topic), moved to the garbage and deleted. A successful run is installed in
this order:

1. the new record (compare-and-set over the one read: a stale owner loses, its ledger is deleted)
   names the new ledger and horizon, drops it from `pending`, and lists the replaced ledger as
   garbage;
2. the view readers use switches to the new ledger;
3. the `__compaction` subscription (a normal durable cursor, created at Earliest when a run
   starts or when a compactionThreshold applies) acknowledges everything up to the horizon, so
   retention may now trim what the view replaced; until then the cursor keeps it;
4. the replaced ledger is deleted and dropped from the record's garbage (a failure leaves it
   listed: the next run retries).

Status (Pulsar's LongRunningProcessStatus, like offload's): NOT_RUN (no run since the topic was
loaded here) -> RUNNING -> SUCCESS | ERROR (lastError says why) -> RUNNING ... A run that found
no key at all succeeds with nothing written and says so in `message`.

What must hold: at most one run per topic at a time; the installed view never goes back (its
horizon only grows); a compacted ledger is deleted only once no record names it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from broker.compaction import record as rec
from broker.compaction.compactor import CompactionResult, Compactor, Progress
from broker.compaction.view import CompactedView
from common.errors import (
    BadVersion,
    CompactionError,
    CompactionInProgress,
    IllegalTransition,
    NotFound,
    ServiceNotReady,
    StrataError,
)
from cursor.stats import backlog
from ledger.position import EARLIEST

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from common.config import Config
    from common.topic_names import TopicName
    from cursor.managed_cursor import ManagedCursor
    from ledger.managed_ledger import ManagedLedger
    from ledger.position import Position

log = logging.getLogger(__name__)

COMPACTION_SUBSCRIPTION = "__compaction"     # Pulsar's Compactor.COMPACTION_SUBSCRIPTION


class CompactedSubscription(Protocol):
    """What compaction needs of the `__compaction` subscription."""

    cursor: ManagedCursor

    def on_cursor_moved(self) -> None: ...


class CompactableTopic(Protocol):
    """What compaction needs of a topic (`broker.topics.topic.CompactableTopic` is one)."""

    ctx: BrokerContext
    name: TopicName
    ml: ManagedLedger
    config: Config
    closing: bool

    @property
    def subscriptions(self) -> Mapping[str, CompactedSubscription]: ...

    async def subscription(self, name: str, *, durable: bool, start: Position) -> CompactedSubscription: ...


class CompactionState(enum.Enum):
    NOT_RUN = "NOT_RUN"      # no run since the topic was loaded on this broker
    RUNNING = "RUNNING"      # a run is in progress
    SUCCESS = "SUCCESS"      # the last run installed its view (or found nothing to do)
    ERROR = "ERROR"          # the last run failed; `last_error` says why; the previous view stays


_TRANSITIONS = {
    CompactionState.NOT_RUN: {CompactionState.RUNNING},
    CompactionState.RUNNING: {CompactionState.SUCCESS, CompactionState.ERROR},
    CompactionState.SUCCESS: {CompactionState.RUNNING},
    CompactionState.ERROR: {CompactionState.RUNNING},
}


class TopicCompaction:
    def __init__(self, topic: CompactableTopic) -> None:
        self.topic = topic
        self.state = CompactionState.NOT_RUN
        self.last_error = ""                  # why the last run failed ("" unless ERROR)
        self.message = ""                     # what the last successful run did, in words
        self.record: rec.CompactionRecord | None = None   # the installed record; None: never compacted
        self._stored: rec.CompactionRecord | None = None  # the record as stored (compare-and-set base)
        self.view: CompactedView | None = None            # what read_compacted readers read; None: none
        self.progress = Progress()
        self.last_result: CompactionResult | None = None
        self._task: asyncio.Task | None = None

    # --- state --------------------------------------------------------------------------------

    def _set_state(self, state: CompactionState) -> None:
        if state not in _TRANSITIONS[self.state]:
            raise IllegalTransition(f"compaction of {self.topic.name}: {self.state.value} -> {state.value}")
        self.state = state

    @property
    def running(self) -> bool:
        return self.state is CompactionState.RUNNING

    def status_json(self) -> dict:
        """Pulsar's LongRunningProcessStatus plus Strata's `message` and `progress`."""
        return {"status": self.state.value, "lastError": self.last_error, "message": self.message,
                "progress": {"entriesDone": self.progress.entries_done,
                             "entriesTotal": self.progress.entries_total}}

    # --- loading --------------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the record and open its compacted ledger (a topic being loaded)."""
        found = await rec.load(self.topic.ctx.astore, self.topic.ml.name)
        if found is None:
            return
        self._stored = found
        if found.pending or found.garbage:         # a run cut short (crash, restart), or a failed delete
            try:
                await self._abandon_pending()
                await self._collect_garbage()
            except CompactionError as exc:
                log.warning("compaction of %s: leftover ledgers kept for the next run: %s", self.topic.name, exc)
        if self._stored is not None and self._stored.installed:
            self.record = self._stored
            self.view = await self._open_view(self._stored)

    async def _open_view(self, record: rec.CompactionRecord) -> CompactedView:
        if record.ledger_id < 0 or record.entries == 0:
            return CompactedView(record, None)
        handle = await self.topic.ctx.ledger_client.open_ledger(record.ledger_id, recover=False)
        return CompactedView(record, handle)

    # --- running --------------------------------------------------------------------------------

    def trigger(self) -> asyncio.Task:
        """Start a run in the background; CompactionInProgress if one runs."""
        if self.running:
            raise CompactionInProgress("Compaction already in progress", topic=str(self.topic.name))
        if self.topic.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.topic.name))
        self._set_state(CompactionState.RUNNING)
        self.last_error = ""
        self.progress = Progress()
        self._task = self.topic.ctx.spawn(self._run())
        return self._task

    async def _run(self) -> None:
        try:
            result = await self.compact_now()
        except asyncio.CancelledError:
            self.last_error = "cancelled: the topic was closed"
            self._set_state(CompactionState.ERROR)
            raise
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._set_state(CompactionState.ERROR)
            if not isinstance(exc, StrataError):
                log.exception("compaction of %s crashed", self.topic.name)
            else:
                log.warning("compaction of %s failed: %s", self.topic.name, exc)
            return
        finally:
            self._task = None
        self.last_result = result
        self.message = _summary(result)
        self._set_state(CompactionState.SUCCESS)
        log.info("compaction of %s: %s", self.topic.name, self.message)

    async def compact_now(self) -> CompactionResult:
        """One run, in this task: compact, then install (see the module docstring)."""
        sub = await self.compaction_subscription()
        await self._abandon_pending()
        compactor = Compactor(self.topic.ml, self.topic.ctx.ledger_client, self.topic.config, self.view,
                              self.progress, on_ledger=self._note_pending)
        result = await compactor.run()
        try:
            await self._install(result)
        except BaseException:
            if result.handle is not None:
                await _delete_quietly(self.topic, result.handle.ledger_id)
            raise
        if result.horizon.entry_id >= 0 and result.horizon > sub.cursor.mark_delete_position:
            sub.cursor.ack_cumulative(result.horizon)
            sub.on_cursor_moved()
            await sub.cursor.flush()
        await self._collect_garbage()
        return result

    async def compaction_subscription(self) -> CompactedSubscription:
        """The `__compaction` durable subscription, created at Earliest if missing."""
        return await self.topic.subscription(COMPACTION_SUBSCRIPTION, durable=True, start=EARLIEST)

    async def _save(self, new: rec.CompactionRecord) -> rec.CompactionRecord:
        """Store `new` over the record read (compare-and-set); CompactionError if it changed."""
        try:
            saved = await rec.save(self.topic.ctx.astore, self.topic.ml.name, new, self._stored)
        except (BadVersion, NotFound):
            self._stored = await rec.load(self.topic.ctx.astore, self.topic.ml.name)  # the next run's base
            raise CompactionError("the compaction record changed under this run (another owner?)",
                                  topic=str(self.topic.name)) from None
        self._stored = saved
        return saved

    async def _note_pending(self, ledger_id: int) -> None:
        """A run created `ledger_id`: name it in the record before anything is written to it."""
        stored = self._stored
        if stored is None:
            await self._save(rec.placeholder((ledger_id,)))
        else:
            await self._save(stored.with_ledgers(garbage=stored.garbage, pending=(*stored.pending, ledger_id)))

    async def _abandon_pending(self) -> None:
        """Pending ledgers of runs that did not finish become garbage (no run is in progress:
        at most one per topic). Moving them fences a stale owner still writing one: its install
        compares against the record it read and fails."""
        stored = self._stored
        if stored is not None and stored.pending:
            await self._save(stored.with_ledgers(garbage=(*stored.garbage, *stored.pending), pending=()))

    async def _install(self, result: CompactionResult) -> None:
        old = self.record
        if old is not None and result.horizon < old.horizon:
            raise CompactionError("a compaction may not move the horizon back",
                                  horizon=str(result.horizon), installed=str(old.horizon))
        stored = self._stored
        garbage = set(stored.garbage) if stored is not None else set()
        new_id = result.handle.ledger_id if result.handle is not None else -1
        for replaced in (old, stored):
            if replaced is not None and replaced.installed and replaced.ledger_id >= 0 and replaced.ledger_id != new_id:
                garbage.add(replaced.ledger_id)
        pending = tuple(p for p in (stored.pending if stored is not None else ()) if p != new_id)
        new = rec.CompactionRecord(
            ledger_id=new_id, horizon=result.horizon,
            entries=result.entries, size_bytes=result.size_bytes, keys=result.keys,
            compacted_ms=self.topic.ctx.clock.wall_ms(), garbage=tuple(sorted(garbage)), pending=pending)
        saved = await self._save(new)
        self.record, self.view = saved, await self._open_view(saved)

    async def _collect_garbage(self) -> None:
        """Delete replaced compacted ledgers; those deleted leave the record's garbage list."""
        current = self._stored
        if current is None or not current.garbage:
            return
        deleted = set()
        for ledger_id in current.garbage:
            if ledger_id != current.ledger_id and await _delete_quietly(self.topic, ledger_id):
                deleted.add(ledger_id)
        if not deleted:
            return
        left = tuple(g for g in current.garbage if g not in deleted)
        try:
            saved = await self._save(current.with_ledgers(garbage=left, pending=current.pending))
        except CompactionError as exc:
            log.warning("compaction record of %s changed while collecting garbage: %s", self.topic.name, exc)
            return
        if saved.installed and self.record is not None:
            self.record = saved
            if self.view is not None:
                self.view.record = saved

    # --- threshold, lifecycle -------------------------------------------------------------------

    @property
    def stored_bytes(self) -> int:
        """Bytes of the compacted ledger (the topic's storageSize counts them)."""
        return self.record.size_bytes if self.record is not None and self.record.ledger_id >= 0 else 0

    def backlog_bytes(self) -> int:
        """Bytes the `__compaction` subscription has not compacted yet (the whole topic's
        stored bytes without one), as Pulsar's compactionThreshold check measures it."""
        sub = self.topic.subscriptions.get(COMPACTION_SUBSCRIPTION)
        if sub is None:
            return sum(info.size_bytes for info in self.topic.ml.ledgers())
        return backlog(sub.cursor, self.topic.ml)[2]

    async def close(self) -> None:
        """The topic closes: stop a run in progress (its new ledger is deleted)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def delete(self) -> None:
        """The topic is deleted: delete its compacted ledgers (the record goes with the
        managed ledger's metadata)."""
        await self.close()
        current = self._stored
        if current is None:
            return
        for ledger_id in {*current.garbage, *current.pending, current.ledger_id}:
            if ledger_id >= 0:
                await _delete_quietly(self.topic, ledger_id)
        self.record, self.view, self._stored = None, None, None


def _summary(result: CompactionResult) -> str:
    if result.notes:
        return "; ".join(result.notes)
    return (f"compacted up to {result.horizon}: {result.keys} key(s) in {result.entries} entr"
            f"{'y' if result.entries == 1 else 'ies'} ({result.size_bytes} bytes) from "
            f"{result.messages_read} message(s) read, {result.tombstones} tombstone(s), "
            f"{result.keyless_messages} without a key")


async def _delete_quietly(topic: CompactableTopic, ledger_id: int) -> bool:
    try:
        await topic.ctx.ledger_client.delete_ledger(ledger_id)
        return True
    except StrataError as exc:
        log.warning("deleting compacted ledger %d of %s failed: %s", ledger_id, topic.name, exc)
        return False
