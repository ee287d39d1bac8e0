"""Offload of a managed ledger's closed ledgers to the cold tier, with Pulsar's semantics
(ManagedLedgerImpl.offloadPrefix / maybeOffload / offloadLoop), kept out of `managed_ledger`.

How it works
- `Offloader.start(before)` offloads every closed, non-empty, not yet offloaded ledger with id <
  before.ledger_id (the open ledger never: its record is not closed), one ledger at a time, and
  returns firstUnoffloaded = `(first kept ledger id >= before.ledger_id, 0)`. One offload runs at
  a time per managed ledger: a second `start` raises OffloadInProgress at once (HTTP 409).
- The request is persisted first: the managed ledger's record gets the property
  `offload.before = "L:E"` by compare-and-set, and loses it by another when the offload ended
  (SUCCESS or ERROR). A broker killed meanwhile leaves it there: the next `open()` resumes it in
  the background (`resume`). A close() (topic unload) cancels the run and leaves it too, so the
  next owner finishes the job.
- Per ledger: `cold.offload(...)`, given the ledger's Kafka offsets (its record's first offset
  and its index's message counts: the object's `offset` column) (idempotent: an attempt that
  crashed left at most an object the next attempt checks and reuses) retried under
  `offload_attempts_max` with backoff doubling up to `offload_retry_backoff_max_ms`; then, under
  the metadata lock, the ledger's record gains `cold` by compare-and-set — only now, after the
  upload returned. A ledger trimmed meanwhile is skipped (OffloadConflict, not an error) and its
  object deleted. The failure of one ledger does not stop the others; the first error is the one
  reported (status ERROR, the ledger stays on the bookies only).
- `maybe_offload`: Pulsar's auto offload — walk the closed ledgers newest to oldest summing their
  sizes; the newest not-offloaded, non-empty ledger with sum > threshold_bytes (>= 0) or age
  (since it was sealed) >= threshold_seconds (>= 0) and every older one are offloaded, as a
  prefix offload up to the ledger after it. Both thresholds < 0: disabled.
- `delete_bookie_copies(lag_ms, now_ms)`: the deletion lag — offloaded ledgers whose object
  completed at least lag_ms ago get `bookie_deleted=True` by compare-and-set, then their bookie
  copy is deleted in the background (the index blob stays: the ledger is still listed and read
  from the cold tier).
- `read`: where an offloaded ledger's entries come from (see `read`'s docstring).
- Objects of trimmed ledgers are deleted by the managed ledger's LedgerDeleter after their
  bookie copy (`object_deleters`): the ledger stays in the record's `deleting` list until both
  are gone, and an owner that opens with a non-empty `deleting` cleans orphans.

What must hold: a record's `cold` is set only after its object is complete, and
`bookie_deleted` only on a record with `cold`, before its bookie copy is deleted; no metadata
compare-and-set is abandoned half way by a cancellation (close() waits for one in flight, so
the managed ledger's view of its version never goes stale); at most one run at a time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from common import retry
from common.config import Config
from common.errors import (
    ColdObjectCorrupt,
    ColdTierError,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
    OffloadConflict,
    OffloadInProgress,
    OffloadNotConfigured,
    StrataError,
)
from common.invariant import present
from ledger.cold import ColdCopy, ColdStorage, LedgerOffsets
from ledger.ml_metadata import LedgerRecord
from ledger.position import Position
from ledger.types import LedgerState
from ledger.view import KeptLedger

if TYPE_CHECKING:
    from ledger.managed_ledger import ManagedLedger

log = logging.getLogger(__name__)
T = TypeVar("T")

NOT_RUN, RUNNING, SUCCESS, ERROR = "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"
BEFORE_PROPERTY = "offload.before"          # the managed ledger record's property of a pending request
NO_POSITION = Position(-1, -1)              # Pulsar's MessageId.earliest, shown unless SUCCESS

# Objects of ledgers no longer listed (trimmed under their upload): any failure is retried (0.1 s
# doubling to 30 s) until deleted, as LedgerDeleter does; one left anyway is found by clean_orphans.
_COLD_DELETE_RETRY = retry.Retry("ledger.cold_delete", retry_on=Exception, wait=retry.exponential(0.1, 30.0),
                                 unbounded_because="Offloader.close() cancels it", log_level=logging.WARNING)


@dataclass
class OffloadStatus:
    """Pulsar's OffloadProcessStatus plus the topic-stats fields and progress, in memory per
    managed ledger (reset when it is reopened, as Pulsar's is on topic load)."""

    status: str = NOT_RUN                   # NOT_RUN | RUNNING | SUCCESS | ERROR
    last_error: str = ""                    # the first error of the last run ("" if none)
    first_unoffloaded: Position = NO_POSITION   # (-1, -1) unless SUCCESS
    last_offload_ledger_id: int = 0         # last ledger offloaded successfully (0 none)
    last_success_ms: int = 0                # wall time of the last ledger offloaded (0 never)
    last_failure_ms: int = 0                # wall time of the last ledger that failed (0 never)
    entries_done: int = 0                   # progress of the running (or last) offload
    entries_total: int = 0


# --- choosing ledgers (pure) ---------------------------------------------------------------------

def prefix_candidates(records: Sequence[LedgerRecord], before_ledger_id: int) -> list[LedgerRecord]:
    """The ledgers an offload up to `before_ledger_id` copies, oldest first."""
    return [r for r in records
            if r.closed and r.entries > 0 and r.cold is None and r.ledger_id < before_ledger_id]


def first_unoffloaded(records: Sequence[LedgerRecord], before_ledger_id: int) -> Position:
    for r in records:
        if r.ledger_id >= before_ledger_id:
            return Position(r.ledger_id, 0)
    return Position(before_ledger_id, 0)


def threshold_before(records: Sequence[LedgerRecord], threshold_bytes: int, threshold_seconds: int,
                     now_ms: int) -> Position | None:
    """Where Pulsar's maybeOffload would offload up to (exclusive), or None if nothing is due."""
    if threshold_bytes < 0 and threshold_seconds < 0:
        return None
    summed_bytes = 0
    for i in range(len(records) - 1, -1, -1):
        r = records[i]
        if not r.closed:
            continue                        # the open ledger: neither counted nor offloaded
        summed_bytes += r.size_bytes
        if r.cold is not None or r.entries == 0:
            continue
        if ((threshold_bytes >= 0 and summed_bytes > threshold_bytes)
                or (threshold_seconds >= 0 and now_ms - r.sealed_ms >= threshold_seconds * 1000)):
            following = records[i + 1].ledger_id if i + 1 < len(records) else r.ledger_id + 1
            return Position(following, 0)
    return None


async def finish_uncancelled(coro: Awaitable[T]) -> T:
    """Run `coro` to its end even if the caller is cancelled meanwhile (the cancellation is
    re-raised after it): a metadata compare-and-set must not be abandoned between the store
    applying it and the managed ledger learning its new version. Bounded by the store's own
    request timeouts."""
    inner = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        await asyncio.wait([inner])
        raise


# --- the offloader -------------------------------------------------------------------------------

@dataclass
class _Run:
    before: Position
    first_error: StrataError | None = None      # the first ledger's failure: the one reported


class Offloader:
    """The offload side of one `ManagedLedger`. It changes the managed ledger's record only
    through the managed ledger's own compare-and-set (`_cas`) under its metadata lock."""

    def __init__(self, ml: ManagedLedger, cold: ColdStorage | None, config: Config) -> None:
        self._ml = ml
        self.cold = cold
        self.status = OffloadStatus()
        self._task: asyncio.Task | None = None           # the running offload, if any
        self._background: set[asyncio.Task] = set()      # object deletions, orphan cleaning
        self._tiered_first = config.offload_read_priority == "tiered-storage-first"
        max_s = config.offload_retry_backoff_max_ms / 1000
        self._upload_retry = retry.Retry(
            "ledger.offload", retry_on=StrataError, wait=retry.exponential(min(1.0, max_s), max_s),
            attempts_max=config.offload_attempts_max, log_level=logging.WARNING,
            when=lambda exc: isinstance(exc, StrataError) and exc.retriable and not isinstance(exc, OffloadConflict))
        self.cold_read_fallbacks = 0                     # cold reads that failed and went to the bookies
        # Since this managed ledger opened, for /metrics (Pulsar's brk_ledgeroffloader_*):
        self.offloaded_bytes = 0                         # bytes of ledgers offloaded and recorded
        self.offload_errors = 0                          # ledger offloads that failed (retries spent)
        self.read_offload_bytes = 0                      # entry bytes read from the cold tier
        self.read_offload_errors = 0                     # cold-tier reads that failed

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # --- starting --------------------------------------------------------------------------------

    def start(self, before: Position) -> asyncio.Task:
        if self.running:
            raise OffloadInProgress("Offload operation already running", name=self._ml.name)
        if self.cold is None:
            raise OffloadNotConfigured("this broker has no cold tier (offload_driver is empty)",
                                       name=self._ml.name)
        if not self._ml.accepts_offload():
            raise ManagedLedgerClosed("Can't offload closed managed ledger", name=self._ml.name)
        return self._launch(Position(*before), persist=True)

    def maybe_start(self, threshold_bytes: int, threshold_seconds: int, now_ms: int) -> asyncio.Task | None:
        if self.cold is None or self.running or not self._ml.accepts_offload():
            return None
        before = threshold_before(self._ml._meta.ledgers, threshold_bytes, threshold_seconds, now_ms)
        return None if before is None else self._launch(before, persist=True)

    def resume(self) -> asyncio.Task | None:
        """On open: finish an offload a previous owner was asked for and did not end."""
        pending = self._ml._meta.properties.get(BEFORE_PROPERTY)
        if pending is None or self.cold is None or self.running:
            return None
        try:
            before = Position.parse(pending)
        except ValueError:
            log.warning("%s: ignoring an unreadable pending offload request %r", self._ml.name, pending)
            return None
        log.info("%s: resuming the offload up to %s a previous owner left unfinished", self._ml.name, pending)
        return self._launch(before, persist=False)

    def _launch(self, before: Position, *, persist: bool) -> asyncio.Task:
        self.status = replace(self.status, status=RUNNING, last_error="", first_unoffloaded=NO_POSITION,
                              entries_done=0, entries_total=0)
        task = asyncio.ensure_future(self._run(_Run(before), persist))
        task.add_done_callback(_retrieve)
        self._task = task
        return task

    # --- the run ---------------------------------------------------------------------------------

    async def _run(self, run: _Run, persist: bool) -> Position:
        ml = self._ml
        try:
            if persist:
                await finish_uncancelled(self._set_request(str(run.before)))
            todo = prefix_candidates(ml._meta.ledgers, run.before.ledger_id)
            self.status.entries_total = sum(r.entries for r in todo)
            for record in todo:
                await self._offload_ledger(run, record)
            await finish_uncancelled(self._clear_request(str(run.before)))
        except asyncio.CancelledError:
            self._end(ERROR, "offload cancelled: the managed ledger closed", NO_POSITION)
            raise
        except StrataError as exc:             # fenced, closed, metadata store down: stop here
            self._end(ERROR, str(exc), NO_POSITION)
            raise
        except Exception as exc:               # a bug: report it rather than hang in RUNNING
            log.exception("offload of %s failed", ml.name)
            self._end(ERROR, repr(exc), NO_POSITION)
            raise
        kept_first = first_unoffloaded(ml._meta.ledgers, run.before.ledger_id)
        if run.first_error is not None:
            self._end(ERROR, str(run.first_error), NO_POSITION)
            raise run.first_error
        self._end(SUCCESS, "", kept_first)
        return kept_first

    def _end(self, status: str, error: str, first: Position) -> None:
        self.status = replace(self.status, status=status, last_error=error, first_unoffloaded=first)

    async def _offload_ledger(self, run: _Run, record: LedgerRecord) -> None:
        """One ledger: upload (retried), then record it. Its own failure is noted in `run`."""
        ml = self._ml
        cold = present(self.cold, "an offload runs only with a cold tier", name=ml.name)
        base_done = self.status.entries_done

        def progress(done: int, total: int) -> None:
            self.status.entries_done = base_done + min(done, record.entries)

        async def attempt() -> ColdCopy:
            self._check_kept(record.ledger_id)
            handle = await ml._reader.handle_for(record.ledger_id)
            return await cold.offload(ml.name, record.ledger_id, handle, record.entries, progress,
                                      self._offsets_of(record))

        try:
            copy = await self._upload_retry.call_async(attempt, about=f"{ml.name} ledger {record.ledger_id}")
            await finish_uncancelled(self._record(record.ledger_id, copy))
        except OffloadConflict as exc:
            log.info("%s: ledger %d not offloaded: %s", ml.name, record.ledger_id, exc)
            return
        except (ManagedLedgerFenced, ManagedLedgerClosed):
            raise
        except StrataError as exc:
            if not self._is_kept(record.ledger_id):     # trimmed under the upload: not an error
                log.info("%s: ledger %d trimmed while offloading it (%s)", ml.name, record.ledger_id, exc)
                return
            log.warning("%s: offload of ledger %d failed: %s", ml.name, record.ledger_id, exc)
            run.first_error = run.first_error or exc
            self.status.last_failure_ms = ml._clock.wall_ms()
            self.offload_errors += 1
            return
        self.offloaded_bytes += record.size_bytes
        self.status.entries_done = base_done + record.entries
        self.status.last_offload_ledger_id = record.ledger_id
        self.status.last_success_ms = ml._clock.wall_ms()

    def _offsets_of(self, record: LedgerRecord) -> LedgerOffsets | None:
        """The ledger's Kafka offsets for its object: its first offset and its index's message
        counts (None, a null `offset` column, if its index does not match the record)."""
        kept = self._ml._view.find(record.ledger_id)
        if kept is None or record.first_offset < 0 or kept.entries != record.entries:
            return None
        return LedgerOffsets(record.first_offset, list(kept.index.messages))

    def _is_kept(self, ledger_id: int) -> bool:
        return any(r.ledger_id == ledger_id for r in self._ml._meta.ledgers)

    def _check_kept(self, ledger_id: int) -> None:
        if not self._is_kept(ledger_id):
            raise OffloadConflict("ledger no longer exists, likely trimmed", ledger_id=ledger_id)

    async def _record(self, ledger_id: int, copy: ColdCopy) -> None:
        """The compare-and-set that makes the offload visible, after the object is complete."""
        ml = self._ml
        async with ml._meta_lock:
            record = next((r for r in ml._meta.ledgers if r.ledger_id == ledger_id), None)
            if record is None:
                self.delete_objects([copy])
                raise OffloadConflict("ledger no longer exists, likely trimmed; its object is deleted",
                                      ledger_id=ledger_id)
            if record.cold is not None:
                return                                   # recorded already (an earlier run)
            if copy.entries != record.entries:
                raise ColdObjectCorrupt("the offloaded object does not hold the ledger's entries",
                                        ledger_id=ledger_id, entries=record.entries, object_entries=copy.entries)
            await ml._cas(ml._meta.with_ledgers([replace(r, cold=copy) if r.ledger_id == ledger_id else r
                                                 for r in ml._meta.ledgers]))
            kept = ml._view.find(ledger_id)
            if kept is not None:
                kept.cold = copy
                kept.state = LedgerState.OFFLOADED

    async def _set_request(self, before: str) -> None:
        await self._change_request(lambda props: props.__setitem__(BEFORE_PROPERTY, before))

    async def _clear_request(self, before: str) -> None:
        def clear(props: dict[str, str]) -> None:
            if props.get(BEFORE_PROPERTY) == before:
                del props[BEFORE_PROPERTY]
        await self._change_request(clear)

    async def _change_request(self, change: Callable[[dict[str, str]], None]) -> None:
        ml = self._ml
        async with ml._meta_lock:
            props = dict(ml._meta.properties)
            change(props)
            if props != ml._meta.properties:
                await ml._cas(ml._meta.with_properties(props))

    # --- the deletion lag ------------------------------------------------------------------------

    async def delete_bookie_copies(self, lag_ms: int, now_ms: int) -> list[int]:
        if lag_ms < 0:
            return []
        ml = self._ml
        async with ml._meta_lock:
            due = {r.ledger_id for r in ml._meta.ledgers
                   if r.closed and r.cold is not None and not r.bookie_deleted
                   and now_ms - r.cold.completed_ms >= lag_ms}
            if not due:
                return []
            await finish_uncancelled(ml._cas(ml._meta.with_ledgers(
                [replace(r, bookie_deleted=True) if r.ledger_id in due else r for r in ml._meta.ledgers])))
            for ledger_id in due:
                kept = ml._view.find(ledger_id)
                if kept is not None:
                    kept.bookie_deleted = True
                ml._reader.handles.pop(ledger_id, None)    # never read the bookies for it again
        doomed = sorted(due)
        ml._deleter.schedule_bookie_copies(doomed)
        log.info("%s: deleting the bookie copy of offloaded ledger(s) %s", ml.name, doomed)
        return doomed

    # --- reading ---------------------------------------------------------------------------------

    async def read(self, kept: KeptLedger, first: int, last: int,
                   from_bookies: Callable[[], Awaitable[list[tuple[int, bytes]]]]) -> list[tuple[int, bytes]]:
        """Entries first..last of an offloaded ledger. Tiered-storage-first (or the bookie copy
        gone): from the cold tier, falling back to the bookies if that fails and the bookie copy
        is still there; with it gone the cold tier's error is raised (ColdTierUnavailable is
        retriable: the dispatcher waits and retries). Bookkeeper-first: the bookies, falling back
        to the cold tier if they fail."""
        copy = present(kept.cold, "only an offloaded ledger is read through the offloader", ledger_id=kept.ledger_id)
        if self.cold is None:
            if kept.bookie_deleted:
                raise OffloadNotConfigured("ledger is only in the cold tier, and this broker has none",
                                           ledger_id=kept.ledger_id)
            return await from_bookies()
        if not self._tiered_first and not kept.bookie_deleted:
            try:
                return await from_bookies()
            except StrataError as exc:
                log.warning("%s: bookie read of offloaded ledger %d failed (%s); reading the cold copy",
                            self._ml.name, kept.ledger_id, exc)
        try:
            got = await self.cold.read(copy, first, last)
        except ColdTierError as exc:
            self.read_offload_errors += 1
            if kept.bookie_deleted:
                raise
            self.cold_read_fallbacks += 1
            log.warning("%s: cold read of ledger %d failed (%s); reading the bookies",
                        self._ml.name, kept.ledger_id, exc)
            return await from_bookies()
        self.read_offload_bytes += sum(len(data) for _, data in got)
        return got

    # --- objects ---------------------------------------------------------------------------------

    def object_deleters(self, copies: Mapping[int, ColdCopy]) -> dict[int, Callable[[], Awaitable[None]]]:
        """Per trimmed ledger, the call that deletes its object (LedgerDeleter retries it)."""
        cold = self.cold
        if cold is None:
            if copies:
                log.warning("%s: objects of trimmed ledgers %s stay in the cold tier: none configured",
                            self._ml.name, sorted(copies))
            return {}
        return {ledger_id: functools.partial(cold.delete, copy) for ledger_id, copy in copies.items()}

    def delete_objects(self, copies: Iterable[ColdCopy]) -> None:
        """Delete objects of ledgers no longer listed in the background, retried until done or close()."""
        for copy in copies:
            self._spawn(self._delete_object(copy))

    async def _delete_object(self, copy: ColdCopy) -> None:
        cold = self.cold
        if cold is None:
            log.warning("%s: cannot delete %s: no cold tier configured", self._ml.name, copy.key)
            return
        await _COLD_DELETE_RETRY.call_async(lambda: cold.delete(copy), about=copy.key)

    async def delete_all(self, copies: list[ColdCopy]) -> None:
        """The managed ledger is being deleted: every object of it, and any stray one."""
        cold = self.cold
        if cold is None:
            if copies:
                log.warning("%s: %d offloaded object(s) left in the cold tier: no cold tier configured",
                            self._ml.name, len(copies))
            return
        for copy in copies:
            await cold.delete(copy)
        await cold.clean_orphans(self._ml.name, set())

    def clean_orphans(self, kept_ids: set[int], newer_than: int) -> None:
        """In the background: objects of ledgers trimmed by an owner that stopped before
        deleting them, and incomplete uploads of ledgers no longer kept. Every ledger id above
        `newer_than` counts as kept: ledgers created after this snapshot (ids only grow) may be
        offloaded before the listing runs."""
        cold = self.cold
        if cold is not None:
            self._spawn(self._clean(cold, KeptIds(frozenset(kept_ids), newer_than)))

    async def _clean(self, cold: ColdStorage, kept_ids: KeptIds) -> None:
        try:
            removed = await cold.clean_orphans(self._ml.name, kept_ids)
        except StrataError as exc:
            log.warning("%s: cleaning orphaned objects failed (next time): %s", self._ml.name, exc)
            return
        if removed:
            log.info("%s: removed %d orphaned object(s): %s", self._ml.name, len(removed), removed)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_retrieve)

    async def wait_idle(self, timeout_s: float | None = None) -> None:
        """Wait for the running offload and the background deletions (tests, `delete()`)."""
        tasks = [*self._background, *([self._task] if self._task is not None else [])]
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout_s)

    async def close(self) -> None:
        tasks = [*self._background, *([self._task] if self.running and self._task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class KeptIds(AbstractSet[int]):
    """The ledger ids an orphan cleaning must keep: `known`, and every id above `newer_than`
    (iterating and len() give the known ones only)."""

    def __init__(self, known: frozenset[int], newer_than: int) -> None:
        self.known = known
        self.newer_than = newer_than

    def __contains__(self, ledger_id: object) -> bool:
        return ledger_id in self.known or (isinstance(ledger_id, int) and ledger_id > self.newer_than)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.known))

    def __len__(self) -> int:
        return len(self.known)


def _retrieve(task: asyncio.Task) -> None:
    """Mark a background task's outcome seen (its error is in the status and the log)."""
    if not task.cancelled():
        task.exception()
