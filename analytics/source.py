"""The `strata` PySpark data source: a topic as a Spark table (batch and streaming), and the sink.

    register(spark)     # or analytics.session.strata_session(master)
    spark.read.format("strata").option("topic", "persistent://t/ns/x").load()
    spark.readStream.format("strata").option("topics", "a,b").load()
    df.write.format("strata").mode("append").option("topic", "t").option("service.url", url).save()

Built on PySpark's Python Data Source API (4.1+ for filter pushdown, 4.2+ for admission control):
- batch: `StrataReader` plans at planning time (`analytics.plan`), a snapshot of every topic
  partition's ledgers and last confirmed entry, and returns one InputPartition per ledger slice
  (a row-group range of an offloaded object, or an entry range on the bookies). Executors read
  Arrow record batches (`analytics.read`). pushFilters keeps the comparisons the source answers
  (`analytics.filters`: publish_time, key, partition, topic, ledger_id, entry_id, message_id),
  prunes ledgers and row groups by them, and applies them to the rows on the executors; every
  other filter goes back to Spark, which applies it row by row.
- stream: `StrataStreamReader`, offsets = {topic partition: "L:E"} (the next position to read).
  No subscription is created, so nothing on the cluster pins storage for the query.
- sink: `analytics.sink` (exactly-once through the broker's deduplication).

What must hold: everything shipped to executors (partitions, the reader) is picklable plain
data; `read` keeps no state between calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from analytics import topic_schema
from analytics.filters import RowFilter, split
from analytics.options import Position, SourceOptions, parse_source_options
from analytics.plan import Footers, PlanCounts, Pruning, group_slices, plan_range, resolve_position, time_pruning
from analytics.read import ReadSpec, TimeBounds
from analytics.snapshot import PartitionSnapshot, take_snapshots
from common.errors import BadSourceOption

log = logging.getLogger(__name__)
SOURCE_NAME = "strata"


def register(spark: Any) -> None:
    """Make `format("strata")` known to this session (and turn on filter pushdown, which Spark
    requires for a source that implements pushFilters)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(StrataDataSource)


