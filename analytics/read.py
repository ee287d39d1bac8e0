"""Executor side: a planned slice -> Arrow record batches of message rows (MESSAGE_ONLY_SCHEMA).

    for batch in read_slices(slices, ReadSpec(access, bounds, fail_on_data_loss)):
        ...                                   # pyarrow.RecordBatch, the source's schema

- `ColdSlice`: the object's row groups straight from S3 with pyarrow's native S3 filesystem
  (pre-buffered ranged reads, page checksums verified), only the message columns; no broker.
- `HotSlice`: the entries straight from the bookies (the ledger's metadata came with the slice:
  ensembles and quorums), each entry unpacked into rows by `offload.message_table`, exactly as
  the offloader would write them. Like Pulsar SQL, no broker funnels the data. The bookies are
  asked with the executor environment's link settings (STRATA_BOOKIE_AUTH_SECRET, the TLS files:
  bookie/link_auth.py `link_config`), as a broker asks them.
- The `offset` column (Kafka offsets): stored in objects written since it exists (older ones
  lack it: null here); a hot slice counts it from its first entry's offset, which the planner
  knew (null when it did not).
- Rows outside the slice's entry range (a row group's edges), when the query has
  startingTime/endingTime, outside those publish times, and rows the filters the source
  answered (analytics.filters) reject, are dropped here.

What must hold: each slice yields exactly its entries' rows, in (entry_id, batch_index) order, or
raises: a damaged object ColdObjectCorrupt; data gone (a missing object, a deleted ledger)
DataLost, or a warning and nothing when failOnDataLoss is false.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from analytics.access import ClusterAccess
from analytics.filters import RowFilter, columns_of, row_mask
from analytics.plan import ColdSlice, HotSlice, Slice
from bookie.link_auth import link_config
from common.clock import SYSTEM_CLOCK
from common.errors import ColdObjectCorrupt, ColdObjectMissing, DataLost, MalformedFrame, NoSuchEntry, NoSuchLedger
from entries.entry import parse_entry
from ledger.handle import ReadHandle
from ledger.ledger_metadata import LedgerMetadata
from ledger.ledger_store import BookiePool
from offload.message_table import MESSAGE_COLUMNS, MESSAGE_ONLY_SCHEMA, EntryTableBuilder, LedgerOrigin

log = logging.getLogger(__name__)
HOT_READ_ENTRIES = 256            # entries per bookie read (and per record batch of a hot slice)
COLD_BATCH_ROWS = 16_384          # rows per record batch of a cold slice
COLD_READ_AHEAD_BATCHES = 8       # batches of a cold slice fetched ahead of the one being shipped
HOT_READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class TimeBounds:
    """Publish-time bounds in ms (start inclusive, end exclusive); None = open."""
    start_ms: int | None = None
    end_ms: int | None = None

    @property
    def active(self) -> bool:
        return self.start_ms is not None or self.end_ms is not None


@dataclass(frozen=True)
class ReadSpec:
    """What every partition of a query shares: plain data, shipped with each partition."""
    access: ClusterAccess
    bounds: TimeBounds
    fail_on_data_loss: bool
    value_schema: str = ""        # "" or a Spark StructType as JSON (analytics.value)
    columns: tuple[str, ...] = () # () = all; else the user-given schema's columns, in its order
    value_avro: tuple[str, ...] = ()  # Avro payloads: the topic's schema versions, newest first
    row_filters: tuple[RowFilter, ...] = ()  # pushed filters the source answers (Spark does not)


def read_slices(slices: Sequence[Slice], spec: ReadSpec) -> Iterator[pa.RecordBatch]:
    decoder: Any = None
    if spec.value_avro:                # the topic's Avro schema (analytics.topic_schema)
        from analytics.topic_schema import AvroValueDecoder, TopicValueSchema

        decoder = AvroValueDecoder(TopicValueSchema("AVRO", spec.value_schema, spec.value_avro))
    elif spec.value_schema:
        from analytics.value import ValueDecoder

        decoder = ValueDecoder(spec.value_schema)
    read_columns = _columns_to_read(spec)
    for piece in slices:
        try:
            batches = _read_cold(piece, spec.access, read_columns) if isinstance(piece, ColdSlice) \
                else _read_hot(piece)
            for batch in batches:
                batch = _within(batch, piece, spec.bounds, spec.row_filters)
                if not batch.num_rows:
                    continue
                if decoder is not None:
                    batch = decoder.add_value(batch)
                yield batch if not spec.columns else batch.select(list(spec.columns))
        except DataLost as exc:
            if spec.fail_on_data_loss:
                raise
            log.warning("skipped (failOnDataLoss=false): %s", exc)


def _columns_to_read(spec: ReadSpec) -> list[str]:
    """The stored columns a cold read fetches: the asked ones, plus what slicing and decoding need."""
    if not spec.columns:
        return list(MESSAGE_COLUMNS)
    needed = set(spec.columns) | {"entry_id"} | ({"publish_time"} if spec.bounds.active else set()) \
        | ({"payload"} if spec.value_schema and "value" in spec.columns else set()) | columns_of(spec.row_filters)
    return [name for name in MESSAGE_COLUMNS if name in needed]


def _within(batch: pa.RecordBatch, piece: Slice, bounds: TimeBounds,
            row_filters: Sequence[RowFilter] = ()) -> pa.RecordBatch:
    """The rows of `batch` inside the slice's entries, the time bounds and the answered filters."""
    entry = batch.column("entry_id")
    mask = None
    if pc.min(entry).as_py() < piece.first_entry or pc.max(entry).as_py() > piece.last_entry:
        mask = pc.and_(pc.greater_equal(entry, piece.first_entry), pc.less_equal(entry, piece.last_entry))
    if bounds.active:
        publish = batch.column("publish_time").cast(pa.int64())
        for condition in (pc.greater_equal(publish, bounds.start_ms * 1000) if bounds.start_ms is not None else None,
                          pc.less(publish, bounds.end_ms * 1000) if bounds.end_ms is not None else None):
            if condition is not None:
                mask = condition if mask is None else pc.and_(mask, condition)
    answered = row_mask(batch, row_filters)
    if answered is not None:
        mask = answered if mask is None else pc.and_(mask, answered)
    return batch if mask is None else batch.filter(pc.fill_null(mask, False))


