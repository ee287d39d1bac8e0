"""Ledger recovery: fence an OPEN ledger, find its last entry that may have been acknowledged,
make that entry and all before it fully replicated, and close the ledger by compare-and-set.

Steps (BookKeeper's protocol):
1. Mark the metadata IN_RECOVERY by compare-and-set (a ledger already IN_RECOVERY is left as
   is: racing recoverers all close from the same version, so exactly one close wins and the
   others re-read the winner's result; a recoverer that died half way is simply redone).
2. Fence the ledger on every bookie of the last fragment. Once a bookie is fenced it refuses the
   old writer's adds, so the set of entries can no longer grow behind our back. We need
   *ack-quorum coverage* of answers (`striping.coverage_met`): then every entry the writer could
   have had acknowledged has a copy on a bookie that answered. LAC = max LAC reported.
3. Entries <= LAC (and all entries before the last fragment: an ensemble change starts its
   fragment at the writer's LAC+1) were acknowledged. Read forward from LAC+1 with recovery
   reads (allow_past_lac) in parallel batches: an entry found on any replica is kept (it may have
   been acknowledged); the first entry that `Qw - Qa + 1` bookies of its write set lack was
   never acknowledged and ends the ledger. Too few answers to decide is NotEnoughBookies
   (retriable: recovery runs again later).
4. Rewrite every kept entry past LAC to the bookies of its write set that lacked it (recovery
   adds pass the fence), so the close point survives like any acknowledged entry.
5. Length: the sum of all payload sizes 0..last, from a full read (recovery is the rare path).
6. Close by compare-and-set. Losing the race means another recoverer closed it: take its result.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from common.clock import Clock
from common.config import Config
from common.errors import (BadVersion, NoSuchEntry, NoSuchLedger, NotEnoughBookies, NotFound,
                           StrataError)
from common.invariant import invariant
from ledger.handle import ReadHandle
from ledger.ledger_metadata import LedgerMetadata, LedgerStatus
from ledger.ledger_store import BookiePool, read_metadata, write_metadata
from ledger.striping import absent_decided, coverage_met, write_set

_RECOVERY_READ_BATCH = 64          # entries past the LAC probed at once
_LENGTH_READ_CHUNK = 1_000         # entries per read when summing the length
_RECOVERY_ATTEMPTS_MAX = 10        # lost compare-and-set races before giving up (retriable)


async def recover(store: Any, pool: BookiePool, ledger_id: int, config: Config, clock: Clock,
                  rng: random.Random) -> LedgerMetadata:
    """Return the CLOSED metadata of `ledger_id`, recovering it first if it is not closed."""
    for attempt in range(_RECOVERY_ATTEMPTS_MAX):
        meta = await read_metadata(store, ledger_id)
        if meta is None:
            raise NotFound("no such ledger", ledger_id=ledger_id)
        if meta.is_closed:
            return meta
        try:
            if meta.state is LedgerStatus.OPEN:   # already IN_RECOVERY: do not bump the version,
                meta = await write_metadata(store, meta.with_state(LedgerStatus.IN_RECOVERY))
            last, length = await _find_end(pool, meta, config, clock, rng)
            closed = meta.with_state(LedgerStatus.CLOSED, last_entry_id=last, length_bytes=length)
            return await write_metadata(store, closed)
        except BadVersion:                # another recoverer moved it: re-read and look again
            await asyncio.sleep(rng.uniform(0.01, 0.05) * (attempt + 1))
    raise NotEnoughBookies("ledger recovery kept losing races", ledger_id=ledger_id)


async def _find_end(pool: BookiePool, meta: LedgerMetadata, config: Config, clock: Clock,
                    rng: random.Random) -> tuple[int, int]:
    lac = await _fence(pool, meta)
    frag_first = meta.fragments[-1].first_entry_id
    start = max(lac, frag_first - 1) + 1
    found = await _recovery_reads(pool, meta, start)
    last = start - 1 + len(found)
    token = rng.randbytes(16)
    await _rewrite(pool, meta, found, last, token)
    length = await _length(pool, meta, last, config, clock)
    return last, length


async def _fence(pool: BookiePool, meta: LedgerMetadata) -> int:
    ensemble = meta.last_ensemble
    answers = await asyncio.gather(*(pool.get(b).fence(meta.ledger_id) for b in ensemble),
                                   return_exceptions=True)
    responded: set[int] = set()
    lac = -1
    for index, answer in enumerate(answers):
        if isinstance(answer, NoSuchLedger):
            responded.add(index)          # it never got an entry: it has nothing, which is an answer
        elif isinstance(answer, BaseException):
            continue
        else:
            responded.add(index)
            lac = max(lac, answer[0])
    if not coverage_met(responded, meta.ensemble_size, meta.write_quorum, meta.ack_quorum):
        raise NotEnoughBookies("too few bookies answered the fence to recover the ledger",
                               ledger_id=meta.ledger_id, answered=sorted(responded))
    return lac


async def _probe(pool: BookiePool, meta: LedgerMetadata, entry_id: int) -> tuple[bytes | None, list[int]]:
    """Ask every bookie of the entry's write set. Returns (payload or None, indexes lacking it)."""
    ensemble = meta.last_ensemble
    indexes = write_set(entry_id, meta.ensemble_size, meta.write_quorum)
    answers = await asyncio.gather(*(pool.get(ensemble[i]).read(meta.ledger_id, entry_id, entry_id,
                                                                allow_past_lac=True)
                                     for i in indexes), return_exceptions=True)
    payload = None
    lacking = []
    for index, answer in zip(indexes, answers):
        if isinstance(answer, (NoSuchEntry, NoSuchLedger)):
            lacking.append(index)
        elif not isinstance(answer, BaseException):
            payload = answer[0][1]
    return payload, lacking


