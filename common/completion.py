"""A one-shot outcome handed to its callback by a plain call: the publish path's future.

An `asyncio.Future` runs its done-callbacks on a later turn of the loop: each link of a chain of
futures (a bookie's answer → the ledger's add → the managed ledger's append → the producer's
receipt) costs a loop iteration, a `Handle` and an `epoll` call, per entry. On the low-rate path,
where every message is its own entry, those hops were a large share of the broker's work.
`Completion` has the part of a future's interface the add path uses (`done`, `set_result`,
`set_exception`, `result`, `exception`, `cancelled`), and calls its callback at once when a
result is set, in the caller's stack.

What must hold:
- The callback runs exactly once. A result runs it synchronously; an exception (a failed bookie,
  a link torn down) runs it on the next loop turn, as a future would: failure handling often
  starts more work on the object that is failing, which must not run inside its own teardown.
- A callback that raises is logged and does not reach the caller that set the result (a bookie
  link must not fail because one listener of one add has a bug), as the loop does for futures.
- Setting a result twice is a bug (`asyncio.InvalidStateError`), as with a future.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_PENDING = object()


class Completion:
    """Set once with a result or an exception; `on_done(self)` is called when it is."""

    __slots__ = ("_exception", "_loop", "_on_done", "_result", "_watchers")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_done: Callable[[Completion], Any]) -> None:
        self._loop = loop
        self._on_done = on_done
        self._result: Any = _PENDING
        self._exception: BaseException | None = None
        self._watchers: list[Callable[[Completion], Any]] | None = None

    def done(self) -> bool:
        return self._result is not _PENDING or self._exception is not None

    def cancelled(self) -> bool:
        return False

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def set_result(self, result: Any) -> None:
        if self.done():
            raise asyncio.InvalidStateError("completion already set")
        self._result = result
        self._run_callback()

    def set_exception(self, exception: BaseException) -> None:
        if self.done():
            raise asyncio.InvalidStateError("completion already set")
        self._exception = exception
        self._loop.call_soon(self._run_callback)

    def result(self) -> Any:
        if self._exception is not None:
            raise self._exception
        if self._result is _PENDING:
            raise asyncio.InvalidStateError("completion not set yet")
        return self._result

    def exception(self) -> BaseException | None:
        if not self.done():
            raise asyncio.InvalidStateError("completion not set yet")
        return self._exception

    def add_done_callback(self, fn: Callable[[Completion], Any]) -> None:
        """Another callback, run after `on_done` (on the next turn if already done)."""
        if self.done():
            self._loop.call_soon(fn, self)
        elif self._watchers is None:
            self._watchers = [fn]
        else:
            self._watchers.append(fn)

    def _run_callback(self) -> None:
        for fn in (self._on_done, *(self._watchers or ())):
            try:
                fn(self)
            except Exception:
                log.exception("a completion callback failed (%r)", fn)


def as_future(outcome: asyncio.Future | Completion) -> asyncio.Future:
    """A loop future that settles with `outcome`, for the rare code that awaits an add (close)."""
    if isinstance(outcome, asyncio.Future):
        return outcome
    future = outcome.get_loop().create_future()

    def settle(done: Completion) -> None:
        if future.done():
            return
        error = done.exception()
        if error is None:
            future.set_result(done.result())
        else:
            future.set_exception(error)
            future.exception()   # retrieved: a waiter may only want it settled

    outcome.add_done_callback(settle)
    return future
