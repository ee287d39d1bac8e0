"""Opening a managed ledger: take ownership, recover what a previous owner left, load indexes.

1. `take_ownership`: read (or create) `/managed-ledgers/<name>` and write it back with a fresh
   owner token by compare-and-set (retrying lost races). That bumps its version, so the
   previous owner's next compare-and-set fails: it is fenced out of the metadata.
2. `recover_last`: if the last ledger is still OPEN (its owner crashed or is being taken over),
   recover it (fence + close, `LedgerClient.open_ledger(recover=True)`): the old owner's appends
   now fail on the bookies. Its per-entry index is rebuilt by reading back the entries after the
   old owner's last index checkpoint (`ledger.index_checkpoint`; all of them without one).
3. `load_index`: a closed ledger's index is the blob its closer wrote; if it is missing or does
   not match the ledger's entry count, it is rebuilt by reading the entries — from the cold
   copy when the bookie copy was deleted after an offload (never from the bookies then: the
   ledger is gone there, and recovering it would fail or, worse, re-create nothing).

Index of a ledger closed by recovery — the choice: entries hold the broker's bytes untouched, so
size is exact from the bytes, and `messages` / `publish_time` are recomputed by the
`meta_from_entry(bytes) -> (messages, publish_time_ms)` hook the broker passes to `open()` (it
parses the Pulsar metadata it stored). Without a hook: 1 message, publish time = ledger creation
time. Nothing extra is written per append; the cost (reading the last ledger once) is paid only
after a crash or takeover, and bounded by the rollover size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from common import retry
from common.errors import AlreadyExists, BadVersion, ManagedLedgerFenced, OffloadNotConfigured
from common.invariant import present
from ledger.cold import ColdStorage
from ledger.entry_index import EntryIndex
from ledger.handle import ReadHandle
from ledger.ml_metadata import LedgerRecord, ManagedLedgerMetadata, index_path, ml_path
from metadata.api import AsyncStore

if TYPE_CHECKING:
    from ledger.client import LedgerClient

MetaFromEntry = Callable[[bytes], tuple[int, int]]
_REBUILD_READ_CHUNK = 500
# Lost compare-and-set races with the owner being replaced, before giving up.
_TAKEOVER_RETRY = retry.Retry("ledger.take_ownership", retry_on=(AlreadyExists, BadVersion),
                              wait=retry.linear(0.01), attempts_max=20)


async def take_ownership(store: AsyncStore, name: str, owner: str) -> ManagedLedgerMetadata:
    """Write our owner token by compare-and-set. A race with the old owner's own update (a
    rollover, a trim) is retried: opening always wins over the owner being replaced."""
    path = ml_path(name)

    async def attempt() -> ManagedLedgerMetadata:
        got = await store.get(path)
        if got is None:
            fresh = ManagedLedgerMetadata(owner=owner)
            return fresh.with_version(await store.create(path, fresh.to_json()))
        meta = ManagedLedgerMetadata.from_json(got.value, got.version).with_owner(owner)
        return meta.with_version(await store.put(path, meta.to_json(), expected_version=got.version))

    return await _TAKEOVER_RETRY.call_async(attempt, give_up=lambda _: ManagedLedgerFenced(
        "could not take ownership: the metadata kept changing", name=name))


async def rebuild_index(handle: ReadHandle, meta_from_entry: MetaFromEntry | None,
                        created_ms: int, start: EntryIndex | None = None) -> EntryIndex:
    """The ledger's index, read back from its entries — only those after `start` (a checkpoint
    of its first entries, `ledger.index_checkpoint`) when given."""
    index = start if start is not None else EntryIndex()
    last = handle.last_add_confirmed
    for first in range(len(index), last + 1, _REBUILD_READ_CHUNK):
        for _, data in await handle.read(first, min(last, first + _REBUILD_READ_CHUNK - 1)):
            messages, publish_ms = meta_from_entry(data) if meta_from_entry else (1, created_ms)
            index.append(len(data), max(1, messages), publish_ms)
    return index


async def load_index(store: AsyncStore, client: LedgerClient, name: str, record: LedgerRecord,
                     meta_from_entry: MetaFromEntry | None, cold: ColdStorage | None = None) -> EntryIndex:
    """The index of a closed ledger: its blob, or rebuilt from the entries if the blob is
    missing or disagrees with the recorded entry count (from the cold copy if the bookie copy
    is gone)."""
    got = await store.get(index_path(name, record.ledger_id))
    if got is not None:
        index = EntryIndex.from_blob(got.value)
        if len(index) == record.entries:
            return index
    if record.bookie_deleted:
        index = await rebuild_index_from_cold(record, cold, meta_from_entry)
    else:
        handle = await client.open_ledger(record.ledger_id, recover=True)
        index = await rebuild_index(handle, meta_from_entry, record.created_ms)
    await store.put(index_path(name, record.ledger_id), index.to_blob())
    return index


async def rebuild_index_from_cold(record: LedgerRecord, cold: ColdStorage | None,
                                  meta_from_entry: MetaFromEntry | None) -> EntryIndex:
    copy = present(record.cold, "a ledger whose bookie copy is gone has a cold copy", ledger_id=record.ledger_id)
    if cold is None:
        raise OffloadNotConfigured("ledger is only in the cold tier and its index must be rebuilt, "
                                   "but this broker has no cold tier", ledger_id=record.ledger_id)
    index = EntryIndex()
    for first in range(0, copy.entries, _REBUILD_READ_CHUNK):
        for _, data in await cold.read(copy, first, min(copy.entries - 1, first + _REBUILD_READ_CHUNK - 1)):
            messages, publish_ms = meta_from_entry(data) if meta_from_entry else (1, record.created_ms)
            index.append(len(data), max(1, messages), publish_ms)
    return index


def closed_record(record: LedgerRecord, index: EntryIndex, closed_ms: int) -> LedgerRecord:
    """The record of a ledger just sealed: its final counts from `index`; its first offset stays."""
    return LedgerRecord(record.ledger_id, True, record.created_ms, len(index), index.total_bytes,
                        index.total_messages, index.first_publish_ms, index.last_publish_ms,
                        closed_ms=closed_ms, first_offset=record.first_offset)
