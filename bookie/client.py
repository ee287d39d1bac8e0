"""The asyncio gRPC client of one bookie: what the ledger layer uses to talk to storage.

How it works
- Adds go over ONE long-lived `AddEntries` stream per client. `submit_add()` only appends the
  add to `_queued` and, if not already done, schedules `_flush()` with `call_soon`; so every add
  made in one event-loop iteration is coalesced into as few `AddRequest`s as possible (split per
  writer token and at `_REQUEST_PAYLOAD_BYTES_MAX`). Each request gets a `request_id`; the
  bookie answers each request once, in order, with one result per entry, matched by position.
- A sender task writes requests to the stream in order; a receiver task resolves futures.
- If the stream breaks (transport error, bookie restart, unexpected end), every add in flight on
  it fails with `BookieUnavailable` and the next add opens a new stream. An add in flight longer
  than `ledger_add_timeout_ms` fails with `TimeoutExpired` and resets the stream (the bookie is
  stuck; later adds on that stream would wait behind it).
- Reads, LAC, fence, delete, list and info are plain calls with a deadline
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
    """One AddEntries stream: its call, its tasks, and its requests in flight (in send order)."""

    call: grpc.aio.StreamStreamCall
    send_queue: asyncio.Queue
    inflight: dict[int, _Inflight] = field(default_factory=dict)
    state: _StreamState = _StreamState.OPEN
    tasks: list[asyncio.Task] = field(default_factory=list)
    watchdog: asyncio.TimerHandle | None = None


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
        # Adds submitted in this loop iteration, not yet put in a request:
        # (ledger_id, entry_id, payload, lac, writer_token, recovery, future).
        self._queued: deque[tuple] = deque()
        self._flush_scheduled = False
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
        self._queued.append((ledger_id, entry_id, payload, last_add_confirmed, writer_token,
                             recovery, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        """Turn every queued add into AddRequests and hand them to the stream's sender."""
        self._flush_scheduled = False
        if not self._queued:
            return
        if self._closed:
            self._fail_queued(ShuttingDown("bookie client is closed", address=self.address))
            return
        stream = self._stream if self._stream is not None else self._open_stream()
        queued, self._queued = self._queued, deque()
        request = None
        futures: list[asyncio.Future] = []
        request_bytes = 0
        token = None
        for ledger_id, entry_id, payload, lac, writer_token, recovery, fut in queued:
            if fut.done():  # cancelled by its caller before it was sent
                continue
            if request is not None and (writer_token != token
                                        or request_bytes + len(payload) > _REQUEST_PAYLOAD_BYTES_MAX):
                self._send(stream, request, futures)
                request, futures, request_bytes = None, [], 0
            if request is None:
                token = writer_token
                request = pb.AddRequest(request_id=self._next_request_id, writer_token=writer_token)
                self._next_request_id += 1
            request.entries.add(ledger_id=ledger_id, entry_id=entry_id, last_add_confirmed=lac,
                                payload=payload, crc32c=_crc32c(payload), recovery=recovery)
            futures.append(fut)
            request_bytes += len(payload)
        if request is not None:
            self._send(stream, request, futures)

    def _fail_queued(self, exc: StrataError) -> None:
        queued, self._queued = self._queued, deque()
        for *_, fut in queued:
            if not fut.done():
                fut.set_exception(exc)

    def _send(self, stream: _AddStream, request: pb.AddRequest, futures: list) -> None:
        if stream.state is not _StreamState.OPEN:
            for fut in futures:
                if not fut.done():
                    fut.set_exception(BookieUnavailable("add stream broke", address=self.address))
            return
        deadline_s = self._clock.monotonic_s() + self._add_timeout_s
        stream.inflight[request.request_id] = _Inflight(futures, deadline_s)
        stream.send_queue.put_nowait(request)

    def _open_stream(self) -> _AddStream:
        stub = self._ensure_stub()
        stream = _AddStream(call=stub.AddEntries(), send_queue=asyncio.Queue())
        stream.tasks.append(asyncio.ensure_future(self._sender(stream)))
        stream.tasks.append(asyncio.ensure_future(self._receiver(stream)))
        self._stream = stream
        self._arm_watchdog(stream)
        return stream

    async def _sender(self, stream: _AddStream) -> None:
        try:
            while True:
                request = await stream.send_queue.get()
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
        request = pb.ReadRequest(ledger_id=ledger_id, first_entry=first, last_entry=last,
                                 allow_past_lac=allow_past_lac)
        expected = first
        try:
            call = self._ensure_stub().ReadEntries(request, timeout=self._read_timeout_s)
            async for response in call:
                if response.error_code:
                    raise error_from_code(response.error_code, response.error_message)
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
        except grpc.aio.AioRpcError as exc:
            raise _unavailable(self.address, exc) from None
        if expected != last + 1:
            raise NoSuchEntry("bookie returned fewer entries than asked", ledger_id=ledger_id,
                              missing_entry_id=expected)

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
        self._fail_queued(ShuttingDown("bookie client is closed", address=self.address))
        if self._stream is not None:
            stream = self._stream
            self._fail_stream(stream, BookieUnavailable("bookie client closed", address=self.address))
            await asyncio.gather(*stream.tasks, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None


def _unavailable(address: str, exc: grpc.aio.AioRpcError) -> BookieUnavailable:
    code = exc.code()
    return BookieUnavailable(f"bookie call failed: {code.name if code else 'unknown'}",
                             address=address, details=exc.details())
