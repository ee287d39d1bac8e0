"""Per-ledger state and the entry index, in memory, plus the files that persist them.

The index maps (ledger_id, entry_id) to a *location*: one int packing the segment id, the
record's offset in that segment file and the record's length (header + payload), so a read is
one dict lookup and one pread, never a scan. `pack_location`/`unpack_location` define it.

Two files persist what memory holds (both written through bookie/fileio.py to a temp name,
fsynced, renamed, then the directory fsynced, so a crash leaves the old or the new file, never
half of one):

- `<segment>.idx`, written once when a segment is sealed: every ADD record in that segment as
  (ledger_id, entry_id, offset, length) quadruples of little-endian int64, after a header with a
  magic and the CRC32C of the body. Immutable; removed with its segment.
- `checkpoint.json`: the state of every live ledger (fenced, LAC, last entry, writer token, the
  first segment of this incarnation) and `replay_from_segment`: every segment below it is sealed
  and has an .idx; segments from it on are replayed record by record at start-up.

What must hold: a ledger absent from the checkpoint is deleted, so its index entries in older
.idx files are dead; entries in segments below a ledger's `first_segment_id` belong to an
earlier incarnation of that id and are dead too.
"""

from __future__ import annotations

import json
import struct
from array import array
from dataclasses import dataclass, field

from crc32c import crc32c

from bookie.record import HEADER_BYTES as _RECORD_HEADER_BYTES
from common.errors import ChecksumMismatch
from common.invariant import invariant

# location = segment_id << 80 | offset << 40 | length: offsets and lengths below 2**40.
_FIELD_BITS = 40
_FIELD_MASK = (1 << _FIELD_BITS) - 1
_IDX_MAGIC = b"SIDX0001"
_IDX_HEADER = struct.Struct("<8sQI")  # magic, quadruple count, crc32c of body
CHECKPOINT_NAME = "checkpoint.json"


def pack_location(segment_id: int, offset: int, length: int) -> int:
    return (segment_id << (2 * _FIELD_BITS)) | (offset << _FIELD_BITS) | length


def unpack_location(location: int) -> tuple[int, int, int]:
    """(segment_id, offset, length)"""
    return (location >> (2 * _FIELD_BITS), (location >> _FIELD_BITS) & _FIELD_MASK,
            location & _FIELD_MASK)


@dataclass(slots=True)
class LedgerState:
    ledger_id: int
    # Refuses adds without `recovery` once True; never goes back to False.
    fenced: bool = False
    # Highest LAC piggybacked on a durable add (-1 = none).
    lac: int = -1
    # Highest entry id durably stored here (-1 = none).
    last_entry_id: int = -1
    # The first writer's token; b"" = none recorded yet (ledger created by a fence).
    writer_token: bytes = b""
    # Segment holding this incarnation's CREATE record; older segments' entries are dead.
    first_segment_id: int = 0
    # entry_id -> packed location of its ADD record.
    entries: dict[int, int] = field(default_factory=dict)
    # Payload bytes of the live entries (headers not counted).
    payload_bytes: int = 0

    def to_json(self) -> dict:
        return {"ledger_id": self.ledger_id, "fenced": self.fenced, "lac": self.lac,
                "last_entry_id": self.last_entry_id, "writer_token": self.writer_token.hex(),
                "first_segment_id": self.first_segment_id}

    @classmethod
    def from_json(cls, data: dict) -> LedgerState:
        return cls(ledger_id=int(data["ledger_id"]), fenced=bool(data["fenced"]),
                   lac=int(data["lac"]), last_entry_id=int(data["last_entry_id"]),
                   writer_token=bytes.fromhex(data["writer_token"]),
                   first_segment_id=int(data["first_segment_id"]))


