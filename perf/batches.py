"""SEND frames of client-side batches of plain messages, fast: the native driver's hot path.

A plain message has a payload and nothing else (no key, properties, event time): what a
benchmark sends. entries.batch.build_batch builds any batch through protobuf objects (about 10 us
per member); here each member's SingleMessageMetadata is written by hand, because for a plain
message it is just two varint fields in field order:

    [u32 BE smm_size][0x18 varint(payload_size)][0x40 varint(sequence_id)][payload]

exactly the bytes protobuf (and the official client) produce. The outer MessageMetadata (one
per batch) still goes through protobuf. Cost: under 1 us per member.

What must hold: `PlainBatchEncoder.frame` / `encode_plain_batch` return byte-for-byte what
`entries.batch.encode_send(*build_batch(...))` returns for the same plain messages, for every
compression and sequence id (tests/acceptance/test_native_driver.py checks it).
"""

from __future__ import annotations

import struct

from common.varint import encode_varint
from entries.batch import BATCH_BYTES_MAX, BATCH_MESSAGES_MAX, NONE, compress
from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command

_U32 = struct.Struct(">I")
_SIZE_HEADS_MAX = 4096  # bound of the per-payload-size header cache




# varints of 0..16383 and the two low continuation bytes of larger values: a sequence id's
# varint is _LOW14[seq & 0x3FFF] + varint(seq >> 14), and the high part repeats for 16k ids.
_SMALL_VARINTS = [encode_varint(i) for i in range(1 << 14)]
_LOW14 = [bytes(((i & 0x7F) | 0x80, ((i >> 7) & 0x7F) | 0x80)) for i in range(1 << 14)]
_high_varints: dict[int, bytes] = {}  # seq >> 14 -> its varint; cleared past 1024 entries


def _seq_varint(seq: int) -> bytes:
    if seq < 0x4000:
        return _SMALL_VARINTS[seq]
    high = seq >> 14
    tail = _high_varints.get(high)
    if tail is None:
        if len(_high_varints) > 1024:
            _high_varints.clear()
        tail = _high_varints[high] = encode_varint(high)
    return _LOW14[seq & 0x3FFF] + tail


def _heads(payload_size: int) -> list[bytes]:
    """varint length n (1..10) -> `[u32 smm_size][0x18 varint(size) 0x40]`, before varint(seq)."""
    smm_head = b"\x18" + encode_varint(payload_size) + b"\x40"
    return [b""] + [_U32.pack(len(smm_head) + n) + smm_head for n in range(1, 11)]


def batch_sizes(message_bytes: int, messages_max: int = BATCH_MESSAGES_MAX,
                bytes_max: int = BATCH_BYTES_MAX) -> int:
    """Members per full batch, by the official client's rule: a message joins while the count is
    below `messages_max` and the payload bytes stay within `bytes_max` (always at least one)."""
    if message_bytes <= 0:
        return messages_max
    return max(1, min(messages_max, bytes_max // message_bytes))


def encode_send_frame(producer_id: int, sequence_id: int, num_messages: int, metadata: bytes,
                      payload: bytes) -> bytes:
    """SEND frame (command, magic, CRC32C, metadata, payload) of a batch of num_messages."""
    cmd = pb.BaseCommand(type=T.SEND)
    cmd.send.producer_id = producer_id
    cmd.send.sequence_id = sequence_id
    cmd.send.num_messages = num_messages
    return encode_payload_command(cmd, build_entry(metadata, payload))


def _seal(producer_id: int, producer_name: str, sequence_id: int, count: int, raw: bytes,
          publish_time_ms: int, compression: int) -> bytes:
    md = pb.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id,
                            publish_time=publish_time_ms, num_messages_in_batch=count)
    if compression != NONE:  # the client sets both only for a compressed payload
        md.compression = compression  # type: ignore[assignment]  # the stubs type enum fields apart from int; run time takes the int
        md.uncompressed_size = len(raw)
    return encode_send_frame(producer_id, sequence_id, count, md.SerializeToString(),
                             compress(raw, compression))


class PlainBatchEncoder:
    """Batches of plain messages for one producer (name fixed at creation).

    payload: the payload `frame` repeats (the perf workload); `frame_of` takes any payloads.
    """

    def __init__(self, payload: bytes, producer_name: str, compression: int = NONE) -> None:
        self.payload = payload
        self.producer_name = producer_name
        self.compression = compression
        self._heads = _heads(len(payload))
        self._heads_by_size: dict[int, list[bytes]] = {len(payload): self._heads}

    def frame(self, producer_id: int, sequence_id: int, count: int, publish_time_ms: int) -> bytes:
        """SEND frame of `count` copies of the payload, sequence ids sequence_id.. +count-1."""
        payload, heads = self.payload, self._heads
        parts: list[bytes] = []
        append = parts.append
        for seq in range(sequence_id, sequence_id + count):
            v = _seq_varint(seq)
            append(heads[len(v)] + v)
            append(payload)
        return _seal(producer_id, self.producer_name, sequence_id, count, b"".join(parts),
                     publish_time_ms, self.compression)

    def frame_of(self, producer_id: int, sequence_id: int, payloads: list[bytes],
                 publish_time_ms: int) -> bytes:
        """SEND frame of the given payloads (any sizes), sequence ids sequence_id.. in order."""
        by_size = self._heads_by_size
        parts: list[bytes] = []
        append = parts.append
        for seq, payload in enumerate(payloads, sequence_id):
            heads = by_size.get(len(payload))
            if heads is None:
                if len(by_size) >= _SIZE_HEADS_MAX:
                    by_size.clear()
                heads = by_size[len(payload)] = _heads(len(payload))
            v = _seq_varint(seq)
            append(heads[len(v)] + v)
            append(payload)
        return _seal(producer_id, self.producer_name, sequence_id, len(payloads), b"".join(parts),
                     publish_time_ms, self.compression)
