"""The Parquet format of an offloaded ledger: one object per ledger, one row per message.

Analytics engines (Spark, DuckDB, Polars, pyarrow.dataset) read an object as plain Parquet: the
message columns say what a consumer would see (topic, ids, key, properties, times, producer,
decompressed payload). The broker reads the same object back and rebuilds every stored entry
byte for byte, CRC32C included, from the message rows plus a few rebuild columns.
`offload.rows` unpacks entries into the row columns, `offload.message_table` holds the schema and
builds the rows into Arrow tables; this module owns the file and the way back from rows to entries.

Rows, in (entry_id, batch_index) order; an entry's rows are consecutive and a row group never
splits an entry:
- message columns: topic, partition (-1: not a partition), ledger_id, entry_id, batch_index (-1:
  a non-batched entry), batch_size (members of the batch; 0 for a non-batched entry, as in a
  message id), offset (the message's Kafka offset: the entry's offset + batch_index, or + 0 for
  a non-batched entry; `offload.message_table` says how entry offsets are known; objects
  written before it existed lack the column, and nothing that rebuilds entries reads it),
  message_id (the serialized MessageIdData a consumer gets; the official client's
  `MessageId.deserialize` takes it), key (partition key), ordering_key, properties, publish_time,
  event_time (null when unset), producer_name, sequence_id (as Java's signed long), payload (the
  decompressed message payload; null for a null-value message, and for an opaque entry, below).
  Times are timestamp[us, UTC] (Iceberg refuses ns); a time past year 294,000 is null. An
  opaque or raw entry (below) has one row, batch_index -1 (batch_size: its message count).
- rebuild columns (set on an entry's first row only, null on the others, except message_metadata):
  entry_rebuild (how to rebuild it, below), entry_crc32c (the stored CRC32C), entry_metadata (the
  stored MessageMetadata bytes), message_metadata (a batch member's SingleMessageMetadata bytes,
  every batch row), entry_payload (the stored payload block, only when rows cannot rebuild it).
- entry_rebuild = 0..3 (ROWS_*): the payload block is the rows joined (a batch: per member
  [u32 BE size][message_metadata][payload]; otherwise the payload), then compressed with that
  Pulsar CompressionType (NONE, LZ4, ZLIB, ZSTD). The writer checks at write time that this gives
  exactly the stored block (recompressing as `entries.batch.compress` does).
  BLOCK (16): entry_payload is the stored payload block: recompression differs (another codec
  implementation or level), or the entry is opaque (encrypted, chunked, a marker, an unknown or
  undecodable compression), in which case it has one row with payload null.
  RAW (17): entry_payload is the whole stored entry, kept verbatim because it does not parse or
  its stored CRC32C is wrong (it is delivered as the bookie would, unchecked).
  Nothing else is stored twice: a rebuildable entry's payload lives only in the message rows.

What must hold:
- `entries_from_table` / `read_entries` return exactly the requested entries, each equal to the
  bytes `LedgerWriter.add` got; every rebuilt entry's CRC32C is checked against entry_crc32c.
  Anything missing, out of order, or failing a page checksum or CRC raises ColdObjectCorrupt and
  returns nothing (never wrong bytes).
- The footer's key-value metadata carries strata.* (format_version, ledger_id, first_entry_id,
  last_entry_id, entries, messages, min/max_publish_time_ms, topic, partition); `object_summary`
  refuses an object without them or of another format version. strata.row_groups maps each row
  group to its entry count and byte span ("entries:start:end,..."): readers take row group
  ranges from it, never from pyarrow's per-column metadata, which aborts the whole process (an
  uncaught C++ exception, pyarrow 26) on some damaged footers; a Parquet footer has no checksum.
- Recompression and library upgrades: ROWS_LZ4/ZLIB/ZSTD entries come back byte for byte as long
  as the codec library compresses as it did at write time. If an upgrade changed its output, the
  recompressed entry fails its CRC although its rows passed their page checksums: such an entry
  is then delivered *uncompressed* (its MessageMetadata without compression/uncompressed_size,
  a fresh CRC32C): the same messages, ids and payloads, other bytes. That is counted
  (`codec_fallbacks`) and logged, never lost. A row damaged on S3 fails its page checksum
  first and stays ColdObjectCorrupt.

Parquet options. Compression measured on 60k messages of 1 KiB in uncompressed batches of 128
(CPU us per message, write / rebuild, on the shared 2-core box; size = Parquet bytes / stored
entry bytes):
  codec          random payloads              JSON-like text payloads
  none           4.7 / 1.4   size 1.049       4.4 / 1.2   size 1.049
  snappy         4.2 / 1.1   size 1.009       5.4 / 2.2   size 0.421
  lz4            4.1 / 1.1   size 1.011       5.3 / 1.4   size 0.423
  zstd level 1   4.6 / 1.4   size 0.999       5.3 / 1.5   size 0.228
  zstd level 3   6.0 / 1.3   size 0.998       8.8 / 1.7   size 0.232
ZSTD level 1 is chosen: on incompressible payloads it costs about what none does (zstd falls
back to raw blocks, and it still shrinks the id/metadata columns), on compressible ones it is
half the size of snappy/lz4 for the same time; level 3 buys nothing more. Page checksums are
written and verified on read (about 0.5 us per KiB message); statistics are kept for the
filterable scalar columns (and topic, whose min == max lets Iceberg partition by it),
dictionaries only for the low-cardinality strings and constant ids.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, Protocol, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from crc32c import crc32c
from google.protobuf.message import DecodeError

from common.errors import (
    ColdObjectCorrupt,
    ColdObjectMissing,
    InvariantViolation,
    StrataError,
)
from entries import batch as eb
from entries.entry import MAGIC_CRC32C_BYTES, build_entry
from offload.message_table import (
    MESSAGE_SCHEMA,
    REBUILD_COLUMNS,
    REBUILD_SCHEMA,
    EntryTableBuilder,
    LedgerOrigin,
)
from offload.rows import (
    BLOCK,
    RAW,
    ROWS_CODECS,
    compress,
)
from proto import pulsar_api_pb2 as pb

FORMAT_VERSION = 1
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 1

_DICTIONARY_COLUMNS = ["topic", "producer_name", "key", "partition", "ledger_id"]
_STATISTICS_COLUMNS = ["topic", "ledger_id", "entry_id", "partition", "batch_index", "offset", "publish_time",
                       "event_time", "key", "sequence_id"]
_SORTING = [pq.SortingColumn(3), pq.SortingColumn(4)]  # entry_id, batch_index

META_PREFIX = "strata."
_META_INT_FIELDS = ("format_version", "ledger_id", "first_entry_id", "last_entry_id", "entries",
                    "messages", "min_publish_time_ms", "max_publish_time_ms", "partition")

_U32 = struct.Struct(">I")
log = logging.getLogger(__name__)
# Entries delivered uncompressed because recompression no longer reproduced their CRC (see the
# module docstring); process-wide, read by tests and logged every CODEC_FALLBACK_LOG_EVERY.
codec_fallbacks = 0
CODEC_FALLBACK_LOG_EVERY = 1_000


class WritableSink(Protocol):
    """What LedgerWriter writes to besides a path: pyarrow calls write, and may call flush; the
    writer calls tell (bytes written so far) around each row group to record its byte span."""

    def write(self, data: bytes, /) -> object: ...

    def tell(self) -> int: ...


class LedgerWriter:
    """Writes one ledger's entries as one Parquet object, a row group per ~row_group_bytes.

    sink: a path or a writable binary file-like. Entries come in order (first, first+1, ...);
    `add` buffers them and writes a row group once the buffered payload reaches row_group_bytes
    (never splitting an entry); `close` writes the last row group and the footer.
    """

    def __init__(self, sink: str | WritableSink, origin: LedgerOrigin, row_group_bytes: int) -> None:
        if row_group_bytes <= 0:
            raise InvariantViolation("row_group_bytes must be positive", row_group_bytes=row_group_bytes)
        self.origin = origin
        self.row_group_bytes = row_group_bytes
        # a path is opened here, so that every sink tells how far it got (row group byte spans)
        self._own_file: BinaryIO | None = None  # a file opened here from a path; closed by close()
        if isinstance(sink, str):
            self._own_file = open(sink, "wb")
            sink = self._own_file
        self._sink: WritableSink = sink
        self._sink_base = self._sink.tell()
        self._row_groups: list[tuple[int, int, int]] = []  # (entries, start byte, end byte) written
        self._writer = pq.ParquetWriter(
            self._sink, MESSAGE_SCHEMA, compression=PARQUET_COMPRESSION,
            compression_level=PARQUET_COMPRESSION_LEVEL, use_dictionary=_DICTIONARY_COLUMNS,
            write_statistics=_STATISTICS_COLUMNS, write_page_checksum=True, sorting_columns=_SORTING)
        self._rows = EntryTableBuilder(origin)
        self._closed: dict[str, str] | None = None

    def add(self, entry_id: int, data: bytes, messages: int | None = None) -> None:
        """Add the next entry (its stored bytes; `messages`: its recorded message count, which
        the offsets follow, None: counted from the bytes)."""
        if self._closed is not None:
            raise InvariantViolation("add after close", entry_id=entry_id)
        self._rows.add(entry_id, data, messages)
        if self._rows.bytes_buffered >= self.row_group_bytes:
            self._flush()

    @property
    def entries(self) -> int:
        return self._rows.entries

    @property
    def messages(self) -> int:
        return self._rows.messages

    @property
    def first_entry_id(self) -> int | None:
        return self._rows.first_entry_id

    @property
    def next_entry_id(self) -> int | None:
        return self._rows.next_entry_id

    def _flush(self) -> None:
        table = self._rows.take()
        if table is None:
            return
        start = self._sink.tell() - self._sink_base
        self._writer.write_table(table, row_group_size=table.num_rows)  # one row group, written through
        self._row_groups.append((self._rows.last_taken_entries, start, self._sink.tell() - self._sink_base))

    def close(self) -> dict[str, str]:
        """Write the last row group and the footer; the strata.* metadata written."""
        if self._closed is not None:
            return self._closed
        self._flush()
        rows = self._rows
        first = self.first_entry_id if self.first_entry_id is not None else 0
        meta = {
            "format_version": FORMAT_VERSION, "ledger_id": self.origin.ledger_id,
            "first_entry_id": first, "last_entry_id": first + self.entries - 1,
            "entries": self.entries, "messages": self.messages,
            "min_publish_time_ms": -1 if rows.min_publish_time_ms is None else rows.min_publish_time_ms,
            "max_publish_time_ms": -1 if rows.max_publish_time_ms is None else rows.max_publish_time_ms,
            "topic": self.origin.topic, "partition": self.origin.partition,
        }
        kv = {META_PREFIX + name: str(value) for name, value in meta.items()}
        # per row group "entries:start:end" (bytes within the object): readers find a row group's
        # entries and bytes here, never through pyarrow's per-column metadata, which aborts the
        # process (an uncaught C++ exception) on some damaged footers
        kv[META_PREFIX + "row_groups"] = ",".join(f"{n}:{a}:{b}" for n, a, b in self._row_groups)
        self._writer.add_key_value_metadata(kv)
        self._writer.close()
        if self._own_file is not None:
            self._own_file.close()
        self._closed = kv
        return kv


# ---------------------------------------------------------------------------- reading


# What pyarrow raises on a damaged object. A Parquet footer has no checksum, so a flipped byte
# there can surface as any of these (a bad UTF-8 column name, an odd type, an offset past the end).
_DECODE_ERRORS = (pa.ArrowException, OSError, ValueError, KeyError, IndexError, TypeError, OverflowError)


@contextmanager
def _decoding(what: str) -> Iterator[None]:
    """Translate pyarrow's errors while decoding an object: a missing file is ColdObjectMissing,
    any other decode error ColdObjectCorrupt; Strata's own errors (a source's
    ColdTierUnavailable, say) pass through unchanged."""
    try:
        yield
    except StrataError:
        raise
    except FileNotFoundError as exc:
        raise ColdObjectMissing("object file not found", reason=str(exc)) from None
    except _DECODE_ERRORS as exc:
        raise ColdObjectCorrupt(f"object does not {what}", reason=f"{type(exc).__name__}: {exc}") from None


def object_summary(meta: pq.FileMetaData) -> dict[str, Any]:
    """The strata.* metadata of an object, keys without the prefix, ints parsed (topic stays a
    str); ColdObjectCorrupt if absent, inconsistent, or of another format version."""
    out: dict[str, Any] = {}
    with _decoding("carry its strata metadata"):
        kv = meta.metadata or {}
        for name in _META_INT_FIELDS:
            out[name] = int(kv[(META_PREFIX + name).encode()])
        out["topic"] = kv[(META_PREFIX + "topic").encode()].decode()
        rows = meta.num_rows
    if out["format_version"] != FORMAT_VERSION:
        raise ColdObjectCorrupt("object of an unknown format version", format_version=out["format_version"])
    if out["entries"] != out["last_entry_id"] - out["first_entry_id"] + 1 or out["messages"] != rows:
        raise ColdObjectCorrupt("object metadata does not match its contents", entries=out["entries"],
                                messages=out["messages"], rows=rows)
    return out


def _row_groups(meta: pq.FileMetaData) -> list[tuple[int, int, int, int]]:
    """(first_entry_id, last_entry_id, start byte, end byte) of each row group, from the strata
    metadata; ColdObjectCorrupt unless they tile the object's entries and bytes in order."""
    summary = object_summary(meta)
    with _decoding("describe its row groups"):
        text = meta.metadata[(META_PREFIX + "row_groups").encode()].decode()
        parts = [tuple(int(x) for x in item.split(":")) for item in text.split(",")] if text else []
        count = meta.num_row_groups
    out: list[tuple[int, int, int, int]] = []
    next_entry, next_byte = summary["first_entry_id"], len(b"PAR1")
    for i, part in enumerate(parts):
        if len(part) != 3 or part[0] <= 0 or part[1] != next_byte or part[2] <= part[1]:
            raise ColdObjectCorrupt("row group map out of order", row_group=i)
        out.append((next_entry, next_entry + part[0] - 1, part[1], part[2]))
        next_entry, next_byte = next_entry + part[0], part[2]
    if len(out) != count or next_entry != summary["last_entry_id"] + 1:
        raise ColdObjectCorrupt("row group map does not match the object", row_groups=count, mapped=len(out))
    return out