def _read_cold(piece: ColdSlice, access: ClusterAccess, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The slice's row groups through pyarrow's dataset scanner: ranged GETs pre-buffered and
    fetched ahead (COLD_READ_AHEAD_BATCHES) while earlier batches are decoded and shipped."""
    import pyarrow.dataset as ds

    path = access.object_path(piece.key)
    try:
        fmt = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(
            pre_buffer=True, page_checksum_verification=True))
        fragment = fmt.make_fragment(path, filesystem=access.s3_filesystem(), row_groups=list(piece.row_groups),
                                     file_size=piece.object_bytes or None)
        stored = set(fragment.physical_schema.names)
        missing = [name for name in columns if name not in stored]     # `offset` of an older object
        for batch in fragment.to_batches(columns=[c for c in columns if c in stored], batch_size=COLD_BATCH_ROWS,
                                         batch_readahead=COLD_READ_AHEAD_BATCHES, use_threads=True):
            yield _conform(_with_nulls(batch, columns, missing))
    except FileNotFoundError:
        raise DataLost("an offloaded ledger's object is gone from S3", key=piece.key,
                       ledger_id=piece.ledger_id, topic=piece.topic) from None
    except OSError as exc:
        if "NoSuchKey" in str(exc) or "404" in str(exc):
            raise DataLost("an offloaded ledger's object is gone from S3", key=piece.key,
                           ledger_id=piece.ledger_id) from None
        if "403" in str(exc) or "AccessDenied" in str(exc) or "InvalidAccessKeyId" in str(exc):
            raise ColdObjectMissing(f"S3 refused the read: {exc}", key=piece.key) from None
        raise ColdObjectCorrupt(f"an offloaded ledger's object could not be read: {exc}", key=piece.key) from None
    except pa.ArrowException as exc:
        raise ColdObjectCorrupt(f"an offloaded ledger's object is damaged: {exc}", key=piece.key) from None


def _with_nulls(batch: pa.RecordBatch, columns: list[str], missing: list[str]) -> pa.RecordBatch:
    """`batch` with null columns for those its object lacks, in `columns`' order."""
    if not missing:
        return batch
    arrays = [pa.nulls(batch.num_rows, MESSAGE_ONLY_SCHEMA.field(name).type) if name in missing
              else batch.column(name) for name in columns]
    return pa.RecordBatch.from_arrays(arrays, names=columns)


def _conform(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The source's exact types (dictionary-encoded columns come back as plain ones)."""
    schema = pa.schema([MESSAGE_ONLY_SCHEMA.field(name) for name in batch.schema.names])
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(i).cast(schema.field(i).type) for i in range(len(schema))],
                                      schema=schema)


