"""Strata's own Pulsar-protocol client: the load generator behind `strata perf --driver native`.

It speaks the binary protocol (docs/protocol.md §1, §4, §6, §8) over one asyncio (uvloop) connection
with the sans-IO codec of wire/pulsar.py and the client-side batches of broker/batch.py, so it
costs the broker exactly what the official client costs it while costing the load generator a
small fraction of the official Python client's ~25 us per message.

    client = NativeClient("pulsar://127.0.0.1:6650")      # or ("pulsar+ssl://localhost:6651",
                                                         #     token=jwt, tls_trust_file=ca_path)
    [producer] = await client.create_producers(topic)          # one per partition (or one)
    fut = await producer.send_batch([BatchMessage(b"x", partition_key="k")])   # any batch
    enc = producer.encoder(b"x" * 1024)                          # fast path, plain messages
    await producer.send_plain(enc, 128)                          # 128 copies in one SEND
    await producer.send_payloads(enc, [b"a", b"bb"])             # these payloads in one SEND
    await producer.flush()                                       # every receipt in
    [consumer] = await client.subscribe(topic, "sub", initial_position=EARLIEST)
    entries = await consumer.receive_entries(timeout_s=1)       # ReceivedEntry list, in order
    consumer.ack(entries[-1]); await consumer.flush_acks()      # .messages() decodes members
    await client.close()

How it works:
- `Connection` is an asyncio.Protocol: `data_received` feeds a FrameDecoder and routes each frame
  synchronously: SEND_RECEIPT / SEND_ERROR to the producer, MESSAGE to the consumer, replies to
  the future waiting on that request_id, PING answered with PONG.
- `pulsar+ssl://` connects with TLS (the server verified against `tls_trust_file`, hostname
  checked) and follows lookups to `brokerServiceUrlTls`; a `token` goes in CONNECT
  (auth_method_name "token", Pulsar's single-step token authentication).
- A producer pipelines SENDs: each SEND is appended to an in-order pending deque; a receipt must
  match the head (docs/protocol.md §8.2), anything else fails the producer (`BrokerError`).
  `send_batch` waits while `max_pending_messages` messages are unacknowledged.
- A consumer grants permits in messages: `receiver_queue_size` after SUBSCRIBE, then the number
  of messages handed to the application once that reaches half the queue (as the official
  client does). Acks are grouped like the client's: flushed every 100 ms or 1,000 ids.

What must hold:
- Every wait is bounded (`TimeoutExpired`); every buffer is bounded: pending requests, pending
  sends (`max_pending_messages`), received entries (the permits granted plus one entry's worth,
  else the broker broke flow control and the consumer fails), grouped acks.
- Receipts are matched strictly in send order; a mismatch is an error, never skipped.
- Batches are what the official client sends: `send_batch` uses entries.batch.build_batch; the
  fast path (perf/batches.py) is byte-identical to it for plain messages
  (tests/acceptance/test_native_driver.py checks both).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import ssl
import time
from collections.abc import Callable
from urllib.parse import urlparse

from common.errors import CODE_TO_ERROR, BrokerError, StrataError, TimeoutExpired
from common.invariant import present
from entries.batch import NONE, BatchMessage, build_batch, decode_payload
from entries.entry import parse_entry
from perf.batches import PlainBatchEncoder, batch_sizes, encode_send_frame  # noqa: F401 (re-exported)
from proto import pulsar_api_pb2 as pb
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder, encode_command

CLIENT_VERSION = "Strata-native-perf"
PROTOCOL_VERSION = 20
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
PENDING_REQUESTS_MAX = 1024
FRAME_BYTES_MAX = 5 * 1024 * 1024 + 64 * 1024  # max message size plus headers (docs/protocol.md §1.2)
RECEIVER_QUEUE_SIZE_DEFAULT = 1000  # the official client's default, in messages
ACK_GROUP_IDS_MAX = 1000
ACK_GROUP_DELAY_S = 0.1
MAX_PENDING_MESSAGES_DEFAULT = 10_000

SUB_EXCLUSIVE = pb.CommandSubscribe.Exclusive
SUB_SHARED = pb.CommandSubscribe.Shared
SUB_FAILOVER = pb.CommandSubscribe.Failover
SUB_KEY_SHARED = pb.CommandSubscribe.Key_Shared
EARLIEST = pb.CommandSubscribe.Earliest
LATEST = pb.CommandSubscribe.Latest

# reply type -> its body field, which carries the request_id the reply answers
_REPLY_BODIES = {
    T.SUCCESS: "success", T.ERROR: "error", T.PRODUCER_SUCCESS: "producer_success",
    T.LOOKUP_RESPONSE: "lookupTopicResponse", T.PARTITIONED_METADATA_RESPONSE: "partitionMetadataResponse",
    T.GET_LAST_MESSAGE_ID_RESPONSE: "getLastMessageIdResponse", T.ACK_RESPONSE: "ackResponse",
}


def _server_error_classes() -> dict[int, type[StrataError]]:
    """ServerError value -> the Strata error class carrying it (BrokerError when several/none)."""
    out: dict[int, type[StrataError]] = {}
    for cls in CODE_TO_ERROR.values():
        if issubclass(cls, BrokerError) and cls.server_error is not None:
            out.setdefault(cls.server_error, cls)
    return out


_ERROR_BY_SERVER_CODE = _server_error_classes()


def server_error(code: int, message: str, **details: object) -> StrataError:
    """The Strata error for a broker ERROR / SEND_ERROR reply."""
    return _ERROR_BY_SERVER_CODE.get(code, BrokerError)(message, server_error=code, **details)


# ------------------------------------------------------------------------------------------------
# Received entries


class ReceivedEntry:
    """One MESSAGE: a stored entry (a batch or a single message) as it arrived.

    entry: the stored form `[0x0E01][crc][md_size][md][payload]`; metadata: its parsed
    MessageMetadata; num_messages: num_messages_in_batch, else 1; received_s: time.time() when
    the frame was decoded (for end-to-end latency against metadata.publish_time).
    """

    __slots__ = (
        "entry",
        "entry_id",
        "ledger_id",
        "metadata",
        "num_messages",
        "partition",
        "payload_offset",
        "received_s",
        "redelivery_count",
    )

    def __init__(self, message: pb.CommandMessage, entry: bytes, received_s: float) -> None:
        mid = message.message_id
        self.ledger_id = mid.ledgerId
        self.entry_id = mid.entryId
        self.partition = mid.partition
        self.redelivery_count = message.redelivery_count
        info = parse_entry(entry)
        self.entry = entry
        self.metadata = info.metadata
        self.payload_offset = info.payload_offset
        self.num_messages = info.num_messages
        self.received_s = received_s

    def messages(self) -> list[BatchMessage]:
        """Decode the members (decompressing as needed); MalformedPayload if they do not decode."""
        return decode_payload(self.metadata, memoryview(self.entry)[self.payload_offset:])


# ------------------------------------------------------------------------------------------------
# The connection


class Connection(asyncio.Protocol):
    """One TCP connection to a broker; routes inbound frames, bounds outstanding requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.transport: asyncio.Transport | None = None
        self.max_message_size = 5 * 1024 * 1024
        self._decoder = FrameDecoder(FRAME_BYTES_MAX)
        self._requests: dict[int, asyncio.Future] = {}  # request_id -> future of the reply
        self._request_ids = itertools.count(1)
        self._object_ids = itertools.count(1)
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self._connected: asyncio.Future = asyncio.get_running_loop().create_future()
        self._writable = asyncio.Event()
        self._writable.set()
        self.failure: StrataError | None = None  # why the connection is unusable; None = healthy

    @classmethod
    async def open(cls, url: str, timeout_s: float = CONNECT_TIMEOUT_S, *, token: str = "",
                   tls: ssl.SSLContext | None = None) -> Connection:
        """TCP (pulsar://) or TLS (pulsar+ssl://, `tls` required) connect, CONNECT (with the token,
        if any), wait for CONNECTED."""
        parsed = urlparse(url)
        if parsed.scheme not in ("pulsar", "pulsar+ssl") or not parsed.hostname or not parsed.port:
            raise StrataError("service URL must look like pulsar://host:port or pulsar+ssl://host:port", url=url)
        secure = parsed.scheme == "pulsar+ssl"
        if secure and tls is None:
            raise StrataError("a pulsar+ssl:// URL needs a TLS context (the trust file)", url=url)
        connect = pb.CommandConnect(client_version=CLIENT_VERSION, protocol_version=PROTOCOL_VERSION,
                                    auth_method_name="token" if token else "none")
        if token:
            connect.auth_data = token.encode()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, conn = await loop.create_connection(lambda: cls(url), parsed.hostname, parsed.port,
                                                       ssl=tls if secure else None)
                conn.write(encode_command(pb.BaseCommand(type=T.CONNECT, connect=connect)))
                await conn._connected
        except TimeoutError:
            raise TimeoutExpired("no CONNECTED from broker", url=url, timeout_s=timeout_s) from None
        return conn

    def next_object_id(self) -> int:
        return next(self._object_ids)

    # --- transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except StrataError as exc:
            self._fail(exc)
            present(self.transport, "connected").close()
            return
        received_s = time.time()
        for frame in frames:
            self._route(frame, received_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(BrokerError("connection closed", url=self.url, reason=str(exc) if exc else "eof"))

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- outbound

    def write(self, data: bytes) -> None:
        if self.failure is not None:
            raise self.failure
        present(self.transport, "connected").write(data)

    async def drain(self, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._writable.is_set():
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._writable.wait()
        except TimeoutError:
            raise TimeoutExpired("socket not writable", url=self.url, timeout_s=timeout_s) from None
        if self.failure is not None:
            raise self.failure

    async def request(self, cmd: pb.BaseCommand, field: str,
                      timeout_s: float = REQUEST_TIMEOUT_S) -> pb.BaseCommand:
        """Send a command whose body `field` takes a request_id; return the reply command."""
        if len(self._requests) >= PENDING_REQUESTS_MAX:
            raise BrokerError("too many outstanding requests", limit=PENDING_REQUESTS_MAX)
        request_id = next(self._request_ids)
        getattr(cmd, field).request_id = request_id
        future = asyncio.get_running_loop().create_future()
        self._requests[request_id] = future
        try:
            self.write(encode_command(cmd))
            async with asyncio.timeout(timeout_s):
                reply = await future
        except TimeoutError:
            raise TimeoutExpired("no reply from broker", command=cmd.type, timeout_s=timeout_s) from None
        finally:
            self._requests.pop(request_id, None)
        if reply.type == T.ERROR:
            raise server_error(reply.error.error, reply.error.message, command=cmd.type)
        return reply

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # --- inbound routing

    def _route(self, frame, received_s: float) -> None:
        cmd = frame.command
        kind = cmd.type
        if kind == T.SEND_RECEIPT:
            producer = self.producers.get(cmd.send_receipt.producer_id)
            if producer is not None:
                producer._on_receipt(cmd.send_receipt)
        elif kind == T.MESSAGE:
            consumer = self.consumers.get(cmd.message.consumer_id)
            if consumer is not None:
                consumer._on_message(cmd.message, frame.entry, received_s)
        elif kind == T.SEND_ERROR:
            producer = self.producers.get(cmd.send_error.producer_id)
            if producer is not None:
                producer._fail(server_error(cmd.send_error.error, cmd.send_error.message,
                                            sequence_id=cmd.send_error.sequence_id))
        elif kind == T.CONNECTED:
            self.max_message_size = cmd.connected.max_message_size or self.max_message_size
            if not self._connected.done():
                self._connected.set_result(None)
        elif kind == T.PING:
            self.write(encode_command(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong())))
        elif kind in (T.CLOSE_PRODUCER, T.CLOSE_CONSUMER):
            self._closed_by_broker(cmd)
        else:
            self._reply(cmd)

    def _reply(self, cmd: pb.BaseCommand) -> None:
        field = _REPLY_BODIES.get(cmd.type)
        if field is None:
            return  # PONG, ACTIVE_CONSUMER_CHANGE and the like: nothing waits on them
        future = self._requests.get(getattr(cmd, field).request_id)
        if future is not None and not future.done():
            future.set_result(cmd)

    def _closed_by_broker(self, cmd: pb.BaseCommand) -> None:
        if cmd.type == T.CLOSE_PRODUCER:
            producer = self.producers.pop(cmd.close_producer.producer_id, None)
            if producer is not None:
                producer._fail(BrokerError("broker closed the producer", topic=producer.topic))
        else:
            consumer = self.consumers.pop(cmd.close_consumer.consumer_id, None)
            if consumer is not None:
                consumer._fail(BrokerError("broker closed the consumer", topic=consumer.topic))

    def _fail(self, exc: StrataError) -> None:
        if self.failure is None:
            self.failure = exc
        if not self._connected.done():
            self._connected.set_exception(exc)
        for future in self._requests.values():
            if not future.done():
                future.set_exception(exc)
        for producer in list(self.producers.values()):
            producer._fail(exc)
        for consumer in list(self.consumers.values()):
            consumer._fail(exc)
        self._writable.set()


# ------------------------------------------------------------------------------------------------
# Producer


class SendReceipt:
    """Where a batch was stored and how long send -> receipt took."""

    __slots__ = ("count", "entry_id", "latency_s", "ledger_id")

    def __init__(self, ledger_id: int, entry_id: int, latency_s: float, count: int) -> None:
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.latency_s = latency_s
        self.count = count


class Producer:
    """A producer on one (partition) topic; SENDs pipelined, receipts matched in order.

    on_receipt: optional callback(latency_s, message_count) run for every receipt (perf stats
    without a future per batch).
    """

    def __init__(self, conn: Connection, producer_id: int, topic: str, producer_name: str,
                 last_sequence_id: int, max_pending_messages: int) -> None:
        self.conn = conn
        self.producer_id = producer_id
        self.topic = topic
        self.producer_name = producer_name
        self.next_sequence_id = last_sequence_id + 1  # the broker's high mark + 1 (0 when new)
        self.max_pending_messages = max_pending_messages
        self.pending_messages = 0  # messages sent and not yet receipted
        # (first sequence id, last sequence id, messages, perf_counter at send, future or None)
        self._pending: collections.deque = collections.deque()
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.on_receipt: Callable[[float, int], None] | None = None
        self.failure: StrataError | None = None

    async def send_batch(self, messages: list[BatchMessage], *, compression: int = NONE,
                         publish_time_ms: int | None = None) -> asyncio.Future:
        """Send one client-side batch of `messages` (keys, properties, ... as given).

        Returns a future of its SendReceipt, once the SEND is written (waits for room first).
        """
        sequence_id = self.next_sequence_id
        md, payload = build_batch(messages, producer_name=self.producer_name, sequence_id=sequence_id,
                                  publish_time_ms=publish_time_ms or int(time.time() * 1000),
                                  compression=compression)
        frame = encode_send_frame(self.producer_id, sequence_id, len(messages),
                                  md.SerializeToString(), payload)
        return present(await self.send_frame(frame, len(messages), want_future=True), "want_future gives one")

    async def send_plain(self, encoder: PlainBatchEncoder, count: int,
                         want_future: bool = False) -> asyncio.Future | None:
        """Send a batch of `count` copies of the encoder's payload (the perf workload)."""
        frame = encoder.frame(self.producer_id, self.next_sequence_id, count, int(time.time() * 1000))
        return await self.send_frame(frame, count, want_future)

    async def send_payloads(self, encoder: PlainBatchEncoder, payloads: list[bytes],
                            want_future: bool = False) -> asyncio.Future | None:
        """Send one batch of plain payloads (any sizes, no keys/properties) on the fast path."""
        frame = encoder.frame_of(self.producer_id, self.next_sequence_id, payloads, int(time.time() * 1000))
        return await self.send_frame(frame, len(payloads), want_future)

    def encoder(self, payload: bytes = b"", compression: int = NONE) -> PlainBatchEncoder:
        """A fast-path batch encoder stamped with this producer's name."""
        return PlainBatchEncoder(payload, self.producer_name, compression)

    async def send_frame(self, frame: bytes, count: int, want_future: bool = False,
                         timeout_s: float = REQUEST_TIMEOUT_S) -> asyncio.Future | None:
        """Write a SEND frame whose first sequence id is `next_sequence_id` and that holds `count`."""
        await self._wait_room(count, timeout_s)
        sequence_id = self.next_sequence_id
        self.next_sequence_id += count
        future = asyncio.get_running_loop().create_future() if want_future else None
        self._pending.append((sequence_id, sequence_id + count - 1, count, time.perf_counter(), future))
        self.pending_messages += count
        self._idle.clear()
        if self.pending_messages >= self.max_pending_messages:
            self._room.clear()
        self.conn.write(frame)
        await self.conn.drain(timeout_s)
        return future

    async def _wait_room(self, count: int, timeout_s: float) -> None:
        if self.failure is not None:
            raise self.failure
        if self.pending_messages and self.pending_messages + count > self.max_pending_messages:
            self._room.clear()
        if self._room.is_set():
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._room.wait()
        except TimeoutError:
            raise TimeoutExpired("no send receipts", topic=self.topic, pending=self.pending_messages,
                                 timeout_s=timeout_s) from None
        if self.failure is not None:
            raise self.failure

    def _on_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        if not self._pending:
            self._fail(BrokerError("receipt with nothing pending", sequence_id=receipt.sequence_id))
            return
        first, last, count, sent_s, future = self._pending[0]
        if receipt.sequence_id not in (first, last):  # the client accepts either (§6.2)
            self._fail(BrokerError("receipt out of order", expected=first, got=receipt.sequence_id))
            return
        self._pending.popleft()
        latency_s = time.perf_counter() - sent_s
        self.pending_messages -= count
        if self.on_receipt is not None:
            self.on_receipt(latency_s, count)
        if future is not None:
            mid = receipt.message_id
            future.set_result(SendReceipt(mid.ledgerId, mid.entryId, latency_s, count))
        if self.pending_messages < self.max_pending_messages:
            self._room.set()
        if not self._pending:
            self._idle.set()

    async def flush(self, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        """Wait until every SEND written so far has its receipt."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            raise TimeoutExpired("flush: receipts missing", topic=self.topic,
                                 pending=self.pending_messages, timeout_s=timeout_s) from None
        if self.failure is not None:
            raise self.failure

    async def close(self) -> None:
        self.conn.producers.pop(self.producer_id, None)
        if self.conn.failure is None:
            await self.conn.request(pb.BaseCommand(type=T.CLOSE_PRODUCER, close_producer=pb.CommandCloseProducer(
                producer_id=self.producer_id, request_id=0)), "close_producer")

    def _fail(self, exc: StrataError) -> None:
        if self.failure is None:
            self.failure = exc
        while self._pending:
            future = self._pending.popleft()[4]
            if future is not None and not future.done():
                future.set_exception(exc)
        self._room.set()
        self._idle.set()


# ------------------------------------------------------------------------------------------------
# Consumer


class Consumer:
    """A consumer on one (partition) topic: permits in messages, entries in arrival order."""

    def __init__(self, conn: Connection, consumer_id: int, topic: str, subscription: str,
                 receiver_queue_size: int) -> None:
        self.conn = conn
        self.consumer_id = consumer_id
        self.topic = topic
        self.subscription = subscription
        self.receiver_queue_size = receiver_queue_size
        self.permits = 0  # messages the broker may still send (may go negative by one entry)
        self._delivered = 0  # messages handed to the application since the last FLOW
        self._queue: collections.deque[ReceivedEntry] = collections.deque()
        self._arrived = asyncio.Event()
        self._acks: list[pb.MessageIdData] = []  # individual acks not yet sent (grouped)
        self._cumulative: pb.MessageIdData | None = None  # newest cumulative ack not yet sent
        self._ack_timer: asyncio.TimerHandle | None = None
        self.failure: StrataError | None = None

    def flow(self, permits: int) -> None:
        """Grant the broker `permits` more messages."""
        self.permits += permits
        self.conn.write(encode_command(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(
            consumer_id=self.consumer_id, messagePermits=permits))))

    def _on_message(self, message: pb.CommandMessage, entry: bytes, received_s: float) -> None:
        if self.permits <= 0:
            self._fail(BrokerError("MESSAGE beyond the permits granted", topic=self.topic,
                                   permits=self.permits))
            return
        try:
            received = ReceivedEntry(message, entry, received_s)
        except StrataError as exc:
            self._fail(exc)
            return
        self.permits -= received.num_messages
        self._queue.append(received)
        self._arrived.set()

    async def receive_entries(self, max_entries: int = 1_000_000,
                              timeout_s: float = REQUEST_TIMEOUT_S) -> list[ReceivedEntry]:
        """Up to `max_entries` received entries, waiting at most timeout_s for the first; [] if none.

        Counts their messages as consumed and refills permits at half the queue.
        """
        if not self._queue:
            if self.failure is not None:
                raise self.failure
            self._arrived.clear()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._arrived.wait()
            except TimeoutError:
                return []
            if self.failure is not None and not self._queue:
                raise self.failure
        out: list[ReceivedEntry] = []
        queue = self._queue
        while queue and len(out) < max_entries:
            out.append(queue.popleft())
        self._delivered += sum(e.num_messages for e in out)
        if self._delivered >= max(1, self.receiver_queue_size // 2) and self.failure is None:
            self.flow(self._delivered)
            self._delivered = 0
        return out

    def ack(self, entry: ReceivedEntry) -> None:
        """Individual ack of the whole entry (every member), grouped like the official client's."""
        self._acks.append(pb.MessageIdData(ledgerId=entry.ledger_id, entryId=entry.entry_id))
        if len(self._acks) >= ACK_GROUP_IDS_MAX:
            self._send_acks()
        else:
            self._arm_ack_timer()

    def ack_cumulative(self, entry: ReceivedEntry) -> None:
        """Cumulative ack of everything up to and including the entry (Exclusive/Failover)."""
        self._cumulative = pb.MessageIdData(ledgerId=entry.ledger_id, entryId=entry.entry_id)
        self._arm_ack_timer()

    def _arm_ack_timer(self) -> None:
        if self._ack_timer is None:
            self._ack_timer = asyncio.get_running_loop().call_later(ACK_GROUP_DELAY_S, self._send_acks)

    def _send_acks(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        if self.conn.failure is not None:
            return
        if self._acks:
            ack = pb.CommandAck(consumer_id=self.consumer_id, ack_type=pb.CommandAck.Individual)
            ack.message_id.extend(self._acks)
            self.conn.write(encode_command(pb.BaseCommand(type=T.ACK, ack=ack)))
            self._acks = []
        if self._cumulative is not None:
            ack = pb.CommandAck(consumer_id=self.consumer_id, ack_type=pb.CommandAck.Cumulative)
            ack.message_id.append(self._cumulative)
            self.conn.write(encode_command(pb.BaseCommand(type=T.ACK, ack=ack)))
            self._cumulative = None

    async def flush_acks(self) -> None:
        """Send the grouped acks now and wait until the socket took them."""
        self._send_acks()
        await self.conn.drain()

    async def close(self) -> None:
        """Flush acks, then CLOSE_CONSUMER (the broker redelivers anything unacked elsewhere)."""
        if self.conn.failure is None:
            await self.flush_acks()
        self.conn.consumers.pop(self.consumer_id, None)
        if self.conn.failure is None:
            await self.conn.request(pb.BaseCommand(type=T.CLOSE_CONSUMER, close_consumer=pb.CommandCloseConsumer(
                consumer_id=self.consumer_id, request_id=0)), "close_consumer")

    def _fail(self, exc: StrataError) -> None:
        if self.failure is None:
            self.failure = exc
        self._arrived.set()


# ------------------------------------------------------------------------------------------------
# The client: lookups, connections by broker URL, producer/consumer creation


def full_topic_name(topic: str) -> str:
    """`my-topic` -> `persistent://public/default/my-topic`, as the official client normalises."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    return f"persistent://{topic}"


class NativeClient:
    """Connections keyed by broker URL (one each, like the official client), lookups, creation."""

    LOOKUP_REDIRECTS_MAX = 20

    def __init__(self, service_url: str, *, token: str = "", tls_trust_file: str = "") -> None:
        self.service_url = service_url
        self.token = token
        self.secure = service_url.startswith("pulsar+ssl://")
        self._tls: ssl.SSLContext | None = None
        if self.secure:
            from auth.tls import client_context

            self._tls = client_context(tls_trust_file) if tls_trust_file else ssl.create_default_context()
        self._connections: dict[str, Connection] = {}
        self._names = itertools.count()

    async def connection(self, url: str | None = None) -> Connection:
        url = url or self.service_url
        conn = self._connections.get(url)
        if conn is None or conn.failure is not None:
            conn = await Connection.open(url, token=self.token, tls=self._tls)
            self._connections[url] = conn
        return conn

    async def partitions(self, topic: str) -> int:
        """PARTITIONED_METADATA: 0 for a non-partitioned topic."""
        conn = await self.connection()
        reply = await conn.request(pb.BaseCommand(
            type=T.PARTITIONED_METADATA, partitionMetadata=pb.CommandPartitionedTopicMetadata(
                topic=full_topic_name(topic), request_id=0)), "partitionMetadata")
        r = reply.partitionMetadataResponse
        if r.response != pb.CommandPartitionedTopicMetadataResponse.Success:
            raise server_error(r.error, r.message, topic=topic)
        return r.partitions

    async def lookup(self, topic: str) -> Connection:
        """LOOKUP (following redirects) and the connection to the owning broker."""
        conn = await self.connection()
        authoritative = False
        for _ in range(self.LOOKUP_REDIRECTS_MAX):
            reply = await conn.request(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(
                topic=topic, request_id=0, authoritative=authoritative)), "lookupTopic")
            r = reply.lookupTopicResponse
            if r.response == pb.CommandLookupTopicResponse.Failed:
                raise server_error(r.error, r.message, topic=topic)
            target = self.service_url if r.proxy_through_service_url else self._broker_url(r, topic)
            conn = await self.connection(target)
            if r.response == pb.CommandLookupTopicResponse.Connect:
                return conn
            authoritative = r.authoritative
        raise BrokerError("too many lookup redirects", topic=topic)

    def _broker_url(self, r: pb.CommandLookupTopicResponse, topic: str) -> str:
        if not self.secure:
            return r.brokerServiceUrl
        if not r.brokerServiceUrlTls:
            raise BrokerError("the owning broker advertises no pulsar+ssl:// URL", topic=topic)
        return r.brokerServiceUrlTls

    async def _topics(self, topic: str) -> list[str]:
        name = full_topic_name(topic)
        count = await self.partitions(name)
        return [f"{name}-partition-{i}" for i in range(count)] if count else [name]

    async def create_producers(self, topic: str, *, producer_name: str | None = None,
                               max_pending_messages: int = MAX_PENDING_MESSAGES_DEFAULT) -> list[Producer]:
        """One producer per partition (or one for a non-partitioned topic), in partition order."""
        return [await self.create_producer(t, producer_name=producer_name,
                                           max_pending_messages=max_pending_messages)
                for t in await self._topics(topic)]

    async def create_producer(self, topic: str, *, producer_name: str | None = None,
                              max_pending_messages: int = MAX_PENDING_MESSAGES_DEFAULT) -> Producer:
        """PRODUCER on one concrete (partition) topic, after its lookup."""
        conn = await self.lookup(topic)
        producer_id = conn.next_object_id()
        body = pb.CommandProducer(topic=topic, producer_id=producer_id, request_id=0,
                                  user_provided_producer_name=producer_name is not None)
        if producer_name is not None:
            body.producer_name = producer_name
        reply = await conn.request(pb.BaseCommand(type=T.PRODUCER, producer=body), "producer")
        ps = reply.producer_success
        producer = Producer(conn, producer_id, topic, ps.producer_name, ps.last_sequence_id,
                            max_pending_messages)
        conn.producers[producer_id] = producer
        return producer

    async def subscribe(self, topic: str, subscription: str, *, sub_type: int = SUB_EXCLUSIVE,
                        initial_position: int = EARLIEST,
                        receiver_queue_size: int = RECEIVER_QUEUE_SIZE_DEFAULT,
                        send_flow: bool = True) -> list[Consumer]:
        """SUBSCRIBE + FLOW on every partition; one consumer per partition, in partition order.

        send_flow=False leaves the permits to the caller (`consumer.flow(n)`), e.g. to start a
        measured catch-up read only once every consumer is set up.
        """
        out = []
        for name in await self._topics(topic):
            conn = await self.lookup(name)
            consumer_id = conn.next_object_id()
            consumer = Consumer(conn, consumer_id, name, subscription, receiver_queue_size)
            conn.consumers[consumer_id] = consumer  # before SUBSCRIBE: MESSAGE may follow SUCCESS at once
            try:
                # the ignores: enum fields take plain ints at run time; protobuf's stubs want enums
                await conn.request(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
                    topic=name, subscription=subscription, subType=sub_type,  # type: ignore[arg-type]
                    consumer_id=consumer_id, request_id=0, consumer_name=f"native-{next(self._names)}",
                    initialPosition=initial_position)), "subscribe")  # type: ignore[arg-type]
            except StrataError:
                conn.consumers.pop(consumer_id, None)
                raise
            if send_flow:
                consumer.flow(receiver_queue_size)
            out.append(consumer)
        return out

    async def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
