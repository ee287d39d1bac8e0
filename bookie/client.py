"""The asyncio gRPC client of one bookie: what the ledger layer uses to talk to storage.

How it works
- Adds go over ONE long-lived `AddEntries` stream per client. `submit_add()` only appends the
  add to the stream's `unsent` queue and wakes its sender task. The sender builds a request from
  everything unsent when it is free (split per writer token and at `_REQUEST_PAYLOAD_BYTES_MAX`),
  so while one write is in progress the adds behind it gather into the next request: the busier
  the client, the fewer and bigger the gRPC messages. Each request gets a `request_id`; the
  bookie answers each request once, in order, with one result per entry, matched by position.
- Requests are encoded by `encode_add_request` as valid `AddRequest` protobuf bytes: large
  payloads are spliced in by hand, so such a payload is copied once into the message instead
  of into a protobuf message and again by its serializer. The bookie parses ordinary
  `AddRequest`s.
- A receiver task resolves futures from the responses.
- If the stream breaks (transport error, bookie restart, unexpected end), every add in flight on
  it fails with `BookieUnavailable` and the next add opens a new stream. An add in flight longer
  than `ledger_add_timeout_ms` fails with `TimeoutExpired` and resets the stream (the bookie is
  stuck; later adds on that stream would wait behind it).
- Reads go over ONE long-lived `ReadEntriesStream` per client (a call per read cost the
  broker more than the read itself): each read gets a `request_id` and a future, a sender task
  writes the requests, a receiver task hands each response to its read, the one marked `last`
  completes it. A read not answered within `ledger_read_timeout_ms` fails with
  `BookieUnavailable` and resets the stream, like a broken stream does for every read on it.
- LAC, fence, delete, list and info are plain calls with a deadline
  (`ledger_read_timeout_ms`; fence and delete use `ledger_add_timeout_ms`).

What must hold
- Every future returned by `submit_add` is resolved exactly once: success only after the bookie
  said the entry is durable, otherwise a typed `StrataError`.
- grpc exceptions never leave this module: they become `BookieUnavailable` here and only here.
- Every payload read is checked against its CRC32C before it is returned (`ChecksumMismatch`).
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass, field

import google_crc32c
import grpc
import grpc.aio

from bookie.types import BookieInfo, LedgerSummary
from common.clock import SYSTEM_CLOCK, Clock
from common.config import MIB, Config
from common.errors import (
    BookieUnavailable,
    ChecksumMismatch,
    EntryTooLarge,
    InvalidArgument,
    NoSuchEntry,
    ShuttingDown,
    StrataError,
    TimeoutExpired,
    error_from_code,
)
from common.invariant import invariant
from proto import bookie_pb2 as pb
from proto import bookie_pb2_grpc as pb_grpc

# One AddRequest carries at most this many payload bytes (a single larger entry goes alone), so
# a burst of adds becomes several moderate messages instead of one huge one.
_REQUEST_PAYLOAD_BYTES_MAX = 2 * MIB
# Headroom over the largest entry for protobuf framing of one request / response.
_MESSAGE_OVERHEAD_BYTES = 4 * MIB
# How often an open add stream checks its oldest request against the add deadline, as a
# fraction of that deadline.
_WATCHDOG_FRACTION = 0.1
_RECONNECT_BACKOFF_MS_MIN = 100
_RECONNECT_BACKOFF_MS_MAX = 1000

_crc32c = google_crc32c.value
_ADD_ENTRIES_METHOD = "/strata.bookie.Bookie/AddEntries"
_ENTRIES_TAG = b"\x1a"  # AddRequest.entries: field 3, length-delimited
_PAYLOAD_TAG = b"\x22"  # AddEntry.payload: field 4, length-delimited
# Payloads at least this big are spliced into a request instead of copied through protobuf
# (below it protobuf's per-entry cost is lower than splicing's).
_SPLICE_PAYLOAD_BYTES_MIN = 16 * 1024


def grpc_channel_options(config: Config) -> list[tuple[str, int]]:
    """Channel/server options shared by client and server: message limits above the entry max."""
    message_bytes_max = config.bookie_entry_bytes_max + _MESSAGE_OVERHEAD_BYTES
    return [
        ("grpc.max_send_message_length", message_bytes_max),
        ("grpc.max_receive_message_length", message_bytes_max),
        # A restarted bookie is reachable again within ~0.1-1 s, not after gRPC's default
        # backoff of up to 2 minutes; calls meanwhile fail fast with BookieUnavailable.
        ("grpc.initial_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS_MIN),
        ("grpc.min_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS_MIN),
        ("grpc.max_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS_MAX),
    ]


class _StreamState(enum.Enum):
    OPEN = "open"        # accepting requests; sender and receiver tasks running
    FAILED = "failed"    # broken or reset: every add on it has been failed; never reused


@dataclass
class _Inflight:
    """One AddRequest sent and not yet answered."""

    futures: list[asyncio.Future]
    deadline_s: float  # monotonic seconds after which its adds fail with TimeoutExpired


@dataclass
class _AddStream:
    """One AddEntries stream: its call, its tasks, adds not yet sent, requests in flight."""

    call: grpc.aio.StreamStreamCall
    # Adds submitted and not yet in a request, in submission order:
    # (ledger_id, entry_id, payload, lac, writer_token, recovery, future).
    unsent: deque = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)  # set when `unsent` gained adds
    inflight: dict[int, _Inflight] = field(default_factory=dict)
    state: _StreamState = _StreamState.OPEN
    tasks: list[asyncio.Task] = field(default_factory=list)
    watchdog: asyncio.TimerHandle | None = None


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_add_request(request_id: int, writer_token: bytes, adds) -> bytes:
    """The protobuf bytes of an `AddRequest` of `adds` ((ledger_id, entry_id, payload, lac,
    recovery) each). A protobuf message may be concatenated from pieces (a repeated field's
    elements append in order), so runs of small entries are encoded by protobuf in one go, and
    each large entry is encoded without its payload, the payload field spliced in by hand:
    everything is joined once, so a large payload is copied once."""
    parts = [pb.AddRequest(request_id=request_id, writer_token=writer_token).SerializeToString()]
    run = pb.AddRequest()  # small entries not yet encoded: only its `entries` are used
    for ledger_id, entry_id, payload, lac, recovery in adds:
        if len(payload) < _SPLICE_PAYLOAD_BYTES_MIN:
            run.entries.add(ledger_id=ledger_id, entry_id=entry_id, last_add_confirmed=lac,
                            payload=payload, crc32c=_crc32c(payload), recovery=recovery)
            continue
        if run.entries:
            parts.append(run.SerializeToString())
            run = pb.AddRequest()
        head = pb.AddEntry(ledger_id=ledger_id, entry_id=entry_id, last_add_confirmed=lac,
                           crc32c=_crc32c(payload), recovery=recovery).SerializeToString()
        payload_len = _varint(len(payload))
        entry_bytes = len(head) + 1 + len(payload_len) + len(payload)
        parts += (_ENTRIES_TAG, _varint(entry_bytes), head, _PAYLOAD_TAG, payload_len, payload)
    if run.entries:
        parts.append(run.SerializeToString())
    return b"".join(parts)


@dataclass
class _PendingRead:
    """One read sent on the read stream and not yet completed."""

    ledger_id: int
    expected: int                 # the next entry id its responses must carry
    last: int                     # the last entry id asked for
    out: list                     # (entry_id, payload) read so far
    future: asyncio.Future        # None once every entry arrived; a StrataError otherwise


@dataclass
class _ReadStream:
    """One ReadEntriesStream: its call, its tasks, its reads in flight by request id."""

    call: grpc.aio.StreamStreamCall
    send_queue: asyncio.Queue
    pending: dict[int, _PendingRead] = field(default_factory=dict)
    state: _StreamState = _StreamState.OPEN
    tasks: list[asyncio.Task] = field(default_factory=list)


class BookieClient:
    """Client of one bookie at `address` ("host:port")."""

    def __init__(self, address: str, *, config: Config, clock: Clock = SYSTEM_CLOCK) -> None:
        self.address = address
        self._config = config
        self._clock = clock
        self._add_timeout_s = config.ledger_add_timeout_ms / 1000.0
        self._read_timeout_s = config.ledger_read_timeout_ms / 1000.0
        self._entry_bytes_max = config.bookie_entry_bytes_max
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.BookieStub | None = None
        self._stream: _AddStream | None = None
        self._read_stream: _ReadStream | None = None
        self._next_request_id = 1
        self._closed = False

    # --- adds -----------------------------------------------------------------------------

    async def add(self, ledger_id: int, entry_id: int, payload: bytes, last_add_confirmed: int,
                  *, writer_token: bytes, recovery: bool = False) -> None:
        """Store one entry; returns once it is durable on this bookie, else raises a typed error."""
        await self.submit_add(ledger_id, entry_id, payload, last_add_confirmed,
                              writer_token=writer_token, recovery=recovery)

    def submit_add(self, ledger_id: int, entry_id: int, payload: bytes, last_add_confirmed: int,
                   *, writer_token: bytes, recovery: bool = False) -> asyncio.Future:
        """Like `add`, without a coroutine per add: returns a future resolved when the add is
        durable (result None) or failed (a StrataError). For pipelined writers."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self._closed:
            fut.set_exception(ShuttingDown("bookie client is closed", address=self.address))
            return fut
        if len(payload) > self._entry_bytes_max:
            fut.set_exception(EntryTooLarge("entry larger than bookie_entry_bytes_max",
                                            size_bytes=len(payload), max_bytes=self._entry_bytes_max))
            return fut
        if ledger_id < 0 or entry_id < 0 or last_add_confirmed < -1:
            fut.set_exception(InvalidArgument("ids must be >= 0 and LAC >= -1",
                                              ledger_id=ledger_id, entry_id=entry_id))
            return fut
        stream = self._stream
        if stream is None:
            try:
                stream = self._open_stream()
            except StrataError as exc:
                fut.set_exception(exc)
                return fut
        stream.unsent.append((ledger_id, entry_id, payload, last_add_confirmed, writer_token,
                              recovery, fut))
        stream.wakeup.set()
        return fut

    def _take_request(self, stream: _AddStream) -> bytes | None:
        """Move the oldest unsent adds (one writer token, up to `_REQUEST_PAYLOAD_BYTES_MAX`)
        into one request, registered in flight; None if every one of them was cancelled."""
        unsent = stream.unsent
        adds, futures = [], []
        token = b""
        request_bytes = 0
        while unsent:
            ledger_id, entry_id, payload, lac, writer_token, recovery, fut = unsent[0]
            if futures and (writer_token != token
                            or request_bytes + len(payload) > _REQUEST_PAYLOAD_BYTES_MAX):
                break
            unsent.popleft()
            if fut.done():  # cancelled by its caller before it was sent
                continue
            token = writer_token
            adds.append((ledger_id, entry_id, payload, lac, recovery))
            futures.append(fut)
            request_bytes += len(payload)
        if not futures:
            return None
        request_id = self._next_request_id
        self._next_request_id += 1
        deadline_s = self._clock.monotonic_s() + self._add_timeout_s
        stream.inflight[request_id] = _Inflight(futures, deadline_s)
        return encode_add_request(request_id, token, adds)

    def _open_stream(self) -> _AddStream:
        self._ensure_stub()
        call = self._channel.stream_stream(
            _ADD_ENTRIES_METHOD, request_serializer=None,  # requests arrive encoded
            response_deserializer=pb.AddResponse.FromString)()
        stream = _AddStream(call=call)
        stream.tasks.append(asyncio.ensure_future(self._sender(stream)))
        stream.tasks.append(asyncio.ensure_future(self._receiver(stream)))
        self._stream = stream
        self._arm_watchdog(stream)
        return stream

    async def _sender(self, stream: _AddStream) -> None:
        try:
            while True:
                if not stream.unsent:
                    stream.wakeup.clear()
                    await stream.wakeup.wait()
                    continue
                request = self._take_request(stream)
                if request is not None:
                    await stream.call.write(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # grpc.aio errors, or writing to a finished call
            self._fail_stream(stream, BookieUnavailable(f"add stream write failed: {exc!r}",
                                                        address=self.address))

    async def _receiver(self, stream: _AddStream) -> None:
        try:
            while True:
                response = await stream.call.read()
                if response is grpc.aio.EOF:
                    raise BookieUnavailable("bookie ended the add stream", address=self.address)
                self._on_response(stream, response)
        except asyncio.CancelledError:
            raise
        except StrataError as exc:
            self._fail_stream(stream, exc)
        except Exception as exc:  # grpc.aio.AioRpcError and friends
            self._fail_stream(stream, BookieUnavailable(f"add stream failed: {exc!r}",
                                                        address=self.address))

    def _on_response(self, stream: _AddStream, response: pb.AddResponse) -> None:
        inflight = stream.inflight.pop(response.request_id, None)
        if inflight is None:
            raise BookieUnavailable("bookie answered an unknown request",
                                    request_id=response.request_id)
        results = response.results
        invariant(len(results) == len(inflight.futures), "one result per add",
                  results=len(results), adds=len(inflight.futures))
        for result, fut in zip(results, inflight.futures):
            if fut.done():
                continue
            code = result.error_code
            if code == 0:
                fut.set_result(None)
            else:
                fut.set_exception(error_from_code(code, result.error_message))

    def _arm_watchdog(self, stream: _AddStream) -> None:
        period_s = max(0.01, self._add_timeout_s * _WATCHDOG_FRACTION)
        stream.watchdog = asyncio.get_running_loop().call_later(period_s, self._watchdog, stream)

    def _watchdog(self, stream: _AddStream) -> None:
        if stream.state is not _StreamState.OPEN:
            return
        oldest = next(iter(stream.inflight.values()), None)
        if oldest is not None and self._clock.monotonic_s() >= oldest.deadline_s:
            self._fail_stream(stream, BookieUnavailable("add stream reset after an add timed out",
                                                        address=self.address), timed_out=True)
            return
        self._arm_watchdog(stream)

    def _fail_stream(self, stream: _AddStream, exc: StrataError, *, timed_out: bool = False) -> None:
        """Fail every add on `stream` and retire it; the next add opens a new stream."""
        if stream.state is _StreamState.FAILED:
            return
        stream.state = _StreamState.FAILED
        if self._stream is stream:
            self._stream = None
        now_s = self._clock.monotonic_s()
        for inflight in stream.inflight.values():
            error = exc
            if timed_out and now_s >= inflight.deadline_s:
                error = TimeoutExpired("add not acknowledged within ledger_add_timeout_ms",
                                       address=self.address, timeout_s=self._add_timeout_s)
            for fut in inflight.futures:
                if not fut.done():
                    fut.set_exception(error)
        stream.inflight.clear()
        while stream.unsent:
            fut = stream.unsent.popleft()[-1]
            if not fut.done():
                fut.set_exception(exc)
        if stream.watchdog is not None:
            stream.watchdog.cancel()
        current = asyncio.current_task()
        for task in stream.tasks:
            if task is not current:
                task.cancel()
        stream.call.cancel()

    # --- other calls ------------------------------------------------------------------------

    async def read(self, ledger_id: int, first_entry: int, last_entry: int, *,
                   allow_past_lac: bool = False) -> list[tuple[int, bytes]]:
        """Entries first_entry..last_entry (inclusive), in order, each checked against its CRC32C.
        Raises NoSuchEntry if any is missing (or past the bookie's LAC without allow_past_lac)."""
        if first_entry < 0 or last_entry < first_entry:
            raise InvalidArgument("bad entry range", first_entry=first_entry, last_entry=last_entry)
        out: list[tuple[int, bytes]] = []
        step = self._config.bookie_read_entries_max
        for chunk_first in range(first_entry, last_entry + 1, step):
            chunk_last = min(last_entry, chunk_first + step - 1)
            await self._read_chunk(ledger_id, chunk_first, chunk_last, allow_past_lac, out)
        return out

    async def _read_chunk(self, ledger_id: int, first: int, last: int, allow_past_lac: bool,
                          out: list[tuple[int, bytes]]) -> None:
        stream = self._read_stream if self._read_stream is not None else self._open_read_stream()
        request_id = self._next_request_id
        self._next_request_id += 1
        loop = asyncio.get_running_loop()
        pending = _PendingRead(ledger_id, first, last, out, loop.create_future())
        stream.pending[request_id] = pending
        stream.send_queue.put_nowait(pb.ReadRequest(
            ledger_id=ledger_id, first_entry=first, last_entry=last,
            allow_past_lac=allow_past_lac, request_id=request_id))
        timer = loop.call_later(self._read_timeout_s, self._read_timed_out, stream, request_id)
        try:
            await pending.future
        finally:
            timer.cancel()
            stream.pending.pop(request_id, None)

    def _open_read_stream(self) -> _ReadStream:
        stub = self._ensure_stub()
        stream = _ReadStream(call=stub.ReadEntriesStream(), send_queue=asyncio.Queue())
        stream.tasks.append(asyncio.ensure_future(self._read_sender(stream)))
        stream.tasks.append(asyncio.ensure_future(self._read_receiver(stream)))
        self._read_stream = stream
        return stream

    async def _read_sender(self, stream: _ReadStream) -> None:
        try:
            while True:
                await stream.call.write(await stream.send_queue.get())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # grpc.aio errors, or writing to a finished call
            self._fail_read_stream(stream, BookieUnavailable(f"read stream write failed: {exc!r}",
                                                             address=self.address))

    async def _read_receiver(self, stream: _ReadStream) -> None:
        try:
            while True:
                response = await stream.call.read()
                if response is grpc.aio.EOF:
                    raise BookieUnavailable("bookie ended the read stream", address=self.address)
                pending = stream.pending.get(response.request_id)
                if pending is None or pending.future.done():
                    continue  # its reader gave up (cancelled)
                try:
                    self._take_read_response(pending, response)
                except StrataError as exc:
                    pending.future.set_exception(exc)
        except asyncio.CancelledError:
            raise
        except StrataError as exc:
            self._fail_read_stream(stream, exc)
        except Exception as exc:  # grpc.aio.AioRpcError and friends
            self._fail_read_stream(stream, BookieUnavailable(f"read stream failed: {exc!r}",
                                                             address=self.address))

    def _take_read_response(self, pending: _PendingRead, response: pb.ReadResponse) -> None:
        """Check and collect one response's entries; complete the read on its last response."""
        if response.error_code:
            raise error_from_code(response.error_code, response.error_message)
        ledger_id, out, expected = pending.ledger_id, pending.out, pending.expected
        for entry in response.entries:
            payload = entry.payload
            if entry.entry_id != expected:
                raise NoSuchEntry("bookie skipped an entry", ledger_id=ledger_id,
                                  expected=expected, got=entry.entry_id)
            if _crc32c(payload) != entry.crc32c:
                raise ChecksumMismatch("entry read does not match its CRC32C",
                                       ledger_id=ledger_id, entry_id=entry.entry_id,
                                       address=self.address)
            out.append((expected, payload))
            expected += 1
        pending.expected = expected
        if response.last:
            if expected != pending.last + 1:
                raise NoSuchEntry("bookie returned fewer entries than asked",
                                  ledger_id=ledger_id, missing_entry_id=expected)
            pending.future.set_result(None)

    def _read_timed_out(self, stream: _ReadStream, request_id: int) -> None:
        if request_id in stream.pending:  # reads are answered in order: the stream is stuck
            self._fail_read_stream(stream, BookieUnavailable(
                "read not answered within ledger_read_timeout_ms; read stream reset",
                address=self.address, timeout_s=self._read_timeout_s))

    def _fail_read_stream(self, stream: _ReadStream, exc: StrataError) -> None:
        """Fail every read on `stream` and retire it; the next read opens a new stream."""
        if stream.state is _StreamState.FAILED:
            return
        stream.state = _StreamState.FAILED
        if self._read_stream is stream:
            self._read_stream = None
        for pending in stream.pending.values():
            if not pending.future.done():
                pending.future.set_exception(exc)
        stream.pending.clear()
        current = asyncio.current_task()
        for task in stream.tasks:
            if task is not current:
                task.cancel()
        stream.call.cancel()

    async def read_lac(self, ledger_id: int) -> tuple[int, int]:
        """(last_add_confirmed, last_entry_id) of the ledger on this bookie; -1 = none."""
        response = await self._unary("ReadLastAddConfirmed", pb.LacRequest(ledger_id=ledger_id),
                                     self._read_timeout_s)
        return response.last_add_confirmed, response.last_entry_id

    async def fence(self, ledger_id: int) -> tuple[int, int]:
        """Fence the ledger here (idempotent; durable before it returns). Returns
        (last_add_confirmed, last_entry_id) as of the fence."""
        response = await self._unary("Fence", pb.FenceRequest(ledger_id=ledger_id),
                                     self._add_timeout_s)
        return response.last_add_confirmed, response.last_entry_id

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger's entries here (idempotent: an unknown ledger is fine)."""
        await self._unary("DeleteLedger", pb.DeleteLedgerRequest(ledger_id=ledger_id),
                          self._add_timeout_s)

    async def list_ledgers(self) -> list[LedgerSummary]:
        response = await self._unary("ListLedgers", pb.ListLedgersRequest(), self._read_timeout_s)
        return [LedgerSummary(ledger_id=s.ledger_id, last_entry_id=s.last_entry_id,
                              last_add_confirmed=s.last_add_confirmed, fenced=s.fenced,
                              payload_bytes=s.bytes) for s in response.ledgers]

    async def info(self) -> BookieInfo:
        r = await self._unary("GetInfo", pb.GetInfoRequest(), self._read_timeout_s)
        return BookieInfo(disk_used_bytes=r.disk_used_bytes, disk_free_bytes=r.disk_free_bytes,
                          ledger_count=r.ledger_count, read_only=r.read_only, bookie_id=r.bookie_id)

    async def _unary(self, method: str, request, timeout_s: float):
        try:
            response = await getattr(self._ensure_stub(), method)(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _unavailable(self.address, exc) from None
        if response.error_code:
            raise error_from_code(response.error_code, response.error_message)
        return response

    # --- lifecycle --------------------------------------------------------------------------

    def _ensure_stub(self) -> pb_grpc.BookieStub:
        if self._closed:
            raise ShuttingDown("bookie client is closed", address=self.address)
        if self._stub is None:
            self._channel = grpc.aio.insecure_channel(self.address,
                                                      options=grpc_channel_options(self._config))
            self._stub = pb_grpc.BookieStub(self._channel)
        return self._stub

    async def wait_reachable(self, timeout_s: float) -> None:
        """Wait until a connection to the bookie is up (e.g. after it restarted), at most
        `timeout_s`; raises BookieUnavailable if it is not."""
        self._ensure_stub()
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout_s)
        except asyncio.TimeoutError:
            raise BookieUnavailable("bookie not reachable", address=self.address,
                                    timeout_s=timeout_s) from None

    async def close(self) -> None:
        """Fail adds not yet answered (BookieUnavailable) and close the channel. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._stream is not None:
            stream = self._stream
            self._fail_stream(stream, BookieUnavailable("bookie client closed", address=self.address))
            await asyncio.gather(*stream.tasks, return_exceptions=True)
        if self._read_stream is not None:
            read_stream = self._read_stream
            self._fail_read_stream(read_stream, BookieUnavailable("bookie client closed",
                                                                  address=self.address))
            await asyncio.gather(*read_stream.tasks, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None


def _unavailable(address: str, exc: grpc.aio.AioRpcError) -> BookieUnavailable:
    code = exc.code()
    return BookieUnavailable(f"bookie call failed: {code.name if code else 'unknown'}",
                             address=address, details=exc.details())
