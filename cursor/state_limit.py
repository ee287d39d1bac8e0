"""How big a durable cursor's persisted state is, and whether an ack may still grow it.

The persisted value (`cursor.codec`) is measured exactly only when it is encoded: at each persist
and when a cursor is opened. Encoding on every ack would cost O(state) per ack, so between two
measurements `StateLimit` keeps an estimate: the last measured size plus `HOLE_BYTES` for every
new run of acked entries and `batch_record_bytes` for every new partially acked batch. Runs are
what the size follows: the encoder run-optimises its bitmaps, so an ack that extends a run (or is
the first entry after mark-delete) costs nothing, one that joins two runs shrinks the state, and
only one that stands alone adds a run, i.e. a new ack hole.

The rule a durable cursor applies (`ManagedCursor`): an ack that would add a run or a partial
batch record is refused with `CursorStateTooLarge` (and counted in
`cursor.metrics.CURSOR_ACKS_REFUSED_TOTAL`) when the estimate has no room left for it. Acks that
extend or join runs, acks completing a partial batch, cumulative acks and moves (skip, clear,
expire, seek) are always taken, so a consumer can always get out. The estimate only grows between
measurements (shrinking is not trusted until measured): near the limit an ack that adds a hole
may be refused for up to one persist interval, until the next persist measures the state again.

What must hold: `error` is set exactly while the state is known or estimated to be over
`bytes_max`, and cleared only by a measurement that fits.
"""

from __future__ import annotations

from collections.abc import Container

from pyroaring import BitMap64

from common.errors import CursorStateTooLarge
from cursor import metrics

HOLE_BYTES = 4  # one run of a run container (start, length: two u16), before zlib


def batch_record_bytes(words: int) -> int:
    """Estimated header bytes of one partial batch: `[l,e,size,[words]]` in JSON."""
    return 32 + 21 * words


class StateLimit:
    """Measured size, estimated growth, and the current over-limit error of one cursor."""

    __slots__ = ("added_bytes", "bytes_max", "cursor_name", "error", "measured_bytes")

    def __init__(self, bytes_max: int, cursor_name: str) -> None:
        self.bytes_max = bytes_max
        self.cursor_name = cursor_name
        self.measured_bytes = 0   # size of the value last encoded (persisted or not); 0: never
        self.added_bytes = 0      # estimated growth since that measurement, never negative
        self.error: CursorStateTooLarge | None = None  # why hole-adding acks are refused; None: fits

    @property
    def estimate_bytes(self) -> int:
        return self.measured_bytes + self.added_bytes

    def room_for(self, nbytes: int) -> bool:
        return self.measured_bytes + self.added_bytes + nbytes <= self.bytes_max

    def free_runs(self) -> int:
        return max(0, (self.bytes_max - self.estimate_bytes) // HOLE_BYTES)

    def grow(self, nbytes: int) -> None:
        if nbytes > 0:
            self.added_bytes += nbytes

    def measure(self, nbytes: int) -> CursorStateTooLarge | None:
        """An exact size: resets the estimate; the error (also counted) if it is over the limit."""
        self.measured_bytes, self.added_bytes = nbytes, 0
        if nbytes <= self.bytes_max:
            self.error = None
            return None
        metrics.CURSOR_STATE_TOO_LARGE_TOTAL += 1
        self.error = CursorStateTooLarge(
            "cursor ack state exceeds cursor_state_bytes_max: not persisted; acks that add ack "
            "holes are refused until acks close enough of them", cursor=self.cursor_name,
            size=nbytes, max=self.bytes_max)
        return self.error

    def refuse(self, acks: int) -> CursorStateTooLarge:
        """The error for `acks` refused acks (counted); it stays set until a measurement fits."""
        metrics.CURSOR_ACKS_REFUSED_TOTAL += acks
        error = CursorStateTooLarge(
            "ack refused: it would add ack holes to a cursor state at cursor_state_bytes_max; "
            "ack earlier messages (or cumulatively) first", cursor=self.cursor_name, refused=acks,
            estimated_size=self.estimate_bytes, max=self.bytes_max)
        if self.error is None:
            self.error = error
        return error


def run_delta(existing: BitMap64 | None, new: BitMap64, front: int | None) -> int:
    """Exact change in the number of runs when `new` (disjoint from `existing`) joins it, the
    entry before `front` (the first entry after mark-delete, if in this ledger) counting as acked.

    runs(X) = |X| - |X ∩ (X+1)|, so for disjoint A and N:
    runs(A ∪ N) - runs(A) = |N| - |N ∩ (N+1)| - |A ∩ (N+1)| - |A ∩ (N-1)|."""
    shifted_up = new.shift(1)
    delta = len(new) - new.intersection_cardinality(shifted_up)
    if existing:
        delta -= existing.intersection_cardinality(shifted_up)
        delta -= existing.intersection_cardinality(new.shift(-1))
    if front is not None and front in new:
        delta -= 1
    return delta


def admit(existing: BitMap64 | None, candidates: list[int], front: int | None,
          protected: Container[int], free_runs: int) -> tuple[list[int], int, int]:
    """Which of `candidates` (ascending, none acked yet) to take when the budget is tight:
    those that extend or join runs, those in `protected` (completing a partial batch), and
    stand-alone ones while `free_runs` lasts. Two passes (ascending, then descending over the
    rest) so a group touching acked entries on its left or its right is taken whole.
    Returns (taken ids, runs added, refused count)."""
    taken: set[int] = set()
    runs = 0

    def is_acked(entry_id: int) -> bool:
        return entry_id >= 0 and (entry_id in taken or (existing is not None and entry_id in existing))

    def take(entry_id: int) -> bool:
        nonlocal runs, free_runs
        left = entry_id == front or is_acked(entry_id - 1)
        delta = 1 - left - is_acked(entry_id + 1)
        if delta > 0 and entry_id not in protected:
            if free_runs < delta:
                return False
            free_runs -= delta
        taken.add(entry_id)
        runs += delta
        return True

    pending = [entry_id for entry_id in candidates if not take(entry_id)]
    refused = sum(1 for entry_id in reversed(pending) if not take(entry_id))
    return sorted(taken), runs, refused
