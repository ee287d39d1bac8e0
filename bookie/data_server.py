"""The bookie's framed TCP data path: adds and reads without grpc.aio's per-message cost.

How it works
- `DataServer` listens on `bookie_data_port` (0 = any free port) on the gRPC host; each
  connection gets a `_DataConnection` (an asyncio Protocol) that decodes frames
  (bookie/frames.py) straight from `data_received`, with no task per message.
- ADD_REQUEST: handed to `Storage.add_request` at once when the storage has room, else kept in
  `_admit_queue` while the connection stops reading (`pause_reading`) and one admit task waits
  for room (`Storage.wait_for_room`: `bookie_add_queue_entries_max` bounds the entries across
  connections). Submitted requests queue in `_adds`; when the journal reports a batch durable
  (a plain callback, no task or future per add), every request at the head of the queue that is
  now done is answered in request order, all of them in one write (bookie/requests.py).
- READ_REQUEST: queued in `_reads` for the connection's reader task, which answers them one
  after another, in request order.
- Writing respects the transport's flow control: when the socket buffer is over its high mark
  (`pause_writing`) the responder and reader wait; a reader that does not read its responses
  therefore stops its own requests being read (the queues fill, the socket is paused).
- A malformed or oversize frame, or a body that is not the protobuf its kind names: the
  connection gets one ERROR frame (`DataLinkError`, code BadRequest) and is closed. Nothing of
  the bad frame reaches storage; other connections are unaffected.
- Authentication (bookie/link_auth.py): on a bookie that requires it, the first frame must be a
  HELLO carrying the cluster secret (at most `HELLO_BYTES_MAX`), unless the TLS handshake verified
  a client certificate of one of `bookie_tls_client_roles`; anything else first, or no frame
  within `authentication_connect_timeout_ms`, gets one ERROR frame (AuthenticationFailed) and
  the connection is closed. A HELLO is accepted (and ignored) as the first frame on any bookie.
  With `bookie_tls_enabled` the port speaks TLS (the guard's server context).

What must hold: every queue is bounded (`bookie_add_requests_queued_max`, `bookie_reads_queued_max`; the
admit queue holds at most what one `data_received` chunk carried); add responses go out in
request order, one per request, success only once durable; no frame of a connection that has not
proved itself reaches storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from google.protobuf.message import DecodeError

from auth.tls import peer_common_name
from bookie.frames import FrameDecoder, FrameKind, encode_frame, frame_bytes_max, frame_header
from bookie.link_auth import HELLO_BYTES_MAX, LinkGuard
from bookie.requests import add_response, stream_read_responses
from bookie.storage import Storage
from common.config import Config
from common.errors import AuthenticationFailed, BadRequest, StrataError
from common.invariant import present
from common.tls_reads import BufferedReads
from proto import bookie_pb2 as pb

log = logging.getLogger(__name__)

# Bodies at least this big are written apart from their header (no copy to join them).
_JOIN_BODY_BYTES_MAX = 64 * 1024


class _DataConnection(asyncio.Protocol):
    """One client connection. Pause reasons: 'room' (storage add queue full), 'adds', 'reads'."""

    def __init__(self, server: DataServer) -> None:
        self._server = server
        self._storage: Storage = server.storage
        config = server.storage.config
        # Add requests submitted to storage and not yet answered before the connection stops
        # reading (the storage's own add queue bounds the entries across connections).
        self._adds_max = config.bookie_add_requests_queued_max
        self._reads_max = config.bookie_reads_queued_max  # read requests waiting, likewise
        guard = server.guard
        # None: the first frame may be anything (a HELLO is still accepted there)
        self._authenticated: bool | None = None if not guard.required else False
        self._decoder = FrameDecoder(server.frame_bytes_max,
                                     first_frame_bytes_max=HELLO_BYTES_MAX + 1 if guard.required else None)
        self._auth_timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._admit_queue: deque = deque()  # AddRequests decoded while storage had no room
        self._admit_task: asyncio.Task | None = None
        self._adds: deque = deque()         # (request_id, entries, PendingAdds), in order
        self._reads: deque = deque()        # ReadRequests not yet answered, in order
        self._reads_wakeup = asyncio.Event()
        self._writable = asyncio.Event()    # clear while the transport asked us to pause writing
        self._writable.set()
        self._paused: set[str] = set()      # why reading is paused; empty = reading
        self._tasks: list[asyncio.Task] = []
        self._closed = False

    # --- asyncio.Protocol -----------------------------------------------------------------

    # asyncio gives a stream protocol a Transport; typeshed's BaseProtocol says BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._transport = transport
        transport.set_write_buffer_limits(high=self._storage.config.bookie_data_write_buffer_bytes_high)
        self._server.connections.add(self)
        if self._authenticated is False:
            if self._server.guard.role_ok(peer_common_name(transport)):
                self._authenticated = None      # a verified certificate of a broker role: proved
            else:
                timeout_s = self._storage.config.authentication_connect_timeout_ms / 1000
                self._auth_timer = asyncio.get_running_loop().call_later(timeout_s, self._auth_timed_out)
        self._tasks = [asyncio.ensure_future(self._answer_reads())]

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            for kind, body in self._decoder.feed(data):
                if not self._authenticated:
                    if self._first_frame(kind, body):
                        continue
                self._on_frame(kind, body)
        except (BadRequest, AuthenticationFailed) as exc:
            self._reject(exc)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()
        self._answer_adds()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._writable.set()
        self._server.connections.discard(self)
        self._server.progress.set()
        for task in self._tasks:
            task.cancel()
        if self._admit_task is not None:
            self._admit_task.cancel()
        if self._auth_timer is not None:
            self._auth_timer.cancel()

    # --- frames in ------------------------------------------------------------------------

    def _first_frame(self, kind: int, body: memoryview) -> bool:
        """Check the connection's first frame; True when it was a HELLO (consumed). Raises
        AuthenticationFailed when the bookie requires a client to prove itself and it did not."""
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        if self._authenticated is False:       # required
            transport = present(self._transport, "connected")
            peer = transport.get_extra_info("peername")
            if kind != FrameKind.HELLO:
                raise self._server.guard.refuse("data", peer, "first frame is not a HELLO")
            self._server.guard.check_hello(body, peer_common_name(transport), peer)
        self._authenticated = True
        return kind == FrameKind.HELLO

    def _auth_timed_out(self) -> None:
        self._auth_timer = None
        if not self._closed and self._authenticated is False:
            peer = present(self._transport, "connected").get_extra_info("peername")
            self._reject(self._server.guard.refuse(
                "data", peer, "no HELLO within authentication_connect_timeout_ms"))

    def _on_frame(self, kind: int, body: bytes | memoryview) -> None:
        if kind == FrameKind.ADD_REQUEST:
            request = _parse(pb.AddRequest, body)
            if self._admit_queue or not self._storage.has_room():
                self._admit_queue.append(request)
                self._pause("room")
                if self._admit_task is None:
                    self._admit_task = asyncio.ensure_future(self._admit())
            else:
                self._submit(request)
        elif kind == FrameKind.READ_REQUEST:
            self._reads.append(_parse(pb.ReadRequest, body))
            self._reads_wakeup.set()
            if len(self._reads) >= self._reads_max:
                self._pause("reads")
        else:
            raise BadRequest("frame kind not accepted by a bookie", kind=kind)

    def _submit(self, request: pb.AddRequest) -> None:
        entries = request.entries
        pending = self._storage.add_request(request.writer_token, entries, self._on_durable)
        self._adds.append((request.request_id, entries, pending))
        if pending.durable.done():    # refused at once: its callback ran before it was queued
            self._answer_adds()
        if len(self._adds) >= self._adds_max:
            self._pause("adds")

    def _on_durable(self, _durable: object) -> None:
        if self._storage.reporting_batch:   # answered once the whole batch is settled
            self._server.answer_due.add(self)
        else:
            self._answer_adds()

    async def _admit(self) -> None:
        """Hand the requests that arrived while storage was full to it as room appears."""
        try:
            while self._admit_queue:
                await self._storage.wait_for_room()
                if self._closed:
                    return
                self._submit(self._admit_queue.popleft())
            self._resume("room")
        finally:
            self._admit_task = None

    def _reject(self, exc: StrataError) -> None:
        """Tell the client why (one ERROR frame) and close; nothing of the bad frame is kept."""
        if not isinstance(exc, AuthenticationFailed):   # the guard logged it (rate-limited)
            log.warning("bookie data connection closed: %s", exc)
        self._closed = True
        body = pb.DataLinkError(error_code=exc.code, error_message=str(exc)).SerializeToString()
        transport = present(self._transport, "connected")
        transport.write(encode_frame(FrameKind.ERROR, body))
        transport.close()

    # --- flow control ---------------------------------------------------------------------

    def _pause(self, reason: str) -> None:
        if not self._paused:
            present(self._transport, "connected").pause_reading()
        self._paused.add(reason)

    def _resume(self, reason: str) -> None:
        if reason in self._paused:
            self._paused.discard(reason)
            if not self._paused and not self._closed:
                present(self._transport, "connected").resume_reading()

    def _write(self, kind: FrameKind, body: bytes) -> None:
        transport = present(self._transport, "connected")
        if len(body) <= _JOIN_BODY_BYTES_MAX:
            transport.write(encode_frame(kind, body))
        else:
            transport.writelines((frame_header(kind, len(body)), body))

    # --- frames out -----------------------------------------------------------------------

    def _answer_adds(self) -> None:
        """Answer, in request order, every request at the head of `_adds` whose adds are done,
        in one write; nothing while the socket is over its high mark (`resume_writing` calls
        again), so unanswered requests stay queued and keep the reading paused."""
        adds = self._adds
        if self._closed or not adds or not self._writable.is_set():
            return
        frames: list[bytes] = []
        while adds and adds[0][2].durable.done():
            request_id, entries, pending = adds.popleft()
            frames.append(encode_frame(FrameKind.ADD_RESPONSE,
                                       add_response(request_id, entries, pending).SerializeToString()))
        if not frames:
            return
        present(self._transport, "connected").writelines(frames)
        self._server.progress.set()
        if len(adds) < self._adds_max // 2:
            self._resume("adds")

    async def _answer_reads(self) -> None:
        reads = self._reads
        while True:
            if not reads:
                self._reads_wakeup.clear()
                await self._reads_wakeup.wait()
                continue
            request = reads.popleft()
            if len(reads) < self._reads_max // 2:
                self._resume("reads")
            async for response in stream_read_responses(self._storage, request):
                if not self._writable.is_set():
                    await self._writable.wait()
                if self._closed:
                    return
                self._write(FrameKind.READ_RESPONSE, response.SerializeToString())

    def idle(self) -> bool:
        """No add waiting for its response (used to drain on shutdown)."""
        return not self._adds and not self._admit_queue

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _parse(message_class, body: bytes | memoryview):
    try:
        return message_class.FromString(body)
    except DecodeError:
        raise BadRequest(f"frame body is not a valid {message_class.__name__}") from None


class DataServer:
    """The framed TCP listener of one bookie; `port` is known after `start()`."""

    def __init__(self, storage: Storage, config: Config, *, host: str, port: int,
                 guard: LinkGuard | None = None) -> None:
        self.storage = storage
        self.guard = guard if guard is not None else LinkGuard(config)
        self._handshake_timeout_s = config.tls_handshake_timeout_ms / 1000
        self.frame_bytes_max = frame_bytes_max(config)
        self._host = host
        self._requested_port = port
        self.port = 0
        self.connections: set[_DataConnection] = set()
        self.progress = asyncio.Event()   # set when an add was answered or a connection ended
        # connections with adds made durable by the journal batch being reported
        self.answer_due: set[_DataConnection] = set()
        storage.on_batch_reported(self._answer_due)
        self._server: asyncio.AbstractServer | None = None

    def _answer_due(self) -> None:
        due, self.answer_due = self.answer_due, set()
        for connection in due:
            connection._answer_adds()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ssl_context = self.guard.data_ssl_context()
        self._server = await loop.create_server(
            # with TLS, uvloop's cheap read path: decrypted straight into a reused buffer (common.tls_reads)
            (lambda: BufferedReads(_DataConnection(self))) if ssl_context else (lambda: _DataConnection(self)),
            self._host, self._requested_port, reuse_port=False,
            ssl=ssl_context, ssl_handshake_timeout=self._handshake_timeout_s if ssl_context else None)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self, grace_s: float) -> None:
        """Stop accepting and reading; give adds in flight up to `grace_s` to be answered."""
        if self._server is None:
            return
        self._server.close()
        for conn in list(self.connections):
            conn._pause("stopping")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while any(not c.idle() for c in self.connections) and loop.time() < deadline:
            self.progress.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.progress.wait(), deadline - loop.time())
        for conn in list(self.connections):
            conn.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), grace_s)
        self._server = None
