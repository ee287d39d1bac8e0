"""Repair of entries a bookie found rotten on its own disk (issue 27; BookKeeper's
"entries to repair" + its replication worker, for one entry at a time): the auditor's leader
calls `repair_reported` each round with the registered bookies.

How it works: a bookie whose stored record of an entry fails its CRC32C stops serving it and
lists it in its registration (`BookieInfo.corrupt`, see bookie/corrupt.py). For each listed
(ledger, entry), grouped by ledger so each ledger's metadata is read once:
1. the ledger's metadata must still name that bookie in the entry's write set (the fragment
   holding the entry, `striping.holds`) and, for a CLOSED ledger, the entry must be one of its
   entries; otherwise (the ledger is deleted, the fragment moved, the entry is past the end)
   there is nothing to repair and the bookie is told to forget it (`ForgetCorrupt`);
2. the entry is read from another replica of its write set (`rereplication.read_live`, the
   reporting bookie skipped);
3. and written back to the reporting bookie as a recovery add (a fenced or closed ledger takes
   it) carrying LAC -1 (it claims nothing about what is confirmed) and the writer's token. The
   bookie serves it again once durable and drops it from its set; its next registration refresh
   no longer lists it. Until then a later round may write it again: harmless, one more copy.
At most `_IN_FLIGHT_MAX` entries are repaired at once. Every wait is a bookie or metadata call
with its own deadline (`ledger_read_timeout_ms`, `ledger_add_timeout_ms`).

What must hold: nothing is written to a bookie the metadata does not name for that entry; the
bytes written back are a replica's, CRC-checked by the bookie they came from; a failure is
counted and the entry stays reported (the next round tries again).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field

from common.errors import StrataError
from ledger.ledger_metadata import LedgerMetadata
from ledger.ledger_store import BookiePool, read_metadata
from ledger.placement import BookieInfo
from ledger.rereplication import WRITER_TOKEN_PROPERTY, read_live
from ledger.striping import holds
from metadata.api import AsyncStore

_IN_FLIGHT_MAX = 16                # entries read and written back at once, over all bookies
_ERRORS_KEPT_MAX = 10              # failure descriptions kept in a report (for the log line)


@dataclass
class RepairReport:
    reported: int = 0              # (bookie, entry) pairs listed by the registrations
    repaired: int = 0              # written back from another replica
    forgotten: int = 0             # nothing to repair: the bookie was told to stop reporting
    failed: int = 0                # tried and failed (retried next round)
    errors: list[str] = field(default_factory=list)  # the first few failures, for the log

    def failure(self, what: str) -> None:
        self.failed += 1
        if len(self.errors) < _ERRORS_KEPT_MAX:
            self.errors.append(what)


async def repair_reported(store: AsyncStore, pool: BookiePool, bookies: list[BookieInfo]) -> RepairReport:
    """Repair (or forget) every corrupt entry the registered `bookies` report."""
    report = RepairReport()
    gate = asyncio.Semaphore(_IN_FLIGHT_MAX)
    for bookie in bookies:
        if not bookie.corrupt:
            continue
        report.reported += len(bookie.corrupt)
        by_ledger: dict[int, list[int]] = defaultdict(list)
        for ledger_id, entry_id in bookie.corrupt:
            by_ledger[ledger_id].append(entry_id)
        forget: list[tuple[int, int]] = []
        for ledger_id, entries in sorted(by_ledger.items()):
            await _repair_ledger(store, pool, bookie.address, ledger_id, entries, gate, forget, report)
        if forget:
            try:
                report.forgotten += await pool.get(bookie.address).forget_corrupt(forget)
            except StrataError as exc:
                report.failure(f"{bookie.address}: forgetting {len(forget)} report(s): {exc!r}")
    return report


async def _repair_ledger(store: AsyncStore, pool: BookiePool, address: str, ledger_id: int,
                         entries: list[int], gate: asyncio.Semaphore, forget: list[tuple[int, int]],
                         report: RepairReport) -> None:
    try:
        meta = await read_metadata(store, ledger_id)
    except StrataError as exc:
        report.failure(f"ledger {ledger_id} metadata: {exc!r}")
        return
    todo = []
    for entry_id in entries:
        index = None if meta is None else _holder_index(meta, address, entry_id)
        if index is None:
            forget.append((ledger_id, entry_id))
        else:
            todo.append((entry_id, index))
    if meta is None or not todo:
        return
    outcomes = await asyncio.gather(*(_repair_entry(pool, meta, address, e, i, gate) for e, i in todo),
                                    return_exceptions=True)
    for (entry_id, _), outcome in zip(todo, outcomes):
        if isinstance(outcome, StrataError):
            report.failure(f"{address} entry {ledger_id}:{entry_id}: {outcome!r}")
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            report.repaired += 1


def _holder_index(meta: LedgerMetadata, address: str, entry_id: int) -> int | None:
    """The ensemble index at which `address` holds `entry_id` per the metadata, or None."""
    if meta.is_closed and entry_id > meta.last_entry_id:
        return None                # never part of the ledger (recovery left it out)
    ensemble = meta.ensemble_for(entry_id)
    if address not in ensemble:
        return None
    index = ensemble.index(address)
    return index if holds(index, entry_id, meta.ensemble_size, meta.write_quorum) else None


async def _repair_entry(pool: BookiePool, meta: LedgerMetadata, address: str, entry_id: int,
                        index: int, gate: asyncio.Semaphore) -> None:
    ensemble = meta.ensemble_for(entry_id)
    payload = await read_live(pool, meta, ensemble, entry_id, {index}, gate)
    token_hex = meta.properties.get(WRITER_TOKEN_PROPERTY, "")
    async with gate:
        await pool.get(address).add(meta.ledger_id, entry_id, payload, -1,
                                    writer_token=bytes.fromhex(token_hex), recovery=True)
