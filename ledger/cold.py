"""The cold tier as the managed ledger sees it: the one small interface offloaded ledgers are
written, read and deleted through.

`ColdStorage` is implemented in `offload/` (over S3, as Parquet); `ledger/` never imports
`offload`, and the broker hands the managed ledger an implementation (or None: no cold tier).
`ColdCopy` is what the managed ledger's record keeps about an offloaded ledger, so a reader can
find it again after a restart without listing the bucket.

Contract every implementation keeps:
- `offload` copies a CLOSED ledger's entries 0..entries-1 into one object and returns only once
  that object is complete and visible; a partial upload is never visible under its key. It is
  idempotent: if a complete object for the ledger is already there (a crashed or racing earlier
  attempt), it is checked and reused, never duplicated. `offsets` (when given) are the ledger's
  Kafka offsets, which the object records per message.
- `read(copy, first, last)` returns entries first..last, byte for byte as they were stored
  (CRC included), in entry order. A corrupt or truncated object raises ColdObjectCorrupt and
  delivers nothing; S3 down raises ColdTierUnavailable (retriable: the caller waits and retries).
- `delete` is idempotent (deleting a missing object is fine).
- `clean_orphans(ml_name, kept)` deletes objects and incomplete multipart uploads under the
  managed ledger's prefix whose ledger id is not in `kept`; returns the keys it removed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Protocol

from ledger.handle import ReadHandle


@dataclass(frozen=True)
class ColdCopy:
    key: str                # object key within the tier's bucket
    size_bytes: int         # object size in S3
    entries: int            # entries the object holds (0..entries-1)
    completed_ms: int       # wall time the upload completed; the deletion lag counts from it
    format_version: int     # the object format's version (`offload.format`)

    def to_doc(self) -> dict:
        return {"key": self.key, "size_bytes": self.size_bytes, "entries": self.entries,
                "completed_ms": self.completed_ms, "format": self.format_version}

    @classmethod
    def from_doc(cls, doc: dict) -> ColdCopy:
        return cls(str(doc["key"]), int(doc["size_bytes"]), int(doc["entries"]), int(doc["completed_ms"]),
                   int(doc["format"]))


# progress(entries_done, entries_total) during an offload
OffloadProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class LedgerOffsets:
    """A ledger's Kafka offsets (`ledger.view`): its first message's, and every entry's message
    count as the managed ledger recorded it (its index), in entry order."""
    first_offset: int
    messages: Sequence[int]


class ColdStorage(Protocol):
    async def offload(self, ml_name: str, ledger_id: int, source: ReadHandle, entries: int,
                      progress: OffloadProgress | None = None, offsets: LedgerOffsets | None = None) -> ColdCopy:
        """Copy a closed ledger to one object; return once it is complete and visible."""
        ...

    async def read(self, copy: ColdCopy, first: int, last: int) -> list[tuple[int, bytes]]:
        """Entries first..last of an offloaded ledger, rebuilt byte for byte."""
        ...

    async def delete(self, copy: ColdCopy) -> None:
        """Delete an offloaded ledger's object (idempotent)."""
        ...

    async def clean_orphans(self, ml_name: str, kept: Set[int]) -> list[str]:
        """Delete objects and incomplete uploads of ledgers not in `kept`; the keys removed."""
        ...

    async def close(self) -> None:
        ...
