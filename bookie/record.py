"""The on-disk record codec of a bookie's log (sans-IO: bytes in, records out).

Every record is a fixed 40-byte header followed by `payload_bytes` bytes of payload:

    offset size field
    0      4    payload_bytes   u32 little-endian
    4      1    kind            RecordKind
    5      3    zero padding
    8      8    ledger_id       u64
    16     8    entry_id        u64 (0 when the kind has no entry)
    24     8    lac             i64 piggybacked last-add-confirmed (-1 = none)
    32     4    payload_crc32c  CRC32C of the payload
    36     4    header_crc32c   CRC32C of bytes 0..35

The header checksum makes a torn or zeroed header detectable; the payload checksum is the
entry's own CRC32C (the one the writer sent and the reader gets back), so each payload byte is
checksummed exactly once on the write path. A record is valid iff its header CRC matches, its
kind is known, its length is within bounds, and its payload CRC matches.

`RecordScanner` is fed bytes in order and yields records until the first record that is
incomplete or invalid; `end_offset` is then the length of the valid prefix, which is where a
recovering bookie truncates the file (a torn tail from a crash is never exposed).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from crc32c import crc32c as _crc32c

from common.invariant import invariant

HEADER = struct.Struct("<IB3xQQqI")  # everything but the header CRC
HEADER_BYTES = HEADER.size + 4
_CRC = struct.Struct("<I")


class RecordKind(enum.IntEnum):
    ADD = 1      # an entry: payload = entry bytes
    CREATE = 2   # a ledger appears on this bookie: payload = writer token (may be empty)
    FENCE = 3    # the ledger is fenced: no payload
    DELETE = 4   # the ledger is deleted: no payload


_KINDS = frozenset(int(k) for k in RecordKind)


@dataclass(frozen=True, slots=True)
class Record:
    offset: int          # where the record starts in its file
    kind: RecordKind
    ledger_id: int
    entry_id: int
    lac: int
    payload_crc32c: int
    payload: bytes

    @property
    def total_bytes(self) -> int:
        return HEADER_BYTES + len(self.payload)


def encode_header(kind: int, ledger_id: int, entry_id: int, lac: int, payload_bytes: int,
                  payload_crc32c: int) -> bytes:
    """The 40-byte header of a record; the caller writes the payload right after it."""
    head = HEADER.pack(payload_bytes, kind, ledger_id, entry_id, lac, payload_crc32c)
    return head + _CRC.pack(_crc32c(head))


def encode(kind: int, ledger_id: int, entry_id: int = 0, lac: int = -1,
           payload: bytes = b"") -> bytes:
    """A whole record as one bytes object (used off the hot path and by tests)."""
    return encode_header(kind, ledger_id, entry_id, lac, len(payload), _crc32c(payload)) + payload


class InvalidRecord(Exception):
    """Raised by `decode_one` when bytes do not form a valid record (callers translate it)."""


def decode_one(data: bytes | memoryview, offset: int = 0, *, payload_bytes_max: int) -> Record:
    """Decode the record that fills `data` exactly (a read of a known location)."""
    if len(data) < HEADER_BYTES:
        raise InvalidRecord("short record")
    record, _ = _decode_at(data, 0, offset, payload_bytes_max)
    if record is None or record.total_bytes != len(data):
        raise InvalidRecord("record does not match its checksums or length")
    return record


def _decode_at(buf: bytes | bytearray | memoryview, pos: int, file_offset: int,
               payload_bytes_max: int) -> tuple[Record | None, bool]:
    """(record, complete): record None + complete True means invalid; None + False: need bytes."""
    if len(buf) - pos < HEADER_BYTES:
        return None, False
    head = bytes(buf[pos:pos + HEADER.size])
    (header_crc,) = _CRC.unpack_from(buf, pos + HEADER.size)
    if _crc32c(head) != header_crc:
        return None, True
    payload_bytes, kind, ledger_id, entry_id, lac, payload_crc = HEADER.unpack(head)
    if kind not in _KINDS or payload_bytes > payload_bytes_max:
        return None, True
    end = pos + HEADER_BYTES + payload_bytes
    if len(buf) < end:
        return None, False
    payload = bytes(buf[pos + HEADER_BYTES:end])
    if _crc32c(payload) != payload_crc:
        return None, True
    record = Record(file_offset, RecordKind(kind), ledger_id, entry_id, lac, payload_crc, payload)
    return record, True


class RecordScanner:
    """Feed bytes of one file from its start; collect valid records up to the first bad one."""

    def __init__(self, *, payload_bytes_max: int) -> None:
        self._payload_bytes_max = payload_bytes_max
        self._buf = bytearray()
        self._buf_offset = 0       # file offset of self._buf[0]
        self.end_offset = 0        # length of the valid prefix seen so far
        self.invalid = False       # a bad record was found: nothing after end_offset counts

    def feed(self, data: bytes) -> list[Record]:
        """Records completed by `data`, in order. After an invalid record, always []."""
        if self.invalid:
            return []
        self._buf += data
        out: list[Record] = []
        pos = 0
        while True:
            record, complete = _decode_at(self._buf, pos, self._buf_offset + pos,
                                          self._payload_bytes_max)
            if record is None:
                self.invalid = complete
                break
            out.append(record)
            pos += record.total_bytes
        del self._buf[:pos]
        self._buf_offset += pos
        self.end_offset = self._buf_offset
        invariant(self.end_offset >= 0, "valid prefix is a length")
        return out

    @property
    def trailing_bytes(self) -> int:
        """Bytes after the valid prefix that do not (yet) form a record."""
        return len(self._buf)
