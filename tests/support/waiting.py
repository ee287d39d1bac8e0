"""Bounded waits on an event, for tests: poll what can be observed until it holds, or fail.

    wait_until(lambda: len(received) == 3, 10, what="three deliveries")              # sync
    await until(lambda: ml.state is MLState.ROLLING, 10, what="the rollover")       # async
    await until(read_only, 10, what="the bookie turned read-only")   # an async predicate too

What must hold: every wait has a bound (`timeout_s`); it returns the predicate's first truthy
value as soon as it is seen and raises `AssertionError` naming `what` (and the last value seen)
once the bound has passed. The predicate is evaluated at least once, even with a zero bound, and
once more after the deadline, so a condition that became true during the last poll interval is
not reported as a timeout. Polling, not a fixed sleep: a test waits as long as the event takes on
a loaded machine, and no longer.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable

POLL_INTERVAL_S = 0.01        # between two checks of a sync wait
ASYNC_POLL_INTERVAL_S = 0.005  # between two checks of an async wait (other tasks run meanwhile)


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str = "condition",
               interval_s: float = POLL_INTERVAL_S) -> object:
    """Call `predicate()` until it returns something truthy (returned), at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            value = predicate()
            if value:
                return value
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {value!r})")
        time.sleep(interval_s)


async def until(predicate: Callable[[], object], timeout_s: float, what: str = "condition",
                interval_s: float = ASYNC_POLL_INTERVAL_S) -> object:
    """Async `wait_until`: `predicate()` may return an awaitable (an async check), which is awaited."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s

    async def check() -> object:
        value = predicate()
        return await value if inspect.isawaitable(value) else value

    while True:
        value = await check()
        if value:
            return value
        if loop.time() >= deadline:
            value = await check()
            if value:
                return value
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {value!r})")
        await asyncio.sleep(interval_s)
