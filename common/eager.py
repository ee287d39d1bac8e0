"""Start a coroutine at once, in the caller's stack, and hand it to a Task only if it must wait.

Python 3.12 has this as eager task start; 3.11 does not. A dispatch pass over entries that are
in the broker's cache never waits, yet `create_task` costs a Task, a loop turn and an `epoll`
call before it even starts: once per entry on the low-rate path. `start_eager(loop, coro)`
runs `coro` until it first suspends; if it finished, no Task was made (None is returned). If it
suspended on a future, a Task resumes it when that future is done, exactly as a Task would
have: the coroutine sees the future's result or exception at its own `await`.

What must hold:
- The coroutine runs exactly as under a Task, step for step: it is resumed with `send(None)`
  once the future it waits on is done (Future.__await__ then returns the result or raises).
- Cancelling the returned Task cancels the future the coroutine waits on and throws
  CancelledError into the coroutine at that await, as Task.cancel does.
- Only for callers that may run the coroutine's first step in their own stack (the coroutine's
  first step must not assume its caller has finished).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def start_eager(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> asyncio.Task | None:
    """Run `coro` until it first waits; None if it finished, else the Task that resumes it."""
    try:
        waiting_on = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_resume(coro, waiting_on))


async def _resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Any:
    while True:
        try:
            if waiting_on is None:          # a bare yield (asyncio.sleep(0)): give the loop a turn
                await asyncio.sleep(0)
            else:
                waiting_on._asyncio_future_blocking = False
                await _until_done(waiting_on)
        except asyncio.CancelledError as cancelled:
            if waiting_on is not None:
                waiting_on.cancel()
            try:
                waiting_on = coro.throw(cancelled)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            waiting_on = coro.send(None)
        except StopIteration as stop:
            return stop.value


async def _until_done(future: asyncio.Future) -> None:
    """Wait until `future` is done, without taking its result (the coroutine takes it)."""
    if future.done():
        return
    waiter = future.get_loop().create_future()

    def wake(_: asyncio.Future) -> None:
        if not waiter.done():
            waiter.set_result(None)

    future.add_done_callback(wake)
    try:
        await waiter
    finally:
        future.remove_done_callback(wake)
