"""From snapshots, a position range and pushed filters to slices, and slices to Spark partitions.

    prune = Pruning.from_row_filters(answered)        # what pushFilters learned (analytics.filters)
    slices = plan_range(snapshot, start, end, options, prune, footers, counts)
    groups = group_slices(slices, options.partition_bytes)   # one Spark partition per group

A slice is one ledger's entries [first_entry, last_entry] of one topic partition: for an
offloaded ledger, a range of its object's row groups (`ColdSlice`); for a ledger on the bookies,
an entry range with the ledger's metadata (`HotSlice`). Slices are plain frozen dataclasses, so
they pickle into InputPartitions and executors need nothing from the driver.

Pruning (only skips work: the executors apply the answered filters to the rows, Spark the rest):
- partitions outside a `partition` / `topic` equality or `partition` range are skipped;
- ledgers whose publish-time range ([first, last] publish ms of a closed ledger) misses the
  publish_time bounds, whose id misses the ledger_id bounds, or that no `message_id` = / IN
  names, are skipped, and the entry range is clipped to the entry_id bounds;
- row groups of an offloaded object are skipped by the Parquet statistics in its footer
  (publish_time, entry_id, key), read once per object (`Footers`, threads, bounded).
`PlanCounts` says how many ledgers, objects and row groups were kept and skipped.

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
from analytics.filters import RowFilter, message_id_positions
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
    """Inclusive bounds on one column's values (numbers, or strings for `key`); None = open."""
    low: Any = None
    high: Any = None

    def narrow(self, low: Any = None, high: Any = None) -> None:
        if low is not None:
            self.low = low if self.low is None else max(self.low, low)
        if high is not None:
            self.high = high if self.high is None else min(self.high, high)

    def misses(self, low: Any, high: Any) -> bool:
        """True if no value in [low, high] lies in this range."""
        return (self.low is not None and high < self.low) or (self.high is not None and low > self.high)

    @property
    def open(self) -> bool:
        return self.low is None and self.high is None


@dataclass
class Pruning:
    """Bounds learnt from the answered filters (analytics.filters) and startingTime/endingTime.
    A bound only ever widens what is kept: `>` prunes as `>=` (the row mask is exact)."""
    publish_ms: Range = field(default_factory=Range)
    ledger_id: Range = field(default_factory=Range)
    entry_id: Range = field(default_factory=Range)
    partition: Range = field(default_factory=Range)
    key: Range = field(default_factory=Range)
    partitions: set[int] | None = None     # None: any; else only these (= / IN)
    topics: set[str] | None = None
    keys: set[str] | None = None
    ledgers: set[int] | None = None        # message_id = / IN: only these ledgers (empty: none)

    @classmethod
    def from_row_filters(cls, row_filters: Iterable[RowFilter]) -> Pruning:
        prune = cls()
        for f in row_filters:
            prune._learn(f)
        prune._learn_message_ids(list(row_filters))
        return prune

    def _learn(self, f: RowFilter) -> None:
        if f.op == "notnull":
            return
        if f.op in ("eq", "in") and f.column in ("partition", "topic", "key"):
            name = {"partition": "partitions", "topic": "topics", "key": "keys"}[f.column]
            current = getattr(self, name)
            setattr(self, name, set(f.values) if current is None else current & set(f.values))
        target = {"publish_time": self.publish_ms, "ledger_id": self.ledger_id, "entry_id": self.entry_id,
                  "partition": self.partition, "key": self.key}.get(f.column)
        if target is None:
            return
        values = [v / 1000 for v in f.values] if f.column == "publish_time" else list(f.values)
        if f.op in ("eq", "in"):
            target.narrow(min(values), max(values))
        elif f.op in ("gt", "ge"):
            target.narrow(low=values[0])
        else:
            target.narrow(high=values[0])

    def _learn_message_ids(self, row_filters: list[RowFilter]) -> None:
        positions = message_id_positions(row_filters)
        if positions is None:
            return
        self.ledgers = {ledger for ledger, _ in positions}
        if positions:
            self.entry_id.narrow(min(e for _, e in positions), max(e for _, e in positions))

    def skips_partition(self, snapshot: PartitionSnapshot) -> bool:
        if self.partitions is not None and snapshot.partition not in self.partitions:
            return True
        if self.partition.misses(snapshot.partition, snapshot.partition):
            return True
        return self.topics is not None and snapshot.topic not in self.topics

    def skips_ledger(self, ledger: LedgerInSnapshot) -> bool:
        if self.ledger_id.misses(ledger.ledger_id, ledger.ledger_id):
            return True
        if self.ledgers is not None and ledger.ledger_id not in self.ledgers:
            return True
        if ledger.first_publish_ms and ledger.last_publish_ms and ledger.cold_key:   # closed: range known
            return self.publish_ms.misses(ledger.first_publish_ms, ledger.last_publish_ms)
        return False

    @property
    def by_row_group(self) -> bool:
        """Whether row-group statistics can prune anything."""
        return not (self.publish_ms.open and self.entry_id.open and self.key.open) or self.keys is not None


