"""Re-replication of a closed ledger whose fragments name a bookie that is gone (BookKeeper's
autorecovery, as a one-shot call: `LedgerClient.rereplicate(ledger_id)`).

How it works: a bookie counts as gone when it is not registered under `/bookies/available` (its
ephemeral key vanishes once its lease expires). For each fragment whose ensemble names a gone
bookie:
1. pick a replacement for each gone index (`placement.replace`: a live writable bookie not in
   that fragment's ensemble);
2. copy every entry of the fragment whose write set includes a gone index from a live replica
   of its write set to the replacement (recovery adds: the ledger is fenced/closed; the LAC they
   carry is the ledger's last entry, all of it confirmed), at most `_COPY_CHUNK_ENTRIES` at once;
3. record the new ensemble of that fragment by compare-and-set (`with_fragment_ensemble`).
A fragment with no entries (the last one of a ledger closed right after an ensemble change) is
only re-pointed. Readers holding the old metadata still read the copies that remain; new readers
read from the replacement.

What must hold: the metadata names a bookie for an entry only after the entry is durable there;
a fragment keeps its first entry id and E distinct bookies. Only CLOSED ledgers are handled (an
open one has a writer changing its metadata; recovery closes it first). Every failure is typed
and the call can simply be repeated: copies are idempotent, and a lost compare-and-set race
re-reads the metadata and starts over.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from common import retry
from common.errors import BadVersion, NotEnoughBookies, NotFound, StrataError
from common.invariant import present
from ledger import placement
from ledger.ledger_metadata import LedgerMetadata
from ledger.ledger_store import BookiePool, read_metadata, write_metadata
from ledger.striping import write_set
from metadata.api import AsyncStore

_COPY_CHUNK_ENTRIES = 500          # entries read and written per round (bounds memory in flight)
_READS_PARALLEL = 64               # single-entry reads from the live replicas in flight at once
# Lost compare-and-set races (another re-replicator), then NotEnoughBookies (retriable).
_RACE_RETRY = retry.Retry("ledger.rereplicate", retry_on=BadVersion, wait=retry.jittered(0.01, 0.05, scaled=True),
                          attempts_max=5)


@dataclass(frozen=True)
class RereplicationResult:
    ledger_id: int
    fragments_moved: int           # fragments whose ensemble was changed
    entries_copied: int            # entry copies written to replacement bookies
    skipped: str | None            # why nothing was done ("not closed"), None if it was looked at
    metadata: LedgerMetadata


async def rereplicate(store: AsyncStore, pool: BookiePool, ledger_id: int,
                      rng: random.Random) -> RereplicationResult:
    async def attempt() -> RereplicationResult:  # BadVersion: metadata moved, look again
        meta = await read_metadata(store, ledger_id)
        if meta is None:
            raise NotFound("no such ledger", ledger_id=ledger_id)
        if not meta.is_closed:
            return RereplicationResult(ledger_id, 0, 0, "not closed", meta)
        return await _rereplicate_closed(store, pool, meta, rng)

    return await _RACE_RETRY.call_async(attempt, rng=rng, give_up=lambda _: NotEnoughBookies(
        "re-replication kept losing metadata races", ledger_id=ledger_id))


async def _rereplicate_closed(store: AsyncStore, pool: BookiePool, meta: LedgerMetadata,
                              rng: random.Random) -> RereplicationResult:
    candidates = await placement.available_bookies(store)
    registered = placement.registered_addresses(candidates)
    moved = copied = 0
    for index, fragment in enumerate(meta.fragments):
        gone = [i for i, address in enumerate(fragment.ensemble) if address not in registered]
        if not gone:
            continue
        ensemble = placement.replace(candidates, fragment.ensemble, gone, rng,
                                     avoid=[fragment.ensemble[i] for i in gone])
        last = present(meta.fragment_last_entry_id(index), "a closed ledger's fragments are final",
                       ledger_id=meta.ledger_id)
        copied += await _copy_fragment(pool, meta, fragment.first_entry_id, last,
                                       fragment.ensemble, ensemble, set(gone), rng.randbytes(16))
        meta = await write_metadata(store, meta.with_fragment_ensemble(index, ensemble))
        moved += 1
    return RereplicationResult(meta.ledger_id, moved, copied, None, meta)


async def _copy_fragment(pool: BookiePool, meta: LedgerMetadata, first: int, last: int,
                         old: tuple[str, ...], new: tuple[str, ...], gone: set[int],
                         token: bytes) -> int:
    """Copy entries first..last held by a `gone` index of `old` to the same index of `new`.
    `token`: writer token of the copies (recovery adds skip the token check; it only matters to
    a bookie that first hears of the ledger through them)."""
    copied = 0
    gate = asyncio.Semaphore(_READS_PARALLEL)
    for chunk_first in range(first, last + 1, _COPY_CHUNK_ENTRIES):
        chunk = range(chunk_first, min(last, chunk_first + _COPY_CHUNK_ENTRIES - 1) + 1)
        needed = [(e, [i for i in write_set(e, meta.ensemble_size, meta.write_quorum) if i in gone])
                  for e in chunk]
        needed = [(e, targets) for e, targets in needed if targets]
        payloads = await asyncio.gather(*(_read_live(pool, meta, old, e, gone, gate)
                                          for e, _ in needed))
        futures = [pool.get(new[i]).submit_add(meta.ledger_id, e, payload, meta.last_entry_id,
                                               writer_token=token, recovery=True)
                   for (e, targets), payload in zip(needed, payloads) for i in targets]
        answers = await asyncio.gather(*futures, return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer             # typed (bookie errors are retriable): call again
        copied += len(futures)
    return copied


async def _read_live(pool: BookiePool, meta: LedgerMetadata, ensemble: tuple[str, ...],
                     entry_id: int, gone: set[int], gate: asyncio.Semaphore) -> bytes:
    """The entry from the first live replica of its write set that has it."""
    async with gate:
        errors: list[str] = []
        for index in write_set(entry_id, meta.ensemble_size, meta.write_quorum):
            if index in gone:
                continue
            try:
                got = await pool.get(ensemble[index]).read(meta.ledger_id, entry_id, entry_id,
                                                           allow_past_lac=True)
                return got[0][1]
            except StrataError as exc:
                errors.append(f"{ensemble[index]}: {exc!r}")
        raise NotEnoughBookies("no live replica of an entry to copy from", ledger_id=meta.ledger_id,
                               entry_id=entry_id, errors=errors)
