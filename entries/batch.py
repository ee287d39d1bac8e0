"""Client-side batches, built and opened exactly as the official client does (docs/protocol.md §6).

A batch is one entry whose payload is, per member, `[u32 BE size][SingleMessageMetadata][payload]`,
concatenated and then compressed as one block (NONE / LZ4 raw block / ZLIB / ZSTD / SNAPPY raw block). The outer
MessageMetadata carries producer_name, the first member's sequence_id, publish_time,
num_messages_in_batch, the compression and uncompressed_size when not NONE, and the first member's
partition_key / ordering_key (what Key_Shared routes on).

The broker never opens a batch nor decompresses; this module serves Strata's own load generator
(`strata perf --driver native`), the offload format (which unpacks batches into rows) and tests:
`build_batch` plus `wire.pulsar.encode_send` produce the SEND frames the official producer would,
`decode_payload` reads back what a consumer receives.

What must hold:
- `decode_payload(*build_batch(msgs, ...))` gives back `msgs` (payload, properties, keys,
  event time, sequence id) in order, for every compression.
- Decompression never produces more than `uncompressed_bytes_max` bytes; a payload that cannot
  be decoded raises `MalformedPayload`, never another exception.
- lz4 and zstandard are imported only when a batch uses them (they are test/tool extras).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from common.errors import InvariantViolation, MalformedPayload
from entries.proto_strings import non_utf8_field
from proto import pulsar_api_pb2 as pb

NONE = pb.NONE
LZ4 = pb.LZ4
ZLIB = pb.ZLIB
ZSTD = pb.ZSTD
SNAPPY = pb.SNAPPY

# Official client defaults with batching on: at most this many messages / bytes per batch.
BATCH_MESSAGES_MAX = 1000
BATCH_BYTES_MAX = 128 * 1024
# Largest decompressed payload decode_payload will produce (a batch fits in a 5 MiB message).
UNCOMPRESSED_BYTES_MAX = 64 * 1024 * 1024

_U32 = struct.Struct(">I")


@dataclass
class BatchMessage:
    """One message as the application sees it (a batch member, or a whole non-batched entry).

    event_time_ms / sequence_id: None when not set. properties go on the wire in dict order
    (decoding keeps the wire order, so decode -> build reproduces the client's bytes).
    """

    payload: bytes
    properties: dict[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    ordering_key: bytes | None = None
    event_time_ms: int | None = None
    sequence_id: int | None = None
    partition_key_b64_encoded: bool = False
    null_value: bool = False


def _single_metadata(msg: BatchMessage) -> pb.SingleMessageMetadata:
    smm = pb.SingleMessageMetadata(payload_size=len(msg.payload))
    for key, value in msg.properties.items():
        smm.properties.add(key=key, value=value)
    if msg.partition_key is not None:
        smm.partition_key = msg.partition_key
        if msg.partition_key_b64_encoded:
            smm.partition_key_b64_encoded = True
    if msg.ordering_key is not None:
        smm.ordering_key = msg.ordering_key
    if msg.event_time_ms is not None:
        smm.event_time = msg.event_time_ms
    if msg.sequence_id is not None:
        smm.sequence_id = msg.sequence_id
    if msg.null_value:
        smm.null_value = True
    return smm


def serialize_batch(messages: Iterable[BatchMessage]) -> bytes:
    """The uncompressed batch payload: per member [u32 size][SingleMessageMetadata][payload]."""
    parts: list[bytes] = []
    for msg in messages:
        smm = _single_metadata(msg).SerializeToString()
        parts.append(_U32.pack(len(smm)))
        parts.append(smm)
        parts.append(msg.payload)
    return b"".join(parts)


def compress(data: bytes, compression: int) -> bytes:
    """Compress a payload with a Pulsar codec (LZ4 = raw block without its size prefix)."""
    if compression == NONE:
        return data
    if compression == LZ4:
        import lz4.block
        return lz4.block.compress(data, store_size=False)
    if compression == ZLIB:
        return zlib.compress(data)
    if compression == ZSTD:
        import zstandard
        return zstandard.ZstdCompressor().compress(data)
    if compression == SNAPPY:
        import cramjam
        return bytes(cramjam.snappy.compress_raw(data))
    raise InvariantViolation("unsupported compression for building", compression=compression)


def decompress(data: bytes | memoryview, compression: int, uncompressed_size: int,
               uncompressed_bytes_max: int = UNCOMPRESSED_BYTES_MAX) -> bytes:
    """Decompress a payload to exactly `uncompressed_size` bytes; MalformedPayload otherwise."""
    if compression == NONE:
        return bytes(data)
    if not 0 <= uncompressed_size <= uncompressed_bytes_max:
        raise MalformedPayload("uncompressed_size out of bounds", uncompressed_size=uncompressed_size,
                               uncompressed_bytes_max=uncompressed_bytes_max)
    try:
        out = _decompress(bytes(data), compression, uncompressed_size)
    except MalformedPayload:
        raise
    except Exception as exc:  # each codec library raises its own types; translated here
        raise MalformedPayload("payload does not decompress", compression=compression,
                               reason=f"{type(exc).__name__}: {exc}") from None
    if len(out) != uncompressed_size:
        raise MalformedPayload("decompressed size differs from uncompressed_size",
                               expected=uncompressed_size, actual=len(out))
    return out


def _decompress(data: bytes, compression: int, uncompressed_size: int) -> bytes:
    if compression == LZ4:
        import lz4.block
        return lz4.block.decompress(data, uncompressed_size=uncompressed_size)
    if compression == ZLIB:
        inflater = zlib.decompressobj()
        out = inflater.decompress(data, uncompressed_size)
        if inflater.unconsumed_tail:
            raise MalformedPayload("zlib payload larger than uncompressed_size")
        return out
    if compression == ZSTD:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=uncompressed_size)
    if compression == SNAPPY:             # a raw snappy block, as the official client writes it
        import cramjam
        buffer = bytearray(uncompressed_size)
        cramjam.snappy.decompress_raw_into(data, buffer)   # a block larger than the buffer raises: bounded
        return bytes(buffer)
    raise MalformedPayload("unsupported compression", compression=compression)


def build_batch(messages: list[BatchMessage], *, producer_name: str, sequence_id: int,
                publish_time_ms: int, compression: int = NONE) -> tuple[pb.MessageMetadata, bytes]:
    """Outer metadata and (compressed) payload of one batch entry, as the official client makes it.

    sequence_id: the first member's; members whose sequence_id is None get sequence_id + index.
    """
    if not messages:
        raise InvariantViolation("a batch needs at least one message")
    members = [m if m.sequence_id is not None else _with_sequence_id(m, sequence_id + i)
               for i, m in enumerate(messages)]
    raw = serialize_batch(members)
    md = pb.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id,
                            publish_time=publish_time_ms, num_messages_in_batch=len(members))
    if compression != NONE:  # the client sets both only for a compressed payload
        md.compression = compression  # type: ignore[assignment]  # the stubs type enum fields apart from int; run time takes the int
        md.uncompressed_size = len(raw)
    first = members[0]
    if first.partition_key is not None:
        md.partition_key = first.partition_key
        if first.partition_key_b64_encoded:
            md.partition_key_b64_encoded = True
    if first.ordering_key is not None:
        md.ordering_key = first.ordering_key
    return md, compress(raw, compression)


def _with_sequence_id(msg: BatchMessage, sequence_id: int) -> BatchMessage:
    return BatchMessage(msg.payload, msg.properties, msg.partition_key, msg.ordering_key,
                        msg.event_time_ms, sequence_id, msg.partition_key_b64_encoded, msg.null_value)


def decode_payload(metadata: pb.MessageMetadata, payload: bytes | memoryview,
                   uncompressed_bytes_max: int = UNCOMPRESSED_BYTES_MAX) -> list[BatchMessage]:
    """The messages an entry holds: batch members in order, or the single message."""
    raw = decompress(payload, metadata.compression, metadata.uncompressed_size, uncompressed_bytes_max)
    if not metadata.HasField("num_messages_in_batch"):
        return [_from_outer(metadata, raw)]
    return parse_batch(raw, metadata.num_messages_in_batch)


def _from_outer(md: pb.MessageMetadata, payload: bytes) -> BatchMessage:
    return BatchMessage(
        payload=payload, properties={kv.key: kv.value for kv in md.properties},
        partition_key=md.partition_key if md.HasField("partition_key") else None,
        ordering_key=md.ordering_key if md.HasField("ordering_key") else None,
        event_time_ms=md.event_time if md.HasField("event_time") else None,
        sequence_id=md.sequence_id, partition_key_b64_encoded=md.partition_key_b64_encoded,
        null_value=md.null_value)


def parse_batch(raw: bytes, count: int) -> list[BatchMessage]:
    """Split an uncompressed batch payload into its `count` members; MalformedPayload if it lies."""
    out: list[BatchMessage] = []
    pos = 0
    size = len(raw)
    for index in range(count):
        if size - pos < 4:
            raise MalformedPayload("batch truncated before member header", index=index)
        smm_size = _U32.unpack_from(raw, pos)[0]
        start = pos + 4
        if smm_size > size - start:
            raise MalformedPayload("member metadata exceeds batch", index=index, smm_size=smm_size)
        smm = pb.SingleMessageMetadata()
        try:
            smm.ParseFromString(raw[start:start + smm_size])
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise MalformedPayload("member metadata does not parse", index=index, reason=str(exc)) from None
        if not smm.IsInitialized() or smm.payload_size < 0:
            raise MalformedPayload("member metadata lacks payload_size", index=index)
        bad = non_utf8_field(smm)
        if bad is not None:
            raise MalformedPayload("member metadata string field is not UTF-8", index=index, field=bad)
        begin = start + smm_size
        pos = begin + smm.payload_size
        if pos > size:
            raise MalformedPayload("member payload exceeds batch", index=index)
        out.append(_member(smm, raw[begin:pos]))
    return out


def _member(smm: pb.SingleMessageMetadata, payload: bytes) -> BatchMessage:
    return BatchMessage(
        payload=payload, properties={kv.key: kv.value for kv in smm.properties},
        partition_key=smm.partition_key if smm.HasField("partition_key") else None,
        ordering_key=smm.ordering_key if smm.HasField("ordering_key") else None,
        event_time_ms=smm.event_time if smm.HasField("event_time") else None,
        sequence_id=smm.sequence_id if smm.HasField("sequence_id") else None,
        partition_key_b64_encoded=smm.partition_key_b64_encoded, null_value=smm.null_value)
