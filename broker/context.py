"""The narrow things every layer of the broker may be handed, instead of the whole service.

A topic, a dispatcher, the retention task or the ownership view needs the broker's settings,
its clock, the metadata store, the ledger client, the cursor writer, the cold tier, a way to run
background work and a way to say "this topic has traffic". `BrokerContext` carries exactly those,
built once by the composition root (`broker.server`) and passed down. Nothing in it knows a topic,
a connection or the service: every field's type comes from a package below `broker/`.

What must hold: the context is frozen (a field never changes after the broker starts), and this
module imports nothing from `broker`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from common.clock import Clock
from common.config import Config
from common.errors import StrataError
from cursor.cursor_writer import CursorWriter
from ledger.client import LedgerClient
from ledger.cold import ColdStorage
from metadata.api import AsyncStore

log = logging.getLogger(__name__)


class ActivityTracker(Protocol):
    """Who keeps rates of the topics with recent traffic (`broker.topics.rates.StatsSampler`)."""

    def touch(self, topic: Any) -> None:
        """`topic`'s counters are about to move."""
        ...

    def discard(self, topic: Any) -> None:
        """`topic` is closing: drop what is kept of it."""
        ...


Spawn = Callable[[Coroutine], asyncio.Task]


@dataclass(frozen=True)
class BrokerContext:
    config: Config
    clock: Clock
    astore: AsyncStore                 # the metadata store, async
    ledger_client: LedgerClient
    cursor_writer: CursorWriter        # one group commit for every cursor's persists
    cold: ColdStorage | None           # the cold tier managed ledgers offload to; None: none
    spawn: Spawn                       # run a coroutine in the background (BackgroundTasks.spawn)
    activity: ActivityTracker          # topics with recent traffic (rates)


class BackgroundTasks:
    """The broker's background tasks: each is kept referenced until done, and its failure logged.

    What must hold: `cancel_all` leaves no task of this set running past the broker's stop."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine) -> asyncio.Task:
        """Run `coro` in the background, keeping a reference and logging its failure."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if isinstance(exc, StrataError):
                log.warning("background task failed: %s", exc)
            else:
                log.error("background task crashed", exc_info=exc)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
