"""The persisted compaction record of a topic: which ledger holds its compacted view.

Key `<managed ledger path>/compaction` (under the managed ledger's own record, so deleting the
topic's metadata takes it too), JSON:

    {"compactedLedgerId": L, "horizon": [ledger, entry], "entries": n, "sizeBytes": b,
     "keys": k, "compactedMs": t, "garbage": [ledger ids], "pending": [ledger ids],
     "installed": true}

`horizon` is the last position of the topic the view covers: the view is the latest value of
every key among the entries up to and including it (tombstones applied). `garbage` lists
compacted ledgers replaced by a newer one whose deletion has not been confirmed yet; the next
compaction retries them. `pending` lists the ledgers of runs in progress: a run names its new
ledger here before writing to it, so a ledger left by a run that never finished (the broker
crashed or restarted) is found at the next load or run and deleted, never leaked. A record that
only carries pending ledgers (no compaction installed yet) has `installed` false and no view.
The record is written by compare-and-set (`version`), so two writers (a stale owner) cannot both
install a view, and moving a pending ledger to the garbage fences a run still writing it.

What must hold: a record names a ledger that is closed and complete; a new record's horizon is
never before the previous one's.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from ledger.ml_metadata import ml_path
from ledger.position import Position
from metadata.api import AsyncStore


def record_path(ml_name: str) -> str:
    return f"{ml_path(ml_name)}/compaction"


@dataclass(frozen=True)
class CompactionRecord:
    ledger_id: int                  # the compacted ledger
    horizon: Position               # last topic position the view covers
    entries: int                    # entries in the compacted ledger
    size_bytes: int                 # their bytes (headers included)
    keys: int                       # live keys in the view
    compacted_ms: int               # wall time the view was installed
    garbage: tuple[int, ...] = field(default=())   # replaced ledgers not yet deleted
    version: int | None = None      # metadata version read; None: not stored yet
    pending: tuple[int, ...] = field(default=())   # ledgers of runs in progress (not installed)
    installed: bool = True          # False: only pending ledgers, no view yet (horizon meaningless)

    def to_json(self) -> bytes:
        return json.dumps({
            "compactedLedgerId": self.ledger_id, "horizon": [self.horizon.ledger_id, self.horizon.entry_id],
            "entries": self.entries, "sizeBytes": self.size_bytes, "keys": self.keys,
            "compactedMs": self.compacted_ms, "garbage": list(self.garbage), "pending": list(self.pending),
            "installed": self.installed}).encode()

    @classmethod
    def from_json(cls, raw: bytes, version: int | None) -> CompactionRecord:
        d = json.loads(raw)
        return cls(int(d["compactedLedgerId"]), Position(*d["horizon"]), int(d["entries"]),
                   int(d["sizeBytes"]), int(d.get("keys", 0)), int(d.get("compactedMs", 0)),
                   tuple(int(g) for g in d.get("garbage", ())), version,
                   tuple(int(p) for p in d.get("pending", ())), bool(d.get("installed", True)))

    def with_ledgers(self, *, garbage: tuple[int, ...], pending: tuple[int, ...]) -> CompactionRecord:
        """The same record with other garbage and pending lists (the version read is kept)."""
        return dataclasses.replace(self, garbage=tuple(sorted(set(garbage))), pending=tuple(sorted(set(pending))))


def placeholder(pending: tuple[int, ...]) -> CompactionRecord:
    """A record of a topic never compacted that only names the ledgers of runs in progress."""
    return CompactionRecord(-1, Position(-1, -1), 0, 0, 0, 0, (), None, pending, installed=False)


async def load(store: AsyncStore, ml_name: str) -> CompactionRecord | None:
    found = await store.get(record_path(ml_name))
    return None if found is None else CompactionRecord.from_json(found.value, found.version)


async def save(store: AsyncStore, ml_name: str, record: CompactionRecord,
               previous: CompactionRecord | None) -> CompactionRecord:
    """Write `record` over `previous` (compare-and-set; BadVersion/NotFound if it changed)."""
    path = record_path(ml_name)
    if previous is None or previous.version is None:
        version = await store.create(path, record.to_json())
    else:
        version = await store.put(path, record.to_json(), expected_version=previous.version)
    return dataclasses.replace(record, version=version)
