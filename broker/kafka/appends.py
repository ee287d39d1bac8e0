"""Fetches waiting for new entries: Kafka's long poll (`max_wait_ms`/`min_bytes`).

A Fetch that found fewer than `min_bytes` waits until an entry is appended to one of its
partitions or its wait ends. The managed ledger calls its append listeners once an entry is
durable; `AppendWaiters` registers one listener per managed ledger (the first time a fetch waits
on it) and wakes every fetch waiting on that ledger. A woken fetch reads again.

What must hold: at most `WAITERS_MAX` fetches wait at once (past it a fetch answers at once with
what it has: clients poll again); a waiter is removed when its wait ends, woken or not; a
listener never raises into the write path.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable

from ledger.position import Position

WAITERS_MAX = 10_000


class AppendWaiters:
    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}     # managed ledger name -> waiting fetches
        self._watched: weakref.WeakSet = weakref.WeakSet()    # managed ledgers with our listener
        self._count = 0

    def _watch(self, ml) -> None:
        if ml in self._watched:
            return
        name = ml.name

        def appended(position: Position) -> None:
            for event in self._waiting.get(name, ()):
                event.set()

        ml.add_append_listener(appended)
        self._watched.add(ml)

    async def wait(self, mls: Iterable, timeout_s: float, ready: Callable[[], bool]) -> bool:
        """Wait until one of `mls` gets an entry or `timeout_s` passes; True if woken. `ready`
        is asked once the waiter is registered: an entry appended between the caller's read and
        now would otherwise be missed until the wait ends."""
        if timeout_s <= 0 or self._count >= WAITERS_MAX:
            return False
        event = asyncio.Event()
        names = []
        for ml in mls:
            self._watch(ml)
            names.append(ml.name)
            self._waiting.setdefault(ml.name, set()).add(event)
        self._count += 1
        try:
            if ready():
                return True
            await asyncio.wait_for(event.wait(), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._count -= 1
            for name in names:
                waiting = self._waiting.get(name)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._waiting[name]