def row_group_entry_ranges(meta: pq.FileMetaData) -> list[tuple[int, int]]:
    """(first_entry_id, last_entry_id) of each row group; ColdObjectCorrupt if the object's
    row group map is missing or does not tile its entries."""
    return [(first, last) for first, last, _, _ in _row_groups(meta)]


def row_group_byte_spans(meta: pq.FileMetaData) -> list[tuple[int, int]]:
    """[start, end) bytes of each row group within the object (all its column chunks): one
    ranged read fetches a row group, with no per-column metadata access (see LedgerWriter.close)."""
    return [(start, end) for _, _, start, end in _row_groups(meta)]


Source: TypeAlias = str | bytes | BinaryIO | pa.NativeFile


def open_object(source: Source) -> pq.ParquetFile:
    """Open an object (a path, its bytes, or a readable seekable file) for reading with page
    checksums verified; ColdObjectCorrupt if its footer does not parse (truncated, not Parquet),
    ColdObjectMissing if the path does not exist."""
    if isinstance(source, bytes):
        source = pa.BufferReader(source)  # no Python file calls per read
    with _decoding("open as Parquet"):
        return pq.ParquetFile(source, page_checksum_verification=True)
    raise AssertionError("unreachable")  # mypy: the context manager may swallow (it never does)


