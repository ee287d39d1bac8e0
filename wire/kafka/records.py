"""Kafka record batches v2 (magic 2): decode, encode, peek at the header (KAFKA-FACTS §4).

Layout (big-endian; 61-byte header): BaseOffset int64, BatchLength int32 (bytes after this field),
PartitionLeaderEpoch int32, Magic int8 = 2, CRC uint32 = CRC-32C over bytes 21..end, Attributes int16
(bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control), LastOffsetDelta int32, BaseTimestamp
int64, MaxTimestamp int64, ProducerId int64, ProducerEpoch int16, BaseSequence int32, RecordsCount int32,
then the records (compressed as one block if the codec is not 0). A record: Length varint, Attributes
int8, TimestampDelta varlong, OffsetDelta varint, Key (varint length, -1 = null), Value (same), Headers
count varint, each header a key (varint length, UTF-8) and a value (varint length, -1 = null); all
varints are zigzag. Codecs: 1 gzip, 2 snappy (raw, as librdkafka writes, or xerial-framed
`\\x82SNAPPY\\x00` + int32-length blocks, as Java, kafka-python and aiokafka write), 3 lz4 frame, 4 zstd.

What must hold:
- Magic 0/1 raises `UnsupportedMessageFormat`; a CRC mismatch (when checked) or bytes that do not parse
  or decompress raise `CorruptRecord`; a records count that does not match the records, or more records
  than `max_records`, raises `InvalidRecord`; codecs 5-7 raise `UnsupportedCompression`.
- Decompressed output never exceeds `decompressed_bytes_max` (zip bombs are an error, not memory growth),
  and every length and count is checked against the bytes left before allocating.
- A trailing partial batch is ignored (fetch responses may be cut at MaxBytes) unless `strict=True`
  (produce), where it is `CorruptRecord`.
- `encode_batch` writes a batch `decode_batches` (and Kafka's clients) read back with a valid CRC.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import cramjam
from crc32c import crc32c

from common.varint import encode_varint
from wire.kafka.errors import CorruptRecord, InvalidRecord, UnsupportedCompression, UnsupportedMessageFormat

MAGIC = 2
HEADER_BYTES = 61
LOG_OVERHEAD = 12  # BaseOffset + BatchLength: the bytes not counted in BatchLength
CRC_START = 21  # the CRC covers attributes .. end of batch
DECOMPRESSED_BYTES_MAX = 100 * 1024 * 1024  # one batch's records after decompression (= the frame max)
RECORDS_MAX = 10_000_000  # records per decode_batches call
RECORD_MIN_BYTES = 7  # length, attributes, timestamp/offset deltas, key/value lengths, headers count
COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_BYTES = 16  # magic, int32 version, int32 compatible version
XERIAL_BLOCK_BYTES = 32 * 1024

_HEAD = struct.Struct(">qiibIhiqqqhii")  # the 61-byte header, in order
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count
_PREFIX = struct.Struct(">qiib")  # base offset, batch length, leader epoch, magic
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")


class _Attributes:
    attributes: int

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


@dataclass(slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class BatchHeader(_Attributes):
    """The 61-byte header alone (`peek_batch_header`); `size` = the whole batch's bytes."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length


@dataclass
class RecordBatch(_Attributes):
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    records: list[Record]


# --- zigzag varints (signed; inside records) -------------------------------------------------------

