"""From snapshots, a position range and pushed filters to slices, and slices to Spark partitions.

    prune = Pruning.from_filters(filters)             # what pushFilters learned
    slices = plan_range(snapshot, start, end, options, prune, footers)
    groups = group_slices(slices, options.partition_bytes)   # one Spark partition per group

A slice is one ledger's entries [first_entry, last_entry] of one topic partition: for an
offloaded ledger, a range of its object's row groups (`ColdSlice`); for a ledger on the bookies,
an entry range with the ledger's metadata (`HotSlice`). Slices are plain frozen dataclasses, so
they pickle into InputPartitions and executors need nothing from the driver.

Pruning (never changes the result, only skips work; Spark re-applies every filter):
- ledgers whose publish-time range ([first, last] publish ms of a closed ledger) misses the
  publish_time bounds, or whose id misses the ledger_id bounds, are skipped, and partitions not
  in a `partition` / `topic` equality;
- row groups of an offloaded object are skipped by the Parquet statistics in its footer
  (publish_time, entry_id, key), read once per object (`Footers`, threads, bounded).

What must hold: for a range [start, end) the slices cover every kept entry in it exactly once,
in position order; pruning removes a ledger or row group only if no row in it can pass.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from analytics.access import ClusterAccess
from analytics.options import EARLIEST, Position, SourceOptions
from analytics.snapshot import LedgerInSnapshot, PartitionSnapshot
from common.errors import ColdObjectCorrupt, ColdObjectMissing, DataLost

log = logging.getLogger(__name__)
FOOTER_THREADS = 8
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True)
class ColdSlice:
    topic: str
    partition: int
    ledger_id: int
    key: str                      # the object's key in the bucket
    row_groups: tuple[int, ...]   # row groups to read, in order
    first_entry: int              # rows outside [first_entry, last_entry] are dropped
    last_entry: int
    size_bytes: int               # estimate, for grouping
    object_bytes: int = 0         # the object's size (saves the reader a HEAD); 0 = unknown


@dataclass(frozen=True)
class HotSlice:
    topic: str
    partition: int
    ledger_id: int
    metadata_json: bytes
    first_entry: int
    last_entry: int
    size_bytes: int
    first_offset: int = -1        # Kafka offset of first_entry's first message; -1: unknown
    # when first_offset is unknown: an earlier entry of the ledger whose offset is known (the
    # reader counts the messages in between); -1: none (null offsets)
    anchor_entry: int = -1
    anchor_offset: int = -1


Slice = ColdSlice | HotSlice


@dataclass
class Range:
    low: float | None = None      # inclusive
    high: float | None = None     # inclusive

    def narrow(self, low: float | None = None, high: float | None = None) -> None:
        if low is not None:
            self.low = low if self.low is None else max(self.low, low)
        if high is not None:
            self.high = high if self.high is None else min(self.high, high)

    def misses(self, low: float, high: float) -> bool:
        """True if no value in [low, high] lies in this range."""
        return (self.low is not None and high < self.low) or (self.high is not None and low > self.high)


@dataclass
class Pruning:
    publish_ms: Range = field(default_factory=Range)
    ledger_id: Range = field(default_factory=Range)
    entry_id: Range = field(default_factory=Range)
    partitions: set[int] | None = None
    topics: set[str] | None = None
    keys: set[str] | None = None

    @classmethod
    def from_filters(cls, filters: Iterable[Any]) -> Pruning:
        """Learn bounds from PySpark's pushed filters (EqualTo, In, GreaterThan(OrEqual),
        LessThan(OrEqual) on publish_time, ledger_id, entry_id, partition, topic, key)."""
        prune = cls()
        for f in filters:
            prune._learn(f)
        return prune

    def _learn(self, f: Any) -> None:
        kind = type(f).__name__
        attribute: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
        if len(attribute) != 1:
            return
        column = attribute[0]
        values = list(f.value) if kind == "In" else [getattr(f, "value", None)]
        if kind in ("EqualTo", "In") and column in ("partition", "topic", "key"):
            allowed = {v for v in values if v is not None}
            current = getattr(self, {"partition": "partitions", "topic": "topics", "key": "keys"}[column])
            setattr(self, {"partition": "partitions", "topic": "topics", "key": "keys"}[column],
                    allowed if current is None else current & allowed)
            return
        target = {"publish_time": self.publish_ms, "ledger_id": self.ledger_id, "entry_id": self.entry_id}.get(column)
        if target is None or not values or values[0] is None:
            return
        numbers = [_number(v) for v in values]
        if kind in ("EqualTo", "In"):
            target.narrow(min(numbers), max(numbers))
        elif kind in ("GreaterThan", "GreaterThanOrEqual"):
            target.narrow(low=numbers[0])
        elif kind in ("LessThan", "LessThanOrEqual"):
            target.narrow(high=numbers[0])

    def skips_partition(self, snapshot: PartitionSnapshot) -> bool:
        if self.partitions is not None and snapshot.partition not in self.partitions:
            return True
        return self.topics is not None and snapshot.topic not in self.topics

    def skips_ledger(self, ledger: LedgerInSnapshot) -> bool:
        if self.ledger_id.misses(ledger.ledger_id, ledger.ledger_id):
            return True
        if ledger.first_publish_ms and ledger.last_publish_ms and ledger.cold_key:   # closed: range known
            return self.publish_ms.misses(ledger.first_publish_ms, ledger.last_publish_ms)
        return False


def _number(value: Any) -> float:
    """A filter value as a number: timestamps as ms since the epoch (naive ones are UTC)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return (value - _EPOCH) / datetime.timedelta(milliseconds=1)
    return float(value)