def read_entries(source: Source, first: int, last: int) -> list[tuple[int, bytes]]:
    """Entries first..last of an object (see open_object), rebuilt and CRC-checked. Errors a
    file-like source raises as StrataError (ColdTierUnavailable) pass through unchanged;
    anything pyarrow raises (page checksums, truncation, a damaged footer) is ColdObjectCorrupt."""
    parquet = open_object(source)
    object_summary(parquet.metadata)
    wanted = [i for i, (low, high) in enumerate(row_group_entry_ranges(parquet.metadata))
              if high >= first and low <= last]
    with _decoding("read"):
        # one thread: on a small machine Arrow's pool only contends with the broker's own work
        table = parquet.read_row_groups(wanted, columns=list(REBUILD_COLUMNS), use_threads=False)
    return entries_from_table(table, first, last)


def entries_from_table(table: pa.Table, first: int, last: int) -> list[tuple[int, bytes]]:
    """Entries first..last rebuilt from `table` (rows of whole entries, in order, holding at
    least REBUILD_COLUMNS); ColdObjectCorrupt if any is missing or fails its CRC."""
    if first > last:
        return []
    with _decoding("hold rebuild columns of the right types"):
        table = table.select(list(REBUILD_COLUMNS))
        if table.schema.types != REBUILD_SCHEMA.types:  # e.g. large_binary from another reader
            table = table.cast(REBUILD_SCHEMA)
    ids_column = table.column("entry_id")
    if ids_column.null_count:
        raise ColdObjectCorrupt("entry_id column has nulls")
    ids = ids_column.to_numpy()
    if ids.size and np.any(ids[1:] < ids[:-1]):
        raise ColdObjectCorrupt("entry ids out of order")
    low = int(np.searchsorted(ids, first, "left"))
    high = int(np.searchsorted(ids, last, "right"))
    span = ids[low:high]
    present = span[np.flatnonzero(np.diff(span, prepend=first - 1))] if span.size else span
    if present.size != last - first + 1 or np.any(present != np.arange(first, last + 1)):
        raise ColdObjectCorrupt("object lacks requested entries", first=first, last=last,
                                found=int(present.size))
    out: list[tuple[int, bytes]] = []
    with _decoding("rebuild its entries"):
        for batch in _whole_entry_batches(table.slice(low, high - low)):
            out.extend(_rebuild_batch(batch))
    return out


