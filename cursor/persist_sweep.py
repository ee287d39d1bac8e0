"""`PersistSweep`: one timer for the background persists of every cursor of an event loop.

A durable cursor that changes is not given a timer of its own: it joins the sweep of its event
loop and persist interval (`sweep_for`), and each sweep starts the persist of every cursor that
joined since the previous one. With a thousand quiet topics, each acked about once a second, that
is one timer a second instead of a thousand, and the cursor writer (`cursor.cursor_writer`)
receives the thousand saves in the same loop turn, so they ride one metadata transaction instead
of hundreds of small ones (each a commit, and a wake-up of the store's watch poller).

Timing: a sweep runs `interval_s` after the previous one, or at once (next loop turn) when the
previous one was longer ago than that. So:
- a change waits at most `interval_s` before its persist starts (the durability bound of
  `cursor_persist_interval_ms`);
- sweeps are at least `interval_s` apart, so the background persists of one cursor are too
  (an explicit `flush()` or `close()` writes at once, outside the sweep).

What must hold: a cursor is in `due` at most once (a dict used as an ordered set); a cursor that
leaves (`cancel`) is never swept; the timer is set exactly when `due` is not empty.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from typing import Protocol


class Sweepable(Protocol):
    def swept(self) -> None:
        """Its turn came: start its persist (it left `due` already)."""


class PersistSweep:
    """The cursors of one event loop waiting for their background persist, and its timer.

    due: cursors to persist at the next sweep, in the order they joined.
    last_s: loop time of the previous sweep (-inf before the first).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float) -> None:
        self.loop = loop
        self.interval_s = interval_s
        self.due: dict[Sweepable, None] = {}
        self.last_s = -math.inf
        self._handle: asyncio.TimerHandle | None = None   # the next sweep; None while `due` is empty
        self.sweeps = 0                                   # sweeps run (tests and metrics)

    def add(self, cursor: Sweepable) -> None:
        """Persist `cursor` at the next sweep (no-op if it waits already)."""
        self.due[cursor] = None
        if self._handle is None:
            at_s = max(self.loop.time(), self.last_s + self.interval_s)
            self._handle = self.loop.call_at(at_s, self._sweep)

    def cancel(self, cursor: Sweepable) -> None:
        """`cursor` no longer waits (it closed, or persists now by other means)."""
        if cursor not in self.due:
            return
        del self.due[cursor]
        if not self.due and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def waiting(self, cursor: Sweepable) -> bool:
        return cursor in self.due

    def _sweep(self) -> None:
        self._handle = None
        self.last_s = self.loop.time()
        self.sweeps += 1
        due, self.due = self.due, {}
        for cursor in due:
            cursor.swept()   # may join again (a retriable failure): the next sweep takes it


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
