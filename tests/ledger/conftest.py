"""Fixtures for ledger tests on real parts: `strata bookie` processes (launch/bookie.py)
registered in a real SQLite metadata store, and an asyncio runner with a bound on every test.

`env` gives a `LedgerEnv` with the metadata URL, a bookie config file (fast GC so trimmed ledgers
free disk quickly; `set_bookie_config` changes it for bookies started later) and
`start_bookies(n)`; everything is torn down after the test. `frozen(bookie)` stops a bookie
process (SIGSTOP: it neither answers nor errors, as a hung host) and always resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import metadata
from common.config import Config, default_config
from launch.bookie import BookieProcess
from ledger.client import LedgerClient
from metadata.aio import AsyncMetadataStore

TEST_BOUND_S = 150.0


def run(coro: Awaitable[Any], timeout_s: float = TEST_BOUND_S) -> Any:
    """Run one test body on a fresh event loop, bounded."""
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout_s)
    return asyncio.run(bounded())


@dataclass
class LedgerEnv:
    base: Path
    metadata_url: str
    bookie_config: Path
    bookies: list[BookieProcess] = field(default_factory=list)

    def start_bookies(self, count: int) -> list[BookieProcess]:
        started = []
        for _ in range(count):
            i = len(self.bookies)
            bookie = BookieProcess.start(self.base / f"bookie-{i}", metadata_url=self.metadata_url,
                                         config_path=self.bookie_config)
            self.bookies.append(bookie)
            started.append(bookie)
        return started

    def set_bookie_config(self, **settings: Any) -> None:
        """Settings for bookies started from now on (on top of the fast-GC defaults)."""
        values = dict(BOOKIE_DEFAULTS, **settings)
        self.bookie_config.write_text("".join(f"{k} = {v!r}\n" for k, v in values.items()))

    def by_address(self, address: str) -> BookieProcess:
        return next(b for b in self.bookies if b.address == address)

    def config(self, **overrides: Any) -> Config:
        base = dict(ledger_add_timeout_ms=5_000, ledger_read_timeout_ms=5_000,
                    metadata_session_lease_ms=2_000)
        base.update(overrides)
        return default_config(**base)

    async def open(self, config: Config, seed: int = 0) -> tuple[AsyncMetadataStore, LedgerClient]:
        import random
        store = AsyncMetadataStore(metadata.open_store(self.metadata_url, config=config))
        return store, LedgerClient(store, config, rng=random.Random(seed))


async def shutdown(store: AsyncMetadataStore, client: LedgerClient) -> None:
    await client.close()
    await store.close()


@contextlib.contextmanager
def frozen(bookie: BookieProcess) -> Iterator[None]:
    """The bookie process is stopped (SIGSTOP) inside the block and resumed when it ends."""
    os.kill(bookie.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(bookie.proc.pid, signal.SIGCONT)


BOOKIE_DEFAULTS = {"bookie_gc_interval_ms": 500, "metadata_session_lease_ms": 2000}


@pytest.fixture
def env(tmp_path: Path):
    e = LedgerEnv(tmp_path, f"sqlite:///{tmp_path}/meta.db", tmp_path / "bookie.toml")
    e.set_bookie_config()
    try:
        yield e
    finally:
        for bookie in e.bookies:
            bookie.close()
