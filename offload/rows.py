"""Stored entries -> message-row columns: the write side of `offload.format`.

An entry's MessageMetadata and payload are opened once (batches unpacked member by member, a plain
batch of same-sized members with consecutive sequence ids by strided slices (`split_plain_batch`),
payloads decompressed) into per-row-group Python lists (`RowGroup`), which become Arrow arrays
one row group at a time: no per-row dicts, and the per-row constants (topic, ids, times,
producer, message-id prefix) are expanded by Arrow, not in Python. `unpack` decides how each
entry will be rebuilt (offload.format's entry_rebuild: ROWS_* codecs, BLOCK or RAW).

What must hold:
- Joining a batch's rows back ([u32 BE size][message_metadata][payload] per member, then the
  codec) gives exactly the stored payload block whenever `unpack` says ROWS_*; otherwise it says
  BLOCK and the stored block is kept.
- `compress` / `decompress` are `entries.batch`'s, with the ZSTD (de)compressor cached per thread.
- Nothing here touches Parquet; `offload.format` owns the schema and the file.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError

from common.errors import MalformedPayload
from common.varint import encode_varint
from entries import batch as eb
from entries.entry import EntryInfo
from proto import pulsar_api_pb2 as pb

# entry_rebuild values (offload.format): 0..3 are ROWS then this Pulsar CompressionType
ROWS_CODECS = frozenset((eb.NONE, eb.LZ4, eb.ZLIB, eb.ZSTD))
BLOCK = 16
RAW = 17
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")  # Iceberg refuses ns

_U32 = struct.Struct(">I")
_MD = {name: fd.number for name, fd in pb.MessageMetadata.DESCRIPTOR.fields_by_name.items()}
MD_PRODUCER_NAME, _MD_SEQUENCE_ID, MD_PUBLISH_TIME = _MD["producer_name"], _MD["sequence_id"], _MD["publish_time"]
_MD_PROPERTIES, _MD_PARTITION_KEY, _MD_ORDERING_KEY = _MD["properties"], _MD["partition_key"], _MD["ordering_key"]
_MD_EVENT_TIME, _MD_NULL_VALUE, MD_NUM_MESSAGES = _MD["event_time"], _MD["null_value"], _MD["num_messages_in_batch"]
_MD_COMPRESSION, _MD_UNCOMPRESSED_SIZE = _MD["compression"], _MD["uncompressed_size"]
_MD_UUID, _MD_NUM_CHUNKS = _MD["uuid"], _MD["num_chunks_from_msg"]
_MD_OPAQUE = frozenset((_MD["encryption_keys"], _MD["encryption_algo"], _MD["marker_type"]))
_SMM = {name: fd.number for name, fd in pb.SingleMessageMetadata.DESCRIPTOR.fields_by_name.items()}
_SMM_PROPERTIES, _SMM_PARTITION_KEY, _SMM_EVENT_TIME = _SMM["properties"], _SMM["partition_key"], _SMM["event_time"]
_SMM_ORDERING_KEY, _SMM_SEQUENCE_ID, _SMM_NULL_VALUE = _SMM["ordering_key"], _SMM["sequence_id"], _SMM["null_value"]
_TIME_MS_MAX = (2**63 - 1) // 1000  # a ms time above this has no timestamp[us]
_I64_SIGN = 2**63




def message_id_prefix(ledger_id: int, entry_id: int, partition: int) -> bytes:
    """MessageIdData fields 1-3 as the official client serializes them (partition only if set)."""
    head = b"\x08" + encode_varint(ledger_id) + b"\x10" + encode_varint(entry_id)
    return head + b"\x18" + encode_varint(partition) if partition >= 0 else head


def _message_ids(prefixes: list[bytes], batch_sizes: list[int], entry_of_row: pa.Array,
                 batch_index: pa.Array) -> pa.Array:
    """Each row's serialized MessageIdData: its entry's prefix, then batch_index (field 4) and
    batch_size (field 6) for a batch member, as the official client writes a batched id."""
    top = max(0, pc.max(batch_index).as_py() or 0)
    index_part = pa.array([b"\x20" + encode_varint(i) for i in range(top + 1)], pa.binary()).take(
        pc.if_else(pc.less(batch_index, 0), None, batch_index))
    size_part = pa.array([b"\x30" + encode_varint(n) if n else None for n in batch_sizes], pa.binary())
    return pc.binary_join_element_wise(
        pa.array(prefixes, pa.binary()).take(entry_of_row), index_part, size_part.take(entry_of_row),
        pa.scalar(b"", pa.binary()), null_handling="replace", null_replacement="")


def time_ms(value: int) -> int | None:
    return value if value <= _TIME_MS_MAX else None


def signed64(value: int) -> int:
    return value - 2**64 if value >= _I64_SIGN else value


class Members:
    """A batch's members as columns (what `split_batch` makes and a row group takes in)."""

    __slots__ = ("event_ms", "key", "metadata", "ordering_key", "payload", "prop_ends", "prop_keys",
                 "prop_values", "sequence_id")

    def __init__(self) -> None:
        self.metadata: list[bytes] = []         # each member's SingleMessageMetadata bytes
        self.payload: list[bytes | None] = []   # None: a null-value message (empty payload)
        self.key: list[str | None] = []
        self.ordering_key: list[bytes | None] = []
        self.event_ms: list[int | None] = []
        self.sequence_id: list[int] = []
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.prop_ends: list[int] = []          # len(prop_keys) after each member; empty if none has any


