"""One client connection: handshake state machine, command routing, keepalive, backpressure.

Bytes go through the sans-IO `FrameDecoder`; each frame's command is routed by type. Commands
on the hot path (SEND, FLOW, ACK, PING) are handled inline, in arrival order; commands that need
the metadata store or a topic load (LOOKUP, PRODUCER, SUBSCRIBE, SEEK, ...) run as tasks that
reply when done. Consumer commands live in `broker.consumer_commands`.

States (`ConnState`): AWAIT_CONNECT → READY → CLOSED. The first frame must be CONNECT, answered
with CONNECTED; anything else first, a second CONNECT, an unparseable or oversize frame closes
the connection (PROTOCOL.md §2, §10). A failed request is answered with ERROR (or the
request's own failure form) carrying the error's ServerError code; the connection stays up.

Keepalive: every `broker_keepalive_interval_ms` the broker sends PING if it heard nothing in the last
interval, and closes the connection if the interval after that stays silent too.

Backpressure: a producer with `broker_pending_sends_max` SENDs awaiting receipts stops the
connection from reading — and from routing frames already decoded, which wait in `_held` (at
most one socket read's worth) — until it drains below half; consumers stop receiving while the socket's write
buffer is over `WRITE_BUFFER_BYTES_HIGH` and resume when it drains.

What must hold: producers/consumers are keyed by the client's ids and released when the
connection closes; nothing is written after CLOSED.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from broker import consumer_commands, lookup
from broker.codec import CommandType as T
from broker.codec import (
    FrameDecoder,
    encode_connected,
    encode_error,
    encode_error_for,
    encode_get_schema_response,
    encode_get_topics_of_namespace_response,
    encode_ping,
    encode_pong,
    encode_producer_success,
    encode_send_error,
    encode_success,
    negotiate_protocol_version,
)
from broker.consumer import WRITE_BUFFER_BYTES_HIGH, Consumer
from broker.names import parse_namespace, parse_topic
from broker.producer import Producer
from common.errors import IllegalTransition, PulsarServerError, StrataError
from ledger.position import LATEST
from proto import pulsar_api_pb2 as pb

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

SERVER_VERSION = "Strata-0.1.0"


class ConnState(enum.Enum):
    AWAIT_CONNECT = "await_connect"  # TCP is open; only CONNECT is accepted
    READY = "ready"                  # CONNECTED was sent; every command is served
    CLOSED = "closed"                # transport gone; producers and consumers released


_TRANSITIONS = {
    ConnState.AWAIT_CONNECT: {ConnState.READY, ConnState.CLOSED},
    ConnState.READY: {ConnState.CLOSED},
    ConnState.CLOSED: set(),
}


class ServerConnection(asyncio.Protocol):
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.config = service.config
        self.state = ConnState.AWAIT_CONNECT
        self.decoder = FrameDecoder(self.config.broker_frame_bytes_max)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}      # consumer_id -> consumer
        self.creating: set[tuple[str, int]] = set()   # ("p"|"c", id) whose creation is under way
        self.cancelled: set[tuple[str, int]] = set()  # closed by the client while being created
        self._backlogged: set[Producer] = set()       # producers holding reads paused
        self._held: collections.deque = collections.deque()  # decoded frames not yet routed (paused)
        self._processing = False                      # _process_held is on the stack
        self._tasks: set[asyncio.Task] = set()
        self._keepalive_s = self.config.broker_keepalive_interval_ms / 1000
        self._heard = True                            # something arrived since the last tick
        self._ping_outstanding = False
        self._keepalive: asyncio.TimerHandle | None = None
        self._handlers: dict[int, Callable[[Any], None]] = self._handler_table()

    def _set_state(self, new: ConnState) -> None:
        if new not in _TRANSITIONS[self.state]:
            raise IllegalTransition("connection state", old=self.state.value, new=new.value)
        self.state = new

    # --- transport callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES_HIGH)  # type: ignore[attr-defined]
        self._keepalive = asyncio.get_running_loop().call_later(self._keepalive_s, self._tick)

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
        """Route decoded frames in order until done or a producer backlog pauses us."""
        if self._processing:
            return
        self._processing = True
        try:
            while self._held and not self._backlogged and self.state is not ConnState.CLOSED:
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

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state is ConnState.CLOSED:
            return
        self._set_state(ConnState.CLOSED)
        if self._keepalive is not None:
            self._keepalive.cancel()
        for producer in list(self.producers.values()):
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            consumer_commands.detach(self, consumer)
        self.consumers.clear()
        for task in list(self._tasks):
            task.cancel()

    def pause_writing(self) -> None:
        pass  # consumers check the buffer size themselves (Consumer.can_take)

    def resume_writing(self) -> None:
        for consumer in list(self.consumers.values()):
            if consumer.subscription.dispatcher is not None:
                consumer.subscription.dispatcher.kick()

    # --- links used by producers and consumers ------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.state is not ConnState.CLOSED and self.transport is not None:
            self.transport.write(data)

    def write_parts(self, parts: list[bytes | memoryview]) -> None:
        """Write several buffers as one frame or frames without joining them (writev)."""
        if self.state is not ConnState.CLOSED and self.transport is not None:
            self.transport.writelines(parts)

    def write_buffer_bytes(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def forget_consumer(self, consumer: Consumer) -> None:
        if self.consumers.get(consumer.consumer_id) is consumer:
            del self.consumers[consumer.consumer_id]

    def producer_backlogged(self, producer: Producer, backlogged: bool) -> None:
        if self.transport is None or self.state is ConnState.CLOSED:
            return
        was_paused = bool(self._backlogged)
        if backlogged:
            self._backlogged.add(producer)
        else:
            self._backlogged.discard(producer)
        if self._backlogged and not was_paused:
            self.transport.pause_reading()
        elif was_paused and not self._backlogged:
            asyncio.get_running_loop().call_soon(self._resume)

    def _resume(self) -> None:
        """Producers drained: route the frames held back, then read again if still clear."""
        if self.state is ConnState.CLOSED or self._backlogged:
            return
        self._process_held()
        if not self._backlogged and self.state is not ConnState.CLOSED:
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.connection_lost(None)

    def spawn(self, coro: Coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- keepalive ---------------------------------------------------------------------------------

    def _tick(self) -> None:
        if self.state is ConnState.CLOSED:
            return
        if not self._heard:
            if self._ping_outstanding:
                log.info("closing %s: no answer to keepalive", self.peer)
                self.close()
                return
            self.write(encode_ping())
            self._ping_outstanding = True
        self._heard = False
        self._keepalive = asyncio.get_running_loop().call_later(self._keepalive_s, self._tick)

    # --- routing -------------------------------------------------------------------------------------

    def _handler_table(self) -> dict[int, Callable[[Any], None]]:
        c = consumer_commands
        return {
            T.PING: lambda cmd: self.write(encode_pong()),
            T.PONG: lambda cmd: None,
            T.SEND: None,  # handled in _route: needs the frame's entry
            T.PARTITIONED_METADATA: lambda cmd: self._reply_async(lookup.partitioned_metadata(self.service, cmd.partitionMetadata)),
            T.LOOKUP: lambda cmd: self._reply_async(lookup.lookup(self.service, cmd.lookupTopic)),
            T.PRODUCER: lambda cmd: self._request(cmd.producer.request_id, self._producer(cmd.producer)),
            T.CLOSE_PRODUCER: lambda cmd: self._close_producer(cmd.close_producer),
            T.SUBSCRIBE: lambda cmd: self._request(cmd.subscribe.request_id, c.subscribe(self, cmd.subscribe)),
            T.FLOW: lambda cmd: c.flow(self, cmd.flow),
            T.ACK: lambda cmd: c.ack(self, cmd.ack),
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: lambda cmd: c.redeliver(self, cmd.redeliverUnacknowledgedMessages),
            T.CLOSE_CONSUMER: lambda cmd: c.close_consumer(self, cmd.close_consumer),
            T.UNSUBSCRIBE: lambda cmd: self._request(cmd.unsubscribe.request_id, c.unsubscribe(self, cmd.unsubscribe)),
            T.SEEK: lambda cmd: self._request(cmd.seek.request_id, c.seek(self, cmd.seek)),
            T.GET_LAST_MESSAGE_ID: lambda cmd: c.get_last_message_id(self, cmd.getLastMessageId),
            T.GET_TOPICS_OF_NAMESPACE: lambda cmd: self._request(cmd.getTopicsOfNamespace.request_id, self._topics_of_namespace(cmd.getTopicsOfNamespace)),
            T.GET_SCHEMA: lambda cmd: self.write(encode_get_schema_response(cmd.getSchema.request_id)),
        }

    def _route(self, frame: Any) -> None:
        cmd = frame.command
        kind = cmd.type
        if self.state is ConnState.AWAIT_CONNECT:
            if kind != T.CONNECT:
                log.info("closing %s: first command was not CONNECT", self.peer)
                self.close()
                return
            self._connect(cmd.connect)
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

    def _connect(self, connect: pb.CommandConnect) -> None:
        version = negotiate_protocol_version(connect.protocol_version)
        self.write(encode_connected(SERVER_VERSION, version, self.config.broker_max_message_bytes))
        self._set_state(ConnState.READY)

    # --- request helpers -----------------------------------------------------------------------------

    def _reply_async(self, coro: Coroutine) -> None:
        async def run() -> None:
            self.write(await coro)
        self.spawn(run())

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
        self.spawn(run())

    # --- producers -----------------------------------------------------------------------------------

    async def _producer(self, cmd: pb.CommandProducer) -> None:
        existing = self.producers.get(cmd.producer_id)
        if existing is not None and not existing.closed:
            self.write(encode_producer_success(cmd.request_id, existing.name,
                                               existing.topic.last_sequence_id(existing.name)))
            return
        if existing is not None:  # closed by the broker (topic unloaded or deleted): start afresh
            self.producers.pop(cmd.producer_id, None)
            self._backlogged.discard(existing)
        key = ("p", cmd.producer_id)
        self.creating.add(key)
        try:
            name = parse_topic(cmd.topic)
            topic = await self.service.get_topic(name)
            if cmd.initial_subscription_name:
                await topic.subscription(cmd.initial_subscription_name, durable=True, start=LATEST)
            producer_name = cmd.producer_name or await self.service.next_producer_name()
            producer = Producer(self, topic, cmd.producer_id, producer_name,
                                self.config.broker_pending_sends_max, self.config.broker_max_message_bytes)
            if key in self.cancelled or self.state is ConnState.CLOSED:
                return
            topic.add_producer(producer)
            self.producers[cmd.producer_id] = producer
        finally:
            self.creating.discard(key)
            self.cancelled.discard(key)
        self.write(encode_producer_success(cmd.request_id, producer_name,
                                           topic.last_sequence_id(producer_name)))

    def _send(self, send: pb.CommandSend, frame: Any) -> None:
        producer = self.producers.get(send.producer_id)
        if producer is None:
            self.write(encode_send_error(send.producer_id, send.sequence_id,
                                         PulsarServerError.NotAllowedError, "producer not found"))
            return
        producer.send(send.sequence_id, frame.entry, frame.checksum_ok)

    def _close_producer(self, cmd: pb.CommandCloseProducer) -> None:
        producer = self.producers.pop(cmd.producer_id, None)
        if producer is not None:
            producer.topic.remove_producer(producer)
            self._backlogged.discard(producer)
        elif ("p", cmd.producer_id) in self.creating:
            self.cancelled.add(("p", cmd.producer_id))
        self.write(encode_success(cmd.request_id))

    async def _topics_of_namespace(self, cmd: pb.CommandGetTopicsOfNamespace) -> None:
        tenant, namespace = parse_namespace(cmd.namespace)
        topics = await self.service.topics_of_namespace(tenant, namespace)
        self.write(encode_get_topics_of_namespace_response(cmd.request_id, topics))
