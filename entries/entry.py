"""The stored entry: the bytes a SEND frame carries from the checksum magic on (docs/protocol.md §1.2).

    [0x0E01][crc32c u32][md_size u32][MessageMetadata][payload]

The broker stores these bytes verbatim and dispatches them verbatim inside MESSAGE frames; the
CRC32C covers md_size + metadata + payload. `parse_entry` reads the metadata and answers the
questions the broker asks of an entry (permits, sticky key, delay, dedup, chunks, markers)
without copying or decompressing the payload: `EntryInfo.payload_offset` says where it starts.

What must hold:
- `parse_entry` accepts only a well-formed entry: the magic, sizes inside the entry, and a
  MessageMetadata with every required field (the C++ client drops the connection on one that
  fails to parse, so such an entry must never be stored). Anything else is `MalformedFrame`.
- `build_entry(md, payload)` followed by `parse_entry` gives back md and payload, and
  `verify_entry_checksum` holds for it.
- Nothing here rewrites stored bytes.
"""

from __future__ import annotations

import base64
import binascii
import struct

from crc32c import crc32c
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from common.errors import MalformedFrame
from entries.proto_strings import non_utf8_field
from proto import pulsar_api_pb2 as pb

MAGIC_CRC32C_BYTES = b"\x0e\x01"
ENTRY_HEAD_BYTES = 2 + 4 + 4  # magic, crc32c, md_size
NONE_KEY = b"NONE_KEY"  # Key_Shared sticky key of an entry with neither ordering nor partition key

_U32 = struct.Struct(">I")
# MessageMetadata.compression: a value our enum lacks is kept by parsing as an unknown field.
_COMPRESSION_FIELD = pb.MessageMetadata.DESCRIPTOR.fields_by_name["compression"].number


def crc32c_from(data: bytes | bytearray | memoryview, offset: int) -> int:
    """CRC32C (Castagnoli) of data[offset:], without copying the tail (the `crc32c` package
    takes any buffer, so a memoryview slice is checksummed in place)."""
    return crc32c(memoryview(data)[offset:])


class EntryInfo:
    """What the broker needs to know about one stored entry.

    metadata: the parsed outer MessageMetadata (for a batch: the batch's, with the first
        member's keys copied in by the client).
    payload_offset: index in the entry where the payload (possibly compressed / a batch) starts.
    checksum: the CRC32C stored in the entry (not verified by parse_entry).
    """

    __slots__ = ("checksum", "metadata", "payload_offset")

    def __init__(self, metadata: pb.MessageMetadata, payload_offset: int, checksum: int) -> None:
        self.metadata = metadata
        self.payload_offset = payload_offset
        self.checksum = checksum

    @property
    def num_messages(self) -> int:
        """Messages in the entry: the permits it costs (num_messages_in_batch, else 1)."""
        md = self.metadata
        return md.num_messages_in_batch if md.HasField("num_messages_in_batch") else 1

    @property
    def is_batch(self) -> bool:
        """The payload is a client-side batch (num_messages_in_batch present, even when 1)."""
        return self.metadata.HasField("num_messages_in_batch")

    @property
    def publish_time_ms(self) -> int:
        """ms since epoch, producer's clock."""
        return self.metadata.publish_time

    @property
    def producer_name(self) -> str:
        return self.metadata.producer_name

    @property
    def sequence_id(self) -> int:
        return self.metadata.sequence_id

    @property
    def highest_sequence_id(self) -> int:
        """highest_sequence_id if set, else sequence_id (the dedup high mark of this entry)."""
        md = self.metadata
        if md.HasField("highest_sequence_id"):
            return max(md.highest_sequence_id, md.sequence_id)
        return md.sequence_id

    @property
    def deliver_at_time_ms(self) -> int | None:
        """Absolute ms when a delayed message becomes deliverable; None if not delayed."""
        md = self.metadata
        return md.deliver_at_time if md.HasField("deliver_at_time") else None

    @property
    def unknown_compression(self) -> int | None:
        """The compression value when it is none the protocol knows (parsing keeps such an enum
        value as an unknown field and reads the field as NONE), else None. No consumer can
        decode such a payload; the official one takes it for uncompressed. Costs a walk of the
        unknown fields, so it is for the SEND path only, not for dispatch."""
        md = self.metadata
        if md.HasField("compression"):
            return None
        for unknown in UnknownFieldSet(md):  # type: ignore[attr-defined]  # iterable at run time (__getitem__)
            if unknown.field_number == _COMPRESSION_FIELD:
                return unknown.data
        return None

    @property
    def marker_type(self) -> int | None:
        """Internal marker type; a marker entry is never dispatched. None for ordinary entries."""
        md = self.metadata
        return md.marker_type if md.HasField("marker_type") else None

    @property
    def sticky_key(self) -> bytes:
        return sticky_key(self.metadata)

    @property
    def is_chunk(self) -> bool:
        """Part of a chunked message (uuid and num_chunks_from_msg set)."""
        md = self.metadata
        return md.HasField("uuid") and md.HasField("num_chunks_from_msg")

    @property
    def chunk_uuid(self) -> str | None:
        md = self.metadata
        return md.uuid if md.HasField("uuid") else None

    @property
    def chunk_id(self) -> int | None:
        md = self.metadata
        return md.chunk_id if md.HasField("chunk_id") else None

    @property
    def num_chunks_from_msg(self) -> int | None:
        md = self.metadata
        return md.num_chunks_from_msg if md.HasField("num_chunks_from_msg") else None

    @property
    def is_last_chunk(self) -> bool:
        """True for the last chunk of a chunked message (dedup checks only that one)."""
        md = self.metadata
        return self.is_chunk and md.chunk_id == md.num_chunks_from_msg - 1

    def payload(self, entry: bytes) -> memoryview:
        """The payload bytes of `entry` (the bytes this info was parsed from), without a copy."""
        return memoryview(entry)[self.payload_offset:]