def _only_size_and_sequence(smm_bytes: bytes, payload_size: int, sequence_id: int) -> bool:
    """True if a member's metadata is exactly [payload_size][sequence_id] (what the Java client
    sends for a message without key, properties or event time): its columns need no field walk.
    Only decides which fields the row reads; the rebuild uses the bytes themselves."""
    sequence_bytes = (sequence_id.bit_length() + 6) // 7 or 1
    size = len(smm_bytes)
    return size == 2 + ((payload_size.bit_length() + 6) // 7 or 1) + sequence_bytes and \
        smm_bytes[0] == 0x18 and smm_bytes[size - 1 - sequence_bytes] == 0x40


def split_batch(raw: bytes, count: int, first_sequence_id: int) -> Members:
    """Unpack an uncompressed batch; MalformedPayload unless joining the members back gives
    exactly `raw`. By construction it does: each size prefix is the length of the metadata bytes
    taken (both inside raw), the members are contiguous, and the last ends at the end of raw
    (trailing bytes could not be rebuilt); a null-value member's payload is None only if empty.
    A plain batch (`split_plain_batch`) is split without a Python step per member."""
    if count < 1:  # a batch of no messages would leave its entry without a row
        raise MalformedPayload("batch without members", count=count)
    plain = split_plain_batch(raw, count)
    if plain is not None:
        return plain
    out = Members()
    pos = 0
    size = len(raw)
    parse = pb.SingleMessageMetadata.FromString
    unpack = _U32.unpack_from
    ends = out.prop_ends
    for index in range(count):
        if size - pos < 4:
            raise MalformedPayload("batch truncated before member header", index=index)
        start = pos + 4
        end = start + unpack(raw, pos)[0]
        smm_bytes = raw[start:end]
        try:
            smm = parse(smm_bytes)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise MalformedPayload("member metadata does not parse", index=index, reason=str(exc)) from None
        pos = end + smm.payload_size
        if end > size or pos > size or pos < end:
            raise MalformedPayload("member exceeds batch", index=index)
        payload: bytes | None = raw[end:pos]
        key = ordering = event = None
        sequence_id = smm.sequence_id
        if not _only_size_and_sequence(smm_bytes, pos - end, sequence_id):
            sequence_id = first_sequence_id + index
            for fd, value in smm.ListFields():
                number = fd.number
                if number == _SMM_SEQUENCE_ID:
                    sequence_id = value
                elif number == _SMM_PARTITION_KEY:
                    key = value
                elif number == _SMM_EVENT_TIME:
                    event = time_ms(value)
                elif number == _SMM_ORDERING_KEY:
                    ordering = value
                elif number == _SMM_PROPERTIES:
                    for kv in value:
                        out.prop_keys.append(kv.key)
                        out.prop_values.append(kv.value)
                    if not ends:
                        ends.extend([0] * index)
                elif number == _SMM_NULL_VALUE and value and not payload:
                    payload = None
        if ends or out.prop_keys:
            ends.append(len(out.prop_keys))
        out.metadata.append(smm_bytes)
        out.payload.append(payload)
        out.key.append(key)
        out.ordering_key.append(ordering)
        out.event_ms.append(event)
        out.sequence_id.append(signed64(sequence_id))
    if pos != size:
        raise MalformedPayload("batch has bytes after its last member", trailing=size - pos)
    return out


_PLAIN_SEQUENCE_MAX = 2**63   # plain batches whose sequence ids stay below this take the fast path


def _plain_first_member(raw: bytes) -> tuple[int, int] | None:
    """(payload_size, sequence_id) when the batch's first member's metadata is exactly
    [payload_size][sequence_id], else None."""
    if len(raw) < 4:
        return None
    end = 4 + _U32.unpack_from(raw, 0)[0]
    if end > len(raw):
        return None
    smm_bytes = raw[4:end]
    try:
        smm = pb.SingleMessageMetadata.FromString(smm_bytes)
    except (DecodeError, ValueError, RuntimeError):
        return None
    if not smm.HasField("sequence_id") or \
            not _only_size_and_sequence(smm_bytes, smm.payload_size, smm.sequence_id):
        return None
    return smm.payload_size, smm.sequence_id


def split_plain_batch(raw: bytes, count: int) -> Members | None:
    """The members of a plain batch, or None if it is not one. Plain: every member's metadata is
    [payload_size = P][sequence_id = s + index] with the first member's P and s (what the Java
    client and the perf driver send for same-sized messages without key, properties or event
    time). Members whose sequence ids have varints of one length lie at a fixed stride, so each
    header byte position is checked for all of them at once (a strided slice of `raw` against
    the bytes that hypothesis implies: size prefix, tags, P, and the sequence id's varint,
    column by column); only when every header byte matches and the members end exactly at the
    end of `raw` are they sliced out. So joining them back gives `raw`, as split_batch
    promises; anything else is None (the caller walks it)."""
    first = _plain_first_member(raw)
    if first is None:
        return None
    payload_size, sequence = first
    if sequence + count > _PLAIN_SEQUENCE_MAX:
        return None
    size_varint = encode_varint(payload_size)
    out = Members()
    position, last = 0, sequence + count
    while sequence < last:
        varint_bytes = _varint_bytes(sequence)
        run = min(last, 1 << (7 * varint_bytes)) - sequence        # members whose id varint has that length
        smm_bytes = 2 + len(size_varint) + varint_bytes
        stride = 4 + smm_bytes + payload_size
        stop = position + run * stride
        if stop > len(raw) or not _headers_hold(raw, position, stop, stride, run, smm_bytes, size_varint,
                                                sequence, varint_bytes):
            return None
        members = range(position, stop, stride)           # not the payloads' range: it is empty when P = 0
        head = 4 + smm_bytes
        out.metadata.extend([raw[a + 4:a + head] for a in members])
        out.payload.extend([raw[a + head:a + stride] for a in members])
        position, sequence = stop, sequence + run
    if position != len(raw):
        return None
    out.key = [None] * count
    out.ordering_key = [None] * count
    out.event_ms = [None] * count
    out.sequence_id = list(range(last - count, last))
    return out


def _varint_bytes(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _headers_hold(raw: bytes, start: int, stop: int, stride: int, run: int, smm_bytes: int, size_varint: bytes,
                  sequence: int, varint_bytes: int) -> bool:
    """True if the `run` members at [start, stop), `stride` apart, each begin with
    [u32 smm_bytes][0x18][size_varint][0x40][varint(sequence + i)]."""
    fixed = _U32.pack(smm_bytes) + b"\x18" + size_varint + b"\x40"
    for j, byte in enumerate(fixed):
        if raw[start + j:stop:stride] != bytes((byte,)) * run:
            return False
    sequences = np.arange(sequence, sequence + run, dtype=np.int64)
    for k in range(varint_bytes):
        column = ((sequences >> (7 * k)) & 0x7F) | (0x80 if k < varint_bytes - 1 else 0)
        if raw[start + len(fixed) + k:stop:stride] != column.astype(np.uint8).tobytes():
            return False
    return True


class RowGroup:
    """Columns of the row group being filled: per-entry lists and per-row lists."""

    def __init__(self) -> None:
        # per entry
        self.entry_ids: list[int] = []
        self.row_counts: list[int] = []
        self.batch_sizes: list[int] = []
        self.entry_offsets: list[int | None] = []   # Kafka offset of the entry's first message; None: unknown
        self.id_prefixes: list[bytes] = []
        self.publish_ms: list[int | None] = []
        self.producer_index: list[int] = []   # -1: no producer (a raw entry)
        self.rebuild: list[int] = []
        self.crcs: list[int | None] = []
        self.entry_metadata: list[bytes | None] = []
        self.entry_payload: list[bytes | None] = []
        # per row
        self.batch_index: list[int] = []
        self.key: list[str | None] = []
        self.ordering_key: list[bytes | None] = []
        self.prop_offsets: list[int] = [0]
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.event_ms: list[int | None] = []
        self.sequence_id: list[int | None] = []
        self.payload: list[bytes | None] = []
        self.message_metadata: list[bytes | None] = []
        self.bytes_buffered = 0

    def add_single(self, fields: dict[int, Any] | None, payload: bytes | None) -> None:
        """The one row of a non-batched (or opaque) entry; fields: its MessageMetadata's set
        fields by number (`set_fields`), or None (a raw entry: nothing known)."""
        key = ordering = event = sequence_id = None
        if fields is not None:
            key = fields.get(_MD_PARTITION_KEY)
            ordering = fields.get(_MD_ORDERING_KEY)
            event = fields.get(_MD_EVENT_TIME)
            if event is not None:
                event = time_ms(event)
            sequence_id = signed64(fields[_MD_SEQUENCE_ID])
            for kv in fields.get(_MD_PROPERTIES, ()):
                self.prop_keys.append(kv.key)
                self.prop_values.append(kv.value)
            if fields.get(_MD_NULL_VALUE) and payload is not None and not payload:
                payload = None
        self.batch_index.append(-1)
        self.key.append(key)
        self.ordering_key.append(ordering)
        self.event_ms.append(event)
        self.sequence_id.append(sequence_id)
        self.prop_offsets.append(len(self.prop_keys))
        self.payload.append(payload)
        self.message_metadata.append(None)
        self.row_counts.append(1)
        self.bytes_buffered += len(payload) if payload else 0

    def add_members(self, members: Members) -> None:
        count = len(members.payload)
        self.batch_index.extend(range(count))
        self.key.extend(members.key)
        self.ordering_key.extend(members.ordering_key)
        self.event_ms.extend(members.event_ms)
        self.sequence_id.extend(members.sequence_id)
        base = len(self.prop_keys)
        if members.prop_ends:
            self.prop_keys.extend(members.prop_keys)
            self.prop_values.extend(members.prop_values)
            self.prop_offsets.extend([base + end for end in members.prop_ends])
        else:
            self.prop_offsets.extend([base] * count)
        self.payload.extend(members.payload)
        self.message_metadata.extend(members.metadata)
        self.row_counts.append(count)
        self.bytes_buffered += sum(map(len, members.metadata)) + sum(len(p) for p in members.payload if p)

    def arrays(self, topic: str, partition: int, ledger_id: int, producers: list[str]) -> list[pa.Array]:
        """The row group's columns, in offload.format.MESSAGE_SCHEMA's order."""
        rows = len(self.payload)
        counts = np.array(self.row_counts, dtype=np.int64)
        starts = np.cumsum(counts) - counts
        entry_of_row = pa.array(np.repeat(np.arange(len(counts)), counts))
        per_row = np.full(rows, -1, dtype=np.int64)  # entry index on each entry's first row
        per_row[starts] = np.arange(len(counts))
        first_row = pa.array(per_row, mask=per_row < 0)
        batch_index = pa.array(self.batch_index, pa.int32())
        return [
            pa.repeat(pa.scalar(topic, pa.string()), rows),
            pa.repeat(pa.scalar(partition, pa.int32()), rows),
            pa.repeat(pa.scalar(ledger_id, pa.int64()), rows),
            pa.array(self.entry_ids, pa.int64()).take(entry_of_row),
            batch_index,
            pa.array(self.batch_sizes, pa.int32()).take(entry_of_row),
            pc.add(pa.array(self.entry_offsets, pa.int64()).take(entry_of_row),
                   pc.max_element_wise(batch_index, 0).cast(pa.int64())),
            _message_ids(self.id_prefixes, self.batch_sizes, entry_of_row, batch_index),
            pa.array(self.key, pa.string()),
            pa.array(self.ordering_key, pa.binary()),
            pa.MapArray.from_arrays(pa.array(self.prop_offsets, pa.int32()),
                                    pa.array(self.prop_keys, pa.string()),
                                    pa.array(self.prop_values, pa.string())),
            _micros(pa.array(self.publish_ms, pa.int64()).take(entry_of_row)),
            _micros(pa.array(self.event_ms, pa.int64())),
            _producer_names(producers, self.producer_index, entry_of_row),
            pa.array(self.sequence_id, pa.int64()),
            pa.array(self.payload, pa.binary()),
            pa.array(self.rebuild, pa.int8()).take(first_row),
            pa.array(self.crcs, pa.int64()).take(first_row),
            pa.array(self.entry_metadata, pa.binary()).take(first_row),
            pa.array(self.message_metadata, pa.binary()),
            pa.array(self.entry_payload, pa.binary()).take(first_row),
        ]


def _producer_names(producers: list[str], indices: list[int], entry_of_row: pa.Array) -> pa.Array:
    """Each row's producer name; index -1 (a raw entry) gives null."""
    per_entry = np.array(indices, dtype=np.int64)
    per_entry[per_entry < 0] = len(producers)
    return pa.array(producers + [None], pa.string()).take(pa.array(per_entry).take(entry_of_row))


def _micros(ms: pa.Array) -> pa.Array:
    return pc.multiply(ms, 1000).cast(TIMESTAMP_TYPE)


_THREAD = threading.local()  # per thread: cached `zstd` compressor, `unzstd` decompressor (not thread-safe)


def compress(raw: bytes, compression: int) -> bytes:
    """`entries.batch.compress`, with ZSTD's compressor (the same defaults) made once per thread:
    a fresh one costs ~10 us, more than compressing a 1 KiB message."""
    if compression != eb.ZSTD:
        return eb.compress(raw, compression)
    compressor = getattr(_THREAD, "zstd", None)
    if compressor is None:
        import zstandard
        compressor = _THREAD.zstd = zstandard.ZstdCompressor()
    return compressor.compress(raw)


def decompress(block: memoryview, compression: int, uncompressed_size: int) -> bytes:
    """`entries.batch.decompress`, with ZSTD's decompressor made once per thread (a fresh one
    costs ~8 us); MalformedPayload unless it gives exactly uncompressed_size bytes."""
    if compression != eb.ZSTD:
        return eb.decompress(block, compression, uncompressed_size)
    if not 0 <= uncompressed_size <= eb.UNCOMPRESSED_BYTES_MAX:
        raise MalformedPayload("uncompressed_size out of bounds", uncompressed_size=uncompressed_size)
    import zstandard
    decompressor = getattr(_THREAD, "unzstd", None)
    if decompressor is None:
        decompressor = _THREAD.unzstd = zstandard.ZstdDecompressor()
    data = bytes(block)
    try:
        declared = zstandard.frame_content_size(data)  # -1: not in the frame
        if declared > uncompressed_size:  # refuse before allocating what the frame claims
            raise MalformedPayload("zstd frame larger than uncompressed_size", declared=declared)
        out = decompressor.decompress(data, max_output_size=uncompressed_size)
    except MalformedPayload:
        raise
    except Exception as exc:  # the codec library raises its own types; translated here
        raise MalformedPayload("payload does not decompress", reason=f"{type(exc).__name__}: {exc}") from None
    if len(out) != uncompressed_size:
        raise MalformedPayload("decompressed size differs from uncompressed_size", actual=len(out))
    return out


def set_fields(md: pb.MessageMetadata) -> dict[int, Any]:
    """The metadata's set fields by field number (one walk instead of a HasField per question)."""
    return {fd.number: value for fd, value in md.ListFields()}


def _is_opaque(info: EntryInfo, fields: dict[int, Any]) -> bool:
    """Entries whose payload is not messages the format can unpack: encrypted, a chunk, a
    marker, or compressed with a codec it cannot rebuild (snappy, or unknown to the protocol)."""
    return not fields.keys().isdisjoint(_MD_OPAQUE) or \
        (_MD_UUID in fields and _MD_NUM_CHUNKS in fields) or \
        fields.get(_MD_COMPRESSION, eb.NONE) not in ROWS_CODECS or info.unknown_compression is not None


def unpack(info: EntryInfo, fields: dict[int, Any], data: bytes) -> tuple[int, Members | bytes | None]:
    """(entry_rebuild, messages) of a well-formed entry: messages are the batch's members, the
    non-batched entry's payload, or None for an opaque entry."""
    if _is_opaque(info, fields):
        return BLOCK, None
    compression = fields.get(_MD_COMPRESSION, eb.NONE)
    block = memoryview(data)[info.payload_offset:]
    try:
        raw = decompress(block, compression, fields.get(_MD_UNCOMPRESSED_SIZE, 0))
        count = fields.get(MD_NUM_MESSAGES)
        members: Members | bytes = raw if count is None else \
            split_batch(raw, count, fields[_MD_SEQUENCE_ID])
    except MalformedPayload:
        return BLOCK, None
    if compression == eb.NONE or compress(raw, compression) == block:
        return compression, members
    return BLOCK, members
