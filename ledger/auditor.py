"""The auditor (BookKeeper's autorecovery auditor + replication worker, in one loop per broker):
find ledgers with fewer than Qw live copies and re-replicate them.

A ledger is *under-replicated* when one of its fragments names a bookie that is no longer
registered under `/bookies/available` (its ephemeral key vanishes once its lease expires, so a
bookie killed -9 counts as gone after `metadata_session_lease_ms`, not at once; a bookie that
merely restarts within its lease never does). Every broker runs an `Auditor`:
- it scans every ledger's metadata (`list_prefix("/ledgers")`) every `ledger_auditor_interval_ms`,
  and at once when a bookie registers or its registration vanishes (a watch on
  `/bookies/available`), and records the ids it found under-replicated in `STATE` (process-wide:
  `broker.stats.internal_stats` shows `underReplicated` from it, `broker.stats.metrics` exports
  `strata_ledgers_under_replicated`);
- one of them, the *leader*, also repairs: it holds the ephemeral key `/ledger-auditor/leader`
  (first create wins; bound to its metadata session, so a dead leader's key goes with its lease
  and another broker takes over at its next round). The leader calls `LedgerClient.rereplicate`
  on each under-replicated ledger: the final fragments (all of a closed ledger, all but the last
  of an open one, whose writer replaces its own) get a live bookie in place of the gone one,
  entries copied first (`ledger.rereplication`);
- the leader also repairs entries a live bookie reports corrupt in its registration (a bit
  rotted on its disk: `ledger.repair`, which writes each back from another replica, or tells the
  bookie to forget it when the metadata no longer puts the entry there). A registration refresh
  that lists corrupt entries not seen before wakes the auditor too.

Where it runs: in every broker, repairing in exactly one (the leader). Running in several at
once is safe too (two leaders for a moment, while an old leader's lease runs out): copies are
idempotent and every metadata change is a compare-and-set, so a loser re-reads and finds nothing
left to do; at worst a few entries are copied twice.

What must hold: the auditor only reads metadata, except through `rereplicate` and
`repair_reported`; a failing repair (no spare bookie: NotEnoughBookies, retriable; no replica to
copy a corrupt entry from) is retried every `_RETRY_S` at most and logged rate-limited; every
wait is bounded; the loop never dies of a StrataError.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from common.clock import Clock
from common.config import Config
from common.errors import AlreadyExists, NotFound, StrataError
from common.ratelimited_log import RateLimitedLog
from ledger import placement, repair
from ledger.client import LedgerClient
from ledger.ledger_metadata import LEDGERS_PATH, LedgerMetadata
from ledger.rereplication import final_fragments, under_replicated
from metadata.api import EventKind, Watch, WatchEvent

log = logging.getLogger(__name__)
_WARN = RateLimitedLog(log, interval_s=30.0)
LEADER_PATH = "/ledger-auditor/leader"
_RETRY_S = 5.0                    # rescan this soon while a repair failed (e.g. no spare bookie)
_CLOSE_TIMEOUT_S = 5.0            # bound on waiting for a repair in progress at close()


@dataclass
class AuditState:
    """What this process's auditor saw at its last scan (read by stats and metrics)."""

    under_replicated: frozenset[int] = frozenset()   # ledger ids with a copy on a gone bookie
    ledgers_scanned: int = 0
    last_scan_ms: int = 0                            # wall time of the last complete scan; 0 = none
    leader: bool = False                             # this process repairs
    rereplicated_total: int = 0                      # ledgers this process re-replicated
    repair_failures_total: int = 0                   # repairs that failed (retried later)
    corrupt_reported: int = 0                        # corrupt entries bookies listed at the last scan
    corrupt_repaired_total: int = 0                  # corrupt entries this process wrote back


STATE = AuditState()


def is_under_replicated(ledger_id: int) -> bool:
    return ledger_id in STATE.under_replicated


@dataclass(frozen=True)
class AuditReport:
    scanned: int
    under_replicated: frozenset[int]   # after this round's repairs
    repaired: int                      # ledgers with at least one fragment moved
    failed: int                        # repairs that raised (retriable)
    leader: bool
    corrupt: repair.RepairReport | None = None   # the leader's repairs of corrupt entries


async def start_auditor(client: LedgerClient, config: Config, clock: Clock, *, owner: str) -> Auditor | None:
    """Start this process's auditor (None when `ledger_auditor_enabled` is off); it stops when
    `client` closes."""
    if not config.ledger_auditor_enabled:
        return None
    auditor = Auditor(client, config, clock, owner=owner)
    await auditor.start()
    client.add_close_hook(auditor.close)
    return auditor


