"""Ledger metadata in the metadata store, and the shared pool of bookie clients.

`read_metadata` / `write_metadata` are the only code that moves `LedgerMetadata` in and out of
`/ledgers/<id>`; writes are always compare-and-set on the version the value was read at (or a
create), so a lost race surfaces as BadVersion / AlreadyExists to the caller, who re-reads.

`BookiePool` keeps one `BookieClient` per bookie address for the whole ledger client: every
ledger writing to a bookie shares its one add stream, so adds from many ledgers batch together.
"""

from __future__ import annotations

from bookie.client import BookieClient
from bookie.link_auth import LinkCredentials
from common.clock import Clock
from common.config import Config
from ledger.ledger_metadata import LedgerMetadata, ledger_path
from metadata.api import AsyncStore


async def read_metadata(store: AsyncStore, ledger_id: int) -> LedgerMetadata | None:
    got = await store.get(ledger_path(ledger_id))
    if got is None:
        return None
    return LedgerMetadata.from_json(got.value, version=got.version)


async def write_metadata(store: AsyncStore, meta: LedgerMetadata) -> LedgerMetadata:
    """Create (version 0) or compare-and-set (version = the one read); returns the stored value."""
    path = ledger_path(meta.ledger_id)
    if meta.version == 0:
        version = await store.create(path, meta.to_json())
    else:
        version = await store.put(path, meta.to_json(), expected_version=meta.version)
    return meta.with_version(version)


class BookiePool:
    def __init__(self, config: Config, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self._clients: dict[str, BookieClient] = {}   # address -> its one client
        # read once, here: an unreadable bookie secret or TLS file fails the ledger client's start
        self._credentials = LinkCredentials(config)

    def get(self, address: str) -> BookieClient:
        client = self._clients.get(address)
        if client is None:
            client = BookieClient(address, config=self._config, clock=self._clock, credentials=self._credentials)
            self._clients[address] = client
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
