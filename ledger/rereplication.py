"""Re-replication of a ledger whose fragments name a bookie that is gone (BookKeeper's
autorecovery, as a one-shot call: `LedgerClient.rereplicate(ledger_id)`; `ledger.auditor` finds
the ledgers and calls it).

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
a fragment keeps its first entry id and E distinct bookies. Only final fragments are moved: every
fragment of a CLOSED ledger, and every fragment but the last of an OPEN one (its entries were all
confirmed before the writer's ensemble change; the writer adopts the moved fragment when its own
compare-and-set loses to ours, `WriteHandle._adopt`). A ledger IN_RECOVERY is left alone. Copies
to an open ledger carry its writer's token (property `writer_token`), so a replacement bookie
that first hears of the ledger through them still takes that writer's adds later. Every failure
is typed and the call can simply be repeated: copies are idempotent, and a lost compare-and-set
race re-reads the metadata and starts over.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from common import retry
from common.errors import BadVersion, NotEnoughBookies, NotFound, StrataError
from common.invariant import present
from ledger import placement
from ledger.ledger_metadata import LedgerMetadata, LedgerStatus
from ledger.ledger_store import BookiePool, read_metadata, write_metadata
from ledger.striping import write_set
from metadata.api import AsyncStore

WRITER_TOKEN_PROPERTY = "writer_token"   # ledger property: hex of the writer's token
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
    skipped: str | None            # why nothing was done ("in recovery"), None if it was looked at
    metadata: LedgerMetadata


def final_fragments(meta: LedgerMetadata) -> int:
    """How many leading fragments are final (their entries will not change): all of a CLOSED
    ledger, all but the last of an OPEN one, none of one IN_RECOVERY (its recoverer moves it)."""
    if meta.state is LedgerStatus.CLOSED:
        return len(meta.fragments)
    if meta.state is LedgerStatus.OPEN:
        return len(meta.fragments) - 1
    return 0


def under_replicated(meta: LedgerMetadata, registered: set[str]) -> bool:
    """Some fragment names a bookie that is not registered: fewer than Qw live copies of some
    of its entries (the last fragment of an open ledger included: its writer replaces it)."""
    return any(address not in registered for f in meta.fragments for address in f.ensemble)


async def rereplicate(store: AsyncStore, pool: BookiePool, ledger_id: int,
                      rng: random.Random, *, quarantined: set[str] | None = None) -> RereplicationResult:
    async def attempt() -> RereplicationResult:  # BadVersion: metadata moved, look again
        meta = await read_metadata(store, ledger_id)
        if meta is None:
            raise NotFound("no such ledger", ledger_id=ledger_id)
        if meta.state is LedgerStatus.IN_RECOVERY:
            return RereplicationResult(ledger_id, 0, 0, "in recovery", meta)
        return await _rereplicate_final(store, pool, meta, rng, quarantined or set())

    return await _RACE_RETRY.call_async(attempt, rng=rng, give_up=lambda _: NotEnoughBookies(
        "re-replication kept losing metadata races", ledger_id=ledger_id))


async def _rereplicate_final(store: AsyncStore, pool: BookiePool, meta: LedgerMetadata,
                             rng: random.Random, quarantined: set[str]) -> RereplicationResult:
    candidates = await placement.available_bookies(store)
    registered = placement.registered_addresses(candidates)
    token_hex = meta.properties.get(WRITER_TOKEN_PROPERTY)
    token = bytes.fromhex(token_hex) if token_hex else rng.randbytes(16)
    moved = copied = 0
    for index in range(final_fragments(meta)):
        fragment = meta.fragments[index]
        gone = [i for i, address in enumerate(fragment.ensemble) if address not in registered]
        if not gone:
            continue
        ensemble = placement.replace(candidates, fragment.ensemble, gone, rng,
                                     avoid=[fragment.ensemble[i] for i in gone], quarantined=quarantined)
        last = present(meta.fragment_last_entry_id(index), "a final fragment has a last entry",
                       ledger_id=meta.ledger_id)
        # every entry of a final fragment is confirmed: the LAC the copies carry
        lac = meta.last_entry_id if meta.is_closed else last
        copied += await _copy_fragment(pool, meta, fragment.first_entry_id, last, lac,
                                       fragment.ensemble, ensemble, set(gone), token)
        meta = await write_metadata(store, meta.with_fragment_ensemble(index, ensemble))
        moved += 1
    return RereplicationResult(meta.ledger_id, moved, copied, None, meta)


async def _copy_fragment(pool: BookiePool, meta: LedgerMetadata, first: int, last: int, lac: int,
                         old: tuple[str, ...], new: tuple[str, ...], gone: set[int],
                         token: bytes) -> int:
    """Copy entries first..last held by a `gone` index of `old` to the same index of `new`.
    `token`: writer token of the copies (recovery adds skip the token check; it only matters to
    a bookie that first hears of the ledger through them). `lac`: confirmed, carried by each."""
    copied = 0
    gate = asyncio.Semaphore(_READS_PARALLEL)
    for chunk_first in range(first, last + 1, _COPY_CHUNK_ENTRIES):
        chunk = range(chunk_first, min(last, chunk_first + _COPY_CHUNK_ENTRIES - 1) + 1)
        needed = [(e, [i for i in write_set(e, meta.ensemble_size, meta.write_quorum) if i in gone])
                  for e in chunk]
        needed = [(e, targets) for e, targets in needed if targets]
        payloads = await asyncio.gather(*(read_live(pool, meta, old, e, gone, gate)
                                          for e, _ in needed))
        futures = [pool.get(new[i]).submit_add(meta.ledger_id, e, payload, lac,
                                               writer_token=token, recovery=True)
                   for (e, targets), payload in zip(needed, payloads) for i in targets]
        answers = await asyncio.gather(*futures, return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer             # typed (bookie errors are retriable): call again
        copied += len(futures)
    return copied


async def read_live(pool: BookiePool, meta: LedgerMetadata, ensemble: tuple[str, ...],
                     entry_id: int, gone: set[int], gate: asyncio.Semaphore) -> bytes:
    """The entry from the first replica of its write set, `gone` indexes skipped, that has it
    (also ledger/repair.py's source of a good copy)."""
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