async def _recovery_reads(pool: BookiePool, meta: LedgerMetadata,
                          start: int) -> list[tuple[int, bytes, list[int]]]:
    """Entries from `start` on that may have been acknowledged: (entry_id, payload, lacking)."""
    found: list[tuple[int, bytes, list[int]]] = []
    entry_id = start
    while True:
        batch = list(range(entry_id, entry_id + _RECOVERY_READ_BATCH))
        probes = await asyncio.gather(*(_probe(pool, meta, e) for e in batch))
        for e, (payload, lacking) in zip(batch, probes):
            if payload is not None:
                found.append((e, payload, lacking))
                continue
            if absent_decided(len(lacking), meta.write_quorum, meta.ack_quorum):
                return found
            raise NotEnoughBookies("cannot tell whether an entry was acknowledged",
                                   ledger_id=meta.ledger_id, entry_id=e, lacking=lacking)
        entry_id += _RECOVERY_READ_BATCH


async def _rewrite(pool: BookiePool, meta: LedgerMetadata, found: list[tuple[int, bytes, list[int]]],
                   last: int, token: bytes) -> None:
    """Recovery adds of kept entries to the write-set bookies that lacked them. A bookie that is
    down is skipped: the entry stays readable from the copies that exist."""
    ensemble = meta.last_ensemble
    futures = []
    for entry_id, payload, lacking in found:
        invariant(entry_id <= last, "only entries up to the close point are rewritten")
        for index in lacking:
            futures.append(pool.get(ensemble[index]).submit_add(
                meta.ledger_id, entry_id, payload, last, writer_token=token, recovery=True))
    if futures:
        await asyncio.gather(*futures, return_exceptions=True)


async def _length(pool: BookiePool, meta: LedgerMetadata, last: int, config: Config,
                  clock: Clock) -> int:
    """Sum of payload sizes 0..last, read through a handle bounded at `last`."""
    if last < 0:
        return 0
    handle = ReadHandle(meta, pool, config, clock, last_add_confirmed=last)
    total = 0
    for first in range(0, last + 1, _LENGTH_READ_CHUNK):
        try:
            entries = await handle.read(first, min(last, first + _LENGTH_READ_CHUNK - 1))
        except StrataError as exc:
            raise NotEnoughBookies("cannot read the ledger back to measure it",
                                   ledger_id=meta.ledger_id, cause=str(exc)) from None
        total += sum(len(p) for _, p in entries)
    return total