def time_pruning(options: SourceOptions, prune: Pruning) -> Pruning:
    """startingTime/endingTime are publish-time bounds too (end exclusive)."""
    if options.starting_time_ms is not None:
        prune.publish_ms.narrow(low=options.starting_time_ms)
    if options.ending_time_ms is not None:
        prune.publish_ms.narrow(high=options.ending_time_ms - 0.001)
    return prune


def resolve_position(snapshot: PartitionSnapshot, bound: Position | str) -> Position:
    if isinstance(bound, tuple):
        return bound
    return snapshot.first if bound == EARLIEST else snapshot.end


def plan_range(snapshot: PartitionSnapshot, start: Position, end: Position, options: SourceOptions,
               prune: Pruning, footers: Footers) -> list[Slice]:
    """Slices covering the kept entries in [start, end) of one topic partition."""
    if prune.skips_partition(snapshot):
        return []
    check_not_lost(snapshot, start, options.fail_on_data_loss)
    out: list[Slice] = []
    for ledger in snapshot.ledgers:
        if ledger.ledger_id < start[0] or ledger.ledger_id > end[0] or not ledger.entries:
            continue
        first = start[1] if ledger.ledger_id == start[0] else 0
        last = min(ledger.entries, end[1] if ledger.ledger_id == end[0] else ledger.entries) - 1
        if prune.entry_id.low is not None:
            first = max(first, int(prune.entry_id.low))
        if prune.entry_id.high is not None:
            last = min(last, int(prune.entry_id.high))
        if last < first or prune.skips_ledger(ledger):
            continue
        per_entry = ledger.size_bytes / ledger.entries if ledger.size_bytes and ledger.entries else 1024.0
        if ledger.cold_key:
            out.extend(footers.cold_slices(snapshot, ledger, first, last, prune))
        else:
            step = max(1, int(options.partition_bytes // per_entry))   # a big hot ledger: several slices
            for low in range(first, last + 1, step):
                high = min(last, low + step - 1)
                anchor_entry, anchor_offset = ledger.offset_anchor(low)
                out.append(HotSlice(snapshot.topic, snapshot.partition, ledger.ledger_id, ledger.metadata_json,
                                    low, high, int(per_entry * (high - low + 1)), ledger.offset_of(low),
                                    anchor_entry, anchor_offset))
    return out


def check_not_lost(snapshot: PartitionSnapshot, start: Position, fail_on_data_loss: bool) -> None:
    """A start before the first kept ledger means retention removed what the query asked for."""
    first_kept = snapshot.ledgers[0].ledger_id if snapshot.ledgers else None
    if first_kept is None or start >= (first_kept, 0) or start == (0, 0):
        return
    if fail_on_data_loss:
        raise DataLost("messages before the first kept ledger were removed (retention)", topic=snapshot.topic,
                       start=f"{start[0]}:{start[1]}", first_kept=f"{first_kept}:0",
                       hint="set failOnDataLoss=false to skip them")
    log.warning("%s: messages from %d:%d to %d:0 were removed by retention; skipped (failOnDataLoss=false)",
                snapshot.topic, start[0], start[1], first_kept)


class Footers:
    """Offloaded objects' footers, read on the driver (threads) to split and prune by row group."""

    def __init__(self, access: ClusterAccess) -> None:
        self.access = access
        self._meta: dict[str, Any] = {}

    def prefetch(self, keys: Sequence[str]) -> None:
        missing = [k for k in dict.fromkeys(keys) if k not in self._meta]
        if not missing:
            return
        filesystem = self.access.s3_filesystem()
        with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(missing))) as pool:
            for key, meta in zip(missing, pool.map(lambda k: self._read(filesystem, k), missing)):
                self._meta[key] = meta

    def _read(self, filesystem: Any, key: str) -> Any:
        import pyarrow.parquet as pq

        from offload.format import object_summary

        path = self.access.object_path(key)
        try:
            meta = pq.read_metadata(path, filesystem=filesystem)
        except FileNotFoundError:
            raise ColdObjectMissing("an offloaded ledger's object is missing from S3", key=key,
                                    bucket=self.access.s3_bucket) from None
        except OSError as exc:
            if "NoSuchKey" in str(exc) or "404" in str(exc):
                raise ColdObjectMissing("an offloaded ledger's object is missing from S3", key=key) from None
            raise ColdObjectCorrupt(f"an offloaded ledger's object cannot be read: {exc}", key=key) from None
        except Exception as exc:   # pyarrow's errors on a damaged footer: ArrowInvalid and kin
            raise ColdObjectCorrupt(f"an offloaded ledger's object is damaged: {exc}", key=key) from None
        object_summary(meta)       # ColdObjectCorrupt unless it is one of ours, of a known version
        return meta

    def cold_slices(self, snapshot: PartitionSnapshot, ledger: LedgerInSnapshot, first: int, last: int,
                    prune: Pruning) -> list[ColdSlice]:
        from offload.format import row_group_byte_spans, row_group_entry_ranges

        self.prefetch([ledger.cold_key])
        meta = self._meta[ledger.cold_key]
        ranges = row_group_entry_ranges(meta)
        spans = row_group_byte_spans(meta)
        out: list[ColdSlice] = []
        for index, (group_first, group_last) in enumerate(ranges):
            if group_last < first or group_first > last or _row_group_pruned(meta, index, prune):
                continue
            size = spans[index][1] - spans[index][0]
            out.append(ColdSlice(snapshot.topic, snapshot.partition, ledger.ledger_id, ledger.cold_key, (index,),
                                 max(first, group_first), min(last, group_last), size, ledger.cold_bytes))
        return out


