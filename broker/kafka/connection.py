"""One Kafka client connection: framing, in-order handling, pipelining, SASL gate, limits.

Bytes arrive as frames (int32 size, then a request); `wire.kafka.codec` decodes each one. Kafka
clients pipeline requests and expect the answers in request order, so requests are *admitted*
one at a time, in arrival order, by one worker task: the handler (`broker.kafka.handlers`) does
everything that must happen in order (resolving partitions, checking idempotence, submitting
appends) and returns either the response body, `None` for no response (Produce with acks=0), or
an awaitable that completes it later (a Produce waiting for durability, a Fetch long-polling).
Completed responses are written strictly in request order, so a slow Fetch holds back the answers
behind it, exactly as on a Kafka broker.

States (`KafkaConnState`): [AWAIT_SASL ->] READY -> CLOSED. On a SASL listener only ApiVersions,
SaslHandshake and SaslAuthenticate are served until authentication succeeds (anything else:
ILLEGAL_SASL_STATE, then close), as Kafka does.

Errors: a frame whose header cannot be read, or past `kafka_request_bytes_max`, closes the
connection (Kafka does the same: there is no correlation id to answer). A request whose header
was read but whose API, version or body is not understood is answered (ApiVersions: a v0 body with
UNSUPPORTED_VERSION and our versions, KIP-511; anything else: the correlation id and the error
code) and the connection stays up. A handler's unexpected exception is logged and answered with
UNKNOWN_SERVER_ERROR.

A SASL listener's client that has not authenticated within `authentication_connect_timeout_ms` is
dropped, as the Pulsar front end drops one that never finishes CONNECT.

Limits: at most `kafka_requests_in_flight_max` requests are admitted and unanswered per
connection (reading pauses until one is written); at most one frame is buffered beyond that.

What must hold: responses leave in request order; nothing is written after CLOSED; a closed
connection's waiting handlers are cancelled.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import struct
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from common.ratelimited_log import RateLimitedLog
from wire.kafka.codec import Request, api_versions_error_response, decode_request, encode_response
from wire.kafka.errors import ErrorCode, KafkaCodecError

if TYPE_CHECKING:
    from auth.api import Identity
    from broker.kafka.frontend import KafkaFrontEnd
    from broker.kafka.listeners import KafkaListener

log = logging.getLogger(__name__)
_noisy = RateLimitedLog(log)
_SIZE = struct.Struct(">i")
API_VERSIONS = 18
SASL_KEYS = frozenset({17, 18, 36})     # SaslHandshake, ApiVersions, SaslAuthenticate


class KafkaConnState(enum.Enum):
    AWAIT_SASL = "await_sasl"   # a SASL listener: only ApiVersions / SaslHandshake / SaslAuthenticate
    READY = "ready"             # authenticated (or no SASL): every API
    CLOSED = "closed"           # nothing is read or written any more


class KafkaConnection(asyncio.Protocol):
    def __init__(self, front: KafkaFrontEnd, listener: KafkaListener) -> None:
        self.front = front
        self.listener = listener
        self.state = KafkaConnState.AWAIT_SASL if listener.sasl else KafkaConnState.READY
        self.identity: Identity | None = None          # who authenticated (None: anonymous)
        self.sasl_mechanism: str | None = None         # set by SaslHandshake
        self.namespace: str | None = None               # SASL username tenant/namespace, if it named one
        self.close_after_reply = False                  # close once the reply being made is written
        self.client_id: str | None = None               # the last request's client id
        self.client_software: str = ""                  # ApiVersions v3+: name/version
        self.peer = ""
        self.connected_ms = front.ctx.clock.wall_ms()
        self.requests = 0                               # requests admitted
        self.bytes_in = 0
        self.bytes_out = 0
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._queue: collections.deque[Request | tuple[int, bytes]] = collections.deque()
        self._wake = asyncio.Event()
        self._replies: collections.deque[asyncio.Future] = collections.deque()   # in request order
        self._paused = False
        self._worker: asyncio.Task | None = None
        self._pending: set[asyncio.Future] = set()      # completions under way (cancelled on close)
        self._sasl_deadline: asyncio.TimerHandle | None = None   # AWAIT_SASL: when the client is dropped
        self._limit = front.ctx.config.kafka_requests_in_flight_max
        self._frame_max = front.ctx.config.kafka_request_bytes_max

    @property
    def default_namespace(self) -> str:
        """Where this client's bare topic names live: the namespace its SASL username named, else
        `kafka_default_namespace`."""
        return self.namespace or self.front.ctx.config.kafka_default_namespace

    @property
    def role(self) -> str | None:
        """The authenticated role (None: anonymous, or authentication off)."""
        return self.identity.role if self.identity is not None else None

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer or "")
        self._worker = asyncio.get_running_loop().create_task(self._run())
        self._worker.add_done_callback(self._worker_ended)
        self.front.connections.add(self)
        if self.state is KafkaConnState.AWAIT_SASL:   # a client that never authenticates is dropped
            deadline_s = self.front.ctx.config.authentication_connect_timeout_ms / 1000
            self._sasl_deadline = asyncio.get_running_loop().call_later(deadline_s, self._sasl_expired)

    def _sasl_expired(self) -> None:
        if self.state is KafkaConnState.AWAIT_SASL:
            _noisy.warning("kafka-sasl-deadline", "kafka %s: not authenticated in time: closing", self.peer)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_state()

    def data_received(self, data: bytes) -> None:
        if self.state is KafkaConnState.CLOSED:
            return
        self._buffer += data
        self.bytes_in += len(data)
        buf = self._buffer
        while len(buf) >= 4:
            size = _SIZE.unpack_from(buf, 0)[0]
            if size < 0 or size > self._frame_max:
                _noisy.warning("kafka-frame-size", "kafka %s: frame of %d bytes (limit %d): closing",
                               self.peer, size, self._frame_max)
                self.close()
                return
            if len(buf) < 4 + size:
                break
            frame = bytes(buf[4:4 + size])
            del buf[:4 + size]
            self._admit(frame)
            if self.state is KafkaConnState.CLOSED:
                return
        self._maybe_pause()

    # --- admission -------------------------------------------------------------------------------

    def _admit(self, frame: bytes) -> None:
        try:
            request = decode_request(frame)
        except KafkaCodecError as exc:
            correlation_id = getattr(exc, "correlation_id", None)
            if correlation_id is None:
                _noisy.warning("kafka-bad-header", "kafka %s: unreadable request header: %s: closing", self.peer, exc)
                self.close()
                return
            self._queue.append((int(correlation_id), self._error_reply(exc, int(correlation_id))))
            self._wake.set()
            return
        self.client_id = request.client_id
        self._queue.append(request)
        self._wake.set()

    def _error_reply(self, exc: KafkaCodecError, correlation_id: int) -> bytes:
        if getattr(exc, "api_key", None) == API_VERSIONS:
            return api_versions_error_response(correlation_id)
        # no schema to answer in: the correlation id and the error code, which every client reads
        # as "this request failed" (what a Kafka broker's generic error body starts with)
        body = _SIZE.pack(correlation_id) + struct.pack(">h", int(exc.kafka_code))
        return _SIZE.pack(len(body)) + body

    def _maybe_pause(self) -> None:
        transport = self.transport
        if transport is None:
            return
        backlog = len(self._queue) + len(self._replies)
        if not self._paused and backlog >= self._limit:
            self._paused = True
            transport.pause_reading()
        elif self._paused and backlog < self._limit:
            self._paused = False
            transport.resume_reading()

    async def _run(self) -> None:
        """The worker: admit requests one at a time, in order."""
        from broker.kafka.handlers import dispatch
        while self.state is not KafkaConnState.CLOSED:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            item = self._queue.popleft()
            reply: asyncio.Future = asyncio.get_running_loop().create_future()
            self._replies.append(reply)
            if isinstance(item, tuple):
                reply.set_result(item[1])
                self._flush()
                continue
            self.requests += 1
            try:
                outcome = await dispatch(self, item)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("kafka %s: %s v%d failed", self.peer, item.api_key, item.api_version)
                outcome = _unknown_error(item)
            self._complete(item, outcome, reply)

    def _worker_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("kafka %s: the connection's worker failed: %r", self.peer, task.exception())
            self.close()

    def _complete(self, request: Request, outcome: Any, reply: asyncio.Future) -> None:
        if isinstance(outcome, Awaitable) and not isinstance(outcome, dict):
            task = asyncio.ensure_future(outcome)
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
            task.add_done_callback(lambda t: self._finish(request, t, reply))
            return
        self._set(request, outcome, reply)

    def _finish(self, request: Request, task: asyncio.Future, reply: asyncio.Future) -> None:
        if task.cancelled():
            if not reply.done():
                reply.cancel()
            return
        exc = task.exception()
        if exc is not None:
            log.error("kafka %s: %s v%d failed: %r", self.peer, request.api_key, request.api_version, exc)
            self._set(request, _unknown_error(request), reply)
            return
        self._set(request, task.result(), reply)

    def _set(self, request: Request, body: dict | bytes | None, reply: asyncio.Future) -> None:
        if reply.done():
            return
        if body is None:
            reply.set_result(None)
        elif isinstance(body, (bytes, bytearray)):
            reply.set_result(bytes(body))
        else:
            reply.set_result(encode_response(request.api_key, request.api_version, request.correlation_id, body))
        self._flush()

    def _flush(self) -> None:
        transport = self.transport
        while self._replies and self._replies[0].done():
            reply = self._replies.popleft()
            if reply.cancelled() or transport is None or self.state is KafkaConnState.CLOSED:
                continue
            data = reply.result()
            if data is not None:
                transport.write(data)
                self.bytes_out += len(data)
            if self.close_after_reply:
                self.close()
                return
        self._maybe_pause()

    # --- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close after what is already answered has been written."""
        if self.transport is not None and self.state is not KafkaConnState.CLOSED:
            self.transport.close()
        self._close_state()

    def _close_state(self) -> None:
        if self.state is KafkaConnState.CLOSED:
            return
        self.state = KafkaConnState.CLOSED
        self.front.connections.discard(self)
        if self._sasl_deadline is not None:
            self._sasl_deadline.cancel()
        if self._worker is not None:
            self._worker.cancel()
        for task in list(self._pending):
            task.cancel()
        for reply in self._replies:
            if not reply.done():
                reply.cancel()
        self._replies.clear()
        self._queue.clear()
        self._wake.set()


def _unknown_error(request: Request) -> bytes:
    """A handler failed: a well-formed response of the request's API and version (every field its
    default, the top-level error code, where there is one, UNKNOWN_SERVER_ERROR), so the client
    reads an error rather than a body it cannot parse; the bare code if even that cannot be made."""
    try:
        return encode_response(request.api_key, request.api_version, request.correlation_id,
                               {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR)})
    except KafkaCodecError:
        body = _SIZE.pack(request.correlation_id) + struct.pack(">h", int(ErrorCode.UNKNOWN_SERVER_ERROR))
        return _SIZE.pack(len(body)) + body
