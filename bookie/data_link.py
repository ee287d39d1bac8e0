"""The client end of a bookie's framed TCP data path: one connection, adds and/or reads.

How it works
- A `DataLink` starts CONNECTING: it asks the bookie for its data port (`discover`, the
  `GetInfo` call over gRPC, bounded by the add timeout) and connects to it. Adds submitted
  meanwhile wait in `unsent`; readers await `ready`. A bookie advertising no data port fails
  the link (`BookieUnavailable`): the data path has no other transport.
- Its first frame is a HELLO with the cluster secret (bookie/link_auth.py), written as soon as
  the connection is made, ahead of any add or read and without waiting for an answer; with
  `bookie_tls_enabled` the connection is TLS (`ssl_context`, the bookie's advertised host
  checked against its certificate). A bookie that refuses it answers one ERROR frame
  (AuthenticationFailed) and the link fails with that error.
- OPEN: `submit()` appends the add to `unsent` and schedules one flush with `call_soon` (no
  task per add); the flush turns everything unsent into ADD_REQUEST frames
  (bookie/client_core.py: coalesced, split per writer token and size) and writes them with
  `transport.write`. So adds submitted while the loop is busy, while the socket is over its
  write buffer mark (`pause_writing`), or while `ledger_bookie_requests_in_flight_max` requests await their
  answers (the next answer flushes again), ride the next frame together.
- Responses are read with `asyncio.BufferedProtocol` (`_FrameReader`): small frames land in
  one reused scratch buffer; a frame too big for it is read straight into a bytearray of its
  own exact size, so a 128 KiB read response reaches protobuf without being copied by the
  loop (bytes per read) or reassembled from chunks. Each frame's length and kind are checked
  against `frame_bytes_max` and the known kinds (bookie/frames.py) before anything of its body
  is buffered. The decoded responses resolve futures directly.
- A watchdog checks the oldest add in flight every `_WATCHDOG_FRACTION` of the add timeout; a
  late one fails the link (`TimeoutExpired` for the late adds, `BookieUnavailable` for the
  rest), as a broken connection, a bad frame or the bookie's ERROR frame do.

What must hold: every add future is resolved exactly once (client_core), every read future
once; a failed link is never reused (`LinkState.FAILED` is final) and fails everything on it
with a typed `StrataError`; socket errors do not leave this module untranslated.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import ssl
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf.message import DecodeError

from bookie.client_core import (
    Inflight,
    PendingRead,
    fail_adds,
    fail_reads,
    resolve_add_response,
    take_add_request,
    take_read_response,
)
from bookie.frames import HEADER_BYTES, FrameKind, encode_frame, frame_header, header_error
from common import write_cork
from common.clock import Clock
from common.config import Config
from common.errors import BadRequest, BookieUnavailable, StrataError, TimeoutExpired, error_from_code
from common.invariant import present
from proto import bookie_pb2 as pb

log = logging.getLogger(__name__)

# How often an open link checks its oldest add against the add deadline, as a fraction of it.
_WATCHDOG_FRACTION = 0.1
# Bodies at least this big are written apart from their header (no copy to join them).
_JOIN_BODY_BYTES_MAX = 64 * 1024
# Frames whose header and body fit in this many bytes are read into one reused scratch buffer
# (many small responses per read call); a bigger one is read into a buffer of its own, so at
# most this many bytes of a big body are copied (out of the scratch buffer) on arrival.
_SCRATCH_BYTES = 16 * 1024
_HEADER = struct.Struct(">IB")  # bookie/frames.py: u32 length (kind + body) | u8 kind


class LinkState(enum.Enum):
    CONNECTING = "connecting"  # finding the data port / connecting; adds wait in `unsent`
    OPEN = "open"              # connected: adds are flushed as frames, reads are sent
    FAILED = "failed"          # broken, reset or closed; never reused


_TRANSITIONS = {LinkState.CONNECTING: {LinkState.OPEN, LinkState.FAILED},
                LinkState.OPEN: {LinkState.FAILED}, LinkState.FAILED: set()}


class _FrameReader:
    """The receiving half of a link's frames for `asyncio.BufferedProtocol` (sans-IO).

    `get_buffer()` is where the next bytes from the socket go; `buffer_updated(n)` returns the
    frames they completed as `(kind, body)`. A small frame's body is copied out of the scratch
    buffer (which is reused); a big frame's body is a read-only view of its own buffer, filled
    by the socket directly. What must hold: a length and kind are checked before any of the
    frame's body is buffered, and a big buffer is never bigger than `frame_bytes_max`; after a
    bad frame the reader is dead (every later call raises), as FrameDecoder is."""

    def __init__(self, frame_bytes_max: int) -> None:
        self._max = frame_bytes_max
        self._scratch = memoryview(bytearray(_SCRATCH_BYTES))
        self._filled = 0                    # bytes at the start of scratch not yet parsed
        self._big: memoryview | None = None  # the body being read into a buffer of its own
        self._big_filled = 0
        self._big_kind = 0
        self._dead: BadRequest | None = None

    def get_buffer(self) -> memoryview:
        if self._big is not None:
            return self._big[self._big_filled:]
        return self._scratch[self._filled:]

    def buffer_updated(self, nbytes: int) -> list[tuple[int, memoryview | bytes]]:
        if self._dead is not None:
            raise self._dead
        frames: list[tuple[int, memoryview | bytes]] = []
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frames.append((self._big_kind, self._big.toreadonly()))
                self._big = None
            return frames
        self._filled += nbytes
        self._parse_scratch(frames)
        return frames

    def _parse_scratch(self, frames: list) -> None:
        buf, pos, end = self._scratch, 0, self._filled
        while end - pos >= HEADER_BYTES:
            length, kind = _HEADER.unpack_from(buf, pos)
            self._check(length, kind)
            body_start, body_bytes = pos + HEADER_BYTES, length - 1
            if end - body_start >= body_bytes:
                frames.append((kind, bytes(buf[body_start:body_start + body_bytes])))
                pos = body_start + body_bytes
                continue
            if HEADER_BYTES + body_bytes > len(buf):  # never fits: read it into its own buffer
                big = memoryview(bytearray(body_bytes))
                have = end - body_start
                big[:have] = buf[body_start:end]
                self._big, self._big_filled, self._big_kind = big, have, kind
                pos = end
            break
        rest = end - pos
        if rest and pos:
            buf[:rest] = buf[pos:end]
        self._filled = rest

    def _check(self, length: int, kind: int) -> None:
        error = header_error(length, kind, self._max)
        if error is not None:
            self._die(error)

    def _die(self, error: BadRequest) -> None:
        self._dead = error
        self._filled, self._big = 0, None
        raise error


class DataLink(asyncio.BufferedProtocol):
    def __init__(self, *, address: str, host: str, discover: Callable[[], Awaitable[int]],
                 frame_bytes_max: int, add_timeout_s: float, clock: Clock,
                 next_request_id: Callable[[], int],
                 on_retired: Callable[[DataLink], None], config: Config, hello_body: bytes = b"",
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.address = address
        self._hello_body = hello_body              # the first frame's body: the cluster secret
        self._ssl_context = ssl_context            # TLS to the bookie, or None
        self._handshake_timeout_s = config.tls_handshake_timeout_ms / 1000
        # Socket write buffer high-water mark: over it, adds wait in `unsent` (and coalesce).
        self._write_buffer_bytes_high = config.ledger_bookie_write_buffer_bytes_high
        # Add requests sent and not yet answered before further adds wait in `unsent` (and so
        # gather into bigger requests): a busy client sends fewer, bigger frames; an idle one
        # sends each add at once.
        self._requests_in_flight_max = config.ledger_bookie_requests_in_flight_max
        self._request_payload_bytes_max = config.ledger_bookie_request_payload_bytes_max
        self._host = host
        self._discover = discover
        self._add_timeout_s = add_timeout_s
        self._clock = clock
        self._next_request_id = next_request_id
        self._on_retired = on_retired
        self._reader = _FrameReader(frame_bytes_max)
        self.loop = asyncio.get_running_loop()   # the loop its futures and callbacks run on
        self.state = LinkState.CONNECTING
        self.unsent: deque = deque()                  # adds not yet in a frame (client_core)
        self.inflight: dict[int, Inflight] = {}       # add requests sent, by request id
        self.reads: dict[int, PendingRead] = {}       # reads sent, by request id
        # True once OPEN, else the error that failed the link.
        self.ready: asyncio.Future = self.loop.create_future()
        self._transport: asyncio.Transport | None = None
        self._flush_scheduled = False
        self._write_paused = False
        self._watchdog: asyncio.TimerHandle | None = None
        self._connect_task = asyncio.ensure_future(self._connect())
        self._arm_watchdog()

    def _set_state(self, state: LinkState) -> None:
        if state not in _TRANSITIONS[self.state]:
            raise AssertionError(f"data link {self.state} -> {state}")
        self.state = state

    # --- connecting -----------------------------------------------------------------------

    async def _connect(self) -> None:
        try:
            port = await asyncio.wait_for(self._discover(), self._add_timeout_s)
            if self.state is not LinkState.CONNECTING:
                return
            if not port:
                self.fail(BookieUnavailable("bookie advertises no data port", address=self.address))
                return
            tls: dict[str, Any] = {} if self._ssl_context is None else {
                "ssl": self._ssl_context, "server_hostname": self._host,
                "ssl_handshake_timeout": self._handshake_timeout_s}
            await asyncio.wait_for(self.loop.create_connection(lambda: self, self._host, port, **tls),
                                   self._add_timeout_s)
        except asyncio.CancelledError:
            raise
        except StrataError as exc:
            self.fail(exc)
        except (TimeoutError, OSError) as exc:   # ssl.SSLError (certificate refused) is an OSError
            self.fail(BookieUnavailable(f"cannot connect to the bookie's data port: {exc!r}",
                                        address=self.address))

    # asyncio gives a stream protocol a Transport; typeshed's BaseProtocol says BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.state is not LinkState.CONNECTING:  # failed (e.g. closed) while connecting
            transport.abort()
            return
        self._transport = transport
        transport.set_write_buffer_limits(high=self._write_buffer_bytes_high)
        transport.write(encode_frame(FrameKind.HELLO, self._hello_body))
        self._set_state(LinkState.OPEN)
        self.ready.set_result(True)
        if self.unsent:
            self._schedule_flush()

    # --- adds -----------------------------------------------------------------------------

    def submit(self, add: tuple) -> None:
        """Queue one add (client_core tuple); it goes out with the next flush."""
        self.unsent.append(add)
        if self.state is LinkState.OPEN:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and not self._write_paused:
            self._flush_scheduled = True
            if write_cork.scope.depth:
                # adds made while a client read or a bookie answer is handled leave when it is
                # done, in one request, without waiting a loop turn
                write_cork.hold(self)
            else:
                self.loop.call_soon(self._flush)

    def flush_corked(self) -> None:
        self._flush()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.state is not LinkState.OPEN or self._write_paused:
            return   # resume_writing schedules the flush again
        deadline_s = self._clock.monotonic_s() + self._add_timeout_s
        unsent, inflight = self.unsent, self.inflight
        in_flight_max, payload_bytes_max = self._requests_in_flight_max, self._request_payload_bytes_max
        frames: list[bytes] = []   # every request of this flush (one per writer token: per ledger) in one writev
        frame_bytes = 0
        while unsent and len(inflight) < in_flight_max and frame_bytes < self._write_buffer_bytes_high:
            body = take_add_request(unsent, inflight, self._next_request_id, deadline_s, payload_bytes_max)
            if body is None:
                continue
            if len(body) <= _JOIN_BODY_BYTES_MAX:
                frames.append(encode_frame(FrameKind.ADD_REQUEST, body))
            else:
                frames += (frame_header(FrameKind.ADD_REQUEST, len(body)), body)
            frame_bytes += len(body)
        if frames:
            present(self._transport, "connected").writelines(frames)
            if unsent and len(inflight) < in_flight_max and not self._write_paused:
                self._schedule_flush()

    def _write(self, kind: FrameKind, body: bytes) -> None:
        transport = present(self._transport, "connected")
        if len(body) <= _JOIN_BODY_BYTES_MAX:
            transport.write(encode_frame(kind, body))
        else:
            transport.writelines((frame_header(kind, len(body)), body))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.unsent:
            self._schedule_flush()

    # --- reads ----------------------------------------------------------------------------

    def send_read(self, request: pb.ReadRequest, pending: PendingRead) -> None:
        """Send one read (the link must be OPEN: await `ready` first)."""
        if self.state is not LinkState.OPEN:
            pending.future.set_exception(BookieUnavailable("data link is down",
                                                           address=self.address))
            return
        self.reads[request.request_id] = pending
        present(self._transport, "connected").write(encode_frame(FrameKind.READ_REQUEST, request.SerializeToString()))

    # --- frames in ------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        # What the answers complete (a producer's receipt, on many topics at once) is written in
        # one system call per client connection when this read's frames are all handled.
        write_cork.begin()
        try:
            self._frames_in(nbytes)
        finally:
            write_cork.end()

    def _frames_in(self, nbytes: int) -> None:
        try:
            for kind, body in self._reader.buffer_updated(nbytes):
                if kind == FrameKind.ADD_RESPONSE:
                    resolve_add_response(self.inflight, pb.AddResponse.FromString(body),  # type: ignore[arg-type]  # FromString takes any buffer
                                         self.address)
                    if self.unsent:
                        self._schedule_flush()
                elif kind == FrameKind.READ_RESPONSE:
                    self._on_read_response(pb.ReadResponse.FromString(body))  # type: ignore[arg-type]  # FromString takes any buffer
                elif kind == FrameKind.ERROR:
                    error = pb.DataLinkError.FromString(body)  # type: ignore[arg-type]  # FromString takes any buffer
                    raise error_from_code(error.error_code,
                                          f"bookie closed the data link: {error.error_message}")
                else:
                    raise BadRequest("frame kind not expected from a bookie", kind=kind)
        except BadRequest as exc:
            self.fail(exc if self.state is LinkState.FAILED else
                      BookieUnavailable(f"bad frame from the bookie: {exc}", address=self.address))
        except StrataError as exc:
            self.fail(exc)
        except DecodeError as exc:
            self.fail(BookieUnavailable(f"undecodable frame from the bookie: {exc}",
                                        address=self.address))

    def _on_read_response(self, response: pb.ReadResponse) -> None:
        pending = self.reads.get(response.request_id)
        if pending is None or pending.future.done():
            return  # its reader gave up (cancelled or timed out)
        try:
            take_read_response(pending, response, self.address)
        except StrataError as exc:
            pending.future.set_exception(exc)
        if pending.future.done():
            del self.reads[response.request_id]

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(BookieUnavailable(f"bookie data connection lost: {exc!r}", address=self.address))

    # --- failure --------------------------------------------------------------------------

    def _arm_watchdog(self) -> None:
        period_s = max(0.01, self._add_timeout_s * _WATCHDOG_FRACTION)
        self._watchdog = self.loop.call_later(period_s, self._check_deadlines)

    def _check_deadlines(self) -> None:
        if self.state is LinkState.FAILED:
            return
        oldest = next(iter(self.inflight.values()), None)
        if oldest is not None and self._clock.monotonic_s() >= oldest.deadline_s:
            self.fail(BookieUnavailable("data link reset after an add timed out",
                                        address=self.address), timed_out=True)
            return
        self._arm_watchdog()

    def _stop_timers(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._connect_task is not asyncio.current_task():
            self._connect_task.cancel()

    def fail(self, exc: StrataError, *, timed_out: bool = False) -> None:
        """Fail everything on the link and retire it; the client opens a new one when needed."""
        if self.state is LinkState.FAILED:
            return
        self._set_state(LinkState.FAILED)
        self._stop_timers()
        timeout_error = None
        if timed_out:
            timeout_error = TimeoutExpired("add not acknowledged within ledger_add_timeout_ms",
                                           address=self.address, timeout_s=self._add_timeout_s)
        fail_adds(self.inflight, self.unsent, exc, timeout_error, self._clock.monotonic_s())
        fail_reads(self.reads, exc)
        if not self.ready.done():
            self.ready.set_exception(exc)
            self.ready.exception()  # retrieved: nobody may be waiting for it
        if self._transport is not None:
            self._transport.abort()
        self._on_retired(self)
