"""One client connection: handshake state machine, command routing, keepalive, backpressure.

Bytes go through the sans-IO `FrameDecoder`; each frame's command is routed by type. Commands
on the hot path (SEND, FLOW, ACK, PING) are handled inline, in arrival order; commands that need
the metadata store or a topic load (LOOKUP, PRODUCER, SUBSCRIBE, SEEK, ...) run as tasks that
reply when done. Their handlers live in `broker.protocol.producer_commands` and
`broker.protocol.consumer_commands`; what producers and consumers send is `broker.protocol.links`.

States (`ConnState`): AWAIT_CONNECT → [AUTHENTICATING →] READY (or REFUSED) → CLOSED. The first
frame must be CONNECT, answered with CONNECTED once its credentials are verified (`broker.protocol.auth`:
the authentication state machine, the connect deadline and the credentials' refresh); anything else
first, a second CONNECT, an unparseable or oversize frame closes the connection (docs/protocol.md §2,
§10). A failed request is answered with ERROR (or the request's own failure form) carrying the
error's ServerError code; the connection stays up.

Keepalive: every `broker_keepalive_interval_ms` the broker sends PING if it heard nothing in the last
interval, and closes the connection if the interval after that stays silent too.

Backpressure, toward the broker (reading). The connection stops reading its socket — and stops
routing frames already decoded, which wait in `_held` (at most one socket read's worth) — while
  - a producer has `broker_pending_sends_max` SENDs awaiting receipts (until it drains below
    half), or
  - a publish rate limit paused one of its producers (`broker.topics.rate_limits`: until the
    limit's bucket refills), or
  - `broker_connection_requests_inflight_max` requests run as tasks (`spawn`: LOOKUP,
    PARTITIONED_METADATA, PRODUCER, SUBSCRIBE, ...), until one completes.
A client past the request cap therefore waits, as under Pulsar's
`maxPendingPublishRequestsPerConnection` (the broker turns auto-read off): nothing is refused, the
client's requests are read and answered as earlier ones complete. (TooManyRequests would make
every client retry with its own back-off; a Pulsar client opening a 1,000-partition topic sends
its SUBSCRIBEs at once and expects them all to succeed.) While reads are paused the keepalive does
not count the client's silence: its PINGs may be unread in the socket.

Backpressure toward the client (writing). The transport calls `pause_writing` when more than
`broker_connection_write_buffer_bytes_high` bytes wait to be sent and `resume_writing` when they
drain to a quarter of that. While paused, the connection is not `writable()`: its consumers take
no entries (`Consumer.can_take`), so dispatchers skip them and serve other consumers; on resume
every dispatcher with a consumer here is kicked. A MESSAGE already decided goes out (at most one
frame past the high mark); replies (receipts, ACK_RESPONSE, PONG, request answers) go out
too, so a client that sends requests and never reads could still fill memory: past
`broker_connection_write_buffer_bytes_max` the connection is aborted (its buffer dropped) with a
logged reason.

What must hold: producers/consumers are keyed by the client's ids and released when the
connection closes; nothing is written after CLOSED or an abort; the bytes queued for one client
never exceed `broker_connection_write_buffer_bytes_max` plus one write; at most
`broker_connection_requests_inflight_max` request tasks run per connection.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from auth.api import Identity
from broker import SERVER_VERSION
from broker.protocol import auth as wire_auth
from broker.protocol import consumer_commands, lookup, producer_commands, topic_lists
from broker.protocol import schemas as schemas_wire
from broker.protocol.links import PulsarClientLink
from broker.protocol.state import ConnState, transition
from broker.topics.consumer import Consumer
from broker.topics.producer import Producer
from common import write_cork
from common.errors import PulsarServerError, StrataError
from proto import pulsar_api_pb2 as pb
from wire.pulsar import CommandType as T
from wire.pulsar import (
    FrameDecoder,
    encode_connected,
    encode_error,
    encode_error_for,
    encode_ping,
    encode_pong,
    encode_send_error,
    negotiate_protocol_version,
)

if TYPE_CHECKING:
    from broker.protocol.frontend import FrontEnd

log = logging.getLogger(__name__)


class ServerConnection(PulsarClientLink, asyncio.Protocol):
    def __init__(self, front: FrontEnd) -> None:
        self.front = front
        self.config = front.ctx.config
        self.state = ConnState.AWAIT_CONNECT
        self.decoder = FrameDecoder(self.config.broker_frame_bytes_max)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_version = ""      # CONNECT's client_version, e.g. "Pulsar-CPP-v3.5.1" (stats)
        # who the client is (auth.api.Identity), set by broker.protocol.auth once CONNECT is authenticated;
        # authorization asks `role` (None before CONNECT, "" for an anonymous client without a role)
        self.identity: Identity | None = None
        self.auth = wire_auth.WireAuth(self)         # the connect deadline, then the refresh checks
        self.end_of_topic_ok = False   # set at CONNECT (broker.protocol.links.PulsarClientLink)
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}      # consumer_id -> consumer
        self.creating: set[tuple[str, int]] = set()   # ("p"|"c", id) whose creation is under way
        self.cancelled: set[tuple[str, int]] = set()  # closed by the client while being created
        self._backlogged: set[Producer] = set()       # producers holding reads paused
        # producers a publish rate limit paused -> how many limits (topic, broker) hold each
        self._rate_limited: dict[Producer, int] = {}
        self._held: collections.deque = collections.deque()  # decoded frames not yet routed (paused)
        self._processing = False                      # _process_held is on the stack
        self._tasks: set[asyncio.Task] = set()        # requests in flight (spawn)
        self._requests_max = self.config.broker_connection_requests_inflight_max
        self._reads_paused = False                    # transport.pause_reading() is in force
        self._resume_scheduled = False                # a _resume call is pending
        self._sink: asyncio.Transport | None = None   # where writes go; None once closed or aborted
        self._corked: list[bytes | memoryview] | None = None   # held in a write_cork scope
        self._write_paused = False                    # between pause_writing and resume_writing
        self._write_buffer_bytes_max = self.config.broker_connection_write_buffer_bytes_max
        self._keepalive_s = self.config.broker_keepalive_interval_ms / 1000
        self._heard = True                            # something arrived since the last tick
        self._ping_outstanding = False
        self._keepalive: asyncio.TimerHandle | None = None
        self._handlers: dict[int, Callable[[Any], None] | None] = self._handler_table()

    @property
    def role(self) -> str | None:
        """The authenticated role (broker.security.authorization checks it); None before CONNECT."""
        return self.identity.role if self.identity is not None else None

    def set_state(self, new: ConnState) -> None:
        self.state = transition(self.state, new)

    # --- transport callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._sink = self.transport
        # low defaults to a quarter of high: resume_writing once the client has read most of it
        transport.set_write_buffer_limits(  # type: ignore[attr-defined]
            high=self.config.broker_connection_write_buffer_bytes_high)
        self._keepalive = asyncio.get_running_loop().call_later(self._keepalive_s, self._tick)
        self.auth.start()

    def data_received(self, data: bytes) -> None:
        if self.state is ConnState.CLOSED:
            return
        self._heard = True
        self._ping_outstanding = False
        try:
            self._held.extend(self.decoder.feed(data))
        except StrataError as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
            return
        self._process_held()

    def _process_held(self) -> None:
        """Route decoded frames in order until done or reads are held (producer backlog, request cap)."""
        if self._processing:
            return
        self._processing = True
        write_cork.begin()   # the replies to every frame of this read leave in one system call
        try:
            while self._held and not self._reads_held() and self.state is not ConnState.CLOSED:
                frame = self._held.popleft()
                try:
                    self._route(frame)
                except StrataError as exc:
                    log.info("command from %s refused: %s", self.peer, exc)
                except Exception:
                    log.exception("command from %s crashed; closing", self.peer)
                    self.close()
                    return
        finally:
            self._processing = False
            write_cork.end()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state is ConnState.CLOSED:
            return
        self.set_state(ConnState.CLOSED)
        self._sink = None
        if self._keepalive is not None:
            self._keepalive.cancel()
        self.auth.stop()
        for producer in list(self.producers.values()):
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            consumer_commands.detach(self, consumer)
        self.consumers.clear()
        topic_lists.release(self)
        for task in list(self._tasks):
            task.cancel()

    def pause_writing(self) -> None:
        """The write buffer passed the high mark: consumers here take nothing until it drains."""
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for consumer in list(self.consumers.values()):
            sub = consumer.subscription
            if sub is not None and sub.dispatcher is not None:
                sub.dispatcher.kick()

    def writable(self) -> bool:
        """True while the client keeps up: open, and the write buffer not over its high mark."""
        return self._sink is not None and not self._write_paused

    def write(self, data: bytes) -> None:
        sink = self._sink
        if sink is not None:
            if write_cork.scope.depth:
                self._hold((data,))
                return
            sink.write(data)
            if self._write_paused:
                self._check_write_buffer()

    def write_parts(self, parts: list[bytes | memoryview]) -> None:
        """Write several buffers as one frame or frames without joining them (writev)."""
        sink = self._sink
        if sink is not None:
            if write_cork.scope.depth:
                self._hold(parts)
                return
            sink.writelines(parts)
            if self._write_paused:
                self._check_write_buffer()

    def _hold(self, parts: Iterable[bytes | memoryview]) -> None:
        """Inside a write_cork scope: keep the bytes until the scope ends (one writev for all)."""
        held = self._corked
        if held is None:
            held = self._corked = []
            write_cork.hold(self)
        held.extend(parts)

    def flush_corked(self) -> None:
        held, self._corked = self._corked, None
        sink = self._sink
        if held and sink is not None:
            sink.writelines(held)
            if self._write_paused:
                self._check_write_buffer()

    def _check_write_buffer(self) -> None:
        """Abort a connection whose unsent bytes passed the hard cap: the client is not reading.

        The abort drops the buffer at once (close would keep it until flushed); the transport
        calls `connection_lost` on the next loop turn, so a dispatcher that is writing to this
        connection right now finishes its step before the consumers are detached."""
        sink = self._sink
        buffered = sink.get_write_buffer_size() if sink is not None else 0
        if sink is None or buffered <= self._write_buffer_bytes_max:
            return
        log.warning("closing %s: %d bytes wait to be sent, over broker_connection_write_buffer_bytes_max "
                    "(%d); the client is not reading its socket", self.peer, buffered,
                    self._write_buffer_bytes_max)
        self._sink = None
        sink.abort()

    def write_buffer_bytes(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def forget_consumer(self, consumer: Consumer) -> None:
        if self.consumers.get(consumer.consumer_id) is consumer:
            del self.consumers[consumer.consumer_id]

    def producer_backlogged(self, producer: Producer, backlogged: bool) -> None:
        if backlogged:
            self._backlogged.add(producer)
        else:
            self._backlogged.discard(producer)
        self._update_reading()

    # --- reading: paused while producers are backlogged or requests at the cap -----------------------

    def producer_rate_limited(self, producer: Producer, limited: bool) -> None:
        """A publish rate limit (broker.topics.rate_limits) paused or resumed `producer`."""
        held = self._rate_limited.get(producer, 0)
        if limited:
            self._rate_limited[producer] = held + 1
        elif held <= 1:
            self._rate_limited.pop(producer, None)
        else:
            self._rate_limited[producer] = held - 1
        self._update_reading()

    def _reads_held(self) -> bool:
        return bool(self._backlogged) or bool(self._rate_limited) or len(self._tasks) >= self._requests_max

    def _update_reading(self) -> None:
        """Pause the socket's reads while held; once clear, resume on the next loop turn."""
        if self.transport is None or self.state is ConnState.CLOSED:
            return
        if self._reads_held():
            if not self._reads_paused:
                self._reads_paused = True
                self.transport.pause_reading()
        elif self._reads_paused and not self._resume_scheduled:
            self._resume_scheduled = True
            asyncio.get_running_loop().call_soon(self._resume)

    def _resume(self) -> None:
        """Clear again: route the frames held back, then read again if still clear."""
        self._resume_scheduled = False
        if self.state is ConnState.CLOSED or self._reads_held():
            return
        self._process_held()
        transport = self.transport
        if (transport is not None and self._reads_paused and not self._reads_held()
                and self.state is not ConnState.CLOSED):
            self._reads_paused = False
            transport.resume_reading()

    def close(self) -> None:
        self.flush_corked()   # what a write_cork scope holds goes out before the close
        if self.transport is not None:
            self.transport.close()
        self.connection_lost(None)

    def spawn(self, coro: Coroutine, inner: Coroutine | None = None) -> None:
        """Run a request as a task; at `broker_connection_requests_inflight_max` reads pause.

        inner: the coroutine `coro` awaits first. When the connection closes before the task's
        first step (a request and a frame that closes the connection in one read), the task is
        cancelled before `coro` ever awaits it; it is closed then, not left for the garbage
        collector to report as "coroutine ... was never awaited"."""
        task = asyncio.get_running_loop().create_task(coro)
        if inner is not None:
            task.add_done_callback(lambda _: inner.close())   # a no-op once it ran
        self._tasks.add(task)
        task.add_done_callback(self._request_done)
        if len(self._tasks) >= self._requests_max:
            self._update_reading()

    def _request_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if self._reads_paused:
            self._update_reading()

    # --- keepalive ---------------------------------------------------------------------------------

    def _tick(self) -> None:
        if self.state is ConnState.CLOSED:
            return
        if not self._heard and not self._reads_paused:   # not reading: its PINGs may be unread
            if self._ping_outstanding:
                log.info("closing %s: no answer to keepalive", self.peer)
                self.close()
                return
            self.write(encode_ping())
            self._ping_outstanding = True
        self._heard = False
        self._keepalive = asyncio.get_running_loop().call_later(self._keepalive_s, self._tick)

    # --- routing -------------------------------------------------------------------------------------

    def _handler_table(self) -> dict[int, Callable[[Any], None] | None]:
        c, p = consumer_commands, producer_commands
        return {
            T.PING: lambda cmd: self.write(encode_pong()),
            T.PONG: lambda cmd: None,
            T.AUTH_RESPONSE: lambda cmd: self.auth.on_auth_response(cmd.authResponse),
            T.SEND: None,  # handled in _route: needs the frame's entry
            T.PARTITIONED_METADATA: lambda cmd: self._reply_async(
                lookup.partitioned_metadata(self.front, cmd.partitionMetadata, self.role)),
            T.LOOKUP: lambda cmd: self._reply_async(lookup.lookup(self.front, cmd.lookupTopic, self.role)),
            T.PRODUCER: lambda cmd: self._request(cmd.producer.request_id, p.producer(self, cmd.producer)),
            T.CLOSE_PRODUCER: lambda cmd: p.close_producer(self, cmd.close_producer),
            T.SUBSCRIBE: lambda cmd: self._request(cmd.subscribe.request_id, c.subscribe(self, cmd.subscribe)),
            T.FLOW: lambda cmd: c.flow(self, cmd.flow),
            T.ACK: lambda cmd: c.ack(self, cmd.ack),
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: lambda cmd: c.redeliver(self, cmd.redeliverUnacknowledgedMessages),
            T.CLOSE_CONSUMER: lambda cmd: c.close_consumer(self, cmd.close_consumer),
            T.UNSUBSCRIBE: lambda cmd: self._request(cmd.unsubscribe.request_id, c.unsubscribe(self, cmd.unsubscribe)),
            T.SEEK: lambda cmd: self._request(cmd.seek.request_id, c.seek(self, cmd.seek)),
            T.GET_LAST_MESSAGE_ID: lambda cmd: c.get_last_message_id(self, cmd.getLastMessageId),
            T.GET_TOPICS_OF_NAMESPACE: lambda cmd: self._request(
                cmd.getTopicsOfNamespace.request_id,
                topic_lists.get_topics_of_namespace(self, cmd.getTopicsOfNamespace)),
            T.WATCH_TOPIC_LIST: lambda cmd: self._request(
                cmd.watchTopicList.request_id, topic_lists.watch_topic_list(self, cmd.watchTopicList)),
            T.WATCH_TOPIC_LIST_CLOSE: lambda cmd: topic_lists.close_watcher(self, cmd.watchTopicListClose),
            T.GET_SCHEMA: lambda cmd: self._request(
                cmd.getSchema.request_id, schemas_wire.get_schema(self, cmd.getSchema)),
            T.GET_OR_CREATE_SCHEMA: lambda cmd: self._request(
                cmd.getOrCreateSchema.request_id, schemas_wire.get_or_create_schema(self, cmd.getOrCreateSchema)),
        }

    def _route(self, frame: Any) -> None:
        cmd = frame.command
        kind = cmd.type
        if self.state is not ConnState.READY:   # CONNECT, authenticating, refused (CLOSED: never routed)
            self.auth.before_ready(cmd)
            return
        if kind == T.SEND:
            self._send(cmd.send, frame)
            return
        handler = self._handlers.get(kind)
        if handler is None:
            self._unsupported(cmd)
            return
        handler(cmd)

    def _unsupported(self, cmd: pb.BaseCommand) -> None:
        """A command Strata does not serve: ERROR if it names a request, else close."""
        name = pb.BaseCommand.Type.Name(cmd.type)
        for field, value in cmd.ListFields():
            if field.name != "type" and hasattr(value, "request_id"):
                self.write(encode_error(value.request_id, PulsarServerError.NotAllowedError,
                                        f"command {name} is not supported"))
                return
        log.info("closing %s: unsupported command %s", self.peer, name)
        self.close()

    def complete_connect(self, connect: pb.CommandConnect, identity: Identity | None) -> int:
        """CONNECT was authenticated as `identity` (broker.protocol.auth): CONNECTED, READY (None:
        refused, REFUSED); the protocol version agreed."""
        version = negotiate_protocol_version(connect.protocol_version)
        self.identity = identity
        self.client_version = connect.client_version
        self.end_of_topic_ok = version >= 9 and not connect.client_version.startswith("Pulsar-CPP")
        self.write(encode_connected(SERVER_VERSION, version, self.config.broker_max_message_bytes,
                                    supports_topic_watchers=True))
        self.set_state(ConnState.READY if identity is not None else ConnState.REFUSED)
        return version

    # --- request helpers -----------------------------------------------------------------------------

    def _reply_async(self, coro: Coroutine) -> None:
        async def run() -> None:
            self.write(await coro)
        self.spawn(run(), coro)

    def _request(self, request_id: int, coro: Coroutine) -> None:
        """Run a request; its coroutine writes the success reply, errors become ERROR."""
        async def run() -> None:
            try:
                await coro
            except StrataError as exc:
                self.write(encode_error_for(request_id, exc))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("request %s from %s crashed", request_id, self.peer)
                self.write(encode_error(request_id, PulsarServerError.UnknownError, f"internal error: {exc}"))
        self.spawn(run(), coro)

    # --- producers (PRODUCER and CLOSE_PRODUCER: broker.protocol.producer_commands) -----------------

    def forget_producer(self, producer: Producer) -> None:
        """`producer` is no longer this connection's: it cannot hold reads paused any more."""
        self._backlogged.discard(producer)
        self._rate_limited.pop(producer, None)
        self._update_reading()

    def _send(self, send: pb.CommandSend, frame: Any) -> None:
        producer = self.producers.get(send.producer_id)
        if producer is None:
            self.write(encode_send_error(send.producer_id, send.sequence_id,
                                         PulsarServerError.NotAllowedError, "producer not found"))
            return
        producer.send(send.sequence_id, frame.entry, frame.checksum_ok)