def encode_idx(quads: array) -> bytes:
    """An .idx file from a flat int64 array of (ledger, entry, offset, length) quadruples."""
    invariant(quads.typecode == "q" and len(quads) % 4 == 0, "idx body is int64 quadruples")
    body = quads.tobytes() if _little_endian() else _swapped(quads).tobytes()
    return _IDX_HEADER.pack(_IDX_MAGIC, len(quads) // 4, crc32c(body)) + body


def decode_idx(data: bytes, path: str = "") -> array:
    if len(data) < _IDX_HEADER.size:
        raise ChecksumMismatch("index file too short", path=path)
    magic, count, crc = _IDX_HEADER.unpack_from(data)
    body = data[_IDX_HEADER.size:]
    if magic != _IDX_MAGIC or len(body) != count * 32 or crc32c(body) != crc:
        raise ChecksumMismatch("index file does not match its checksum", path=path)
    quads = array("q")
    quads.frombytes(body)
    return quads if _little_endian() else _swapped(quads)


def encode_checkpoint(replay_from_segment: int, ledgers: list[LedgerState]) -> bytes:
    body = {"version": 1, "replay_from_segment": replay_from_segment,
            "ledgers": [s.to_json() for s in ledgers]}
    text = json.dumps(body, separators=(",", ":"), sort_keys=True)
    return json.dumps({"crc32c": crc32c(text.encode()), "body": text}).encode()


def decode_checkpoint(data: bytes) -> tuple[int, list[LedgerState]]:
    outer = json.loads(data)
    text = outer["body"]
    if crc32c(text.encode()) != outer["crc32c"]:
        raise ChecksumMismatch("checkpoint does not match its checksum")
    body = json.loads(text)
    invariant(body["version"] == 1, "known checkpoint version", version=body["version"])
    return int(body["replay_from_segment"]), [LedgerState.from_json(d) for d in body["ledgers"]]


def _little_endian() -> bool:
    return array("q", [1]).tobytes()[0] == 1


def _swapped(quads: array) -> array:
    out = array("q", quads)
    out.byteswap()
    return out


@dataclass(slots=True)
class SegmentInfo:
    segment_id: int
    # Bytes in the file; for the active segment, bytes placed (some may not be durable yet).
    size_bytes: int
    # Record bytes (header + payload) of the live ADD records in it.
    live_bytes: int = 0
    # True once its .idx file is written; only sealed segments are collected or compacted.
    sealed: bool = False
    # (ledger, entry, offset, length) of every durable ADD record, kept until the .idx is written.
    quads: array | None = field(default_factory=lambda: array("q"))


class Index:
    """Ledgers and where their entries are; segment liveness follows every change."""

    def __init__(self) -> None:
        self.ledgers: dict[int, LedgerState] = {}
        self.segments: dict[int, SegmentInfo] = {}

    def create_ledger(self, ledger_id: int, writer_token: bytes, segment_id: int) -> LedgerState:
        """A new incarnation of `ledger_id` (any older one must already be dropped)."""
        invariant(ledger_id not in self.ledgers, "create only absent ledgers", ledger_id=ledger_id)
        state = LedgerState(ledger_id, writer_token=writer_token, first_segment_id=segment_id)
        self.ledgers[ledger_id] = state
        return state

    def drop_ledger(self, ledger_id: int) -> LedgerState | None:
        """Forget the ledger; its records become dead bytes in their segments."""
        state = self.ledgers.pop(ledger_id, None)
        if state is not None:
            segments = self.segments
            for location in state.entries.values():
                segment = segments.get(location >> (2 * _FIELD_BITS))
                if segment is not None:
                    segment.live_bytes -= location & _FIELD_MASK
            state.entries.clear()
            state.payload_bytes = 0
            self._forget_in_open_segments(ledger_id)
        return state

    def _forget_in_open_segments(self, ledger_id: int) -> None:
        """Drop the ledger's quads from segments not yet sealed. Their .idx is written from the
        quads at sealing, and a later incarnation of the same id created in the same segment
        would otherwise take the dead entries back on the next start."""
        for segment in self.segments.values():
            quads = segment.quads
            if quads is None or ledger_id not in quads[0::4]:
                continue
            kept = array("q")
            for i in range(0, len(quads), 4):
                if quads[i] != ledger_id:
                    kept.extend(quads[i:i + 4])
            segment.quads = kept

    def insert(self, state: LedgerState, entry_id: int, segment_id: int, offset: int,
               length: int, lac: int, payload_bytes: int) -> None:
        """Record a durable ADD at (segment_id, offset); replaces an older copy of the entry."""
        segment = self.segments[segment_id]
        old = state.entries.get(entry_id)
        if old is not None:
            old_segment = self.segments.get(old >> (2 * _FIELD_BITS))
            if old_segment is not None:
                old_segment.live_bytes -= old & _FIELD_MASK
            state.payload_bytes -= (old & _FIELD_MASK) - _RECORD_HEADER_BYTES
        state.entries[entry_id] = (segment_id << (2 * _FIELD_BITS)) | (offset << _FIELD_BITS) | length
        state.payload_bytes += payload_bytes
        segment.live_bytes += length
        if segment.quads is not None:
            segment.quads.extend((state.ledger_id, entry_id, offset, length))
        if entry_id > state.last_entry_id:
            state.last_entry_id = entry_id
        if lac > state.lac:
            state.lac = lac

    def drop_entry(self, state: LedgerState, entry_id: int) -> None:
        """Stop serving one entry (its record is corrupt): its bytes become dead. The quads of
        an unsealed segment keep it, so its .idx (and a restart) still point at the record."""
        location = state.entries.pop(entry_id, None)
        if location is None:
            return
        segment = self.segments.get(location >> (2 * _FIELD_BITS))
        if segment is not None:
            segment.live_bytes -= location & _FIELD_MASK
        state.payload_bytes -= (location & _FIELD_MASK) - _RECORD_HEADER_BYTES

    def load_sealed(self, segment: SegmentInfo, quads: array) -> None:
        """Take the live entries of a sealed segment's .idx (start-up)."""
        ledgers = self.ledgers
        sid = segment.segment_id
        shift = 2 * _FIELD_BITS
        for i in range(0, len(quads), 4):
            state = ledgers.get(quads[i])
            if state is None or sid < state.first_segment_id:
                continue  # deleted ledger, or an earlier incarnation of its id
            entry_id, offset, length = quads[i + 1], quads[i + 2], quads[i + 3]
            old = state.entries.get(entry_id)
            if old is not None:
                old_segment = self.segments.get(old >> shift)
                if old_segment is not None:
                    old_segment.live_bytes -= old & _FIELD_MASK
                state.payload_bytes -= (old & _FIELD_MASK) - _RECORD_HEADER_BYTES
            state.entries[entry_id] = (sid << shift) | (offset << _FIELD_BITS) | length
            state.payload_bytes += length - _RECORD_HEADER_BYTES
            segment.live_bytes += length
            if entry_id > state.last_entry_id:
                state.last_entry_id = entry_id

    def is_live(self, ledger_id: int, entry_id: int, location: int) -> bool:
        state = self.ledgers.get(ledger_id)
        return state is not None and state.entries.get(entry_id) == location