def _whole_entry_batches(table: pa.Table) -> list[pa.RecordBatch]:
    """The table's record batches, merging neighbours that split an entry between them."""
    groups: list[list[pa.RecordBatch]] = []
    last_id = None
    for batch in table.to_batches():
        if batch.num_rows == 0:
            continue
        ids = batch.column(0)
        if groups and ids[0].as_py() == last_id:
            groups[-1].append(batch)
        else:
            groups.append([batch])
        last_id = ids[batch.num_rows - 1].as_py()
    return [group[0] if len(group) == 1 else pa.Table.from_batches(group).combine_chunks().to_batches()[0]
            for group in groups]


def _joined_rows(batch: pa.RecordBatch) -> tuple[memoryview, np.ndarray]:
    """Every row's part of its entry's uncompressed payload, concatenated: ([u32 BE size]
    [message_metadata] for a batch member) + payload. Returns the bytes and n+1 row offsets."""
    smm = batch.column(5)
    lengths = pc.fill_null(pc.binary_length(smm), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    has_smm = smm.is_valid().to_numpy(zero_copy_only=False)
    heads = lengths[has_smm].astype(">u4").tobytes()
    head_offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(np.where(has_smm, 4, 0), out=head_offsets[1:])
    head = pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [None, pa.py_buffer(head_offsets.tobytes()), pa.py_buffer(heads)])
    joined = pc.binary_join_element_wise(head, smm, batch.column(1), pa.scalar(b"", pa.binary()),
                                         null_handling="replace", null_replacement="")
    buffers = joined.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[joined.offset:joined.offset + len(joined) + 1]
    data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")
    return data, offsets