@dataclass
class PlanCounts:
    """What one planning pass kept and skipped: how pruning shows (StrataReader.counts, and a log
    line at INFO). Objects are offloaded ledgers; a skipped one has no row group planned."""
    ledgers: int = 0                # ledgers with entries in the range, before pruning
    ledgers_skipped: int = 0        # by ledger id, message id or publish-time range
    objects: int = 0                # objects with at least one row group planned
    objects_skipped: int = 0        # objects whose every row group was pruned by statistics
    row_groups: int = 0             # row groups planned
    row_groups_skipped: int = 0     # pruned by statistics (publish_time, entry_id, key)

    def text(self) -> str:
        return ", ".join(f"{name} {value}" for name, value in vars(self).items())


def _number(value: Any) -> float:
    """A statistics value as a number: timestamps as ms since the epoch (naive ones are UTC)."""
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
               prune: Pruning, footers: Footers, counts: PlanCounts | None = None) -> list[Slice]:
    """Slices covering the kept entries in [start, end) of one topic partition (what was kept and
    skipped is added to `counts`)."""
    counts = counts if counts is not None else PlanCounts()
    if prune.skips_partition(snapshot):
        return []
    check_not_lost(snapshot, start, options.fail_on_data_loss)
    out: list[Slice] = []
    for ledger in snapshot.ledgers:
        if ledger.ledger_id < start[0] or ledger.ledger_id > end[0] or not ledger.entries:
            continue
        counts.ledgers += 1
        first = start[1] if ledger.ledger_id == start[0] else 0
        last = min(ledger.entries, end[1] if ledger.ledger_id == end[0] else ledger.entries) - 1
        if prune.entry_id.low is not None:
            first = max(first, int(prune.entry_id.low))
        if prune.entry_id.high is not None:
            last = min(last, int(prune.entry_id.high))
        if last < first or prune.skips_ledger(ledger):
            counts.ledgers_skipped += 1
            counts.objects_skipped += 1 if ledger.cold_key else 0
            continue
        if ledger.cold_key:
            out.extend(footers.cold_slices(snapshot, ledger, first, last, prune, counts))
        else:
            out.extend(_hot_slices(snapshot, ledger, first, last, options.partition_bytes))
    return out


def _hot_slices(snapshot: PartitionSnapshot, ledger: LedgerInSnapshot, first: int, last: int,
                partition_bytes: int) -> list[Slice]:
    """Entries [first, last] of a ledger on the bookies, in slices of about partition_bytes."""
    per_entry = ledger.size_bytes / ledger.entries if ledger.size_bytes and ledger.entries else 1024.0
    step = max(1, int(partition_bytes // per_entry))
    out: list[Slice] = []
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
                    prune: Pruning, counts: PlanCounts) -> list[ColdSlice]:
        from offload.format import row_group_byte_spans, row_group_entry_ranges

        self.prefetch([ledger.cold_key])
        meta = self._meta[ledger.cold_key]
        ranges = row_group_entry_ranges(meta)
        spans = row_group_byte_spans(meta)
        out: list[ColdSlice] = []
        for index, (group_first, group_last) in enumerate(ranges):
            if group_last < first or group_first > last:
                continue
            if _row_group_pruned(meta, index, prune):
                counts.row_groups_skipped += 1
                continue
            size = spans[index][1] - spans[index][0]
            out.append(ColdSlice(snapshot.topic, snapshot.partition, ledger.ledger_id, ledger.cold_key, (index,),
                                 max(first, group_first), min(last, group_last), size, ledger.cold_bytes))
        counts.row_groups += len(out)
        counts.objects += 1 if out else 0
        counts.objects_skipped += 0 if out else 1
        return out


def _row_group_pruned(meta: Any, index: int, prune: Pruning) -> bool:
    """True if the row group's statistics show no row can pass (publish_time, entry_id, key)."""
    if not prune.by_row_group:
        return False
    group = meta.row_group(index)
    for column_index in range(group.num_columns):
        column = group.column(column_index)
        stats = column.statistics
        if stats is None or not stats.has_min_max:
            continue
        name = column.path_in_schema
        if name == "key" and isinstance(stats.min, str) and isinstance(stats.max, str):
            if prune.key.misses(stats.min, stats.max):
                return True
            if prune.keys is not None and not any(stats.min <= k <= stats.max for k in prune.keys):
                return True
        bounds = {"publish_time": prune.publish_ms, "entry_id": prune.entry_id}.get(name)
        if bounds is not None and bounds.misses(_number(stats.min), _number(stats.max)):
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
