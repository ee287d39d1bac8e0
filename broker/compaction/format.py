"""The compacted ledger's entry format, and the keys of a stored entry.

A compacted ledger holds, in the topic's order, the entries that still carry the latest value of
some key. Each of its entries is

    [orig ledger id i64][orig entry id i64][mask words u16][mask: words x i64][stored entry bytes]

(big endian). The original position is what consumers see as the message id, so acks, seeks and
`last message id` keep meaning positions of the topic. The stored entry bytes are the topic's
own, verbatim (a batch keeps its compression). For a batch some of whose members were compacted
out, the mask says which members survive: bit i set = member i is kept, Pulsar's ack_set layout
(`BitSet.toLongArray`); the broker sends it as the MESSAGE's ack_set, so the client skips the
others exactly as it skips batch members already acknowledged. No mask (0 words): every member
is kept (or the entry is not a batch).

Keys (`entry_keys`): the message key is `partition_key` (MessageMetadata for one message,
SingleMessageMetadata for each batch member). A member is a tombstone when it has
`null_value=true` or an empty payload (Pulsar's compactor removes a key on an empty value).
Messages without a key and markers are not compacted: they never enter a compacted view. A
chunked message is one message spread over several entries: `entry_keys` gives [] for each
chunk and `chunk_of` says which message and chunk it is, so the compactor keeps every chunk of
the latest value of a key when that value is a chunked message.

What must hold: `decode(encode(p, mask, data)) == (p, mask, data)`; a mask has a bit for every
member it keeps and none past the batch's size; parsing refuses (MalformedPayload) a header or a
batch that lies about its sizes.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError

from common.errors import MalformedPayload
from entries.batch import decompress
from entries.entry import parse_entry
from ledger.position import Position
from proto import pulsar_api_pb2 as pb

_HEAD = struct.Struct(">qqH")
_WORD = struct.Struct(">q")
_U32 = struct.Struct(">I")
MASK_WORDS_MAX = 0xFFFF          # u16 count: 4M members, far above any batch a client makes

# A member as compaction sees it: (key, tombstone); key None = the message has no key.
Member = tuple[str | None, bool]


def encode(position: Position, mask: list[int] | None, data: bytes) -> bytes:
    """One compacted-ledger entry. `mask`: signed 64-bit words (None: whole entry kept)."""
    words = mask or []
    if len(words) > MASK_WORDS_MAX:
        raise MalformedPayload("batch too large for a compaction mask", words=len(words))
    head = _HEAD.pack(position.ledger_id, position.entry_id, len(words))
    return b"".join([head, *(_WORD.pack(w) for w in words), data])


def decode(raw: bytes) -> tuple[Position, list[int] | None, bytes]:
    """(original position, mask or None, stored entry bytes) of a compacted-ledger entry."""
    if len(raw) < _HEAD.size:
        raise MalformedPayload("compacted entry shorter than its header", size=len(raw))
    ledger_id, entry_id, count = _HEAD.unpack_from(raw, 0)
    start = _HEAD.size + count * _WORD.size
    if start > len(raw):
        raise MalformedPayload("compacted entry mask exceeds the entry", words=count)
    mask = [_WORD.unpack_from(raw, _HEAD.size + i * _WORD.size)[0] for i in range(count)]
    return Position(ledger_id, entry_id), (mask or None), raw[start:]


def decode_position(raw: bytes) -> Position:
    """Only the original position (binary search over the compacted ledger)."""
    if len(raw) < _HEAD.size:
        raise MalformedPayload("compacted entry shorter than its header", size=len(raw))
    ledger_id, entry_id, _count = _HEAD.unpack_from(raw, 0)
    return Position(ledger_id, entry_id)


def mask_of(kept: list[bool]) -> list[int]:
    """Signed 64-bit words with bit i set for every kept member i."""
    words = [0] * ((len(kept) + 63) // 64)
    for i, keep in enumerate(kept):
        if keep:
            words[i >> 6] |= 1 << (i & 63)
    return [w - (1 << 64) if w >= (1 << 63) else w for w in words]


def mask_keeps(mask: list[int] | None, index: int) -> bool:
    """Member `index` survives `mask` (None: all do)."""
    if mask is None:
        return True
    word = index >> 6
    return word < len(mask) and bool((mask[word] >> (index & 63)) & 1)


def intersect(a: list[int] | None, b: list[int] | None) -> list[int] | None:
    """Members kept by both (None: all kept)."""
    if a is None:
        return b
    if b is None:
        return a
    return [x & y for x, y in zip(a, b)]


def entry_keys(data: bytes) -> list[Member]:
    """(key, tombstone) of every message of a stored entry, in batch order; [] for an entry
    compaction ignores (a marker, a chunk of a chunked message)."""
    info = parse_entry(data)
    md = info.metadata
    if md.HasField("marker_type") or (md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1):
        return []
    payload = memoryview(data)[info.payload_offset:]
    if not md.HasField("num_messages_in_batch"):
        key = md.partition_key if md.HasField("partition_key") else None
        empty = len(payload) == 0 or (md.HasField("uncompressed_size") and md.uncompressed_size == 0)
        return [(key, md.null_value or empty)]
    raw: bytes | memoryview = payload
    if md.compression != pb.NONE:
        raw = decompress(payload, md.compression, md.uncompressed_size)
    return _batch_keys(raw, md.num_messages_in_batch)


def chunk_of(data: bytes) -> tuple[str | None, str, int, int] | None:
    """(key, message uuid, chunk id, chunk count) of a chunk of a chunked message; None if the
    entry is not one."""
    md = parse_entry(data).metadata
    if md.HasField("marker_type") or not (md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1):
        return None
    key = md.partition_key if md.HasField("partition_key") else None
    return key, md.uuid, md.chunk_id, md.num_chunks_from_msg


def _batch_keys(raw: bytes | memoryview, count: int) -> list[Member]:
    """Keys of the members of an uncompressed batch payload, without copying their payloads."""
    out: list[Member] = []
    pos, size = 0, len(raw)
    smm = pb.SingleMessageMetadata()
    for index in range(count):
        if size - pos < 4:
            raise MalformedPayload("batch truncated before member header", index=index)
        smm_size = _U32.unpack_from(raw, pos)[0]
        start = pos + 4
        if smm_size > size - start:
            raise MalformedPayload("member metadata exceeds batch", index=index)
        smm.Clear()
        try:
            smm.ParseFromString(bytes(raw[start:start + smm_size]))
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise MalformedPayload("member metadata does not parse", index=index, reason=str(exc)) from None
        pos = start + smm_size + smm.payload_size
        if smm.payload_size < 0 or pos > size:
            raise MalformedPayload("member payload exceeds batch", index=index)
        key = smm.partition_key if smm.HasField("partition_key") else None
        out.append((key, smm.null_value or smm.payload_size == 0))
    return out
