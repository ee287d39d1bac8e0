"""Ledger handles: `ReadHandle` reads a ledger, `WriteHandle` is its one writer.

Reads go to any replica: a range is split into runs that one bookie holds whole
(`striping.read_chunks`), read in parallel, and a run that fails is re-read entry by entry from
the other bookies of each entry's write set. The bookie client checks every CRC32C. A handle
never reads past what it knows is confirmed: the last entry of a closed ledger, the writer's own
LAC, or the LAC read from the bookies for an open ledger.

Writing (`WriteHandle.add`): the entry id is assigned synchronously (call order = entry order),
the entry is sent to the Qw bookies of its write set through the shared per-bookie add stream
(`submit_add`, one `Completion` per copy, no coroutine per add), and the add resolves once Qa
copies are durable and every lower entry resolved (`pending.AddPipeline`). The LAC rides on every
add. A bookie's answer is counted, and the add it completes resolved, in the turn it arrives
(`add_then` hands the entry id to its caller there too; `add_future` a turn later, as a future).

A bookie that fails is replaced (`_change_ensemble`): a new fragment starting at LAC+1 is written
by compare-and-set, the replaced bookie's acks of unresolved entries are dropped and those
entries are resent to the replacement. While the change is under way acks are recorded but
nothing resolves (BookKeeper does the same), so no entry is confirmed on a bookie the metadata
no longer names. With no replacement available, entries whose write set still has Qa live
bookies go on; the rest fail at `ledger_add_timeout_ms` with NotEnoughBookies (retriable),
failing every later add with them and ending the handle: a ledger has no gaps. A failed bookie is
quarantined in the client's `BookieHealth` (placement prefers others while it is registered).

Hand-off (★ beyond BookKeeper, for a managed ledger): with a hand-off listener set
(`set_handoff_listener`) a writer that finds no replacement does not wait for the add timeout:
it tells the listener (synchronously, with how many adds are unconfirmed), then fails every
unconfirmed add with one `NotEnoughBookies` error, `self.error` (state HANDED_OFF); close()
then seals the ledger at its LAC. The listener's owner resends those adds, in entry order, to a
new ledger, which may have a smaller ensemble (`placement.choose_ensemble`): nothing
unconfirmed is ever confirmed here, so nothing is stored twice.

Re-replication of an OPEN ledger (the auditor moving a fragment other than the last off a dead
bookie) changes the metadata under the writer: a compare-and-set that loses to such a change
(same fragments, same state, same last fragment) adopts it and tries again. LedgerFenced
from a bookie (a recoverer took over) fails every unresolved add with AddOutcomeUnknown.

No bytes go to a bookie while the metadata store's lease has lapsed (`store.lease_valid()`,
asked in `_send_to`, the one place an add leaves): the writer then fails every unresolved add
with LeaseLost and takes no more, so a broker stalled past its lease (SIGSTOP, a long pause)
never adds an entry to a ledger another broker may already own.

What must hold: LAC never goes back; entries resolve in order; a resolved entry has Qa durable
copies on the ensemble its fragment names; no add is sent once the lease has lapsed.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import random
from collections.abc import Callable
from typing import Any

from common import retry
from common.clock import Clock
from common.completion import Completion, as_future
from common.config import Config
from common.errors import (
    AddOutcomeUnknown,
    BadVersion,
    EntryTooLarge,
    IllegalTransition,
    InvalidArgument,
    LeaseLost,
    LedgerClosed,
    LedgerFenced,
    NotEnoughBookies,
    StrataError,
    TimeoutExpired,
)
from common.invariant import invariant, present
from ledger import placement
from ledger.ledger_metadata import LedgerMetadata, LedgerStatus
from ledger.ledger_store import BookiePool, read_metadata, write_metadata
from ledger.pending import AddPipeline, PendingAdd
from ledger.striping import read_chunks, write_set
from metadata.api import AsyncStore

HandoffListener = Callable[["WriteHandle", int], None]   # (handle, unconfirmed adds)
_ADOPT_RETRIES_MAX = 16            # closes retried after losing to re-replication
# Finding a replacement bookie (NotEnoughBookies) or a metadata store hiccup: try again in 0.2 s.
_ENSEMBLE_RETRY = retry.Retry("ledger.ensemble_change", retry_on=StrataError, wait=retry.fixed(0.2),
                              unbounded_because="the add deadline watchdog fails the handle, which ends it")


class ReadHandle:
    def __init__(self, metadata: LedgerMetadata, pool: BookiePool, config: Config, clock: Clock,
                 *, last_add_confirmed: int | None = None) -> None:
        self.metadata = metadata
        self.ledger_id = metadata.ledger_id
        self._pool = pool
        self._config = config
        self._clock = clock
        # Highest entry this handle may read: final when closed, else what was learned.
        self._lac = (metadata.last_entry_id if metadata.is_closed
                     else -1 if last_add_confirmed is None else last_add_confirmed)

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length_bytes(self) -> int:
        return self.metadata.length_bytes

    async def read(self, first: int, last: int) -> list[tuple[int, bytes]]:
        """Entries first..last (inclusive, <= LAC), in order, from any replica."""
        if first < 0 or last < first or last > self.last_add_confirmed:
            raise InvalidArgument("read outside the confirmed entries", ledger_id=self.ledger_id,
                                  first=first, last=last, lac=self.last_add_confirmed)
        meta = self.metadata
        runs: list[tuple[tuple[str, ...], int, int, int]] = []
        for i, frag in enumerate(meta.fragments):
            frag_last = meta.fragments[i + 1].first_entry_id - 1 if i + 1 < len(meta.fragments) else last
            lo, hi = max(first, frag.first_entry_id), min(last, frag_last)
            for bookie_index, a, b in read_chunks(lo, hi, meta.ensemble_size, meta.write_quorum):
                runs.append((frag.ensemble, bookie_index, a, b))
        gate = asyncio.Semaphore(self._config.ledger_read_runs_in_flight_max)  # Qw < E: runs are short
        parts = await asyncio.gather(*(self._read_run(gate, *run) for run in runs))
        out = [entry for part in parts for entry in part]
        invariant([e for e, _ in out] == list(range(first, last + 1)), "read returns the range in order",
                  ledger_id=self.ledger_id, first=first, last=last)
        return out

    async def _read_run(self, gate: asyncio.Semaphore, ensemble: tuple[str, ...], bookie_index: int,
                        first: int, last: int) -> list[tuple[int, bytes]]:
        async with gate:
            try:
                return await self._pool.get(ensemble[bookie_index]).read(
                    self.ledger_id, first, last, allow_past_lac=True)
            except StrataError:
                pass                      # fail over, entry by entry, to the other replicas
            out = []
            for entry_id in range(first, last + 1):
                out.append((entry_id, await self._read_one(ensemble, entry_id, avoid=bookie_index)))
            return out

    async def _read_one(self, ensemble: tuple[str, ...], entry_id: int, *, avoid: int) -> bytes:
        meta = self.metadata
        order = write_set(entry_id, meta.ensemble_size, meta.write_quorum)
        order = [i for i in order if i != avoid] + [i for i in order if i == avoid]
        error: StrataError | None = None
        for index in order:
            try:
                got = await self._pool.get(ensemble[index]).read(self.ledger_id, entry_id, entry_id,
                                                                 allow_past_lac=True)
                return got[0][1]
            except StrataError as exc:
                error = exc
        raise present(error, "a write set is not empty")


class WriterState(enum.Enum):
    WRITING = "writing"   # takes adds
    FAILED = "failed"     # an add failed (no quorum in time); takes no adds; may still close
    HANDED_OFF = "handed_off"  # no replacement bookie: unconfirmed adds went back to the listener
    FENCED = "fenced"     # a recoverer fenced the ledger; every unresolved add's outcome unknown
    CLOSED = "closed"     # this writer closed the ledger; metadata CLOSED


_WRITER_TRANSITIONS = {
    WriterState.WRITING: {WriterState.FAILED, WriterState.HANDED_OFF, WriterState.FENCED, WriterState.CLOSED},
    WriterState.FAILED: {WriterState.FENCED, WriterState.CLOSED},
    WriterState.HANDED_OFF: {WriterState.FENCED, WriterState.CLOSED},
    WriterState.FENCED: set(),
    WriterState.CLOSED: set(),
}


class WriteHandle(ReadHandle):
    def __init__(self, metadata: LedgerMetadata, pool: BookiePool, store: AsyncStore, config: Config,
                 clock: Clock, rng: random.Random, *, health: placement.BookieHealth | None = None,
                 writer_token: bytes | None = None) -> None:
        super().__init__(metadata, pool, config, clock, last_add_confirmed=-1)
        self._store = store
        self._rng = rng
        self._health = health                      # the client's quarantine of failed bookies
        self._handoff_listener: HandoffListener | None = None
        # the ledger's "master key" on the bookies
        self.writer_token = writer_token if writer_token is not None else rng.randbytes(16)
        self.state = WriterState.WRITING
        self.error: StrataError | None = None      # why adds stopped (FAILED / FENCED)
        self._timeout_s = config.ledger_add_timeout_ms / 1000.0
        self._pipeline = AddPipeline(metadata.ensemble_size, metadata.write_quorum,
                                     metadata.ack_quorum, in_flight_max=config.ledger_adds_in_flight_max,
                                     queued_max=config.ledger_adds_in_flight_max)
        self._failed_indexes: set[int] = set()     # ensemble indexes down and not yet replaced
        self._failed_addresses: set[str] = set()   # never chosen again as replacements
        self._ensemble_task: asyncio.Task | None = None
        self._changing = False                     # an ensemble change holds completions
        self._watchdog: asyncio.TimerHandle | None = None
        self._closing = False                      # close() started: no new adds
        # The loop adds run on, once the first add came (asking asyncio each time costs a
        # getpid() system call per add).
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- state ----------------------------------------------------------------------------------

    @property
    def pending_adds(self) -> int:
        """Adds accepted and not yet complete: sent to bookies, or held back by the in-flight limit."""
        return self._pipeline.in_flight + len(self._pipeline.unsent)

    def _set_state(self, state: WriterState) -> None:
        if state not in _WRITER_TRANSITIONS[self.state]:
            raise IllegalTransition(f"writer of ledger {self.ledger_id}: {self.state.value} -> {state.value}")
        self.state = state

    @property
    def last_add_confirmed(self) -> int:
        return self._pipeline.lac

    @property
    def length_bytes(self) -> int:
        return self._pipeline.confirmed_bytes

    # --- adds -----------------------------------------------------------------------------------

    async def add(self, data: bytes) -> int:
        """Append one entry; returns its id once Qa copies are durable and all lower entries are."""
        return await self.add_future(data)

    def add_future(self, data: bytes) -> asyncio.Future:
        """Assign the next entry id now (so call order is entry order); the future gives the id."""
        self._check_writable(data)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._start_add(data, future)
        return future

    def add_then(self, data: bytes, on_done: Callable[[Completion], Any]) -> Completion:
        """`add_future` for the publish path: `on_done(completion)` runs in the same turn as the
        bookie answer that completes the add (its result is the entry id), not a turn later."""
        self._check_writable(data)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        completion = Completion(loop, on_done)
        self._start_add(data, completion)
        return completion

    def _check_writable(self, data: bytes) -> None:
        if len(data) > self._config.bookie_entry_bytes_max:
            raise EntryTooLarge("entry larger than bookie_entry_bytes_max", size_bytes=len(data))
        if self.state is not WriterState.WRITING or self._closing:
            if self.state is WriterState.FENCED:
                raise LedgerFenced("ledger was fenced by a recoverer", ledger_id=self.ledger_id)
            if self.state in (WriterState.FAILED, WriterState.HANDED_OFF) and self.error is not None:
                raise type(self.error)(f"ledger writer failed earlier: {self.error.message}",
                                       ledger_id=self.ledger_id)
            raise LedgerClosed("ledger is closed", ledger_id=self.ledger_id)

    def _start_add(self, data: bytes, outcome: asyncio.Future | Completion) -> None:
        add = self._pipeline.add(data, outcome, self._clock.monotonic_s() + self._timeout_s)
        if add is not None:
            self._send(add)
        self._arm_watchdog()

    def _send(self, add: PendingAdd) -> None:
        for index in self._pipeline.write_set(add.entry_id):
            if index not in self._failed_indexes:
                self._send_to(add, index)

    def _send_to(self, add: PendingAdd, index: int) -> None:
        if not self._store.lease_valid():  # a stalled owner never adds after its lease
            self._fail_all(WriterState.FAILED, LeaseLost(
                "metadata lease lapsed: no add is sent to a bookie", ledger_id=self.ledger_id))
        if self.state is not WriterState.WRITING:
            return
        address = self.metadata.last_ensemble[index]
        # a Completion: the answer is counted in the turn it arrives, no loop turn per copy
        self._pool.get(address).submit_add_then(self.ledger_id, add.entry_id, add.payload, self._pipeline.lac,
                                                functools.partial(self._on_copy_done, add, index, address),
                                                writer_token=self.writer_token)

    def _on_copy_done(self, add: PendingAdd, index: int, address: str,
                      fut: asyncio.Future | Completion) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()             # always retrieved, even when no longer needed
        if self.state is not WriterState.WRITING:
            return
        if self.metadata.last_ensemble[index] != address:
            return                        # answer from a bookie replaced since: not counted
        if exc is None:
            self._resolve(self._pipeline.on_ack(add.entry_id, index, hold=self._changing))
        elif isinstance(exc, LedgerFenced):
            self._fail_all(WriterState.FENCED, AddOutcomeUnknown(
                "ledger fenced by a recoverer while adding", ledger_id=self.ledger_id))
        else:
            self._bookie_failed(index, address, exc)

    def _resolve(self, done: list[PendingAdd]) -> None:
        for add in done:
            if not add.future.done():
                add.future.set_result(add.entry_id)
        if done:
            for add in self._pipeline.release():
                self._send(add)

    def _fail_all(self, state: WriterState, error: StrataError) -> None:
        if self.state is not WriterState.WRITING:
            return
        self._set_state(state)
        self.error = error
        for add in self._pipeline.drain_all():
            if not add.future.done():
                add.future.set_exception(error)
                add.future.exception()    # mark retrieved: callers may have stopped waiting
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    # --- timeouts -------------------------------------------------------------------------------

    def _arm_watchdog(self) -> None:
        if self._watchdog is None and self._pipeline.pending:
            period_s = max(0.02, self._timeout_s / 10)
            loop = self._loop if self._loop is not None else asyncio.get_running_loop()
            self._watchdog = loop.call_later(period_s, self._check_deadline)

    def _check_deadline(self) -> None:
        self._watchdog = None
        oldest = self._pipeline.oldest()
        if oldest is not None and self._clock.monotonic_s() >= oldest.deadline_s:
            if self._failed_indexes:
                error: StrataError = NotEnoughBookies("fewer than Qa bookies reachable for an add",
                                                      ledger_id=self.ledger_id, entry_id=oldest.entry_id)
            else:
                error = TimeoutExpired("add not acknowledged within ledger_add_timeout_ms",
                                       ledger_id=self.ledger_id, entry_id=oldest.entry_id)
            self._fail_all(WriterState.FAILED, error)
            return
        self._arm_watchdog()

    # --- ensemble change ------------------------------------------------------------------------

    def _bookie_failed(self, index: int, address: str, exc: BaseException) -> None:
        self._failed_indexes.add(index)
        self._failed_addresses.add(address)
        if self._health is not None:
            self._health.failed(address)
        if self._ensemble_task is None or self._ensemble_task.done():
            self._ensemble_task = asyncio.ensure_future(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        async def replace_failed() -> None:
            while self._failed_indexes and self.state is WriterState.WRITING:
                await self._try_change_ensemble()

        await _ENSEMBLE_RETRY.call_async(replace_failed, about=f"ledger {self.ledger_id}")

    async def _try_change_ensemble(self) -> None:
        replaced = sorted(self._failed_indexes)
        candidates = await placement.available_bookies(self._store)
        quarantined = self._health.quarantined() if self._health is not None else set()
        try:
            ensemble = placement.replace(candidates, self.metadata.last_ensemble, replaced, self._rng,
                                         avoid=self._failed_addresses, quarantined=quarantined)
        except NotEnoughBookies as exc:
            if self._handoff_listener is None or self.state is not WriterState.WRITING:
                raise
            self._hand_off(exc)
            return
        self._changing = True
        try:
            first = self._pipeline.lac + 1
            await self._write_fragment(first, ensemble)
        finally:
            self._changing = False
        if self.state is not WriterState.WRITING:
            return
        for index in replaced:
            self._failed_indexes.discard(index)
            for add in self._pipeline.forget_index(index):
                self._send_to(add, index)
        self._resolve(self._pipeline.advance())

    def set_handoff_listener(self, listener: HandoffListener) -> None:
        """Hand unconfirmed adds back instead of waiting when no replacement bookie is found
        (see the module docstring). `listener(handle, unconfirmed_count)` runs synchronously
        before those adds fail with `self.error`."""
        self._handoff_listener = listener

    @property
    def handed_off(self) -> bool:
        return self.state is WriterState.HANDED_OFF

    def _hand_off(self, error: NotEnoughBookies) -> None:
        listener = present(self._handoff_listener, "hand-off needs a listener")
        handoff = NotEnoughBookies(f"no replacement bookie; unconfirmed adds go to a new ledger: "
                                   f"{error.message}", **{**error.details, "ledger_id": self.ledger_id})
        listener(self, len(self._pipeline.pending))
        self._fail_all(WriterState.HANDED_OFF, handoff)

    def _adopt(self, current: LedgerMetadata | None) -> bool:
        """Take `current` as our metadata if it differs from ours only by re-replication of
        fragments other than the last (the auditor on an OPEN ledger)."""
        mine = self.metadata
        if (current is None or current.state is not LedgerStatus.OPEN
                or len(current.fragments) != len(mine.fragments)
                or current.fragments[-1] != mine.fragments[-1]
                or [f.first_entry_id for f in current.fragments] != [f.first_entry_id for f in mine.fragments]):
            return False
        self.metadata = current
        return True

    async def _write_fragment(self, first: int, ensemble: tuple[str, ...]) -> None:
        """Record the ensemble change by compare-and-set; a lost race means we were fenced,
        unless it was lost to re-replication (adopted, and tried again)."""
        try:
            self.metadata = await write_metadata(self._store, self.metadata.with_fragment(first, ensemble))
        except BadVersion:
            current = await read_metadata(self._store, self.ledger_id)
            if self._adopt(current):
                raise                     # the ensemble-change retry writes again on it
            if current is None or current.state is not LedgerStatus.OPEN:
                self._fail_all(WriterState.FENCED, AddOutcomeUnknown(
                    "ledger metadata changed by a recoverer during an ensemble change",
                    ledger_id=self.ledger_id))
                return
            raise

    # --- close ----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Wait for adds in flight, then record last entry id and length by compare-and-set."""
        if self.state is WriterState.CLOSED:
            return
        self._closing = True
        futures = [as_future(a.future) for a in self._pipeline.pending.values()]
        if futures:
            await asyncio.gather(*futures, return_exceptions=True)
        if self._ensemble_task is not None and not self._ensemble_task.done():
            self._ensemble_task.cancel()
            await asyncio.gather(self._ensemble_task, return_exceptions=True)
        if self.state is WriterState.FENCED:
            raise LedgerFenced("ledger was fenced by a recoverer", ledger_id=self.ledger_id)
        lac, length = self._pipeline.lac, self._pipeline.confirmed_bytes
        try:
            self.metadata = await self._write_closed(lac, length)
        except BadVersion:
            current = await read_metadata(self._store, self.ledger_id)
            if current is None or not current.is_closed:
                if self.state is WriterState.WRITING:
                    self._fail_all(WriterState.FENCED, AddOutcomeUnknown("ledger being recovered"))
                elif self.state in (WriterState.FAILED, WriterState.HANDED_OFF):
                    self._set_state(WriterState.FENCED)
                raise LedgerFenced("ledger is being recovered by another client",
                                   ledger_id=self.ledger_id) from None
            invariant(current.last_entry_id >= lac, "recovery never loses a confirmed entry",
                      ledger_id=self.ledger_id, recovered=current.last_entry_id, lac=lac)
            self.metadata = current
        if self.state is WriterState.WRITING:
            self._fail_all(WriterState.CLOSED, LedgerClosed("ledger closed", ledger_id=self.ledger_id))
        elif self.state in (WriterState.FAILED, WriterState.HANDED_OFF):
            self._set_state(WriterState.CLOSED)
        self._lac = lac

    async def _write_closed(self, lac: int, length: int) -> LedgerMetadata:
        """The close by compare-and-set; a loss to re-replication is adopted and written again
        (bounded: each retry follows a real change by another writer of the record)."""
        for _ in range(_ADOPT_RETRIES_MAX):
            closing = self.metadata.with_state(LedgerStatus.CLOSED, last_entry_id=lac, length_bytes=length)
            try:
                return await write_metadata(self._store, closing)
            except BadVersion:
                if not self._adopt(await read_metadata(self._store, self.ledger_id)):
                    raise
        raise BadVersion("ledger metadata kept changing while closing", ledger_id=self.ledger_id)
