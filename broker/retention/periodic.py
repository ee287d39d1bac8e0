"""A pass over the loaded topics, run every `interval_s` from `start()` until `stop()`.

The retention/TTL task, the backlog-quota check and the lifecycle task are each one of these:
they differ only in what one topic's check does and in whether the first pass runs at once.

`each_topic(check, what)` walks the topics loaded when the pass begins, skipping the ones closing;
one topic's failure is logged and counted in `errors` and does not stop the others; the loop
yields between topics so a broker with many topics keeps serving.

What must hold: one loop at a time (`start` twice starts one); `stop` returns once the loop has
ended and nothing runs after it; a pass never raises but for cancellation.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.topics.loaded import LoadedTopics
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)


class PeriodicPass(abc.ABC):
    """Subclasses define `check_all()`, one pass; `first_at_once` runs the first pass when started,
    not after one interval."""

    first_at_once = False

    def __init__(self, ctx: BrokerContext, loaded: LoadedTopics, interval_s: float) -> None:
        self.ctx = ctx
        self.loaded = loaded             # the topics this broker serves
        self.interval_s = interval_s
        self.passes = 0                  # passes completed since start
        self.errors = 0                  # topic checks that failed (logged) since start
        self._task: asyncio.Task | None = None   # None until started, and again once stopped
        self._stopped = False            # the broker is stopping

    @property
    def stopped(self) -> bool:
        return self._stopped

    def start(self) -> None:
        if self._task is None and not self._stopped:
            self._task = self.ctx.spawn(self._run())

    async def stop(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        if not self.first_at_once:
            await asyncio.sleep(self.interval_s)
        while not self._stopped:
            await self.check_all()
            await asyncio.sleep(self.interval_s)

    @abc.abstractmethod
    async def check_all(self) -> None:
        """One pass over the loaded topics; never raises but for cancellation."""

    async def each_topic(self, check: Callable[[PersistentTopic], Awaitable[None]], what: str) -> None:
        """`check` each loaded topic (see the module docstring), then count the pass."""
        for topic in list(self.loaded.topics.values()):
            if topic.closing or self._stopped:
                continue
            try:
                await check(topic)
            except asyncio.CancelledError:
                raise
            except Exception as exc:         # one topic's failure must not stop the others
                self.failed(topic, what, exc)
            await asyncio.sleep(0)
        self.passes += 1

    def failed(self, topic: PersistentTopic, what: str, exc: Exception) -> None:
        """One topic's check failed: logged and counted."""
        self.errors += 1
        log.warning("%s of %s failed: %r", what, topic.name, exc)