def _rebuild_batch(batch: pa.RecordBatch) -> list[tuple[int, bytes]]:
    ids = batch.column(0).to_numpy()
    starts = np.flatnonzero(np.diff(ids, prepend=ids[0] - 1))
    ends = np.append(starts[1:], len(ids))
    first_rows = pa.array(starts)
    rebuild = batch.column(2).take(first_rows).to_pylist()
    crcs = batch.column(3).take(first_rows).to_pylist()
    metadata = batch.column(4).take(first_rows).to_pylist()
    stored = batch.column(6).take(first_rows).to_pylist()
    joined: tuple[memoryview, np.ndarray] | None = None  # made on the first ROWS entry
    out: list[tuple[int, bytes]] = []
    for k, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        entry_id = int(ids[start])
        mode = rebuild[k]
        if mode == RAW:
            if stored[k] is None:
                raise ColdObjectCorrupt("raw entry without its bytes", entry_id=entry_id)
            out.append((entry_id, stored[k]))
            continue
        block: bytes | memoryview
        if mode == BLOCK:
            block = stored[k]
        elif mode in ROWS_CODECS:
            if joined is None:
                joined = _joined_rows(batch)
            data, offsets = joined
            block = data[offsets[start]:offsets[end]]
            if mode != eb.NONE:
                rows = bytes(block)
                block = compress(rows, mode)
                if not _crc_holds(metadata[k], block, crcs[k]):
                    out.append((entry_id, _uncompressed(entry_id, metadata[k], rows)))
                    continue
        else:
            raise ColdObjectCorrupt("entry with an unknown rebuild mode", entry_id=entry_id, mode=mode)
        out.append((entry_id, _assemble(entry_id, metadata[k], block, crcs[k])))
    return out


