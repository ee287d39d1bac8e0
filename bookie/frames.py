"""The framing of the bookie's TCP data path: a sans-IO codec (bytes in, frames out).

A frame is `u32 length (big-endian) | u8 kind | body`, where `length` counts the kind byte and
the body, and the body is the protobuf bytes of the message the kind names (proto/bookie.proto):

    ADD_REQUEST   AddRequest      client -> bookie
    ADD_RESPONSE  AddResponse     bookie -> client, one per AddRequest, same request_id
    READ_REQUEST  ReadRequest     client -> bookie, request_id names the read
    READ_RESPONSE ReadResponse    bookie -> client, echoes request_id, the last one has `last`
    ERROR         DataLinkError   bookie -> client, then the bookie closes the connection
    HELLO         (raw bytes)     client -> bookie, the first frame of every link: the cluster
                                  secret (empty without one); not answered (bookie/link_auth.py)

`FrameDecoder.feed()` takes whatever bytes arrived and returns the complete frames in them
(bodies as memoryviews, copied at most once: see the class);
`frame_header()` is the 5 bytes to write before a body (written separately, so a large body is
never copied to prepend its header).

What must hold: a length is checked against `frame_bytes_max` (the first frame against
`first_frame_bytes_max` when given: a client not yet authenticated cannot make the bookie buffer
a large frame) and the kind against the known kinds before anything of the frame is buffered;
a bad frame raises `BadRequest` (code 209) and the decoder is then dead (every later feed
raises): after a framing error the stream position is unknown.
"""

from __future__ import annotations

import enum
import struct

from common.config import MIB, Config
from common.errors import BadRequest

_HEADER = struct.Struct(">IB")
HEADER_BYTES = _HEADER.size  # 5
# Headroom over the largest entry for the protobuf framing of one request / response
# (gRPC control calls use the same figure for their message limit).
MESSAGE_OVERHEAD_BYTES = 4 * MIB


class FrameKind(enum.IntEnum):
    ADD_REQUEST = 1
    ADD_RESPONSE = 2
    READ_REQUEST = 3
    READ_RESPONSE = 4
    ERROR = 5
    HELLO = 6


_KINDS = frozenset(int(k) for k in FrameKind)


def frame_bytes_max(config: Config) -> int:
    """Largest `length` either side accepts: one entry at its maximum plus framing."""
    return config.bookie_entry_bytes_max + MESSAGE_OVERHEAD_BYTES


def frame_header(kind: FrameKind, body_bytes: int) -> bytes:
    return _HEADER.pack(body_bytes + 1, kind)


def encode_frame(kind: FrameKind, body: bytes) -> bytes:
    """Header and body in one bytes (for small bodies; large ones: write the header apart)."""
    return _HEADER.pack(len(body) + 1, kind) + body


def header_error(length: int, kind: int, frame_bytes_max: int) -> BadRequest | None:
    """Why a frame header (its length and kind) is refused, or None if it is acceptable.

    Checked before anything of the frame's body is buffered, by every reader of the data path."""
    if length < 1 or length > frame_bytes_max:
        return BadRequest("frame length out of bounds", length=length, frame_bytes_max=frame_bytes_max)
    if kind not in _KINDS:
        return BadRequest("unknown frame kind", kind=kind)
    return None


class FrameDecoder:
    """Bytes in, `(kind, body)` out. One per direction of one connection.

    A body is a read-only memoryview, never a copy where that can be avoided (a 64 KiB add
    copied twice more per frame cost the bookie a fifth of its CPU, most of it page faults
    on fresh allocations): a frame that arrived whole inside one `data` is a view of that
    `data` (kept alive by the view); one that spanned several is assembled once in a buffer
    of its own. Parse a body (protobuf `FromString` copies) and drop it; do not keep it."""

    def __init__(self, frame_bytes_max: int, *, first_frame_bytes_max: int | None = None) -> None:
        self._max = frame_bytes_max
        self._limit = frame_bytes_max if first_frame_bytes_max is None else first_frame_bytes_max
        # The start of a frame that did not arrive whole (its header already checked once it
        # holds HEADER_BYTES or more); empty between frames.
        self._buf = bytearray()
        self._frame_bytes = 0  # 4 + length of the frame in `_buf`; 0 = header not complete
        self._dead: BadRequest | None = None  # set once a bad frame was seen

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[int, memoryview]]:
        """The frames completed by `data`, in order. Raises BadRequest on a bad frame."""
        if self._dead is not None:
            raise self._dead
        if type(data) is not bytes:
            data = bytes(data)  # bodies may be views of it, so it must never change
        view = memoryview(data)
        frames: list[tuple[int, memoryview]] = []
        pos = self._finish_partial(view, frames) if self._buf else 0
        end = len(data)
        while end - pos >= HEADER_BYTES:
            length, kind = _HEADER.unpack_from(data, pos)
            self._check(length, kind)
            if end - pos - 4 < length:
                self._frame_bytes = 4 + length
                break
            frames.append((kind, view[pos + HEADER_BYTES:pos + 4 + length]))
            pos += 4 + length
        if pos < end:
            self._buf += view[pos:]
        return frames

    def _finish_partial(self, view: memoryview, frames: list) -> int:
        """Complete the frame begun in earlier data from the start of `view`; how many bytes
        of `view` it took (all of them while the frame is still incomplete)."""
        buf = self._buf
        taken = 0
        if not self._frame_bytes:  # its header is not complete yet
            taken = min(HEADER_BYTES - len(buf), len(view))
            buf += view[:taken]
            if len(buf) < HEADER_BYTES:
                return taken
            length, kind = _HEADER.unpack_from(buf, 0)
            self._check(length, kind)
            self._frame_bytes = 4 + length
        more = min(self._frame_bytes - len(buf), len(view) - taken)
        buf += view[taken:taken + more]
        taken += more
        if len(buf) == self._frame_bytes:
            frames.append((buf[4], memoryview(buf).toreadonly()[HEADER_BYTES:]))
            self._buf, self._frame_bytes = bytearray(), 0  # the view keeps the old buffer
        return taken

    def _check(self, length: int, kind: int) -> None:
        error = header_error(length, kind, self._limit)
        if error is not None:
            self._die(error)
        self._limit = self._max

    def _die(self, error: BadRequest) -> None:
        self._dead = error
        self._buf.clear()
        self._frame_bytes = 0
        raise error
