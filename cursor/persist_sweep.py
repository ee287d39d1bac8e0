"""`PersistSweep`: one timer for the background persists of every cursor of an event loop.

A durable cursor that changes is not given a timer of its own: it joins the sweep of its event
loop and persist interval (`sweep_for`) with its due time (its last persist plus the interval, or
now), and a sweep starts the persist of every cursor then due. With a thousand quiet topics, each
acked about once a second, that is a few timers a second instead of a thousand, and the cursor
writer (`cursor.cursor_writer`) receives the saves of one sweep in the same loop turn, so they
ride one metadata transaction instead of hundreds of small ones (each a commit, and a wake-up of
the store's watch poller).

Timing: due times are rounded down to a grid of an eighth of the interval (`grid_s`), so cursors
persisted together stay together, and one sweep per grid slot runs at most. So:
- a change waits at most the interval before its persist starts (the durability bound of
  `cursor_persist_interval_ms`): its due time is at most the interval after the change;
- one cursor's background persists are at least the interval minus one grid step apart, and
  an explicit `flush()` or `close()` (which writes at once) pushes the next one back alike.

What must hold: a cursor waits in at most one slot (`slot_of`); a cursor that leaves (`cancel`) is
never swept; the timer is set exactly when some cursor waits, for the earliest slot.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Protocol

GRID_STEPS = 8   # grid steps per interval: how early a due time may be rounded


class Sweepable(Protocol):
    def swept(self) -> None:
        """Its turn came: start its persist (it left the sweep already)."""


class PersistSweep:
    """The cursors of one event loop waiting for their background persist, and its timer.

    slots: grid slot (due time // grid_s) -> the cursors due in it, in the order they joined.
    slot_of: cursor -> its slot.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float) -> None:
        self.loop = loop
        self.interval_s = interval_s
        self.grid_s = interval_s / GRID_STEPS   # 0: every change is due at once (next loop turn)
        self.slots: dict[int, dict[Sweepable, None]] = {}
        self.slot_of: dict[Sweepable, int] = {}
        self._handle: asyncio.TimerHandle | None = None   # the next sweep; None while none waits
        self._handle_slot: int | None = None               # the slot it is set for
        self.sweeps = 0                                   # sweeps run (tests and metrics)

    @property
    def due(self) -> dict[Sweepable, int]:
        return self.slot_of

    def add(self, cursor: Sweepable, due_s: float | None = None) -> None:
        """Persist `cursor` at its due time (loop time; None: now); no-op if it waits already."""
        if cursor in self.slot_of:
            return
        slot = int(max(due_s or 0.0, self.loop.time()) // self.grid_s) if self.grid_s > 0 else 0
        self.slot_of[cursor] = slot
        self.slots.setdefault(slot, {})[cursor] = None
        if self._handle_slot is None or slot < self._handle_slot:
            self._arm(slot)

    def cancel(self, cursor: Sweepable) -> None:
        """`cursor` no longer waits (it closed, or persists now by other means)."""
        slot = self.slot_of.pop(cursor, None)
        if slot is None:
            return
        waiting = self.slots[slot]
        del waiting[cursor]
        if not waiting:
            del self.slots[slot]
            if not self.slots and self._handle is not None:
                self._handle.cancel()
                self._handle = self._handle_slot = None

    def waiting(self, cursor: Sweepable) -> bool:
        return cursor in self.slot_of

    def _arm(self, slot: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle_slot = slot
        self._handle = self.loop.call_at(slot * self.grid_s, self._sweep)

    def _sweep(self) -> None:
        self._handle = self._handle_slot = None
        self.sweeps += 1
        now_slot = int(self.loop.time() // self.grid_s) if self.grid_s > 0 else 0
        due = [slot for slot in self.slots if slot <= now_slot]
        for slot in sorted(due):
            for cursor in self.slots.pop(slot):
                del self.slot_of[cursor]
                cursor.swept()   # may join again (a retriable failure): a later sweep takes it
        if self.slots and self._handle is None:
            self._arm(min(self.slots))


# event loop -> interval (s) -> its sweep; a loop's sweeps go with the loop.
_sweeps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, PersistSweep]] = \
    weakref.WeakKeyDictionary()


def sweep_for(loop: asyncio.AbstractEventLoop, interval_s: float) -> PersistSweep:
    """The sweep shared by the cursors of `loop` persisting every `interval_s`."""
    by_interval = _sweeps.get(loop)
    if by_interval is None:
        by_interval = _sweeps[loop] = {}
    sweep = by_interval.get(interval_s)
    if sweep is None:
        sweep = by_interval[interval_s] = PersistSweep(loop, interval_s)
    return sweep
