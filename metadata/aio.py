"""`AsyncMetadataStore`: the metadata store for asyncio code.

Every method of the synchronous store runs in a bounded thread pool (`metadata_async_threads_max`
threads), so the event loop never waits on SQL. At most `metadata_async_calls_in_flight_max` calls
are queued or running at once; further callers wait (asyncio backpressure) rather than growing an unbounded queue.
`watch()` callbacks are delivered on the event loop that called `watch()` (via
`call_soon_threadsafe`), in the order the store's poller saw them; session listeners
(`add_session_listener`) likewise on the loop that registered them, in the order the store
announced the events. The lease calls (`lease_valid`, `add_session_listener`, `new_session`) are
plain methods passed straight to the store: `lease_valid()` reads only the clock, so the ledger
can ask it before every add.

It implements `metadata.api.AsyncStore`, the type asyncio code takes. `ToThreadStore` is the
light adapter for code that holds a blocking store and makes a few async calls (tests, tools):
each call runs with `asyncio.to_thread`, with no pool or limit of its own.

What must hold: after `await close()` no callback is scheduled any more and the wrapped store is
closed; the pool is shut down without waiting for the loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from common.config import Config, default_config
from common.errors import StrataError
from metadata.api import AsyncStore, MetadataStore, SessionEvent, Versioned, Watch, WatchEvent


class AsyncMetadataStore(AsyncStore):
    def __init__(self, store: MetadataStore, *, config: Config | None = None) -> None:
        """`config`: the process's settings (None: the defaults)."""
        config = config or default_config()
        self.sync = store
        self._pool = ThreadPoolExecutor(max_workers=config.metadata_async_threads_max,
                                        thread_name_prefix="metadata-aio")
        self._slots = asyncio.Semaphore(config.metadata_async_calls_in_flight_max)  # queued + running calls
        self._closed = False

    @property
    def session_id(self) -> str:
        return self.sync.session_id

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async with self._slots:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def get(self, path: str) -> Versioned | None:
        return await self._call(self.sync.get, path)

    async def create(self, path: str, value: bytes, *, ephemeral: bool = False) -> int:
        return await self._call(self.sync.create, path, value, ephemeral=ephemeral)

    async def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> int:
        return await self._call(self.sync.put, path, value, expected_version=expected_version)

    async def put_many(self, ops: Sequence[tuple[str, bytes, int | None]], *,
                       watched: bool = True) -> list[int | StrataError]:
        return await self._call(self.sync.put_many, ops, watched=watched)

    async def delete(self, path: str, *, expected_version: int | None = None) -> None:
        await self._call(self.sync.delete, path, expected_version=expected_version)

    async def delete_recursive(self, path: str) -> int:
        return await self._call(self.sync.delete_recursive, path)

    async def children(self, path: str) -> list[str]:
        return await self._call(self.sync.children, path)

    async def list_prefix(self, path: str, *, limit: int | None = None) -> list[tuple[str, Versioned]]:
        return await self._call(self.sync.list_prefix, path, limit=limit)

    async def next_id(self, name: str) -> int:
        return await self._call(self.sync.next_id, name)

    async def watch(self, prefix: str, callback: Callable[[WatchEvent], None]) -> Watch:
        """Like the sync `watch`, but `callback(event)` runs on this event loop."""
        return await self._call(self.sync.watch, prefix, self._on_loop(callback))

    def lease_valid(self) -> bool:
        return self.sync.lease_valid()

    def add_session_listener(self, callback: Callable[[SessionEvent], None]) -> None:
        """Like the sync one, but `callback(event)` runs on the running loop of the caller."""
        self.sync.add_session_listener(self._on_loop(callback))

    def new_session(self) -> str:
        return self.sync.new_session()

    def _on_loop(self, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        """`callback` moved onto the running loop: called from any thread, it runs there."""
        loop = asyncio.get_running_loop()

        def hop(event: Any) -> None:
            if self._closed:
                return
            try:
                loop.call_soon_threadsafe(callback, event)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                pass

        return hop

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._call(self.sync.close)
        finally:
            self._pool.shutdown(wait=False)


class ToThreadStore(AsyncMetadataStore):
    """`store` as an `AsyncStore` whose calls each run with `asyncio.to_thread` (the default
    executor): no pool and no in-flight limit of its own, so it can be made anywhere, outside a
    loop or for one call. `close()` closes the store, as the protocol says."""

    def __init__(self, store: MetadataStore) -> None:  # no pool, no slots: see _call and close
        self.sync = store
        self._closed = False

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._call(self.sync.close)
