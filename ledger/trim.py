"""Trimming: which ledgers a `trim(before)` removes, and deleting them from the bookies.

`trimmable()` is pure: the ledgers, from the oldest, whose every entry lies before `before`,
stopping at the first that does not qualify and never including the last (current) ledger.

Deletion order: the managed ledger first drops the ledgers from its metadata (compare-and-set),
so no reader is ever handed a position in them; then `LedgerDeleter` deletes each ledger's index
blob, its entries on every bookie and its ledger metadata (`LedgerClient.delete_ledger`), in the
background, retrying with capped exponential backoff until done. Any exception is retried, not
only a StrataError: an unexpected one (a bug, an untranslated foreign error) is logged with its
traceback and counted (`unexpected_errors`), and must not quietly end the retries and leak the
ledger. A ledger that is deleted twice is fine (every step is idempotent). The managed ledger's
record lists trimmed ledgers under `deleting` until a later compare-and-set sees them in
`deleted` and drops them from both. The same compare-and-set that drops a ledger adds its
entries, messages and bytes to the record's `trimmed` totals (`ManagedLedgerMetadata.without_trimmed`),
so what was ever stored stays known after the ledger is gone. A trimmed ledger that was offloaded also has its cold
object deleted (`also`, after the bookie copy, retried the same way) before it counts as
deleted, so a crash before that leaves it in `deleting` and the next owner's orphan cleaning
removes the object.

`schedule_bookie_copies` deletes only the bookie copy of ledgers that stay listed (offloaded,
deletion lag passed: their record says `bookie_deleted`, their index blob stays), one after the
other in one background task, retried the same way; they never enter `deleted`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from common import retry
from common.errors import NotFound, StrataError
from ledger.position import Position
from ledger.view import KeptLedger
from metadata.api import AsyncStore

if TYPE_CHECKING:
    from ledger.client import LedgerClient

log = logging.getLogger(__name__)

# Any exception is retried (0.1 s doubling to 5 s) until the ledger is deleted: giving up would
# leak it. Logged as warnings (rate-limited), with the traceback when it is no StrataError.
_DELETE_RETRY = retry.Retry("ledger.delete_trimmed", retry_on=Exception, wait=retry.exponential(0.1, 5.0),
                            unbounded_because="LedgerDeleter.close() cancels it", log_level=logging.WARNING)


def trimmable(kept: list[KeptLedger], before: Position) -> list[int]:
    out = []
    for ledger in kept[:-1]:
        if Position(ledger.ledger_id, ledger.entries - 1) >= before:
            break
        out.append(ledger.ledger_id)
    return out


class LedgerDeleter:
    """Background deletion of trimmed ledgers, retried until done (or until `close()`)."""

    def __init__(self, client: LedgerClient, store: AsyncStore, index_path_of: Callable[[int], str]) -> None:
        self._client = client
        self._store = store
        self._index_path_of = index_path_of      # ledger id -> its index blob path
        self._tasks: set[asyncio.Task] = set()
        self.deleted: set[int] = set()           # fully deleted, not yet cleared from `deleting`
        self.retries = 0                         # failed attempts that were retried, any cause
        self.unexpected_errors = 0               # of those, failures that were no StrataError

    def schedule(self, ledger_ids: Iterable[int],
                 also: Mapping[int, Callable[[], Awaitable[None]]] | None = None) -> None:
        """Delete each ledger in the background; `also[id]`, when given, runs after (its cold object)."""
        for ledger_id in ledger_ids:
            task = asyncio.ensure_future(self._delete(ledger_id, (also or {}).get(ledger_id)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def schedule_bookie_copies(self, ledger_ids: Iterable[int]) -> None:
        ids = list(ledger_ids)
        if ids:
            task = asyncio.ensure_future(self._delete_bookie_copies(ids))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _delete_bookie_copies(self, ledger_ids: list[int]) -> None:
        for ledger_id in ledger_ids:
            await _DELETE_RETRY.call_async(functools.partial(self._client.delete_ledger, ledger_id),
                                           on_retry=self._count_retry, about=f"bookie copy of ledger {ledger_id}")

    async def _delete(self, ledger_id: int, also: Callable[[], Awaitable[None]] | None) -> None:
        await _DELETE_RETRY.call_async(lambda: self.delete_now(ledger_id), on_retry=self._count_retry,
                                       about=f"ledger {ledger_id}")
        if also is not None:
            await _DELETE_RETRY.call_async(also, on_retry=self._count_retry, about=f"cold object of ledger {ledger_id}")
        self.deleted.add(ledger_id)

    def _count_retry(self, exc: BaseException, attempt: int, delay_s: float) -> None:
        self.retries += 1
        if not isinstance(exc, StrataError):
            self.unexpected_errors += 1

    async def delete_now(self, ledger_id: int) -> None:
        try:
            await self._store.delete(self._index_path_of(ledger_id))
        except NotFound:
            pass
        await self._client.delete_ledger(ledger_id)

    async def wait_idle(self, timeout_s: float | None = None) -> None:
        """Wait for every scheduled deletion to finish (tests, and `ManagedLedger.delete`)."""
        if self._tasks:
            await asyncio.wait_for(asyncio.gather(*list(self._tasks)), timeout_s)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
