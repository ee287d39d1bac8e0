"""metadata: Strata's ZooKeeper. Versioned keys with compare-and-set, ephemeral keys bound to a
session lease, watches on prefixes, and id sequences, on SQLite (embedded default) or PostgreSQL.

    store = open_store("sqlite:////var/lib/strata/meta.db")        # or postgresql://user@host:5432/db
    store.create("/ledgers/00000000000000000042", b"...")
    astore = metadata.aio.AsyncMetadataStore(store)                 # for asyncio callers

The contract is `metadata.api.MetadataStore`; `metadata.sql_store` explains how it is kept.

Credentials and TLS for PostgreSQL travel in the URL, as libpq takes them: the password in the user
info (percent-encoded: `p%40ss` for `p@ss`) and libpq's parameters in the query, all handed to psycopg
as connection options (SQLAlchemy's psycopg dialect), e.g.
`postgresql://strata:pw@db:5432/strata?sslmode=verify-full&sslrootcert=/etc/strata/pg-ca.pem`
(`sslcert`/`sslkey` for a client certificate; with no password in the URL libpq's PGPASSWORD or
~/.pgpass apply). A URL is only ever logged or printed through `common.redact.redact_url`, which masks
the password.
"""

from __future__ import annotations

import logging
import time

from common.clock import Clock
from common.config import Config
from common.errors import MetadataUnavailable
from metadata.api import AsyncStore, EventKind, MetadataStore, Versioned, Watch, WatchEvent
from metadata.sql_store import SqlMetadataStore

__all__ = [
    "AsyncStore",
    "EventKind",
    "MetadataStore",
    "SqlMetadataStore",
    "Versioned",
    "Watch",
    "WatchEvent",
    "open_store",
    "open_store_waiting",
]

log = logging.getLogger(__name__)
START_RETRY_S = 0.5


def open_store(url: str, *, config: Config | None = None, clock: Clock | None = None) -> SqlMetadataStore:
    """Open (creating tables if needed) the store at `url`: `sqlite:///abs/path/meta.db` (the
    parent directory is created) or `postgresql://user@host:port/db` (also
    `postgresql+psycopg://`). Starts this store's session; call `close()` to end it."""
    return SqlMetadataStore(url, config=config, clock=clock)


def open_store_waiting(url: str, *, config: Config, clock: Clock | None = None) -> SqlMetadataStore:
    """`open_store`, tried again while the database cannot be reached, for up to the setting
    `metadata_start_wait_ms` (what a starting broker or bookie uses: a metadata store down for a
    few seconds delays its start instead of failing it). Raises the last MetadataUnavailable."""
    deadline = time.monotonic() + config.metadata_start_wait_ms / 1000
    while True:
        try:
            return open_store(url, config=config, clock=clock)
        except MetadataUnavailable as exc:
            if time.monotonic() + START_RETRY_S >= deadline:
                raise
            log.warning("metadata store not reachable yet (%s); trying again", exc.message)
            time.sleep(START_RETRY_S)