def _read_hot(piece: HotSlice) -> Iterator[pa.RecordBatch]:
    meta = LedgerMetadata.from_json(piece.metadata_json)
    loop = asyncio.new_event_loop()
    config = link_config()   # the bookie secret and TLS files from STRATA_* (the executor's environment)
    pool = BookiePool(config, SYSTEM_CLOCK)
    try:
        handle = ReadHandle(meta, pool, config, SYSTEM_CLOCK, last_add_confirmed=piece.last_entry)
        first_offset = piece.first_offset
        if first_offset < 0 <= piece.anchor_offset:
            first_offset = _offset_from_anchor(loop, handle, piece)
        rows = EntryTableBuilder(LedgerOrigin(piece.topic, piece.partition, piece.ledger_id), first_offset)
        for low in range(piece.first_entry, piece.last_entry + 1, HOT_READ_ENTRIES):
            high = min(piece.last_entry, low + HOT_READ_ENTRIES - 1)
            try:
                entries = loop.run_until_complete(asyncio.wait_for(handle.read(low, high), HOT_READ_TIMEOUT_S))
            except (NoSuchLedger, NoSuchEntry) as exc:
                raise DataLost("a ledger's entries are gone from the bookies (retention deleted it?)",
                               ledger_id=piece.ledger_id, topic=piece.topic, cause=str(exc)) from None
            for entry_id, data in entries:
                rows.add(entry_id, data)
            table = rows.take()
            if table is not None:
                yield from table.select(list(MESSAGE_COLUMNS)).to_batches()
    finally:
        loop.run_until_complete(pool.close())
        loop.close()


def _offset_from_anchor(loop: asyncio.AbstractEventLoop, handle: ReadHandle, piece: HotSlice) -> int:
    """The first offset of a slice that starts past its ledger's index checkpoint: the anchor's
    offset plus the messages of the entries between (at most a checkpoint interval of them)."""
    offset = piece.anchor_offset
    for low in range(piece.anchor_entry, piece.first_entry, HOT_READ_ENTRIES):
        high = min(piece.first_entry - 1, low + HOT_READ_ENTRIES - 1)
        entries = loop.run_until_complete(asyncio.wait_for(handle.read(low, high), HOT_READ_TIMEOUT_S))
        for _entry_id, data in entries:
            try:
                offset += max(1, parse_entry(data).num_messages)
            except MalformedFrame:
                offset += 1       # stored as the broker counted it: one message for an unparsable entry
    return offset


def read_partition(value: Any) -> Iterator[pa.RecordBatch]:
    """What the source's `read(partition)` runs: value = (slices, ReadSpec)."""
    slices, spec = value
    yield from read_slices(slices, spec)