def read_varint(buf: bytes, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """A zigzag varint (max_bytes 5 for int32, 10 for int64); IndexError past the end."""
    b = buf[pos]
    if b < 0x80:                 # one byte: most lengths and deltas (the hot path)
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    for _ in range(max_bytes - 1):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecord(f"varint longer than {max_bytes} bytes")


def _zigzag(value: int) -> bytes:
    return encode_varint((value << 1) ^ (value >> 63))


_SMALL = 1 << 14                  # zigzag varints of -_SMALL .. _SMALL-1 are made once (up to 3 bytes)
_VARINTS = [_zigzag(v) for v in range(-_SMALL, _SMALL)]


def varint(value: int) -> bytes:
    """Zigzag varint of a signed int (64-bit range)."""
    if -_SMALL <= value < _SMALL:
        return _VARINTS[value + _SMALL]
    return _zigzag(value)


# --- header ---------------------------------------------------------------------------------------

def peek_batch_header(data: bytes | bytearray | memoryview, offset: int = 0) -> BatchHeader:
    """The header of the batch at `offset` without touching its records or checking its CRC."""
    if len(data) - offset < 17:
        raise CorruptRecord(f"a record batch header is {HEADER_BYTES} bytes, {len(data) - offset} left")
    magic = data[offset + 16]
    if magic != MAGIC:
        raise UnsupportedMessageFormat(f"message format magic {magic}: only record batches v2 are supported")
    if len(data) - offset < HEADER_BYTES:
        raise CorruptRecord(f"a record batch header is {HEADER_BYTES} bytes, {len(data) - offset} left")
    header = BatchHeader(*_HEAD.unpack_from(data, offset))
    if header.batch_length < HEADER_BYTES - LOG_OVERHEAD:
        raise CorruptRecord(f"batch length {header.batch_length} shorter than a header")
    return header


# --- decompression --------------------------------------------------------------------------------

def _bounded(module: Any, src: bytes | memoryview, limit: int) -> bytes:
    """Decompress into a buffer that grows x4 up to `limit`: a bomb stops at the limit."""
    size = min(limit, max(64 * 1024, 8 * len(src)))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(src, out)
            return bytes(memoryview(out)[:n])
        except cramjam.DecompressionError as exc:
            # cramjam says "failed to write whole buffer" when the output is too small; any other
            # message is corrupt input, refused at once rather than retried up to the limit
            if size >= limit or "whole buffer" not in str(exc):
                raise CorruptRecord(f"records do not decompress within {limit} bytes: {exc}") from None
            size = min(limit, size * 4)


def _snappy_raw(src: bytes | memoryview, limit: int) -> bytes:
    try:
        if cramjam.snappy.decompress_raw_len(src) > limit:
            raise CorruptRecord(f"snappy block decompresses past {limit} bytes")
        return bytes(cramjam.snappy.decompress_raw(src))
    except cramjam.DecompressionError as exc:
        raise CorruptRecord(f"snappy: {exc}") from None


def _snappy(src: bytes | memoryview, limit: int) -> bytes:
    """Raw snappy (librdkafka) or xerial framing (Java, kafka-python, aiokafka): sniffed by the magic."""
    if bytes(src[:8]) != XERIAL_MAGIC:
        return _snappy_raw(src, limit)
    pos = XERIAL_HEADER_BYTES
    parts: list[bytes] = []
    total = 0
    while pos < len(src):
        if pos + 4 > len(src):
            raise CorruptRecord("xerial snappy: truncated block length")
        n = _I32.unpack_from(src, pos)[0]
        if n < 0 or pos + 4 + n > len(src):
            raise CorruptRecord(f"xerial snappy: block length {n} past the end")
        block = _snappy_raw(src[pos + 4:pos + 4 + n], limit - total)
        total += len(block)
        parts.append(block)
        pos += 4 + n
    return b"".join(parts)


def decompress(codec: int, src: bytes | memoryview, limit: int = DECOMPRESSED_BYTES_MAX) -> bytes:
    if codec == COMPRESSION_GZIP:
        return _bounded(cramjam.gzip, src, limit)
    if codec == COMPRESSION_SNAPPY:
        return _snappy(src, limit)
    if codec == COMPRESSION_LZ4:
        return _bounded(cramjam.lz4, src, limit)
    if codec == COMPRESSION_ZSTD:
        return _bounded(cramjam.zstd, src, limit)
    raise UnsupportedCompression(f"compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Compress records as Kafka's Java client does (snappy in xerial framing)."""
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == COMPRESSION_SNAPPY:
        out = [XERIAL_MAGIC, _I32.pack(1), _I32.pack(1)]
        for start in range(0, len(data), XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(data[start:start + XERIAL_BLOCK_BYTES]))
            out += (_I32.pack(len(block)), block)
        return b"".join(out)
    if codec == COMPRESSION_LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompression(f"compression codec {codec}")


# --- records --------------------------------------------------------------------------------------

def _blob(buf: bytes, pos: int, end: int, nullable: bool) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos, 5)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise CorruptRecord(f"invalid length {n}")
    if pos + n > end:
        raise CorruptRecord(f"length {n} runs past the record")
    return buf[pos:pos + n], pos + n


def _read_record(buf: bytes, pos: int, region_end: int) -> tuple[Record, int]:
    length, pos = read_varint(buf, pos, 5)
    end = pos + length
    if length < RECORD_MIN_BYTES - 1 or end > region_end:
        raise CorruptRecord(f"record length {length} invalid or past the batch ({region_end - pos} bytes left)")
    pos += 1  # attributes: unused
    timestamp_delta, pos = read_varint(buf, pos, 10)
    offset_delta, pos = read_varint(buf, pos, 5)
    key, pos = _blob(buf, pos, end, True)
    value, pos = _blob(buf, pos, end, True)
    count, pos = read_varint(buf, pos, 5)
    if count < 0 or 2 * count > end - pos:
        raise CorruptRecord(f"record headers count {count} invalid for the {end - pos} bytes left")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name, pos = _blob(buf, pos, end, False)
        header_value, pos = _blob(buf, pos, end, True)
        try:
            headers.append((name.decode(), header_value))  # type: ignore[union-attr]  # not nullable
        except UnicodeDecodeError:
            raise CorruptRecord("record header key is not UTF-8") from None
    if pos != end:
        raise CorruptRecord(f"record of {length} bytes parsed as {length - (end - pos)}")
    return Record(offset_delta, timestamp_delta, key, value, headers), pos


def _read_records(buf: bytes, count: int, max_records: int) -> list[Record]:
    if count < 0 or count > max_records or count * RECORD_MIN_BYTES > len(buf):
        raise InvalidRecord(f"records count {count} invalid (limit {max_records}, {len(buf)} bytes)")
    records = []
    pos = 0
    end = len(buf)
    try:
        for _ in range(count):
            record, pos = _read_record(buf, pos, end)
            records.append(record)
    except IndexError:
        raise CorruptRecord("record truncated") from None
    if pos != end:
        raise InvalidRecord(f"{end - pos} bytes left after the batch's {count} records")
    return records


def decode_batches(data: bytes | bytearray | memoryview, *, verify_crc: bool = True, max_records: int = RECORDS_MAX,
                   strict: bool = False,
                   decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX) -> list[RecordBatch]:
    """Every batch in `data` (concatenated batches), records parsed and decompressed."""
    buf = data if isinstance(data, bytes) else bytes(data)
    batches: list[RecordBatch] = []
    pos = 0
    while pos < len(buf):
        left = len(buf) - pos
        batch_length = _I32.unpack_from(buf, pos + 8)[0] if left >= LOG_OVERHEAD else None
        if batch_length is None or (0 <= batch_length and left < LOG_OVERHEAD + batch_length):
            if strict:
                raise CorruptRecord(f"partial record batch: {left} trailing bytes")
            break  # a fetch response cut at MaxBytes: clients ignore the partial batch
        header = peek_batch_header(buf, pos)
        end = pos + header.size
        if verify_crc and crc32c(memoryview(buf)[pos + CRC_START:end]) != header.crc:
            raise CorruptRecord(f"record batch at offset {header.base_offset}: CRC-32C mismatch")
        body: bytes = buf[pos + HEADER_BYTES:end]
        if header.compression:
            body = decompress(header.compression, body, decompressed_bytes_max)
        records = _read_records(body, header.records_count, max_records)
        max_records -= len(records)
        batches.append(RecordBatch(
            header.base_offset, header.partition_leader_epoch, header.attributes, header.last_offset_delta,
            header.base_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
            header.base_sequence, header.records_count, records))
        pos = end
    return batches


def _encode_record(record: Record) -> bytes:
    key, value = record.key, record.value
    parts = [b"\x00", varint(record.timestamp_delta), varint(record.offset_delta),
             _NULL if key is None else varint(len(key)), key or b"",
             _NULL if value is None else varint(len(value)), value or b""]
    headers = record.headers
    parts.append(varint(len(headers)))
    for name, header_value in headers:
        raw = name.encode()
        parts += (varint(len(raw)), raw, _NULL if header_value is None else varint(len(header_value)),
                  header_value or b"")
    body = b"".join(parts)
    return varint(len(body)) + body


_NULL = _zigzag(-1)


def encode_batch(records: list[Record], *, base_offset: int, base_timestamp: int, max_timestamp: int,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, compression: int = 0,
                 timestamp_type: int = 0, partition_leader_epoch: int = -1, last_offset_delta: int | None = None,
                 transactional: bool = False) -> bytes:
    """One record batch v2 with a correct CRC-32C; `last_offset_delta` defaults to the last record's."""
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else 0
    return encode_batch_of(b"".join(_encode_record(r) for r in records), len(records), base_offset=base_offset,
                           base_timestamp=base_timestamp, max_timestamp=max_timestamp, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=base_sequence, compression=compression,
                           timestamp_type=timestamp_type, partition_leader_epoch=partition_leader_epoch,
                           last_offset_delta=last_offset_delta, transactional=transactional)


def record_bytes(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[bytes, bytes | None]]) -> bytes:
    """One encoded record (header names already UTF-8): what `encode_batch_of` takes, joined."""
    parts = [b"\x00", varint(timestamp_delta), varint(offset_delta),
             _NULL if key is None else varint(len(key)), key or b"",
             _NULL if value is None else varint(len(value)), value or b"", varint(len(headers))]
    for name, header_value in headers:
        parts += (varint(len(name)), name, _NULL if header_value is None else varint(len(header_value)),
                  header_value or b"")
    body = b"".join(parts)
    return varint(len(body)) + body


def encode_batch_of(records_blob: bytes, count: int, *, base_offset: int, base_timestamp: int, max_timestamp: int,
                    last_offset_delta: int, producer_id: int = -1, producer_epoch: int = -1,
                    base_sequence: int = -1, compression: int = 0, timestamp_type: int = 0,
                    partition_leader_epoch: int = -1, transactional: bool = False, control: bool = False) -> bytes:
    """A record batch around `count` records already encoded back to back (`record_bytes`)."""
    blob = compress(compression, records_blob) if compression else records_blob
    attributes = compression | (timestamp_type << 3) | (0x10 if transactional else 0) | (0x20 if control else 0)
    after_crc = _AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                                producer_epoch, base_sequence, count) + blob
    batch_length = HEADER_BYTES - LOG_OVERHEAD + len(blob)
    prefix = _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC)
    return prefix + _U32.pack(crc32c(after_crc)) + after_crc
