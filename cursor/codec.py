"""The persisted form of one durable cursor: a small binary value for the metadata store.

Layout (all integers big-endian):

    b"STCR"  magic
    u8       format version (1)
    zlib( u32 header_length | header JSON (utf-8) | bitmap blobs, concatenated )

The header JSON holds the mark-delete position, the byte length of each ledger's serialized
bitmap (`[[ledger_id, nbytes], ...]`, in blob order), partially acked batches
(`[[ledger_id, entry_id, batch_size, [unsigned words]], ...]`), redelivery counts
(`[[ledger_id, entry_id, count], ...]`), the broker's opaque `properties`, and `writer`: the
token of the cursor instance that wrote the value (see `cursor.cursor_store`: a lost
compare-and-set over a value carrying our own token is our own earlier write, any other token is
another owner). `writer` is optional: values written before fencing existed have none and still
load (format version 1 throughout, so older code can read newer values too: it ignores the key).

Each bitmap is `BitMap64.serialize()` after `run_optimize()`, so a long acked run is one run
container and the size grows with the number of ack holes, not with the span of the backlog;
zlib then squeezes regular patterns (every other entry acked compresses to a few hundred bytes).
The read position is not stored: on load it is the first unacked entry after mark-delete, as in
Pulsar (entries dispatched but unacked are dispatched again after a restart).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field

from pyroaring import BitMap64

from common.errors import CursorError
from cursor.ack_state import AckState, BatchAck
from ledger.position import Position

MAGIC = b"STCR"
FORMAT_VERSION = 1
ZLIB_LEVEL = 6


@dataclass
class CursorSnapshot:
    """Everything a durable cursor persists."""

    mark_delete: Position
    acks: AckState
    redelivery_counts: dict[Position, int] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    writer: str | None = None  # token of the cursor instance that wrote it; None: written before tokens


def encode(snapshot: CursorSnapshot) -> bytes:
    blobs: list[bytes] = []
    ledgers: list[list[int]] = []
    for ledger_id in sorted(snapshot.acks.acked):
        bitmap = snapshot.acks.acked[ledger_id]
        if not bitmap:
            continue
        bitmap.run_optimize()
        blob = bitmap.serialize()
        blobs.append(blob)
        ledgers.append([ledger_id, len(blob)])
    header = {
        "md": [snapshot.mark_delete[0], snapshot.mark_delete[1]],
        "ledgers": ledgers,
        "batches": [[p[0], p[1], b.batch_size, b.remaining]
                    for p, b in sorted(snapshot.acks.batches.items())],
        "redelivery": [[p[0], p[1], n] for p, n in sorted(snapshot.redelivery_counts.items())],
        "properties": snapshot.properties,
    }
    if snapshot.writer is not None:
        header["writer"] = snapshot.writer
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    body = struct.pack(">I", len(head)) + head + b"".join(blobs)
    return MAGIC + bytes([FORMAT_VERSION]) + zlib.compress(body, ZLIB_LEVEL)


def _open(value: bytes) -> tuple[bytes, dict, int]:
    """(decompressed body, header, offset of the first bitmap blob)."""
    if value[:4] != MAGIC or len(value) < 5:
        raise CursorError("not a persisted cursor (bad magic)")
    if value[4] != FORMAT_VERSION:
        raise CursorError("unknown cursor format version", version=value[4])
    try:
        body = zlib.decompress(value[5:])
        (head_len,) = struct.unpack_from(">I", body, 0)
        header = json.loads(body[4:4 + head_len])
    except (zlib.error, struct.error, ValueError) as exc:
        raise CursorError(f"corrupt persisted cursor: {exc}") from None
    return body, header, 4 + head_len


def writer_of(value: bytes) -> str | None:
    """The writer token of a persisted value (None if it predates tokens); bitmaps not parsed."""
    _, header, _ = _open(value)
    writer = header.get("writer")
    return None if writer is None else str(writer)


def decode(value: bytes) -> CursorSnapshot:
    body, header, offset = _open(value)
    acks = AckState()
    for ledger_id, nbytes in header["ledgers"]:
        blob = body[offset:offset + nbytes]
        if len(blob) != nbytes:
            raise CursorError("corrupt persisted cursor: truncated bitmap", ledger_id=ledger_id)
        acks.acked[ledger_id] = BitMap64.deserialize(blob)
        offset += nbytes
    if offset != len(body):
        raise CursorError("corrupt persisted cursor: trailing bytes", extra=len(body) - offset)
    for ledger_id, entry_id, batch_size, words in header["batches"]:
        acks.batches[Position(ledger_id, entry_id)] = BatchAck(batch_size, list(words))
    writer = header.get("writer")
    return CursorSnapshot(
        mark_delete=Position(*header["md"]),
        acks=acks,
        redelivery_counts={Position(ledger, e): n for ledger, e, n in header["redelivery"]},
        properties={str(k): str(v) for k, v in header["properties"].items()},
        writer=None if writer is None else str(writer),
    )
