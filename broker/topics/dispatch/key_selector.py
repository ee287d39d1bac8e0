"""Which Key_Shared consumer owns a hash slot (0..65535).

Two selectors, both answering `select(slot) -> consumer or None`:

- `AutoSplitSelector` (KeySharedMode AUTO_SPLIT): consistent hashing. Each consumer puts
  `POINTS_PER_CONSUMER` points on a ring over the slot space; a slot belongs to the consumer of
  the first point at or after it (wrapping around). A consumer joining or leaving moves only the
  slots next to its own points, so most keys keep their owner.
- `StickySelector` (KeySharedMode STICKY): each consumer brings inclusive ranges; a range that
  overlaps another consumer's is refused with ConsumerAssignError; a slot in no range has no owner
  and is not dispatched.

An entry's slot is `key_slot(sticky_key)`: `(murmur3_x86_32(key, seed=0) & 0x7FFFFFFF) % 65536`,
as Pulsar's broker computes it (docs/protocol.md §8.10), with the C `mmh3` package.

What must hold: `select` is a pure function of the current set of consumers (no history), so the
dispatcher can compare owners before and after a change. The selectors never look at entries.
`murmur3_x86_32` equals the reference MurmurHash3_x86_32 (Appleby's smhasher) as an unsigned
32-bit value; `key_slot` is within 0..65535.
"""

from __future__ import annotations

import bisect
import itertools
import zlib
from collections.abc import Hashable
from typing import Generic, TypeVar

import mmh3

from common.errors import ConsumerAssignError

SLOTS = 65536
KEY_SLOTS = SLOTS  # Key_Shared hash space: slots 0..65535, ranges inclusive
POINTS_PER_CONSUMER = 100

C = TypeVar("C", bound=Hashable)


def murmur3_x86_32(data: bytes | memoryview, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of `data` as an unsigned 32-bit int (mmh3, C)."""
    return mmh3.mmh3_32_uintdigest(data, seed)


def key_slot(key: bytes) -> int:
    """The Key_Shared hash slot (0..65535) of a sticky key, as Pulsar's broker computes it."""
    return (mmh3.mmh3_32_uintdigest(key, 0) & 0x7FFFFFFF) % KEY_SLOTS


def _ring_point(label: str) -> int:
    # crc32 spreads well enough over 16 bits and is deterministic across processes.
    return zlib.crc32(label.encode()) % SLOTS


class AutoSplitSelector(Generic[C]):
    """Consistent-hashing ring; `identity(consumer)` gives the string its points are made from."""

    def __init__(self) -> None:
        self._points: list[int] = []                # sorted ring points
        self._owners: dict[int, list[C]] = {}       # point -> consumers on it (first wins)
        self._labels: dict[C, str] = {}

    def add(self, consumer: C, label: str) -> None:
        """Add `consumer`; `label` must be unique per consumer (e.g. name + connection id)."""
        self._labels[consumer] = label
        for i in range(POINTS_PER_CONSUMER):
            point = _ring_point(f"{label}#{i}")
            owners = self._owners.setdefault(point, [])
            if not owners:
                bisect.insort(self._points, point)
            owners.append(consumer)

    def remove(self, consumer: C) -> None:
        label = self._labels.pop(consumer, None)
        if label is None:
            return
        for i in range(POINTS_PER_CONSUMER):
            point = _ring_point(f"{label}#{i}")
            owners = self._owners.get(point)
            if owners and consumer in owners:
                owners.remove(consumer)
                if not owners:
                    del self._owners[point]
                    index = bisect.bisect_left(self._points, point)
                    del self._points[index]

    def select(self, slot: int) -> C | None:
        if not self._points:
            return None
        index = bisect.bisect_left(self._points, slot)
        if index == len(self._points):
            index = 0
        return self._owners[self._points[index]][0]

    def consumers(self) -> list[C]:
        return list(self._labels)


class StickySelector(Generic[C]):
    """Fixed inclusive ranges per consumer; overlaps refused."""

    def __init__(self) -> None:
        self._starts: list[int] = []                   # sorted range starts
        self._ranges: dict[int, tuple[int, C]] = {}    # start -> (end, consumer)

    def check(self, ranges: list[tuple[int, int]]) -> None:
        """Raise ConsumerAssignError if `ranges` are malformed or overlap an existing range."""
        if not ranges:
            raise ConsumerAssignError("sticky key_shared consumer brought no hash ranges")
        ordered = sorted(ranges)
        for start, end in ordered:
            if not (0 <= start <= end < SLOTS):
                raise ConsumerAssignError("hash range outside 0..65535", start=start, end=end)
        for (_, end_a), (start_b, _) in itertools.pairwise(ordered):
            if start_b <= end_a:
                raise ConsumerAssignError("a consumer's own hash ranges overlap")
        for start, end in ordered:
            if self._overlapping(start, end) is not None:
                raise ConsumerAssignError("hash range overlaps another consumer's", start=start, end=end)

    def _overlapping(self, start: int, end: int) -> tuple[int, int] | None:
        index = bisect.bisect_right(self._starts, end)
        if index == 0:
            return None
        other_start = self._starts[index - 1]
        other_end, _ = self._ranges[other_start]
        return (other_start, other_end) if other_end >= start else None

    def add(self, consumer: C, ranges: list[tuple[int, int]]) -> None:
        self.check(ranges)
        for start, end in ranges:
            bisect.insort(self._starts, start)
            self._ranges[start] = (end, consumer)

    def remove(self, consumer: C) -> None:
        gone = [s for s, (_, c) in self._ranges.items() if c == consumer]
        for start in gone:
            del self._ranges[start]
            self._starts.remove(start)

    def select(self, slot: int) -> C | None:
        index = bisect.bisect_right(self._starts, slot)
        if index == 0:
            return None
        end, consumer = self._ranges[self._starts[index - 1]]
        return consumer if slot <= end else None

    def consumers(self) -> list[C]:
        seen: dict[C, None] = {}
        for _, consumer in self._ranges.values():
            seen[consumer] = None
        return list(seen)