class Auditor:
    def __init__(self, client: LedgerClient, config: Config, clock: Clock, *, owner: str) -> None:
        self._client = client
        self._store = client.store
        self._clock = clock
        self._interval_s = config.ledger_auditor_interval_ms / 1000
        self._scan_keys_max = config.metadata_list_prefix_keys_max
        self._owner = owner                      # who holds the leader key (a broker id)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._watch: Watch | None = None
        self.leader = False                      # held the leader key at the last round
        # registration path -> corrupt entries it listed at its last refresh (bounded by the
        # number of bookies: removed when a registration goes)
        self._corrupt_seen: dict[str, tuple[tuple[int, int], ...]] = {}

    async def start(self) -> None:
        self._watch = await self._store.watch(placement.AVAILABLE_PATH, self._on_bookies)
        self._task = asyncio.ensure_future(self._run())

    def _on_bookies(self, event: WatchEvent) -> None:
        # a registration came or went, or a refresh lists corrupt entries not seen before
        if event.kind is not EventKind.UPDATED or self._new_corrupt(event):
            self._wake.set()

    def _new_corrupt(self, event: WatchEvent) -> bool:
        try:
            reported = placement.corrupt_entries(json.loads(event.value or b"{}"))
        except ValueError:
            reported = ()
        seen = self._corrupt_seen.pop(event.path, ())
        if event.kind is not EventKind.DELETED:
            self._corrupt_seen[event.path] = reported
        return bool(reported) and reported != seen

    async def _run(self) -> None:
        while True:
            wait_s = self._interval_s
            try:
                report = await self.audit_once()
                if report.failed or (report.under_replicated and report.leader):
                    wait_s = min(wait_s, _RETRY_S)
            except StrataError as exc:
                _WARN.warning("scan", "ledger audit failed (next try in %.0f s): %s", _RETRY_S, exc)
                wait_s = min(wait_s, _RETRY_S)
            try:
                await asyncio.wait_for(self._wake.wait(), wait_s)
            except TimeoutError:
                pass
            self._wake.clear()

    async def audit_once(self) -> AuditReport:
        """One round: scan, and repair if this process leads. Updates `STATE`."""
        bookies = await placement.available_bookies(self._store)
        registered = placement.registered_addresses(bookies)
        metas = await self._scan()
        under = {m.ledger_id: m for m in metas if under_replicated(m, registered)}
        leader = self.leader = await self._lead()
        repaired = failed = 0
        if leader:
            for ledger_id, meta in sorted(under.items()):
                if not any(b not in registered for f in meta.fragments[:final_fragments(meta)]
                           for b in f.ensemble):
                    continue                     # only the writer's own fragment: it replaces it
                try:
                    result = await self._client.rereplicate(ledger_id)
                except NotFound:
                    under.pop(ledger_id)         # deleted meanwhile
                    continue
                except StrataError as exc:
                    failed += 1
                    _WARN.warning("repair", "re-replication of ledger %d failed (retried): %s", ledger_id, exc)
                    continue
                if result.fragments_moved:
                    repaired += 1
                    log.info("ledger %d re-replicated: %d fragment(s), %d entry copies", ledger_id,
                             result.fragments_moved, result.entries_copied)
                if not under_replicated(result.metadata, registered):
                    under.pop(ledger_id)
        corrupt = await self._repair_corrupt(bookies) if leader else None
        if corrupt is not None:
            failed += corrupt.failed
        self._record(len(metas), frozenset(under), leader, repaired, failed)
        STATE.corrupt_reported = sum(len(b.corrupt) for b in bookies)
        return AuditReport(len(metas), frozenset(under), repaired, failed, leader, corrupt)

    async def _repair_corrupt(self, bookies: list[placement.BookieInfo]) -> repair.RepairReport:
        report = await repair.repair_reported(self._store, self._client.pool, bookies)
        if report.repaired or report.forgotten:
            log.info("corrupt entries: %d written back from another replica, %d with nothing to "
                     "repair forgotten", report.repaired, report.forgotten)
        if report.failed:
            _WARN.warning("corrupt", "repair of %d corrupt entr(y/ies) failed (retried): %s",
                          report.failed, "; ".join(report.errors))
        STATE.corrupt_repaired_total += report.repaired
        return report

    def _record(self, scanned: int, under: frozenset[int], leader: bool, repaired: int, failed: int) -> None:
        if under != STATE.under_replicated:
            log.info("under-replicated ledgers: %d%s", len(under),
                     f" {sorted(under)[:20]}" if under else "")
        STATE.under_replicated = under
        STATE.ledgers_scanned = scanned
        STATE.last_scan_ms = self._clock.wall_ms()
        STATE.leader = leader
        STATE.rereplicated_total += repaired
        STATE.repair_failures_total += failed

    async def _scan(self) -> list[LedgerMetadata]:
        rows = await self._store.list_prefix(LEDGERS_PATH, limit=self._scan_keys_max)
        if len(rows) >= self._scan_keys_max:
            _WARN.warning("partial", "ledger audit saw only the first %d ledgers "
                          "(metadata_list_prefix_keys_max)", self._scan_keys_max)
        out = []
        for path, got in rows:
            name = path[len(LEDGERS_PATH) + 1:]
            if not path.startswith(LEDGERS_PATH + "/") or "/" in name or not name.isdigit():
                continue
            try:
                out.append(LedgerMetadata.from_json(got.value, got.version))
            except (ValueError, KeyError, TypeError, StrataError) as exc:
                _WARN.warning(("bad", path), "ledger audit skips unreadable metadata at %s: %s", path, exc)
        return out

    async def _lead(self) -> bool:
        """Whether this process holds the leader key (creating it if nobody does)."""
        try:
            await self._store.create(LEADER_PATH, json.dumps({"owner": self._owner}).encode(), ephemeral=True)
            return True
        except AlreadyExists:
            got = await self._store.get(LEADER_PATH)
            return got is not None and got.ephemeral_owner == self._store.session_id

    async def close(self) -> None:
        """Stop the loop; give up the leader key if held (another broker takes over at once)."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=_CLOSE_TIMEOUT_S)
            self._task = None
        if self.leader:
            try:
                got = await self._store.get(LEADER_PATH)
                if got is not None and got.ephemeral_owner == self._store.session_id:
                    await self._store.delete(LEADER_PATH, expected_version=got.version)
            except StrataError:
                pass                              # the session's end removes it anyway
            self.leader = STATE.leader = False