def parse_entry(entry: bytes) -> EntryInfo:
    """Parse a stored entry's header and metadata; MalformedFrame if it is not well formed."""
    size = len(entry)
    if size < ENTRY_HEAD_BYTES or entry[:2] != MAGIC_CRC32C_BYTES:
        raise MalformedFrame("entry without checksum magic", size=size)
    checksum, md_size = struct.unpack_from(">II", entry, 2)
    payload_offset = ENTRY_HEAD_BYTES + md_size
    if payload_offset > size:
        raise MalformedFrame("entry metadata size exceeds entry", md_size=md_size, size=size)
    md = pb.MessageMetadata()
    try:
        md.ParseFromString(entry[ENTRY_HEAD_BYTES:payload_offset])
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise MalformedFrame("MessageMetadata does not parse", reason=str(exc)) from None
    if not md.IsInitialized():
        raise MalformedFrame("MessageMetadata lacks required fields",
                             missing=",".join(md.FindInitializationErrors()))  # type: ignore[attr-defined]
    bad = non_utf8_field(md)
    if bad is not None:
        raise MalformedFrame("MessageMetadata string field is not UTF-8", field=bad)
    return EntryInfo(md, payload_offset, checksum)


def verify_entry_checksum(entry: bytes) -> bool:
    """True if `entry` has the magic and its stored CRC32C matches md_size + metadata + payload."""
    if len(entry) < ENTRY_HEAD_BYTES or entry[:2] != MAGIC_CRC32C_BYTES:
        return False
    return crc32c_from(entry, 6) == _U32.unpack_from(entry, 2)[0]


def build_entry(metadata: pb.MessageMetadata | bytes, payload: bytes) -> bytes:
    """The stored form of (metadata, payload), with its CRC32C. Accepts serialized metadata."""
    md = metadata if isinstance(metadata, (bytes, bytearray)) else metadata.SerializeToString()
    tail = _U32.pack(len(md)) + md + payload
    return MAGIC_CRC32C_BYTES + _U32.pack(crc32c(tail)) + tail


def sticky_key(md: pb.MessageMetadata) -> bytes:
    """Key_Shared routing key: ordering_key, else partition_key (base64-decoded when flagged,
    falling back to its UTF-8 bytes if that fails), else b"NONE_KEY" (docs/protocol.md §8.10)."""
    if md.HasField("ordering_key"):
        return md.ordering_key
    if md.HasField("partition_key"):
        if md.partition_key_b64_encoded:
            try:
                return base64.b64decode(md.partition_key, validate=True)
            except (binascii.Error, ValueError):
                pass
        return md.partition_key.encode()
    return NONE_KEY