def _row_group_pruned(meta: Any, index: int, prune: Pruning) -> bool:
    checks = [("publish_time", prune.publish_ms), ("entry_id", prune.entry_id)]
    if not any(r.low is not None or r.high is not None for _, r in checks) and prune.keys is None:
        return False
    group = meta.row_group(index)
    for column_index in range(group.num_columns):
        column = group.column(column_index)
        name = column.path_in_schema
        stats = column.statistics
        if stats is None or not stats.has_min_max:
            continue
        if name == "key" and prune.keys is not None:
            if not any(stats.min <= k <= stats.max for k in prune.keys) and stats.null_count < group.num_rows:
                return True
        for column_name, bounds in checks:
            if name == column_name and bounds.misses(_number(stats.min), _number(stats.max)):
                return True
    return False


def group_slices(slices: Sequence[Slice], partition_bytes: int) -> list[list[Slice]]:
    """Consecutive slices of one ledger kind merged up to partition_bytes (a row-group range of
    one object, or adjacent entry ranges), then packed into groups of about partition_bytes."""
    groups: list[list[Slice]] = []
    current: list[Slice] = []
    size = 0
    for piece in slices:
        if current and size + piece.size_bytes > partition_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(piece)
        size += piece.size_bytes
    if current:
        groups.append(current)
    return [_merge_adjacent(group) for group in groups]


def _merge_adjacent(group: list[Slice]) -> list[Slice]:
    out: list[Slice] = []
    for piece in group:
        prev = out[-1] if out else None
        if isinstance(piece, ColdSlice) and isinstance(prev, ColdSlice) and prev.key == piece.key \
                and prev.last_entry + 1 == piece.first_entry:
            out[-1] = ColdSlice(prev.topic, prev.partition, prev.ledger_id, prev.key,
                                prev.row_groups + piece.row_groups, prev.first_entry, piece.last_entry,
                                prev.size_bytes + piece.size_bytes, prev.object_bytes)
        else:
            out.append(piece)
    return out
