"""Announce a running bookie in the metadata store so ledger writers can find it.

The bookie holds an ephemeral key `/bookies/available/<host>:<port>` whose JSON value is
`{"address": "host:port", "free_bytes": n, "read_only": bool, "bookie_id": "...",
"data_port": p, "corrupt": [[ledger, entry], ...]}`; `data_port` is the bookie's framed TCP data
port on the same host (bookie/data_server.py), where adds and reads go (a bookie client also
learns it from `GetInfo`); `corrupt` lists (at most `bookie.corrupt.REPORTED_ENTRIES_MAX`)
entries whose stored copy failed its checksum, for the auditor to repair (ledger/repair.py).
The key lives as long as the metadata session (renewed by the store's own keeper thread), so it
vanishes within about a lease after the bookie dies. Every
`bookie_registration_refresh_interval_ms` the value is rewritten with fresh free space,
read-only state and corrupt entries. If the session expired (the process was stalled past the
lease, or the database was away longer than that) or its lease lapsed, a new
store is opened and the key re-created.

What must hold: at most one live registration per address; a failed refresh never stops the
bookie serving, it is retried on the next tick.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from common.config import Config
from common.errors import (
    AlreadyExists,
    BadVersion,
    LeaseLost,
    MetadataError,
    NotFound,
    SessionExpired,
    StrataError,
)
from metadata import open_store_waiting
from metadata.aio import AsyncMetadataStore

log = logging.getLogger(__name__)
BOOKIES_AVAILABLE_PATH = "/bookies/available"


def registration_path(address: str) -> str:
    return f"{BOOKIES_AVAILABLE_PATH}/{address}"


class BookieRegistration:
    def __init__(self, metadata_url: str, address: str, describe: Callable[[], dict],
                 *, config: Config, data_port: int = 0) -> None:
        self._url = metadata_url
        self._address = address
        self._data_port = data_port      # advertised framed data port; 0 = none (not written)
        self._describe = describe        # -> {"free_bytes": int, "read_only": bool, ...}
        self._config = config
        self._refresh_interval_s = config.bookie_registration_refresh_interval_ms / 1000
        self._store: AsyncMetadataStore | None = None
        self._task: asyncio.Task | None = None
        self._version = 0  # version of our key as we last wrote it

    def _value(self) -> bytes:
        doc = {"address": self._address, **self._describe()}
        if self._data_port:
            doc["data_port"] = self._data_port
        return json.dumps(doc).encode()

    async def start(self) -> None:
        """Register (raises a MetadataError if the store cannot be reached), then keep it fresh."""
        await self._register()
        self._task = asyncio.ensure_future(self._refresh_forever())

    async def _register(self) -> None:
        loop = asyncio.get_running_loop()
        store = await loop.run_in_executor(None, lambda: open_store_waiting(self._url, config=self._config))
        self._store = AsyncMetadataStore(store, config=self._config)
        path = registration_path(self._address)
        try:
            self._version = await self._store.create(path, self._value(), ephemeral=True)
        except AlreadyExists:
            # A previous process on this address died and its lease has not run out yet; we own
            # the port now, so its key is stale.
            try:
                await self._store.delete(path)
            except NotFound:
                pass
            self._version = await self._store.create(path, self._value(), ephemeral=True)

    async def _refresh_forever(self) -> None:
        path = registration_path(self._address)
        while True:
            await asyncio.sleep(self._refresh_interval_s)
            try:
                if self._store is None:
                    await self._register()
                else:  # compare-and-set: never re-create the key as a persistent one
                    self._version = await self._store.put(path, self._value(),
                                                          expected_version=self._version)
            except (SessionExpired, LeaseLost, NotFound, BadVersion):
                await self._close_store()
            except (MetadataError, StrataError) as exc:
                log.warning("bookie registration refresh failed: %s", exc)

    async def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                await store.close()
            except StrataError:
                pass

    async def stop(self) -> None:
        """Remove the key (by ending the session) and stop refreshing."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self._close_store()