def message_schema() -> StructType:
    """The Spark schema of a message row: offload.message_table.MESSAGE_ONLY_SCHEMA."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from offload.message_table import MESSAGE_ONLY_SCHEMA

    return from_arrow_schema(MESSAGE_ONLY_SCHEMA)


class StrataDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        schema = message_schema()
        value_schema = {str(k).lower(): v for k, v in self.options.items()}.get("valueschema")
        if not value_schema:                   # the topic's own schema, if it has one
            found = topic_schema.of_options(dict(self.options))
            value_schema = found.struct_json if found is not None else None
        if value_schema:
            from analytics.value import VALUE_COLUMN, value_struct

            schema = schema.add(VALUE_COLUMN, value_struct(value_schema))
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return StrataReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StrataStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from analytics.sink import SinkWriter

        return SinkWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from analytics.sink import SinkStreamWriter

        return SinkStreamWriter(dict(self.options), schema)


class SlicePartition(InputPartition):
    """One Spark partition: (slices, ReadSpec), all plain data."""

    def __init__(self, slices: Sequence[Any], spec: ReadSpec) -> None:
        super().__init__((list(slices), spec))


def _spec(options: SourceOptions, row_filters: Sequence[RowFilter] = ()) -> ReadSpec:
    found = topic_schema.topic_value_schema(options.topics, options.pattern, options.value_schema, options.access)
    value_schema = found.struct_json if found is not None else options.value_schema
    avro = found.definitions if found is not None and found.kind == "AVRO" else ()
    return ReadSpec(options.access, TimeBounds(options.starting_time_ms, options.ending_time_ms),
                    options.fail_on_data_loss, value_schema, options.columns, avro, tuple(row_filters))


def _columns(schema: StructType | None) -> tuple[str, ...]:
    """The columns a user-given schema names (`.schema("key string, payload binary")`): only
    those are read and shipped, the source's one form of column pruning. Each must be one of
    the message columns (or `value` with valueSchema), with its type."""
    if schema is None:
        return ()
    full = message_schema()
    known = {f.name: f.dataType for f in full.fields}
    out = []
    for f in schema.fields:
        if f.name == "value":
            out.append(f.name)
            continue
        if f.name not in known:
            raise BadSourceOption(f"column {f.name!r} is not a message column of format('strata')",
                                  columns=", ".join(known))
        if f.dataType != known[f.name]:
            raise BadSourceOption(f"column {f.name!r} must have type {known[f.name].simpleString()}",
                                  given=f.dataType.simpleString())
        out.append(f.name)
    names = tuple(out)
    return () if names == tuple(known) else names


def _plan(options: SourceOptions, snapshots: Sequence[PartitionSnapshot], starts: dict[str, Position],
          ends: dict[str, Position], prune: Pruning, row_filters: Sequence[RowFilter] = (),
          counts: PlanCounts | None = None) -> list[InputPartition]:
    footers = Footers(options.access)
    footers.prefetch([ledger.cold_key for snap in snapshots for ledger in snap.ledgers
                      if ledger.cold_key and starts[snap.topic][0] <= ledger.ledger_id <= ends[snap.topic][0]
                      and not prune.skips_ledger(ledger) and not prune.skips_partition(snap)])
    slices: list[Any] = []
    for snap in snapshots:
        slices.extend(plan_range(snap, starts[snap.topic], ends[snap.topic], options, prune, footers, counts))
    spec = _spec(options, row_filters)
    return [SlicePartition(group, spec) for group in group_slices(slices, options.partition_bytes)]


class StrataReader(DataSourceReader):
    """A batch query: the snapshot is taken when Spark plans (partitions()), once."""

    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.options = parse_source_options(options, streaming=False, columns=_columns(schema))
        self.prune = time_pruning(self.options, Pruning())
        self.row_filters: list[RowFilter] = []     # the pushed filters the source answers
        self.counts = PlanCounts()                 # what partitions() kept and skipped

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keep the filters the source answers exactly (pruning by them, applying them to the
        rows); return the others, which Spark applies."""
        self.row_filters, rest = split(filters)
        self.prune = time_pruning(self.options, Pruning.from_row_filters(self.row_filters))
        return rest

    def partitions(self) -> Sequence[InputPartition]:
        snapshots = take_snapshots(self.options)
        starts = {s.topic: resolve_position(s, self.options.starting.for_topic(s.topic)) for s in snapshots}
        ends = {s.topic: min(resolve_position(s, self.options.ending.for_topic(s.topic)), s.end) for s in snapshots}
        for topic, start in starts.items():
            if ends[topic] < start and isinstance(self.options.ending.for_topic(topic), tuple):
                raise BadSourceOption("endingOffsets is before startingOffsets", topic=topic)
        self.counts = PlanCounts()
        partitions = _plan(self.options, snapshots, starts, ends, self.prune, self.row_filters, self.counts)
        log.info("format('strata') plan: %d partitions; %s", len(partitions), self.counts.text())
        return partitions or [SlicePartition([], _spec(self.options, self.row_filters))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from analytics.read import read_partition

        yield from read_partition(partition.value)


class StrataStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream: offsets are {topic partition: "L:E"}, the next position to read. No subscription
    is made, so nothing pins the cluster's storage for the query; retention may remove what a
    stopped query has not read (failOnDataLoss decides what then happens)."""

    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.options = parse_source_options(options, streaming=True, columns=_columns(schema))
        self._available_now: dict[str, str] | None = None   # the end of an availableNow run

    def _snapshots(self) -> list[PartitionSnapshot]:
        return take_snapshots(self.options)

    def initialOffset(self) -> dict:
        return {s.topic: _text(resolve_position(s, self.options.starting.for_topic(s.topic)))
                for s in self._snapshots()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = {s.topic: _text(s.end) for s in self._snapshots()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        if self.options.max_bytes_per_trigger:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        snapshots = self._snapshots()
        starts = {s.topic: _parse(start[s.topic]) if s.topic in start else s.first for s in snapshots}
        ends = {s.topic: s.end for s in snapshots}
        if self._available_now is not None:
            ends = {t: min(e, _parse(self._available_now[t])) if t in self._available_now else starts[t]
                    for t, e in ends.items()}
        ends = {t: max(e, starts[t]) for t, e in ends.items()}
        ends = admit(snapshots, starts, ends, limit)
        return {**start, **{t: _text(p) for t, p in ends.items()}}

    def reportLatestOffset(self) -> dict | None:
        return {s.topic: _text(s.end) for s in self._snapshots()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        snapshots = [s for s in self._snapshots() if s.topic in end]
        starts = {s.topic: _parse(start[s.topic]) if s.topic in start else s.first for s in snapshots}
        ends = {s.topic: _parse(end[s.topic]) for s in snapshots}
        prune = time_pruning(self.options, Pruning())
        return _plan(self.options, snapshots, starts, ends, prune)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from analytics.read import read_partition

        yield from read_partition(partition.value)

    def commit(self, end: dict) -> None:
        """Nothing to do: no subscription holds the query's place (the checkpoint does)."""

    def stop(self) -> None:
        """Nothing to release: the reader holds no connection between calls."""


def _text(position: Position) -> str:
    return f"{position[0]}:{position[1]}"


def _parse(text: str) -> Position:
    ledger, _, entry = str(text).partition(":")
    return int(ledger), int(entry)


def admit(snapshots: Sequence[PartitionSnapshot], starts: dict[str, Position], ends: dict[str, Position],
          limit: ReadLimit) -> dict[str, Position]:
    """Ends moved back so the range holds about `limit` rows or bytes in all (whole entries,
    sized by their ledger's averages), shared evenly by the topic partitions with data."""
    if isinstance(limit, ReadMaxRows):
        budget, per = float(limit.max_rows), "messages"
    elif isinstance(limit, ReadMaxBytes):
        budget, per = float(limit.max_bytes), "size_bytes"
    else:
        return ends
    busy = [s for s in snapshots if ends[s.topic] > starts[s.topic]]
    if not busy:
        return ends
    share = budget / len(busy)
    out = dict(ends)
    for snap in busy:
        left = share
        position = starts[snap.topic]
        known = [(getattr(ledger, per), ledger.entries) for ledger in snap.ledgers if getattr(ledger, per)]
        # the open ledger has no counts yet: size it like the partition's closed ledgers
        typical = max(sum(v for v, _ in known) / max(1, sum(n for _, n in known)), 1.0) if known \
            else (1.0 if per == "messages" else 1024.0)
        for ledger in snap.ledgers:
            if ledger.ledger_id < position[0] or (ledger.ledger_id, 0) >= ends[snap.topic]:
                continue
            first = position[1] if ledger.ledger_id == position[0] else 0
            last = min(ledger.entries, ends[snap.topic][1] if ledger.ledger_id == ends[snap.topic][0]
                       else ledger.entries)
            value = getattr(ledger, per)
            per_entry = max(value / ledger.entries, 1.0) if value and ledger.entries else typical
            take = max(1, int(left // per_entry)) if left >= per_entry or position == starts[snap.topic] else 0
            if first + take < last:
                out[snap.topic] = (ledger.ledger_id, first + take)
                break
            left -= (last - first) * per_entry
            position = (ledger.ledger_id, last)
            if left <= 0:
                out[snap.topic] = position
                break
    return out
