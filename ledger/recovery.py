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
   fragment at the writer's LAC+1, and those of a known prefix when Qw == Qa) were
   acknowledged. Read forward from LAC+1 with recovery reads (allow_past_lac) in parallel
   batches: an entry found on any replica is kept (it may have been acknowledged); the first
   entry that `Qw - Qa + 1` bookies of its write set lack was never acknowledged and ends the
   ledger. Too few answers to decide is NotEnoughBookies (retriable: recovery runs again later).
4. Rewrite every kept entry past LAC to the bookies of its write set that did not show a copy
   (recovery adds pass the fence), so the close point survives like any acknowledged entry.
   A target bookie that is not registered, or whose recovery add fails (BookieUnavailable, a
   timeout, read-only, disk full), is replaced as a writer would replace it: a new fragment
   starting at LAC+1 whose ensemble has a live registered bookie (`placement.replace`) in its
   place, written by compare-and-set on the IN_RECOVERY metadata; then every kept entry whose
   write set includes a replaced index is written to the replacement. Entries <= LAC stay on
   the old fragment (a copy on a dead bookie is re-replication's job, ledger.rereplication).
   The fragment names the indexes a recoverer filled (`Fragment.recovery_indexes`): those
   bookies never saw the writer's adds, so a later recoverer counts neither their fence answer
   towards coverage nor their "no such entry" towards deciding an entry absent.
   No replacement available is NotEnoughBookies: the ledger stays IN_RECOVERY, never closed
   short of an acknowledged entry, and the next attempt starts over.
5. Length: the sum of all payload sizes 0..last, from a full read, or only of the entries after
   a prefix whose size the caller already knows (`known_prefix`: the managed ledger's index
   checkpoint), so a takeover does not read a whole open ledger back just to measure it.
6. Close by compare-and-set. Losing the race means another recoverer closed it (take its
   result) or changed the ensemble (look again on the new ensemble).

A dead bookie is "no answer" in steps 2 and 3 as soon as its connection is refused; a hung one
is, at the latest, after the call's deadline (`ledger_add_timeout_ms` / `ledger_read_timeout_ms`).
"""

from __future__ import annotations

import asyncio
import random

from common import retry
from common.clock import Clock
from common.config import Config
from common.errors import (
    BadVersion,
    BookieError,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    NotEnoughBookies,
    NotFound,
    StrataError,
    TimeoutExpired,
)
from common.invariant import invariant
from ledger import placement
from ledger.handle import ReadHandle
from ledger.ledger_metadata import LedgerMetadata, LedgerStatus
from ledger.ledger_store import BookiePool, read_metadata, write_metadata
from ledger.striping import absent_decided, coverage_met, write_set
from metadata.api import AsyncStore

_RECOVERY_READ_BATCH = 64          # entries past the LAC probed at once
_LENGTH_READ_CHUNK = 1_000         # entries per read when summing the length
# Lost compare-and-set races with another recoverer (BadVersion), then NotEnoughBookies (retriable).
_RECOVERY_RETRY = retry.Retry("ledger.recover", retry_on=BadVersion, wait=retry.jittered(0.01, 0.05, scaled=True),
                              attempts_max=10)
_ENSEMBLE_CHANGES_MAX = 8          # replacement rounds in one attempt before giving up (retriable)

Found = tuple[int, bytes, list[int]]   # (entry_id, payload, write-set indexes that showed no copy)


async def recover(store: AsyncStore, pool: BookiePool, ledger_id: int, config: Config, clock: Clock,
                  rng: random.Random, known_prefix: tuple[int, int] | None = None) -> LedgerMetadata:
    """Return the CLOSED metadata of `ledger_id`, recovering it first if it is not closed.
    `known_prefix` = (entries, bytes) of the ledger's first entries, if the caller knows them."""
    async def attempt() -> LedgerMetadata:    # BadVersion: another recoverer moved it, look again
        meta = await read_metadata(store, ledger_id)
        if meta is None:
            raise NotFound("no such ledger", ledger_id=ledger_id)
        if meta.is_closed:
            return meta
        if meta.state is LedgerStatus.OPEN:   # already IN_RECOVERY: do not bump the version,
            meta = await write_metadata(store, meta.with_state(LedgerStatus.IN_RECOVERY))
        meta, last, length = await _find_end(store, pool, meta, config, clock, rng, known_prefix)
        closed = meta.with_state(LedgerStatus.CLOSED, last_entry_id=last, length_bytes=length)
        return await write_metadata(store, closed)

    return await _RECOVERY_RETRY.call_async(attempt, rng=rng, give_up=lambda _: NotEnoughBookies(
        "ledger recovery kept losing races", ledger_id=ledger_id))


async def _find_end(store: AsyncStore, pool: BookiePool, meta: LedgerMetadata, config: Config,
                    clock: Clock, rng: random.Random,
                    known_prefix: tuple[int, int] | None = None) -> tuple[LedgerMetadata, int, int]:
    """(metadata as changed by any ensemble change, last entry id, length in bytes)."""
    lac = await _fence(pool, meta)
    frag_first = meta.fragments[-1].first_entry_id
    start = max(lac, frag_first - 1)
    start = max(start, await _proven_prefix(pool, meta, known_prefix, start)) + 1
    found = await _recovery_reads(pool, meta, start)
    last = start - 1 + len(found)
    meta = await _rewrite(store, pool, meta, found, start, rng)
    length = await _length(pool, meta, last, config, clock, known_prefix)
    return meta, last, length


async def _proven_prefix(pool: BookiePool, meta: LedgerMetadata, known_prefix: tuple[int, int] | None,
                         start_after: int) -> int:
    """The last entry of the caller's known prefix, when recovery may start past it; else -1.

    The bookies' LAC lags the writer by its pipeline (each add carries the LAC as it was when
    sent): after a burst of 3,000 pipelined adds it was ~2,000 entries behind, and recovery
    probed each of those one by one. A managed ledger's index checkpoint holds only entries
    whose adds were acknowledged, and with Qw == Qa an acknowledged entry has all its copies,
    so there is nothing to find or repair before it. Trusted only when it is checked: the
    prefix's last entry lies in the last fragment and every bookie of its write set has it."""
    if known_prefix is None or meta.write_quorum != meta.ack_quorum:
        return -1
    claimed = known_prefix[0] - 1
    if claimed <= start_after or claimed < meta.fragments[-1].first_entry_id:
        return -1
    payload, _, missing = await _probe(pool, meta, claimed)
    if payload is None or missing:
        return -1
    return claimed


async def _fence(pool: BookiePool, meta: LedgerMetadata) -> int:
    ensemble = meta.last_ensemble
    filled = set(meta.fragments[-1].recovery_indexes)   # never saw the writer: not a witness
    answers = await asyncio.gather(*(pool.get(b).fence(meta.ledger_id) for b in ensemble),
                                   return_exceptions=True)
    responded: set[int] = set()
    lac = -1
    for index, answer in enumerate(answers):
        if isinstance(answer, NoSuchLedger):
            if index not in filled:       # it never got an entry: it has nothing, which is an answer
                responded.add(index)
        elif isinstance(answer, BaseException):
            continue
        else:                             # a filled bookie's LAC came from a recoverer: still true
            if index not in filled:
                responded.add(index)
            lac = max(lac, answer[0])
    if not coverage_met(responded, meta.ensemble_size, meta.write_quorum, meta.ack_quorum):
        raise NotEnoughBookies("too few bookies answered the fence to recover the ledger",
                               ledger_id=meta.ledger_id, answered=sorted(responded))
    return lac


async def _probe(pool: BookiePool, meta: LedgerMetadata, entry_id: int) -> tuple[bytes | None, int, list[int]]:
    """Ask every bookie of the entry's write set. Returns (payload or None, how many said they
    lack it, indexes that showed no copy: those lacking it and those that did not answer). A
    bookie a recoverer filled in lacking the entry is no evidence the writer never had it
    acknowledged, so it is not counted as lacking."""
    ensemble = meta.last_ensemble
    filled = meta.fragments[-1].recovery_indexes
    indexes = write_set(entry_id, meta.ensemble_size, meta.write_quorum)
    answers = await asyncio.gather(*(pool.get(ensemble[i]).read(meta.ledger_id, entry_id, entry_id,
                                                                allow_past_lac=True)
                                     for i in indexes), return_exceptions=True)
    payload = None
    lacking = 0
    missing = []
    for index, answer in zip(indexes, answers):
        if isinstance(answer, BaseException):
            lacking += isinstance(answer, (NoSuchEntry, NoSuchLedger)) and index not in filled
            missing.append(index)
        else:
            payload = answer[0][1]
    return payload, lacking, missing


async def _recovery_reads(pool: BookiePool, meta: LedgerMetadata, start: int) -> list[Found]:
    """Entries from `start` on that may have been acknowledged."""
    found: list[Found] = []
    entry_id = start
    while True:
        batch = list(range(entry_id, entry_id + _RECOVERY_READ_BATCH))
        probes = await asyncio.gather(*(_probe(pool, meta, e) for e in batch))
        for e, (payload, lacking, missing) in zip(batch, probes):
            if payload is not None:
                found.append((e, payload, missing))
                continue
            if absent_decided(lacking, meta.write_quorum, meta.ack_quorum):
                return found
            raise NotEnoughBookies("cannot tell whether an entry was acknowledged",
                                   ledger_id=meta.ledger_id, entry_id=e, lacking=lacking)
        entry_id += _RECOVERY_READ_BATCH


async def _rewrite(store: AsyncStore, pool: BookiePool, meta: LedgerMetadata, found: list[Found],
                   start: int, rng: random.Random) -> LedgerMetadata:
    """Recovery adds of kept entries to the write-set bookies that showed no copy, replacing
    (ensemble change) every target bookie that is unregistered or fails. Returns the metadata
    as it now stands; raises NotEnoughBookies (retriable) if no replacement can be found."""
    if not found:
        return meta
    token = rng.randbytes(16)
    payloads = {entry_id: payload for entry_id, payload, _ in found}
    todo = {(entry_id, index) for entry_id, _, missing in found for index in missing}
    failed: set[str] = set()                      # addresses replaced: never chosen again
    for _ in range(_ENSEMBLE_CHANGES_MAX):
        ensemble = meta.last_ensemble
        registered = placement.registered_addresses(await placement.available_bookies(store))
        down = {index for _, index in todo if ensemble[index] not in registered}
        if not down:
            todo = await _send_rewrites(pool, meta, todo, payloads, start - 1, token)
            if not todo:
                return meta
            down = {index for _, index in todo}
        failed |= {ensemble[index] for index in down}
        meta = await _replace_bookies(store, meta, down, start, failed, rng)
        for entry_id in payloads:
            for index in write_set(entry_id, meta.ensemble_size, meta.write_quorum):
                if index in down:
                    todo.add((entry_id, index))   # the replacement has none of them
    raise NotEnoughBookies("recovery kept losing replacement bookies", ledger_id=meta.ledger_id,
                           failed=sorted(failed))


async def _send_rewrites(pool: BookiePool, meta: LedgerMetadata, todo: set[tuple[int, int]],
                         payloads: dict[int, bytes], lac: int, token: bytes) -> set[tuple[int, int]]:
    """Send the recovery adds in `todo`; returns those that failed on a bookie to be replaced.
    The LAC they carry is the fenced one (`lac`): the rest is not confirmed until the close."""
    ensemble = meta.last_ensemble
    order = sorted(todo)
    futures = [pool.get(ensemble[index]).submit_add(meta.ledger_id, entry_id, payloads[entry_id], lac,
                                                    writer_token=token, recovery=True)
               for entry_id, index in order]
    answers = await asyncio.gather(*futures, return_exceptions=True)
    failed = set()
    for (entry_id, index), answer in zip(order, answers):
        if answer is None:
            continue
        if isinstance(answer, (BookieError, TimeoutExpired)) and not isinstance(answer, LedgerFenced):
            failed.add((entry_id, index))
        elif isinstance(answer, BaseException):
            raise answer
    return failed


async def _replace_bookies(store: AsyncStore, meta: LedgerMetadata, indexes: set[int], first: int,
                           avoid: set[str], rng: random.Random) -> LedgerMetadata:
    """Ensemble change of the IN_RECOVERY ledger: entries from `first` on live on the last
    ensemble with new bookies at `indexes`. Compare-and-set: BadVersion if another recoverer
    moved the metadata (the caller re-reads and starts over)."""
    invariant(first >= meta.fragments[-1].first_entry_id, "a recovery fragment starts in the last one",
              ledger_id=meta.ledger_id, first=first)
    candidates = await placement.available_bookies(store)
    ensemble = placement.replace(candidates, meta.last_ensemble, indexes, rng, avoid=avoid)
    filled = tuple(set(meta.fragments[-1].recovery_indexes) | indexes)
    return await write_metadata(store, meta.with_fragment(first, ensemble, recovery_indexes=filled))


async def _length(pool: BookiePool, meta: LedgerMetadata, last: int, config: Config,
                  clock: Clock, known_prefix: tuple[int, int] | None = None) -> int:
    """Sum of payload sizes 0..last, read through a handle bounded at `last` (only past a
    known prefix that the ledger does hold)."""
    if last < 0:
        return 0
    handle = ReadHandle(meta, pool, config, clock, last_add_confirmed=last)
    start, total = known_prefix if known_prefix is not None and 0 <= known_prefix[0] <= last + 1 else (0, 0)
    for first in range(start, last + 1, _LENGTH_READ_CHUNK):
        try:
            entries = await handle.read(first, min(last, first + _LENGTH_READ_CHUNK - 1))
        except StrataError as exc:
            raise NotEnoughBookies("cannot read the ledger back to measure it",
                                   ledger_id=meta.ledger_id, cause=str(exc)) from None
        total += sum(len(p) for _, p in entries)
    return total
