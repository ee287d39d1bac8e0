"""Helpers for in-process storage tests: build add entries, run storage on a fresh loop."""

from __future__ import annotations

import asyncio

import google_crc32c

from bookie.storage import Storage
from common.completion import as_future
from common.config import default_config
from proto import bookie_pb2 as pb

SMALL = dict(bookie_segment_file_bytes_max=1024 * 1024, bookie_journal_group_commit_wait_ms=0.0)


def config(**overrides):
    return default_config(**{**SMALL, **overrides})


def entry(ledger_id: int, entry_id: int, payload: bytes, lac: int | None = None, *,
          recovery: bool = False, crc: int | None = None) -> pb.AddEntry:
    return pb.AddEntry(ledger_id=ledger_id, entry_id=entry_id,
                       last_add_confirmed=entry_id - 1 if lac is None else lac, payload=payload,
                       crc32c=google_crc32c.value(payload) if crc is None else crc,
                       recovery=recovery)


async def add(storage: Storage, entries: list, token: bytes = b"w") -> list[int]:
    """Submit one request; wait for durability; return per-entry codes (0 = stored)."""
    pending = storage.add_request(token, entries)
    failure = None
    try:
        await as_future(pending.durable)
    except Exception as exc:  # the journal's failure applies to every accepted entry
        failure = exc
    return [c if c or failure is None else failure.code for c in pending.codes]


async def read_all(storage: Storage, ledger_id: int) -> list[bytes]:
    state = storage.ledger(ledger_id)
    if state.last_entry_id < 0:
        return []
    entries, error = await storage.read(ledger_id, 0, state.last_entry_id, True)
    assert error is None, error
    return [p for _, p, _ in entries]


async def opened(data_dir, cfg=None, fs=None) -> Storage:
    storage = Storage(str(data_dir), cfg or config(), fs=fs)
    await storage.open()
    return storage


async def crash(storage: Storage) -> None:
    """Stop a storage the way kill -9 leaves it on disk: no seal, no checkpoint (everything
    acknowledged has already been fsynced)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, storage._journal.stop)
    await storage.reader.close()