def _crc_holds(md: bytes | None, block: bytes, crc: int | None) -> bool:
    return md is not None and crc is not None and crc32c(block, crc32c(md, crc32c(_U32.pack(len(md))))) == crc


def _uncompressed(entry_id: int, md: bytes | None, rows: bytes) -> bytes:
    """The entry as an uncompressed one: its rows passed their page checksums but recompressing
    them no longer gives the stored CRC (a codec library changed its output)."""
    global codec_fallbacks
    if md is None:
        raise ColdObjectCorrupt("entry lacks rebuild data", entry_id=entry_id)
    try:
        metadata = pb.MessageMetadata.FromString(md)
    except DecodeError as exc:
        raise ColdObjectCorrupt("entry metadata does not parse", entry_id=entry_id, reason=str(exc)) from None
    metadata.ClearField("compression")
    metadata.ClearField("uncompressed_size")
    entry = build_entry(metadata, rows)
    codec_fallbacks += 1
    if codec_fallbacks % CODEC_FALLBACK_LOG_EVERY == 1:
        log.warning("entry %d: recompression no longer reproduces its CRC (codec library changed?); "
                    "delivered uncompressed (%d such entries so far)", entry_id, codec_fallbacks)
    return entry


def _assemble(entry_id: int, md: bytes | None, block: bytes | memoryview | None, crc: int | None) -> bytes:
    if md is None or block is None or crc is None:
        raise ColdObjectCorrupt("entry lacks rebuild data", entry_id=entry_id)
    head = _U32.pack(len(md))
    if crc32c(block, crc32c(md, crc32c(head))) != crc:
        raise ColdObjectCorrupt("rebuilt entry fails its CRC32C", entry_id=entry_id)
    return b"".join((MAGIC_CRC32C_BYTES, _U32.pack(crc), head, md, block))
