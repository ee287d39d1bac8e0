"""`ManagedLedger`: one topic partition's storage — an ordered list of ledgers, the last one open.

How it works
- `open()` takes ownership of `/managed-ledgers/<name>` (a compare-and-set that fences out any
  previous owner), recovers a ledger a previous owner left OPEN (its appends then fail on the
  bookies), loads per-entry indexes, and creates a fresh ledger to append to (`ledger.ml_open`).
- `append()` assigns the entry to the current ledger synchronously, so call order is position
  order, and resolves once the ledger confirms it (Qa copies, all lower entries confirmed). The
  entry's facts go into the ledger's `EntryIndex`, its bytes into the shared tail cache, and the
  append listeners are called with its position, in position order.
- Rollover (`rollover.RolloverPolicy`, checked as entries are assigned): the current ledger is
  closed (waiting for its adds), its index blob written, its record sealed by compare-and-set,
  then a new ledger is created and added by compare-and-set. Appends meanwhile wait in a bounded
  FIFO and then go to the new ledger, in order. A ledger whose adds failed (no quorum in time) is
  rolled the same way; its failed appends raise retriable errors to their callers.
- A dead bookie with no replacement (fewer live bookies than the ensemble needs): the writer
  hands its unconfirmed adds back (`WriteHandle.set_handoff_listener`) instead of failing them
  at the add timeout; the ledger is sealed at its last confirmed entry and those appends go, in
  order and ahead of any later one, to the next ledger, whose ensemble may be smaller
  (`placement.choose_ensemble`: down to Qw bookies). Callers see a delay, not an error. Fewer
  than Qw live bookies: the rollover fails with NotEnoughBookies (retriable), logged rate-limited.
  Bounded: after `_HANDOFFS_IN_A_ROW_MAX` ledgers in a row handed off without confirming an
  entry (bookies that hang rather than die), the hand-off is refused and the appends fail as
  any failed add does.
- An append that fails after it was accepted fails everything behind it: the ledger writer fails
  its later adds, and the managed ledger fails every append waiting in the FIFO, in order, before
  any later append is accepted (`_appends_failed`). Each such failure event increments
  `append_failures`. So an append never becomes durable after an earlier one failed, unless it
  was accepted after `append_failures` moved: a caller that needs its own entries stored without
  a gap (a producer with dedup, apache/pulsar#5218) reads `append_failures` before each append
  and stops appending when it moved while any of its appends was outstanding
  (`broker.topics.producer`). Entries too large for a bookie are refused synchronously, never queued.
- `read()` walks positions across ledgers up to `last_confirmed`, from the cache, else from the
  bookies or the cold tier (`ledger.ml_read.EntryReader`). A ledger that fails to read after
  earlier ones were read ends the read with what it has; the error comes from the next read,
  which starts there.
- `trim()` drops whole closed ledgers before a position: metadata first (compare-and-set, moving
  them to the record's `deleting` list), then background deletes on the bookies
  (`ledger.trim.LedgerDeleter`); the next compare-and-set drops the finished ones from
  `deleting`, and a new owner finishes any left there, so a crash in between leaks nothing.
- Offload (`ledger.ml_offload`, given a `ColdStorage` at open): closed ledgers are copied to
  the cold tier (`start_offload`, `maybe_offload`), recorded by compare-and-set once complete,
  read back from it transparently (`ledger.ml_read`), and their bookie copy deleted after the
  deletion lag (`delete_offloaded_from_bookies`). Trimming an offloaded ledger deletes its object
  too. `add_ledger_closed_listener` tells the broker a ledger was sealed, so it can apply its
  offload policies. close() cancels a running offload between its metadata updates; the
  request stays in the record and the next open resumes it.
- `terminate()` (Pulsar's asyncTerminate): no append is accepted from then on (TopicTerminated,
  which never changes), appends in flight complete, the current ledger is sealed, and the last
  confirmed position is written to the record (`terminated`) by compare-and-set. A terminated
  managed ledger reopens (after a restart, on another broker) terminated at that position, with
  no new ledger; reads, trims and offloads go on. Terminating again returns the same position.
- Kafka offsets (`offset_of`, `entry_for_offset`, `log_start_offset`, `end_offset`; how in
  `ledger.view`): each ledger's first offset is fixed in its record when it is added
  (`_add_new_ledger`: the previous, sealed ledger's first offset + its final message count), and
  the open ledger's index grows in `_on_added`, so an append's offset is known when its future
  resolves. Records written before first offsets existed are assigned on open (`_initialize`,
  `ml_metadata.assign_first_offsets`) from `trimmed.messages` on, in the compare-and-set open
  already makes: the same offsets every later open computes again.
- Fencing: any failed compare-and-set on our metadata, or a fenced ledger, means another owner
  took over: state FENCED, every later append raises ManagedLedgerFenced. Two owners never
  interleave: the new owner's ledger only starts after the old owner's last ledger was fenced.

What must hold (checked with `invariant`): positions handed out strictly increase; the LAC of
the current ledger never goes back; trimmed ledgers never include the current one. And: if an
append failed after being accepted, every append accepted before the next change of
`append_failures` failed too (no append of the same failure epoch succeeds after a failed one).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from common.clock import SYSTEM_CLOCK, Clock
from common.completion import Completion
from common.config import Config
from common.errors import (
    AddOutcomeUnknown,
    BadVersion,
    EntryTooLarge,
    IllegalTransition,
    InvalidArgument,
    InvariantViolation,
    LedgerFenced,
    LimitExceeded,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
    NotEmpty,
    NotFound,
    StrataError,
    TimeoutExpired,
    TopicTerminated,
)
from common.histogram import LatencyHistogram
from common.invariant import invariant, present
from common.ratelimited_log import RateLimitedLog
from ledger import index_checkpoint, ml_open
from ledger.cache import EntryCache
from ledger.cold import ColdStorage
from ledger.entry_index import EntryIndex
from ledger.handle import WriteHandle, WriterState
from ledger.index_checkpoint import IndexCheckpointer
from ledger.ml_metadata import (
    LedgerRecord,
    LedgerTotals,
    ManagedLedgerMetadata,
    assign_first_offsets,
    index_path,
    index_root,
    ml_path,
)
from ledger.ml_offload import Offloader, OffloadStatus
from ledger.ml_read import EntryReader
from ledger.position import Position
from ledger.rollover import RolloverPolicy
from ledger.trim import LedgerDeleter, trimmable
from ledger.types import Entry, EntryMeta, LedgerInfo, LedgerState
from ledger.view import KeptLedger, LedgerListView
from metadata.api import AsyncStore

if TYPE_CHECKING:
    from ledger.client import LedgerClient

log = logging.getLogger(__name__)
# per managed ledger (a rollover retried per append), and one key for hand-offs of all of them
_ROLL_WARN = RateLimitedLog(log, interval_s=5.0)
PUBLISH_TIME_MS_MIN = -(2**63)       # the entry index keeps publish times as int64 (ledger.entry_index)
PUBLISH_TIME_MS_MAX = 2**63 - 1
_HANDOFF_WAIT_YIELDS_MAX = 1_000   # loop turns a rollover waits for handed-off appends to come back
_HANDOFFS_IN_A_ROW_MAX = 3         # ledgers handed off in a row with no entry confirmed; then fail
_TERMINATE_ROLL_WAITS_MAX = 100    # rollovers terminate() waits out before giving up (each bounded)
AppendListener = Callable[[Position], None]
Outcome = asyncio.Future | Completion   # where an append's position (or failure) goes
LedgerClosedListener = Callable[[int], None]      # the id of a ledger just sealed


class MLState(enum.Enum):
    READY = "ready"          # the current ledger takes appends
    ROLLING = "rolling"      # switching to a new ledger; appends wait in the FIFO
    NO_LEDGER = "no_ledger"  # the last attempt to get a new ledger failed; the next append retries
    FENCED = "fenced"        # another owner took over: no more appends, ever
    FAILED = "failed"        # an invariant broke on the write path (a bug): no more appends;
                             # reopening the managed ledger recovers from what is stored
    TERMINATED = "terminated"  # terminate() began: no more appends, ever (reads go on)
    CLOSED = "closed"        # close() or delete() ran


_ML_TRANSITIONS = {
    MLState.READY: {MLState.ROLLING, MLState.FENCED, MLState.FAILED, MLState.CLOSED, MLState.TERMINATED},
    MLState.ROLLING: {MLState.READY, MLState.NO_LEDGER, MLState.FENCED, MLState.FAILED,
                      MLState.CLOSED},
    MLState.NO_LEDGER: {MLState.ROLLING, MLState.FENCED, MLState.FAILED, MLState.CLOSED,
                        MLState.TERMINATED},
    MLState.FAILED: {MLState.FENCED, MLState.CLOSED},
    MLState.TERMINATED: {MLState.FENCED, MLState.CLOSED},
    MLState.FENCED: {MLState.CLOSED},
    MLState.CLOSED: set(),
}


class ManagedLedger:
    def __init__(self, name: str, store: AsyncStore, client: LedgerClient, config: Config, clock: Clock,
                 quorum: tuple[int, int, int], meta_from_entry: ml_open.MetaFromEntry | None,
                 cache: EntryCache | None, cold: ColdStorage | None = None) -> None:
        self.name = name
        self._store = store
        self._client = client
        self._config = config
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None   # the loop appends run on (first append)
        self._quorum = quorum                        # (E, Qw, Qa) of new ledgers
        self._meta_from_entry = meta_from_entry
        self._cache = cache if cache is not None else client.entry_cache
        self._policy = RolloverPolicy.from_config(config)
        self._owner = secrets.token_hex(8)
        self.state = MLState.NO_LEDGER
        self._meta = ManagedLedgerMetadata()         # as last read/written, with its version
        self._meta_lock = asyncio.Lock()             # one read-modify-CAS of our metadata at a time
        self._view = LedgerListView(name)
        self._handle: WriteHandle | None = None      # current ledger's writer; None between ledgers
        self._assigned_entries = 0                   # entries handed to the current ledger
        self._assigned_bytes = 0
        self._ledger_started_s = 0.0                 # monotonic time the current ledger was created
        self._last_position = Position(-1, -1)       # last position handed out (monotonic check)
        self._waiting: deque[tuple[bytes, int, int, Outcome]] = deque()  # appends held during rollover
        self._waiting_max = config.ledger_adds_in_flight_max
        self._requeued = 0                           # handed-off appends put back at the FIFO's head
        self._handoff_expected = 0                   # handed-off appends not yet put back
        self._handoffs_in_a_row = 0                  # hand-offs since a ledger last confirmed an entry
        self._handoff_refused: set[int] = set()      # ledgers whose hand-off fails its appends instead
        # Failure events so far: each failed every append accepted before it and not yet
        # complete (in flight on the ledger or waiting in the FIFO). 0 = none ever failed.
        self.append_failures = 0
        self._roll_task: asyncio.Task | None = None
        self._listeners: list[AppendListener] = []
        self._deleter = LedgerDeleter(client, store, lambda lid: index_path(name, lid))
        self._checkpoints = IndexCheckpointer(store, name, clock, config.managed_ledger_index_checkpoint_entries,
                                              config.managed_ledger_index_checkpoint_bytes,
                                              config.managed_ledger_index_checkpoint_interval_ms)
        self._closed_listeners: list[LedgerClosedListener] = []
        self._offloader = Offloader(self, cold, config)
        self.add_latency = LatencyHistogram()        # submit to the ledger -> confirmed, s (/metrics)
        self._reader = EntryReader(name, self._view, self._cache, client, config, self._offloader,
                                   lambda: self._handle)

    # --- opening ---------------------------------------------------------------------------------

    @classmethod
    async def open(cls, name: str, store: AsyncStore, client: LedgerClient, config: Config,
                   clock: Clock = SYSTEM_CLOCK, *, ensemble_size: int | None = None,
                   write_quorum: int | None = None, ack_quorum: int | None = None,
                   meta_from_entry: ml_open.MetaFromEntry | None = None,
                   cache: EntryCache | None = None, cold: ColdStorage | None = None) -> ManagedLedger:
        quorum = (ensemble_size or config.ledger_ensemble_size, write_quorum or config.ledger_write_quorum,
                  ack_quorum or config.ledger_ack_quorum)
        ml = cls(name, store, client, config, clock, quorum, meta_from_entry, cache, cold)
        await ml._initialize()
        return ml

    async def _initialize(self) -> None:
        self._meta = await ml_open.take_ownership(self._store, self.name, self._owner)
        # Older records lack first offsets: assigned here, persisted by the compare-and-set below.
        records = assign_first_offsets(self._meta.ledgers, self._meta.trimmed.messages)
        for i, record in enumerate(records):
            if not record.closed:
                invariant(i == len(records) - 1, "only the last ledger is open", ledger=record.ledger_id)
                start = await index_checkpoint.load(self._store, self.name, record.ledger_id)
                known = (len(start), start.total_bytes) if start is not None else None
                handle = await self._client.open_ledger(record.ledger_id, recover=True, known_prefix=known)
                start = index_checkpoint.fits(start, self.name, record.ledger_id, handle.last_add_confirmed + 1)
                index = await ml_open.rebuild_index(handle, self._meta_from_entry, record.created_ms, start)
                await self._store.put(index_path(self.name, record.ledger_id), index.to_blob())
                records[i] = ml_open.closed_record(record, index, self._clock.wall_ms())
            else:
                index = await ml_open.load_index(self._store, self._client, self.name, record,
                                                 self._meta_from_entry, self._offloader.cold)
            # An empty recovered ledger is kept (trimmed later like any other): deleting it now
            # would drop its fence on the bookies while the old owner may still try to add.
            state = LedgerState.CLOSED if record.cold is None else LedgerState.OFFLOADED
            self._view.add(KeptLedger(record.ledger_id, state, record.created_ms, index, record.cold,
                                      record.bookie_deleted, records[i].first_offset))
        await self._cas(self._meta.with_ledgers(records))
        if self._meta.deleting:  # trimmed by an earlier owner that stopped before deleting them
            log.info("%s: deleting %d ledger(s) an earlier owner trimmed: %s", self.name,
                     len(self._meta.deleting), list(self._meta.deleting))
            self._deleter.schedule(self._meta.deleting)
        if self._meta.deleting or any(r.cold is not None for r in records):
            # objects of ledgers trimmed by an owner that stopped before deleting them
            ids = {r.ledger_id for r in records}
            self._offloader.clean_orphans(ids, max(ids | set(self._meta.deleting)))
        # bookie copies an earlier owner marked deleted (deletion lag) and may not have deleted
        self._deleter.schedule_bookie_copies(r.ledger_id for r in records if r.bookie_deleted)
        if self._meta.terminated is not None:
            self._set_state(MLState.TERMINATED)   # no new ledger: nothing will be appended
        else:
            self._set_state(MLState.ROLLING)
            try:
                await self._add_new_ledger()
            except StrataError as exc:       # e.g. NotEnoughBookies: say why the topic cannot load
                _ROLL_WARN.warning(self.name, "%s: no ledger could be created with E/Qw/Qa %s: %s",
                                   self.name, "/".join(map(str, self._quorum)), exc)
                raise
            self._set_state(MLState.READY)
        lc = self._view.last_confirmed
        self._last_position = lc if lc.entry_id >= 0 else Position(-1, -1)
        self._offloader.resume()                  # an offload an earlier owner did not finish

    # --- state -----------------------------------------------------------------------------------

    def _set_state(self, state: MLState) -> None:
        if state not in _ML_TRANSITIONS[self.state] and state is not self.state:
            raise IllegalTransition(f"managed ledger {self.name}: {self.state.value} -> {state.value}")
        self.state = state

    def _check_appendable(self) -> None:
        self._check_live()
        if self.state is MLState.TERMINATED:
            raise TopicTerminated("the topic was terminated: it takes no more messages", name=self.name,
                                  last=str(self._meta.terminated or self._view.last_confirmed))

    def _check_live(self) -> None:
        """Not fenced, closed or failed (a terminated managed ledger is live: reads, trims)."""
        if self.state is MLState.FENCED:
            raise ManagedLedgerFenced("another owner took over this managed ledger", name=self.name)
        if self.state is MLState.CLOSED:
            raise ManagedLedgerClosed("managed ledger is closed", name=self.name)
        if self.state is MLState.FAILED:
            raise InvariantViolation("managed ledger stopped taking appends after an internal "
                                     "error; reopen it", name=self.name)

    def _become_fenced(self) -> None:
        if self.state in (MLState.FENCED, MLState.CLOSED):
            return
        self._set_state(MLState.FENCED)
        self._appends_failed(ManagedLedgerFenced("another owner took over this managed ledger",
                                                 name=self.name))

    async def _cas(self, meta: ManagedLedgerMetadata) -> None:
        """Write our metadata by compare-and-set; losing means we were fenced out. Ledgers the
        deleter has finished with leave `deleting` on the way (no write of their own)."""
        done = self._deleter.deleted & set(meta.deleting)
        if done:
            meta = meta.with_deleting(set(meta.deleting) - done)
        try:
            version = await self._store.put(ml_path(self.name), meta.to_json(),
                                            expected_version=self._meta.version)
        except (BadVersion, NotFound):
            self._become_fenced()
            raise ManagedLedgerFenced("managed ledger metadata changed by another owner",
                                      name=self.name) from None
        self._meta = meta.with_version(version)
        self._deleter.deleted.difference_update(done)

    # --- appending -------------------------------------------------------------------------------

    def add_append_listener(self, callback: AppendListener) -> None:
        self._listeners.append(callback)

    async def append(self, data: bytes, *, messages: int = 1, publish_time_ms: int = 0) -> Position:
        """Store one entry; returns its position once it is durable (Qa copies)."""
        return await self.append_future(data, messages=messages, publish_time_ms=publish_time_ms)

    def append_future(self, data: bytes, *, messages: int = 1, publish_time_ms: int = 0) -> asyncio.Future:
        """`append` without a coroutine: the entry is assigned now (call order is entry order)
        and the future gives its position once durable. A refusal raises at once."""
        self._check_accepts(publish_time_ms)
        future = self._loop_now().create_future()
        self._append_future(data, max(1, messages), publish_time_ms, future)
        return future

    def append_then(self, data: bytes, on_done: Callable[[Completion], Any], *, messages: int = 1,
                    publish_time_ms: int = 0) -> Completion:
        """`append_future` for the publish path: `on_done(completion)` runs in the turn the
        bookies' answers complete the entry (its result is the position), not a turn later."""
        self._check_accepts(publish_time_ms)
        completion = Completion(self._loop_now(), on_done)
        self._append_future(data, max(1, messages), publish_time_ms, completion)
        return completion

    def _loop_now(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:   # not asyncio.get_running_loop() per append: it costs a getpid()
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _check_accepts(self, publish_time_ms: int) -> None:
        self._check_appendable()
        if not PUBLISH_TIME_MS_MIN <= publish_time_ms <= PUBLISH_TIME_MS_MAX:
            # Refused before assignment: the entry index stores it as an int64, and a value that
            # does not fit would fail only after the write, stopping every later append here.
            raise InvalidArgument("publish time outside the int64 range", publish_time_ms=publish_time_ms,
                                  name=self.name)

    def _append_future(self, data: bytes, messages: int, publish_time_ms: int, out: Outcome) -> None:
        if len(data) > self._config.bookie_entry_bytes_max:
            # Refused now, not after waiting in the FIFO: a late failure would fail every
            # append behind it.
            raise EntryTooLarge("entry larger than bookie_entry_bytes_max", size_bytes=len(data),
                                name=self.name)
        if self.state is MLState.READY and not self._waiting:
            try:
                self._submit(data, messages, publish_time_ms, out)
                return
            except StrataError:
                if self._handle is None or self._handle.state is WriterState.WRITING:
                    raise
                self._start_rollover()       # the ledger failed under us: this entry goes to the next
        if len(self._waiting) >= self._waiting_max:
            raise LimitExceeded("appends waiting for a ledger rollover", waiting=len(self._waiting))
        self._waiting.append((data, messages, publish_time_ms, out))
        if self.state is MLState.NO_LEDGER:
            self._start_rollover()

    def _submit(self, data: bytes, messages: int, publish_time_ms: int, out: Outcome) -> None:
        """Hand the entry to the current ledger; `out` gets its position (or the failure)."""
        handle = present(self._handle, "a READY managed ledger has a current ledger", name=self.name)
        now_s = self._clock.monotonic_s()
        # add_then: _on_added runs in the turn the bookies' answer arrives, not one later
        handle.add_then(data, functools.partial(self._on_added, handle, data, messages, publish_time_ms, out, now_s))
        self._assigned_entries += 1
        self._assigned_bytes += len(data)
        age_ms = int((now_s - self._ledger_started_s) * 1000)
        if self._policy.should_roll(self._assigned_entries, self._assigned_bytes, age_ms):
            self._start_rollover()

    def _on_added(self, handle: WriteHandle, data: bytes, messages: int, publish_time_ms: int,
                  out: Outcome, submitted_s: float, add: Completion) -> None:
        exc = add.exception()
        if (exc is not None and handle.handed_off and exc is handle.error
                and handle.ledger_id not in self._handoff_refused):
            self._requeue(data, messages, publish_time_ms, out)
            return
        if exc is not None:
            if handle.state is WriterState.FENCED or isinstance(exc, (LedgerFenced, AddOutcomeUnknown)):
                self._become_fenced()
                exc = ManagedLedgerFenced("ledger fenced by a new owner; append outcome unknown",
                                          name=self.name, ledger_id=handle.ledger_id)
            else:
                # The writer failed every later add of this ledger with it; what waits for a
                # rollover (this one, or the one replacing the failed ledger) fails too.
                self._appends_failed(_behind(exc))
                if handle is self._handle and self.state is MLState.READY:
                    self._start_rollover()   # a failed ledger is replaced for the next appends
            if not out.done():
                out.set_exception(exc)
            return
        try:
            position = Position(handle.ledger_id, add.result())
            invariant(position > self._last_position, "positions strictly increase",
                      position=str(position), last=str(self._last_position))
            kept = present(self._view.find(handle.ledger_id), "the current ledger is in the view",
                           position=str(position))
            invariant(kept.entries == position.entry_id, "the index grows one entry at a time",
                      position=str(position))
            kept.index.append(len(data), messages, publish_time_ms)
            self._checkpoints.appended(handle.ledger_id, kept.index)
        except Exception as failure:
            # log it and `out` would never resolve: the producer would wait forever.
            self._fail_appends(failure)
            if not out.done():
                out.set_exception(failure)
            return
        self._last_position = position
        self.add_latency.observe(self._clock.monotonic_s() - submitted_s)
        self._cache.put(self.name, position.ledger_id, position.entry_id, data)
        if not out.done():
            out.set_result(position)
        for listener in self._listeners:
            try:
                listener(position)
            except Exception:                # a listener's bug must not break the write path
                log.exception("append listener failed on %s", self.name)

    def _fail_appends(self, exc: Exception) -> None:
        """A bug on the write path: stop taking appends rather than build on a broken index."""
        log.error("managed ledger %s stops taking appends: %s", self.name, exc, exc_info=exc)
        if self.state in (MLState.READY, MLState.ROLLING, MLState.NO_LEDGER):
            self._set_state(MLState.FAILED)
        self._appends_failed(InvariantViolation("managed ledger stopped taking appends after an "
                                                "internal error", name=self.name))

    # --- hand-off: a writer with no replacement bookie gives its unconfirmed appends back ---------

    def _on_handoff(self, handle: WriteHandle, unconfirmed: int) -> None:
        """Called by the writer before it fails `unconfirmed` adds with its hand-off error: they
        come back through `_on_added` and go to the next ledger, ahead of later appends."""
        self._handoffs_in_a_row = 1 if handle.last_add_confirmed >= 0 else self._handoffs_in_a_row + 1
        if self._handoffs_in_a_row > _HANDOFFS_IN_A_ROW_MAX:
            self._handoff_refused = {handle.ledger_id}   # its appends fail: `_on_added`'s usual path
            _ROLL_WARN.warning(self.name, "%s: %d ledgers in a row lost a bookie before confirming an "
                               "entry; appends fail", self.name, self._handoffs_in_a_row - 1)
            return
        self._handoff_expected += unconfirmed
        _ROLL_WARN.warning("handoff", "%s: ledger %d lost a bookie and no replacement is live; %d unconfirmed "
                           "append(s) move to a new ledger", self.name, handle.ledger_id, unconfirmed)
        if handle is self._handle and self.state is MLState.READY:
            self._start_rollover()

    def _requeue(self, data: bytes, messages: int, publish_time_ms: int, out: Outcome) -> None:
        self._handoff_expected -= 1
        if out.done():
            return
        try:
            self._check_appendable()
        except StrataError as exc:
            out.set_exception(exc)
            return
        # Behind the appends already put back (entry order), ahead of any that came since.
        self._waiting.insert(self._requeued, (data, messages, publish_time_ms, out))
        self._requeued += 1
        if self.state in (MLState.READY, MLState.NO_LEDGER):
            self._start_rollover()

    async def _handed_off_back(self) -> None:
        """Wait (a few loop turns at most: their callbacks are already scheduled) until every
        handed-off append is back in the FIFO, so none is ordered after a later one."""
        for _ in range(_HANDOFF_WAIT_YIELDS_MAX):
            if self._handoff_expected <= 0:
                return
            await asyncio.sleep(0)
        invariant(self._handoff_expected <= 0, "handed-off appends come back", name=self.name,
                  missing=self._handoff_expected)

    # --- rollover --------------------------------------------------------------------------------

    def _start_rollover(self) -> None:
        if self.state not in (MLState.READY, MLState.NO_LEDGER):
            return
        self._set_state(MLState.ROLLING)
        self._roll_task = asyncio.ensure_future(self._rollover())

    async def _rollover(self) -> None:
        try:
            async with self._meta_lock:
                if self._handle is not None:
                    await self._seal_current()
                await self._handed_off_back()
                if self.state is MLState.ROLLING:
                    await self._add_new_ledger()
        except (ManagedLedgerFenced, LedgerFenced):
            self._become_fenced()
            return
        except StrataError as exc:
            _ROLL_WARN.warning(self.name, "rollover of %s failed: %s", self.name, exc)
            if self.state is MLState.ROLLING:
                self._set_state(MLState.NO_LEDGER)
            self._appends_failed(exc)
            return
        if self.state is MLState.ROLLING:
            self._set_state(MLState.READY)
            self._drain_waiting()

    async def _seal_current(self) -> None:
        """Close the current ledger, persist its index, record it closed (compare-and-set)."""
        handle = present(self._handle, "sealing needs a current ledger")
        await handle.close()
        kept = present(self._view.find(handle.ledger_id), "the current ledger is in the view",
                       ledger_id=handle.ledger_id)
        invariant(kept.entries == handle.last_add_confirmed + 1, "index matches the closed ledger",
                  ledger_id=handle.ledger_id)
        await self._checkpoints.settle()   # no checkpoint lands after the final blob
        await self._store.put(index_path(self.name, handle.ledger_id), kept.index.to_blob())
        closed_ms = self._clock.wall_ms()
        records = [ml_open.closed_record(r, kept.index, closed_ms) if r.ledger_id == handle.ledger_id else r
                   for r in self._meta.ledgers]
        await self._cas(self._meta.with_ledgers(records))
        kept.state = LedgerState.CLOSED
        self._reader.handles[handle.ledger_id] = handle
        self._handle = None
        for listener in self._closed_listeners:
            try:
                listener(handle.ledger_id)
            except Exception:                # a listener's bug must not break the rollover
                log.exception("ledger closed listener failed on %s", self.name)

    @property
    def quorum(self) -> tuple[int, int, int]:
        """(E, Qw, Qa) the next ledger is created with."""
        return self._quorum

    def set_quorum(self, ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
        """The next ledger (the next rollover, or the first after a failed one) is created with
        these; the current ledger keeps its own (a topic's persistence policy changed)."""
        invariant(ensemble_size >= write_quorum >= ack_quorum >= 1, "E >= Qw >= Qa >= 1",
                  E=ensemble_size, Qw=write_quorum, Qa=ack_quorum)
        self._quorum = (ensemble_size, write_quorum, ack_quorum)

    async def _add_new_ledger(self) -> None:
        e, qw, qa = self._quorum
        handle = await self._client.create_ledger(e, qw, qa, properties={"managed_ledger": self.name})
        handle.set_handoff_listener(self._on_handoff)
        previous = self._meta.ledgers[-1] if self._meta.ledgers else None
        if previous is None:
            first_offset = self._meta.trimmed.messages
        else:
            invariant(previous.closed and previous.first_offset >= 0, "a new ledger follows a sealed one "
                      "with a first offset", previous=previous.ledger_id, first_offset=previous.first_offset)
            first_offset = previous.first_offset + previous.messages
        record = LedgerRecord(handle.ledger_id, False, handle.metadata.created_ms, first_offset=first_offset)
        try:
            await self._cas(self._meta.with_ledgers(list(self._meta.ledgers) + [record]))
        except ManagedLedgerFenced:
            self._deleter.schedule([handle.ledger_id])   # never used: do not leak it
            raise
        self._view.add(KeptLedger(handle.ledger_id, LedgerState.OPEN, record.created_ms, EntryIndex(),
                                  first_offset=first_offset))
        self._handle = handle
        self._assigned_entries = 0
        self._assigned_bytes = 0
        self._ledger_started_s = self._clock.monotonic_s()

    def _drain_waiting(self) -> None:
        self._requeued = 0
        while self._waiting and self.state is MLState.READY:
            data, messages, publish_ms, future = self._waiting.popleft()
            if future.done():
                continue
            try:
                self._submit(data, messages, publish_ms, future)
            except StrataError as exc:
                # Accepted earlier, failing now: nothing behind it may be stored after it.
                future.set_exception(exc)
                self._appends_failed(_behind(exc))
                return

    def _appends_failed(self, exc: StrataError) -> None:
        """A failure event: appends already accepted failed. Every append still waiting fails
        too, in FIFO order, and `append_failures` moves so callers can tell later appends apart
        from the failed ones (see the module docstring)."""
        self.append_failures += 1
        self._fail_waiting(exc)

    def _fail_waiting(self, exc: StrataError) -> None:
        self._requeued = 0
        while self._waiting:
            future = self._waiting.popleft()[3]
            if not future.done():
                future.set_exception(exc)
                future.exception()           # retrieved: its caller may be gone

    # --- reading ---------------------------------------------------------------------------------

    async def read(self, start: Position, max_entries: int, *, max_bytes: int | None = None) -> list[Entry]:
        """Entries at/after `start`, up to `last_confirmed`, crossing ledgers; [] if none
        (`ledger.ml_read.EntryReader`)."""
        if self.state is MLState.CLOSED:
            raise ManagedLedgerClosed("managed ledger is closed", name=self.name)
        return await self._reader.read(start, max_entries, max_bytes=max_bytes)

    # --- trimming --------------------------------------------------------------------------------

    async def trim(self, before: Position,
                   recheck: Callable[[], Position | None] | None = None) -> list[int]:
        """Delete whole ledgers whose every entry is before `before` (never the current one):
        metadata first, then the bookies in the background. Returns the trimmed ledger ids.

        `before` is computed by the caller, and waiting for the metadata lock (a rollover may
        hold it) can let a cursor move back meanwhile: a seek/reset, or a new subscription at
        earliest. `recheck`, when given, is called once the lock is held, with no await between it
        and choosing the ledgers: it recomputes the trim point from the cursors as they are now
        (None = trim nothing) and the earlier of the two is used, so a cursor that moved back
        before this point keeps its ledgers. A move after it is ordered after the trim (as if
        the seek came later: it lands on the first ledger still kept)."""
        self._check_live()
        async with self._meta_lock:
            if recheck is not None:
                again = recheck()
                if again is None:
                    return []
                before = min(Position(*before), Position(*again))
            doomed = trimmable(self._view.kept, Position(*before))
            if self._handle is not None:
                invariant(self._handle.ledger_id not in doomed, "never trim the current ledger",
                          ledger_id=self._handle.ledger_id)
            if not doomed:
                return []
            gone = set(doomed)
            copies = {r.ledger_id: r.cold for r in self._meta.ledgers if r.ledger_id in gone and r.cold is not None}
            await self._cas(self._meta.without_trimmed(gone))   # their totals join `trimmed`
            self._view.remove(gone)
            for ledger_id in doomed:
                self._cache.invalidate_ledger(self.name, ledger_id)
                self._reader.handles.pop(ledger_id, None)
        self._deleter.schedule(doomed, self._offloader.object_deleters(copies))   # bookies, then objects
        return doomed

    async def wait_trimmed(self, timeout_s: float | None = None) -> None:
        """Wait until every trimmed ledger is deleted from the bookies (tests, tools)."""
        await self._deleter.wait_idle(timeout_s)

    # --- offload (ledger.ml_offload) -------------------------------------------------------------

    def add_ledger_closed_listener(self, callback: LedgerClosedListener) -> None:
        self._closed_listeners.append(callback)

    def start_offload(self, before: Position) -> asyncio.Task:
        """Offload every closed ledger before `before.ledger_id` (Pulsar's offloadPrefix); the task
        gives firstUnoffloaded. Raises OffloadInProgress at once if one runs (HTTP 409)."""
        return self._offloader.start(before)

    def maybe_offload(self, threshold_bytes: int, threshold_seconds: int, now_ms: int) -> asyncio.Task | None:
        """Pulsar's auto offload by size / age thresholds (< 0 off, 0 ASAP); None if nothing is due
        or an offload runs."""
        return self._offloader.maybe_start(threshold_bytes, threshold_seconds, now_ms)

    async def delete_offloaded_from_bookies(self, lag_ms: int, now_ms: int) -> list[int]:
        """Delete the bookie copy of ledgers offloaded at least `lag_ms` ago (< 0: never); they
        stay listed and are read from the cold tier. Returns their ids."""
        return await self._offloader.delete_bookie_copies(lag_ms, now_ms)

    @property
    def offload_status(self) -> OffloadStatus:
        """A snapshot of the offload status (Pulsar's OffloadProcessStatus, stats, progress)."""
        return dataclasses.replace(self._offloader.status)

    @property
    def pending_adds(self) -> int:
        """Appends accepted and not yet confirmed: on the current ledger, or waiting for a rollover
        (Pulsar's pendingAddEntriesCount)."""
        return len(self._waiting) + (self._handle.pending_adds if self._handle is not None else 0)

    @property
    def trimmed_totals(self) -> LedgerTotals:
        """Entries, messages and bytes of every ledger trimmed since the managed ledger was
        created (persisted in its record): what was ever stored = this + the kept ledgers'."""
        return self._meta.trimmed

    @property
    def offloaded_size_bytes(self) -> int:
        """Bytes of the ledgers that have a cold copy (Pulsar's offloadedStorageSize)."""
        return sum(k.index.total_bytes for k in self._view.kept if k.cold is not None)

    def accepts_offload(self) -> bool:
        return self.state in (MLState.READY, MLState.ROLLING, MLState.NO_LEDGER, MLState.TERMINATED)

    async def wait_offload_idle(self, timeout_s: float | None = None) -> None:
        """Wait for the running offload and background object deletions (tests, tools)."""
        await self._offloader.wait_idle(timeout_s)

    # --- properties ------------------------------------------------------------------------------

    def get_property(self, key: str) -> str | None:
        """One property of the managed ledger's record (None: unset)."""
        return self._meta.properties.get(key)

    async def set_property(self, key: str, value: str) -> None:
        """Set one property in the record by compare-and-set (ManagedLedgerFenced if another
        owner took over: a stale owner can never overwrite it)."""
        self._check_live()
        async with self._meta_lock:
            if self._meta.properties.get(key) == value:
                return
            await self._cas(self._meta.with_properties({**self._meta.properties, key: value}))

    # --- terminating -----------------------------------------------------------------------------

    @property
    def terminated_position(self) -> Position | None:
        """The last position this managed ledger will ever hold once `terminate()` completed
        (persisted); None before."""
        return self._meta.terminated

    async def terminate(self) -> Position:
        """Take no more appends, ever; seal the current ledger once its appends completed, and
        record the last confirmed position (returned). Idempotent: the same position again."""
        if self._meta.terminated is not None:
            return self._meta.terminated
        self._check_live()
        if self.state is not MLState.TERMINATED:
            await self._wait_rollovers()
            self._check_live()
            self._set_state(MLState.TERMINATED)
            self._fail_waiting(TopicTerminated("the topic was terminated", name=self.name))
        async with self._meta_lock:
            if self._meta.terminated is not None:       # a concurrent terminate() finished first
                return self._meta.terminated
            try:
                if self._handle is not None:
                    await self._seal_current()          # waits for the appends in flight
                last = self._view.last_confirmed
                await self._cas(self._meta.with_terminated(last))
            except (ManagedLedgerFenced, LedgerFenced):
                self._become_fenced()
                raise ManagedLedgerFenced("another owner took over this managed ledger",
                                          name=self.name) from None
        log.info("%s: terminated at %s", self.name, last)
        return last

    async def _wait_rollovers(self) -> None:
        """Let a running rollover finish (its waiting appends go to the new ledger first)."""
        for _ in range(_TERMINATE_ROLL_WAITS_MAX):
            task = self._roll_task
            if task is None or task.done():
                return
            await asyncio.gather(task, return_exceptions=True)
        raise TimeoutExpired("rollovers kept starting; terminate again", name=self.name)

    # --- closing ---------------------------------------------------------------------------------

    async def close(self) -> None:
        """Seal the current ledger (its appends complete first) and stop. Idempotent."""
        if self.state is MLState.CLOSED:
            return
        if self._roll_task is not None and not self._roll_task.done():
            await asyncio.gather(self._roll_task, return_exceptions=True)
        fenced = self.state is MLState.FENCED
        self._set_state(MLState.CLOSED)
        self._appends_failed(ManagedLedgerClosed("managed ledger closed", name=self.name))
        await self._offloader.close()        # a running offload stops between its metadata updates
        if self._handle is not None and not fenced:
            try:
                async with self._meta_lock:
                    await self._seal_current()
            except StrataError as exc:       # fenced or store down: the next owner recovers it
                log.warning("closing %s left its ledger open: %s", self.name, exc)
        self._handle = None
        self._cache.invalidate_owner(self.name)
        await self._deleter.close()

    async def delete(self) -> None:
        """Remove the managed ledger: every ledger on the bookies, its indexes, its metadata."""
        if self.state is not MLState.CLOSED:
            await self.close()
        for ledger_id in [k.ledger_id for k in self._view.kept]:
            await self._deleter.delete_now(ledger_id)
        await self._offloader.delete_all([k.cold for k in self._view.kept if k.cold is not None])
        self._view.remove({k.ledger_id for k in self._view.kept})
        for child in await self._store.children(index_root(self.name)):
            try:
                await self._store.delete(f"{index_root(self.name)}/{child}")
            except NotFound:
                pass
        try:
            await self._store.delete(ml_path(self.name))
        except NotEmpty:                     # cursors live below it; take them too
            await self._store.delete_recursive(ml_path(self.name))
        except NotFound:
            pass

    # --- LedgerView ------------------------------------------------------------------------------

    def ledgers(self) -> list[LedgerInfo]:
        return self._view.ledgers()

    @property
    def last_confirmed(self) -> Position:
        return self._view.last_confirmed

    @property
    def first_position(self) -> Position:
        return self._view.first_position

    def kept_spans(self) -> list[tuple[int, int, int]]:
        """(ledger id, first kept entry id, one past the last) of every ledger holding kept
        entries, oldest first: what an examine or a browse walks."""
        lac, first = self.last_confirmed, self.first_position
        spans = []
        for info in self.ledgers():
            if info.ledger_id < first.ledger_id or info.ledger_id > lac.ledger_id:
                continue
            lo = first.entry_id if info.ledger_id == first.ledger_id else 0
            hi = lac.entry_id + 1 if info.ledger_id == lac.ledger_id else info.entries
            if hi > lo:
                spans.append((info.ledger_id, lo, hi))
        return spans

    def next_position(self, position: Position) -> Position:
        return self._view.next_position(Position(*position))

    def entry_meta(self, position: Position) -> EntryMeta:
        return self._view.entry_meta(Position(*position))

    def entries_between(self, start: Position, end: Position) -> int:
        return self._view.entries_between(Position(*start), Position(*end))

    def position_for_publish_time(self, publish_time_ms: int) -> Position:
        return self._view.position_for_publish_time(publish_time_ms)

    # --- Kafka offsets (ledger.view) --------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """Kafka offset of the first kept message; equals end_offset when nothing is kept."""
        return self._view.log_start_offset if self._view.kept else self._meta.trimmed.messages

    @property
    def end_offset(self) -> int:
        """One past the last confirmed message's Kafka offset (log end offset = high watermark)."""
        return self._view.end_offset if self._view.kept else self._meta.trimmed.messages

    def offset_of(self, position: Position) -> int:
        """Kafka offset of the first message of the kept entry at `position` (InvalidPosition
        if it is not kept)."""
        return self._view.offset_of(Position(*position))

    def entry_for_offset(self, offset: int) -> Position:
        """The kept entry holding `offset`; at end_offset the position the next entry gets;
        OffsetOutOfRange below log_start_offset or past end_offset."""
        return self._view.entry_for_offset(offset)


def _behind(exc: BaseException) -> StrataError:
    """The error for an append failed because an earlier one failed: same type (so retriable
    stays what it was), saying why. The writer fails adds with StrataErrors only; anything else
    (a bug) becomes a plain StrataError naming it."""
    if not isinstance(exc, StrataError):
        return StrataError(f"an earlier append failed: {exc!r}")
    try:
        return type(exc)(f"an earlier append failed: {exc.message}", **exc.details)
    except TypeError:                        # an error class with its own constructor
        return exc


