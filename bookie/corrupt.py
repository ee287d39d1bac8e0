"""The entries a bookie found corrupt on its own disk and waits to get back (BookKeeper's
"entries to repair"): a bounded, in-memory set, reported to the auditor.

How it works: when a read (or GC's compaction) finds a stored record that fails its CRC32C, the
storage stops serving it (drops it from the index: bookie/storage.py `found_corrupt`) and adds
(ledger, entry) here. The bookie's registration doc lists the first `REPORTED_ENTRIES_MAX` of
them (`"corrupt": [[ledger, entry], ...]`, bookie/registration.py); the auditor's leader writes
each entry back from another replica (ledger/repair.py), and the add of that good copy takes it
out of the set. The auditor also takes out reports it has nothing to do for (the ledger is
deleted, the entry no longer lives on this bookie) through the `ForgetCorrupt` control call.

Each entry keeps the segment of its bad record: GC keeps such a segment (neither deletes nor
compacts it) while the entry waits, so a restart before the repair still finds the bad record
through the segment's .idx, re-reports it at the first read, and the repair is not lost. The
set itself is not persisted: after a restart an entry is reported again only once a read finds
it again.

What must hold: at most `entries_max` entries (further finds are counted in `overflow_total`
and left in the index, so a later read finds them again once there is room); an entry dropped
from the index for corruption is in the set until it is repaired, forgotten or its ledger
deleted.
"""

from __future__ import annotations

from common.invariant import invariant

ENTRIES_MAX = 10_000            # entries a bookie remembers to repair
REPORTED_ENTRIES_MAX = 1_000    # of them, listed in the registration doc (~20 KB of JSON at most)


class CorruptEntries:
    def __init__(self, entries_max: int = ENTRIES_MAX) -> None:
        invariant(entries_max >= 1, "room for at least one entry", entries_max=entries_max)
        self._entries_max = entries_max
        # (ledger_id, entry_id) -> segment id of its corrupt record, in the order found.
        self._entries: dict[tuple[int, int], int] = {}
        self.found_total = 0        # entries taken into the set since start (each find counts)
        self.repaired_total = 0     # entries taken out by the add of a good copy
        self.overflow_total = 0     # corrupt records found while the set was full (not taken)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: tuple[int, int]) -> bool:
        return key in self._entries

    def add(self, ledger_id: int, entry_id: int, segment_id: int) -> bool:
        """Remember the entry (True), or count it as overflow when full (False). An entry
        already here is updated in place (True)."""
        key = (ledger_id, entry_id)
        if key not in self._entries and len(self._entries) >= self._entries_max:
            self.overflow_total += 1
            return False
        if key not in self._entries:
            self.found_total += 1
        self._entries[key] = segment_id
        return True

    def repaired(self, ledger_id: int, entry_id: int) -> bool:
        """A good copy of the entry is stored: forget it (True if it was here)."""
        if self._entries.pop((ledger_id, entry_id), None) is None:
            return False
        self.repaired_total += 1
        return True

    def forget(self, ledger_id: int, entry_id: int) -> bool:
        """Nothing to repair any more (the auditor says so): forget it (True if it was here)."""
        return self._entries.pop((ledger_id, entry_id), None) is not None

    def forget_ledger(self, ledger_id: int) -> None:
        """The ledger is deleted here: none of its entries need repair."""
        for key in [k for k in self._entries if k[0] == ledger_id]:
            del self._entries[key]

    def report(self, limit: int = REPORTED_ENTRIES_MAX) -> list[list[int]]:
        """The first `limit` entries as [[ledger, entry], ...] (JSON-ready), oldest first."""
        out: list[list[int]] = []
        for ledger_id, entry_id in self._entries:
            if len(out) >= limit:
                break
            out.append([ledger_id, entry_id])
        return out

    def held_segments(self) -> set[int]:
        """Segments holding a corrupt record that still waits (GC keeps them)."""
        return set(self._entries.values())
