"""`strata perf cursor`: ack throughput and persisted cursor size / persist and restore time.

Measures, in one process, on a synthetic ledger (`UniformView`: equal entries, rolled every
`--ledger-entries` like the managed ledger's default rollover):
- `acks_per_s`: individual acks through `ManagedCursor.ack()`, given in groups of `--ack-group`
  positions (as one Pulsar ACK command carries them), shuffled within windows of 1,000 entries
  (the out-of-order acks of a shared subscription); `acks_per_s_one_per_call` with one position
  per call;
- `persisted_bytes_alternating_1m`: 1M entries with every other one acked (target <= 256 KiB);
- `persisted_bytes_100m_1000_holes`: 100M entries with 1,000 unacked holes (target <= 64 KiB);
each with `*_persist_ms` (encode + write to a SQLite metadata store in a temp dir) and
`*_restore_ms` (read + decode + a cursor ready to dispatch).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import random
import tempfile
import time

from pyroaring import BitMap64

from common.errors import InvalidPosition, OffsetOutOfRange
from cursor.ack_state import AckState
from cursor.codec import CursorSnapshot
from cursor.cursor_store import CursorStore
from cursor.managed_cursor import ManagedCursor
from ledger.position import EARLIEST, Position
from ledger.types import EntryMeta, LedgerInfo, LedgerState
from metadata.aio import ToThreadStore

ENTRY_BYTES = 1000
BASE_PUBLISH_MS = 1_700_000_000_000


class UniformView:
    """A LedgerView of `total` equal entries in ledgers 1, 2, ... of `per_ledger` entries each."""

    def __init__(self, total: int, per_ledger: int, name: str = "perf/cursor") -> None:
        self.name = name
        self.per_ledger = per_ledger
        count = max(1, -(-total // per_ledger))
        self.sizes = [min(per_ledger, total - i * per_ledger) for i in range(count)]
        self.starts = [i * per_ledger for i in range(count)]  # global index of each first entry

    def _index(self, position: Position) -> int:
        return self.starts[position[0] - 1] + position[1]

    def _position(self, index: int) -> Position:
        ledger = bisect.bisect_right(self.starts, index) - 1
        return Position(ledger + 1, index - self.starts[ledger])

    def ledgers(self) -> list[LedgerInfo]:
        last = len(self.sizes) - 1
        return [LedgerInfo(i + 1, n, n * ENTRY_BYTES, n,
                           LedgerState.OPEN if i == last else LedgerState.CLOSED, BASE_PUBLISH_MS,
                           BASE_PUBLISH_MS + self.starts[i], BASE_PUBLISH_MS + self.starts[i] + n - 1)
                for i, n in enumerate(self.sizes)]

    @property
    def last_confirmed(self) -> Position:
        return Position(len(self.sizes), self.sizes[-1] - 1)

    @property
    def first_position(self) -> Position:
        return Position(1, 0)

    def next_position(self, position: Position) -> Position:
        ledger, entry = position
        if 1 <= ledger < len(self.sizes) and entry + 1 >= self.sizes[ledger - 1]:
            return Position(ledger + 1, 0)
        return Position(ledger, entry + 1)

    def entry_meta(self, position: Position) -> EntryMeta:
        if not (1 <= position[0] <= len(self.sizes) and 0 <= position[1] < self.sizes[position[0] - 1]):
            raise InvalidPosition("entry not kept", position=str(position))
        return EntryMeta(ENTRY_BYTES, 1, BASE_PUBLISH_MS + self._index(position))

    def entries_between(self, start: Position, end: Position) -> int:
        def rank(p: Position) -> int:  # entries at or before p
            if p[0] < 1:
                return 0
            if p[0] > len(self.sizes):
                return sum(self.sizes)
            return self.starts[p[0] - 1] + min(max(p[1] + 1, 0), self.sizes[p[0] - 1])
        return max(0, rank(end) - rank(start))

    def position_for_publish_time(self, publish_time_ms: int) -> Position:
        index = max(0, publish_time_ms - BASE_PUBLISH_MS)
        if index >= sum(self.sizes):
            return self.next_position(self.last_confirmed)
        return self._position(index)

    # one message per entry: an entry's Kafka offset is its global index
    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return sum(self.sizes)

    def offset_of(self, position: Position) -> int:
        self.entry_meta(position)                  # InvalidPosition if not kept
        return self._index(position)

    def entry_for_offset(self, offset: int) -> Position:
        if offset == self.end_offset:
            return self.next_position(self.last_confirmed)
        if not 0 <= offset < self.end_offset:
            raise OffsetOutOfRange("offset out of range", offset=offset, start=0, end=self.end_offset)
        return self._position(offset)


def _ack_order(total: int, per_ledger: int, seed: int) -> list[Position]:
    rng = random.Random(seed)
    order = list(range(total))
    for lo in range(0, total, 1000):
        window = order[lo:lo + 1000]
        rng.shuffle(window)
        order[lo:lo + 1000] = window
    return [Position(i // per_ledger + 1, i % per_ledger) for i in order]


def measure_acks(total: int, per_ledger: int, group: int, seed: int) -> dict[str, float]:
    view = UniformView(total, per_ledger)
    positions = _ack_order(total, per_ledger, seed)
    groups = [positions[i:i + group] for i in range(0, total, group)]
    cursor = ManagedCursor.starting_at("bench", view, EARLIEST, durable=False)
    started = time.perf_counter()
    for chunk in groups:
        cursor.ack(chunk)
    grouped_s = time.perf_counter() - started
    assert cursor.mark_delete_position == view.last_confirmed, cursor.mark_delete_position
    cursor = ManagedCursor.starting_at("bench1", view, EARLIEST, durable=False)
    single = positions[: min(total, 200_000)]
    started = time.perf_counter()
    for position in single:
        cursor.ack((position,))
    single_s = time.perf_counter() - started
    return {"acks_per_s": round(total / grouped_s), "acks_per_s_one_per_call": round(len(single) / single_s)}


async def _persist_and_restore(view: UniformView, acks: AckState, label: str, url: str) -> dict[str, float]:
    import metadata  # imported here: the ack benchmark needs no database

    store = metadata.open_store(url)
    try:
        snapshot = CursorSnapshot(Position(1, -1), acks)
        cursors = CursorStore(ToThreadStore(store), f"perf-{label}")
        cursor = ManagedCursor("sub", view, mark_delete_position=Position(1, -1), store=cursors,
                               snapshot=snapshot, state_bytes_max=512 * 1024 * 1024)
        started = time.perf_counter()
        await cursor.flush(force=True)
        persist_s = time.perf_counter() - started
        started = time.perf_counter()
        loaded = await CursorStore(ToThreadStore(store), f"perf-{label}").load_cursor(view, "sub")
        restore_s = time.perf_counter() - started
        assert loaded is not None and loaded.individually_acked_count() == cursor.individually_acked_count()
        return {f"persisted_bytes_{label}": cursor.persisted_bytes,
                f"persist_ms_{label}": round(persist_s * 1000, 2),
                f"restore_ms_{label}": round(restore_s * 1000, 2)}
    finally:
        store.close()


def _alternating(total: int, per_ledger: int) -> tuple[UniformView, AckState]:
    view = UniformView(total, per_ledger)
    acks = AckState()
    for ledger_id, size in enumerate(view.sizes, start=1):
        start = view.starts[ledger_id - 1]
        first = 1 - start % 2  # odd global indexes are acked, so entry 0 stays a hole
        acks.acked[ledger_id] = BitMap64(range(first, size, 2))
    return view, acks


def _holes(total: int, per_ledger: int, holes: int, seed: int) -> tuple[UniformView, AckState]:
    view = UniformView(total, per_ledger)
    rng = random.Random(seed)
    hole_indexes = sorted({0} | set(rng.sample(range(total), holes - 1)))
    acks = AckState()
    for ledger_id, size in enumerate(view.sizes, start=1):
        bitmap = BitMap64()
        bitmap.add_range(0, size)
        acks.acked[ledger_id] = bitmap
    for index in hole_indexes:
        position = view._position(index)
        acks.acked[position[0]].discard(position[1])
    return view, acks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="strata perf cursor")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--ack-entries", type=int, default=1_000_000)
    parser.add_argument("--ack-group", type=int, default=100, help="positions per ack() call")
    parser.add_argument("--alternating-entries", type=int, default=1_000_000)
    parser.add_argument("--holes-entries", type=int, default=100_000_000)
    parser.add_argument("--holes", type=int, default=1000)
    parser.add_argument("--ledger-entries", type=int, default=50_000, help="entries per ledger")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    result: dict[str, float] = {}
    result.update(measure_acks(args.ack_entries, args.ledger_entries, args.ack_group, args.seed))
    with tempfile.TemporaryDirectory(prefix="strata-perf-cursor-") as tmp:
        url = f"sqlite:///{tmp}/meta.db"
        view, acks = _alternating(args.alternating_entries, args.ledger_entries)
        result.update(asyncio.run(_persist_and_restore(view, acks, "alternating_1m", url)))
        view, acks = _holes(args.holes_entries, args.ledger_entries, args.holes, args.seed)
        result.update(asyncio.run(_persist_and_restore(view, acks, "100m_1000_holes", url)))
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        for key, value in sorted(result.items()):
            print(f"{key:40} {value}")
    return 0
