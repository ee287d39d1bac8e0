"""Persistence and lifecycle of a managed cursor: a part the cursor owns, not a base class.

`ManagedCursor` holds one `CursorPersistence` (`cursor.persistence`) and hands it a callable that
returns its state as a `CursorSnapshot`. A durable cursor persists through a `CursorStore`: every
change calls `changed()`, which marks the state dirty and enrols the cursor in its event loop's
`cursor.persist_sweep.PersistSweep`: one timer for all cursors, sweeping every
`cursor_persist_interval_ms`, so a change is persisted within that interval and the background
writes of one cursor are at least that far apart (coalesced: many acks, one write; many cursors,
one sweep and one group transaction); `flush()` writes now and `close()` flushes a last time
(`close(flush=False)` drops unpersisted changes: the cursor is being deleted).
Each write measures the encoded state (`cursor.state_limit`): over `cursor_state_bytes_max` it is
`CursorStateTooLarge`, never written, never hidden. Each write carries the cursor's writer token;
when the store finds another owner's token (`CursorFenced`) the cursor turns FENCED for good.

What must hold: the state only moves along `_TRANSITIONS` (one setter, `_set_state`); a FENCED or
CLOSED cursor never writes and refuses every change (`check_active`); `dirty` is True whenever a
change has not been persisted. Only this class reads or writes its fields; the store and the
cursor use the methods and read-only properties below.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from common.config import SETTINGS_BY_NAME
from common.errors import BadVersion, CursorClosed, CursorFenced, CursorStateTooLarge, IllegalTransition, StrataError
from cursor import metrics
from cursor.codec import encode
from cursor.persist_sweep import PersistSweep, sweep_for
from cursor.state_limit import StateLimit

if TYPE_CHECKING:
    from common.clock import Clock
    from cursor.codec import CursorSnapshot
    from cursor.cursor_store import CursorStore

log = logging.getLogger("cursor.managed_cursor")


class CursorState(enum.Enum):
    ACTIVE = "active"  # takes acks and moves; a durable one persists its changes
    FENCED = "fenced"  # another owner took the cursor over: never persists again, refuses changes
    CLOSED = "closed"  # flushed for the last time (or dropped); refuses every change


_TRANSITIONS = {
    CursorState.ACTIVE: frozenset({CursorState.FENCED, CursorState.CLOSED}),
    CursorState.FENCED: frozenset({CursorState.CLOSED}),
    CursorState.CLOSED: frozenset(),
}


class CursorPersistence:
    """The lifecycle state, the dirty flag, the scheduled write and the state limit of one
    cursor. `snapshot` returns the cursor's state to persist."""

    def __init__(self, name: str, snapshot: Callable[[], CursorSnapshot], *, durable: bool,
                 clock: Clock, store: CursorStore | None, persist_interval_ms: int | None,
                 state_bytes_max: int | None, writer_token: str | None, state_bytes: int) -> None:
        self.name = name
        self.durable = durable                  # False: a reader's cursor, never persisted
        self.clock = clock
        self.store = store                      # where writes go; None for non-durable cursors
        self.writer_token = writer_token        # written into every persisted value; None: none
        self.state = CursorState.ACTIVE         # change only through _set_state
        self._snapshot = snapshot
        self._persist_interval_s = (persist_interval_ms if persist_interval_ms is not None else
                                    SETTINGS_BY_NAME["cursor_persist_interval_ms"].default) / 1000
        self.state_limit = StateLimit(state_bytes_max if state_bytes_max is not None else
                                      SETTINGS_BY_NAME["cursor_state_bytes_max"].default, name)
        self.state_limit.measured_bytes = state_bytes  # size of the value it was loaded from
        self._dirty = False                     # changed since the last successful persist
        self._sweep: PersistSweep | None = None  # the sweep it waits in; None: no write scheduled
        self._last_persist_s = -math.inf        # loop time of the last persist attempt
        self._flush_task: asyncio.Task | None = None
        self._flush_lock = asyncio.Lock()
        self.persist_error: StrataError | None = None  # last failed persist, None after success
        self.persisted_bytes = state_bytes      # size of the last persisted (or loaded) value

    @property
    def dirty(self) -> bool:
        """A change has not been persisted yet."""
        return self._dirty

    @property
    def write_scheduled(self) -> bool:
        """A coalesced write is due (the cursor waits for the next sweep)."""
        return self._sweep is not None

    @property
    def state_error(self) -> CursorStateTooLarge | None:
        """Why acks that add holes are refused now (state over the limit); None when it fits."""
        return self.state_limit.error

    def encode_state(self) -> bytes:
        """The persisted value; measures the state (`state_limit`) and raises
        CursorStateTooLarge (counted) when it is over `state_limit.bytes_max`."""
        value = encode(self._snapshot())
        error = self.state_limit.measure(len(value))
        if error is not None:
            self.persist_error = error
            raise error
        return value

    async def flush(self, *, force: bool = False) -> None:
        """Persist now if anything changed since the last persist, or always with `force` (a
        new cursor is written at once). Durable cursors only; a fenced one never writes:
        CursorFenced."""
        if not self.durable or self.store is None:
            return
        async with self._flush_lock:
            if self.state is CursorState.FENCED:
                raise self.persist_error or CursorFenced("cursor is fenced", cursor=self.name)
            if not (self._dirty or force):
                return
            self._last_persist_s = asyncio.get_running_loop().time()
            value = self.encode_state()
            self._dirty = False
            try:
                await self.store.save(self.name, value, self.writer_token)
            except CursorFenced as exc:
                self._dirty = True
                self._become_fenced(exc)
                raise
            except BaseException:
                self._dirty = True
                raise
            metrics.CURSOR_PERSISTS_TOTAL += 1
            self.persisted_bytes = len(value)
            self.persist_error = None

    async def close(self, *, flush: bool = True) -> None:
        """Flush a last time (unless fenced, or `flush` is False: unpersisted changes are
        dropped because the cursor is being deleted) and refuse further changes."""
        if self.state is CursorState.CLOSED:
            return
        self._cancel_scheduled()
        if not flush:
            self._dirty = False
        try:
            if self.state is CursorState.ACTIVE:
                await self.flush()
        finally:
            self._set_state(CursorState.CLOSED)

    async def persist_scheduled_now(self) -> None:
        """Run the scheduled background write now, as its sweep would (errors are recorded in
        `persist_error` and counted, not raised)."""
        self._cancel_scheduled()
        await self._auto_flush()

    def changed(self) -> None:
        """The cursor's state changed: mark it dirty and wait for the next sweep."""
        self._dirty = True
        if not self.durable or self._sweep is not None or self.state is not CursorState.ACTIVE:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop: the owner persists with flush()
        self._sweep = sweep_for(loop, self._persist_interval_s)
        self._sweep.add(self, self._last_persist_s + self._persist_interval_s)

    @property
    def persist_interval_ms(self) -> int:
        return round(self._persist_interval_s * 1000)

    def set_persist_interval_ms(self, interval_ms: int) -> None:
        """Background writes at least this far apart from now on (a topic's persistence policy
        limits its mark-delete rate); a write already waiting moves to the new interval's sweep."""
        interval_s = interval_ms / 1000
        if interval_s == self._persist_interval_s:
            return
        self._persist_interval_s = interval_s
        if self._sweep is not None:
            self._cancel_scheduled()
            self.changed()

    def check_active(self) -> None:
        """Raise unless the cursor takes changes (CursorFenced, CursorClosed)."""
        if self.state is CursorState.ACTIVE:
            return
        if self.state is CursorState.FENCED:
            raise CursorFenced("cursor is fenced: another owner has taken it over", cursor=self.name)
        raise CursorClosed("cursor is closed", cursor=self.name)

    # ---- internals -------------------------------------------------------------------------------

    def _cancel_scheduled(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel(self)
            self._sweep = None

    def _become_fenced(self, error: CursorFenced) -> None:
        """Another owner has the cursor: stop persisting for good; changes are refused."""
        if self.state is not CursorState.ACTIVE:
            return
        self._set_state(CursorState.FENCED)
        self.persist_error = error
        metrics.CURSOR_FENCED_TOTAL += 1
        self._cancel_scheduled()
        log.error("cursor %s: fenced, another owner has taken it over; its unpersisted changes "
                  "here are dropped and it takes no more: %s", self.name, error)

    def _set_state(self, new: CursorState) -> None:
        if new is self.state:
            return
        if new not in _TRANSITIONS[self.state]:
            raise IllegalTransition("cursor state change not allowed", cursor=self.name,
                                    old=self.state.value, new=new.value)
        self.state = new

    def swept(self) -> None:
        """The sweep came (it has let go of this cursor): start the background write."""
        self._sweep = None
        if self.state is CursorState.ACTIVE and self._dirty:
            self._flush_task = asyncio.get_running_loop().create_task(self._auto_flush())

    async def _auto_flush(self) -> None:
        try:
            await self.flush()
        except CursorFenced as exc:  # logged and counted by _become_fenced
            self.persist_error = exc
            metrics.CURSOR_PERSIST_FAILURES_TOTAL += 1
        except BadVersion as exc:  # lost compare-and-set three times over our own value
            self.persist_error = exc
            metrics.CURSOR_PERSIST_FAILURES_TOTAL += 1
            log.error("cursor %s: persist kept losing compare-and-set over our own value; still "
                      "dirty, tried again on the next change: %s", self.name, exc)
        except StrataError as exc:
            self.persist_error = exc
            metrics.CURSOR_PERSIST_FAILURES_TOTAL += 1
            log.warning("cursor %s: persist failed, retrying on the next change: %s", self.name, exc)
            if exc.retriable:
                self.changed()
