"""The ack state above a cursor's mark-delete: roaring bitmaps per ledger plus batch-index acks.

How it works: `acked[ledger_id]` is a `pyroaring.BitMap64` of the entry ids of that ledger that
are fully acked and lie after the mark-delete position (the "individually deleted" set of Pulsar).
`batches[position]` holds, for an entry with some but not all batch members acked, the words of
the *remaining unacked* members (Pulsar's ack_set convention: a set bit = not yet acked), kept
unsigned here. An entry is in at most one of the two: when its last member is acked, the batch
record goes and the entry id joins the bitmap.

This module knows nothing of ledgers or the metadata store; `ManagedCursor` keeps it consistent
with the mark-delete position (see the invariants there). Bitmaps are 64-bit so ledgers of more
than 2^32 entries (rollover allows 10^10) still fit; the cost over 32-bit bitmaps is small.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyroaring import BitMap64

from ledger.position import Position

WORD_BITS = 64
WORD_MASK = (1 << WORD_BITS) - 1
ENTRY_ID_END = 1 << 63  # exclusive bound of entry ids (signed 64-bit on the wire)


def full_words(batch_size: int) -> list[int]:
    """Words with the low `batch_size` bits set: a batch with nothing acked."""
    words = [WORD_MASK] * (batch_size // WORD_BITS)
    rest = batch_size % WORD_BITS
    if rest:
        words.append((1 << rest) - 1)
    return words


def to_unsigned(words: Iterable[int]) -> list[int]:
    return [int(w) & WORD_MASK for w in words]


def to_signed(words: list[int]) -> list[int]:
    """Words as signed int64 values, as the protobuf `repeated int64 ack_set` field wants them."""
    return [w - (1 << 64) if w >= (1 << 63) else w for w in words]


def popcount(words: list[int]) -> int:
    return sum(w.bit_count() for w in words)


@dataclass
class BatchAck:
    batch_size: int        # members in the entry's batch, as the consumer reported it
    remaining: list[int]   # unsigned words, set bit = member still unacked; never all zero


def run_end(bitmap: BitMap64, start: int) -> int:
    """The last id of the run of consecutive ids in `bitmap` that begins at `start` (which must be
    in it). Exponential then binary search with `contains_range`, so the cost is O(log run) C
    calls whatever the bitmap's size."""
    good, step = 1, 1  # [start, start+good) is known to be in the bitmap
    while bitmap.contains_range(start, start + good + step):
        good += step
        step *= 2
    bad = good + step  # [start, start+bad) is known not to be fully in it
    while bad - good > 1:
        mid = (good + bad) // 2
        if bitmap.contains_range(start, start + mid):
            good = mid
        else:
            bad = mid
    return start + good - 1


class AckState:
    """Fully acked entries after mark-delete, per ledger, and partially acked batches."""

    __slots__ = ("acked", "batches")

    def __init__(self) -> None:
        self.acked: dict[int, BitMap64] = {}
        self.batches: dict[Position, BatchAck] = {}

    def contains(self, position: Position) -> bool:
        bitmap = self.acked.get(position[0])
        return bitmap is not None and position[1] in bitmap

    def add(self, ledger_id: int, entry_ids: BitMap64) -> None:
        """Mark `entry_ids` of `ledger_id` fully acked (their batch records go)."""
        if not entry_ids:
            return
        bitmap = self.acked.get(ledger_id)
        if bitmap is None:
            self.acked[ledger_id] = entry_ids
        else:
            bitmap |= entry_ids
        if self.batches:
            for entry_id in [p[1] for p in self.batches if p[0] == ledger_id]:
                if entry_id in entry_ids:
                    del self.batches[Position(ledger_id, entry_id)]

    def count(self) -> int:
        return sum(len(b) for b in self.acked.values())

    def drop_through(self, position: Position) -> None:
        """Forget every ack at or before `position` (it is now at or below mark-delete)."""
        ledger_id, entry_id = position
        for lid in [lid for lid in self.acked if lid <= ledger_id]:
            bitmap = self.acked[lid]
            if lid < ledger_id:
                del self.acked[lid]
            elif entry_id >= 0:
                bitmap.remove_range(0, entry_id + 1)
                if not bitmap:
                    del self.acked[lid]
        if self.batches:
            for p in [p for p in self.batches if p <= position]:
                del self.batches[p]

    def drop_from(self, position: Position) -> None:
        """Forget every ack at or after `position` (a seek moved before it)."""
        ledger_id, entry_id = position
        for lid in [lid for lid in self.acked if lid >= ledger_id]:
            bitmap = self.acked[lid]
            if lid > ledger_id:
                del self.acked[lid]
            else:
                bitmap.remove_range(max(entry_id, 0), ENTRY_ID_END)
                if not bitmap:
                    del self.acked[lid]
        if self.batches:
            for p in [p for p in self.batches if p >= position]:
                del self.batches[p]
