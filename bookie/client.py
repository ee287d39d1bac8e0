"""The asyncio client of one bookie: what the ledger layer uses to talk to storage.

How it works
- Adds and reads go over the bookie's framed TCP data port (bookie/data_link.py), which the
  bookie advertises as `data_port` in `GetInfo` (and in its registration): one connection for
  adds and one for reads, frames written straight to the socket. The bookkeeping (coalescing,
  responses, failing) is in bookie/client_core.py. A bookie advertising no data port is
  unavailable for adds and reads (`BookieUnavailable`).
- `submit_add()` only appends the add to the link's `unsent` queue; the link's flush builds a
  request from everything unsent, so adds submitted while it is busy gather into the next
  request: the busier the client, the fewer and bigger the frames. Each request gets a
  `request_id`; the bookie answers each request once, with one result per entry.
- Requests are encoded by `encode_add_request` (client_core) as valid `AddRequest` protobuf
  bytes: large payloads are spliced in by hand, so such a payload is copied once.
- If a link breaks (transport error, bookie restart, unexpected end), every add in flight on
  it fails with `BookieUnavailable` and the next add opens a new one. An add in flight longer
  than `ledger_add_timeout_ms` fails with `TimeoutExpired` and resets the link (the bookie is
  stuck; later adds on it would wait behind it).
- Reads go over ONE long-lived read link per client: each read gets a `request_id` and a
  future; the response marked `last` completes it. A read not answered within
  `ledger_read_timeout_ms` fails with `BookieUnavailable` and resets the link, like a broken
  one does for every read on it.
- LAC, fence, delete, list, info and forget-corrupt are plain gRPC calls with a deadline
  (`ledger_read_timeout_ms`; fence, delete and forget-corrupt use `ledger_add_timeout_ms`).
- Credentials (bookie/link_auth.py, from the same Config): the cluster secret rides every gRPC
  call's metadata and each data link's first frame (HELLO); with `bookie_tls_enabled` the channel
  and the links are TLS, the bookie checked against `tls_trust_certs_file` and its advertised host,
  presenting `bookie_client_tls_cert_file` when set. A refusal (UNAUTHENTICATED, or the data
  port's ERROR frame) is `AuthenticationFailed`, not retriable: no amount of retrying fixes a
  wrong secret.

What must hold
- Every future returned by `submit_add` is resolved exactly once: success only after the bookie
  said the entry is durable, otherwise a typed `StrataError`.
- grpc exceptions never leave this module (socket errors never leave data_link.py): they
  become `BookieUnavailable` (`AuthenticationFailed` when refused) there and only there.
- Every payload read was checked against its CRC32C by the bookie when it read it from disk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from bookie.client_core import PendingRead, encode_add_request
from bookie.data_link import DataLink, LinkState
from bookie.frames import MESSAGE_OVERHEAD_BYTES, frame_bytes_max
from bookie.link_auth import LinkCredentials, refused_call
from bookie.types import BookieInfo, LedgerSummary
from common.clock import SYSTEM_CLOCK, Clock
from common.completion import Completion
from common.config import Config
from common.errors import (
    BookieUnavailable,
    EntryTooLarge,
    InvalidArgument,
    ShuttingDown,
    StrataError,
    error_from_code,
)
from common.invariant import present
from proto import bookie_pb2 as pb
from proto import bookie_pb2_grpc as pb_grpc

__all__ = ["BookieClient", "encode_add_request", "grpc_channel_options"]

_RECONNECT_BACKOFF_MS_MIN = 100
_RECONNECT_BACKOFF_MS_MAX = 1000


def grpc_channel_options(config: Config) -> list[tuple[str, int]]:
    """Channel/server options shared by client and server: message limits above the entry max."""
    message_bytes_max = config.bookie_entry_bytes_max + MESSAGE_OVERHEAD_BYTES
    return [
        ("grpc.max_send_message_length", message_bytes_max),
        ("grpc.max_receive_message_length", message_bytes_max),
        # A restarted bookie is reachable again within ~0.1-1 s, not after gRPC's default
        # backoff of up to 2 minutes; calls meanwhile fail fast with BookieUnavailable.
        ("grpc.initial_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS_MIN),
        ("grpc.min_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS_MIN),
        ("grpc.max_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS_MAX),
    ]


class BookieClient:
    """Client of one bookie at `address` ("host:port", its gRPC address)."""

    def __init__(self, address: str, *, config: Config, clock: Clock = SYSTEM_CLOCK,
                 credentials: LinkCredentials | None = None) -> None:
        self.address = address
        self._host = address.rsplit(":", 1)[0]
        self._config = config
        self._clock = clock
        self._add_timeout_s = config.ledger_add_timeout_ms / 1000.0
        self._read_timeout_s = config.ledger_read_timeout_ms / 1000.0
        self._entry_bytes_max = config.bookie_entry_bytes_max
        # the secret and TLS material (shared by a pool's clients); KeyMaterialError if unreadable
        self._credentials = credentials if credentials is not None else LinkCredentials(config)
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.BookieStub | None = None   # control calls (LAC, fence, delete, info)
        self._add_link: DataLink | None = None    # TCP link for adds; None = open on next add
        self._read_link: DataLink | None = None   # TCP link for reads; None = open on next read
        self._next_request_id = 1
        self._closed = False

    def _request_id(self) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        return request_id

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
        link = self._link_for(ledger_id, entry_id, payload, last_add_confirmed)
        if isinstance(link, StrataError):
            refused = asyncio.get_running_loop().create_future()
            refused.set_exception(link)
            return refused
        fut = link.loop.create_future()   # the link's loop: asyncio.get_running_loop() costs a getpid()
        link.submit((ledger_id, entry_id, payload, last_add_confirmed, writer_token, recovery, fut))
        return fut

    def submit_add_then(self, ledger_id: int, entry_id: int, payload: bytes, last_add_confirmed: int,
                        on_done: Callable[[Completion], Any], *, writer_token: bytes) -> Completion:
        """`submit_add` for the write handle's hot path: `on_done(completion)` runs in the turn the
        bookie's answer arrives (a refusal or a failure: on the next turn), no future per copy."""
        link = self._link_for(ledger_id, entry_id, payload, last_add_confirmed)
        if isinstance(link, StrataError):
            refused = Completion(asyncio.get_running_loop(), on_done)
            refused.set_exception(link)
            return refused
        completion = Completion(link.loop, on_done)
        link.submit((ledger_id, entry_id, payload, last_add_confirmed, writer_token, False, completion))
        return completion

    def _link_for(self, ledger_id: int, entry_id: int, payload: bytes,
                  last_add_confirmed: int) -> DataLink | StrataError:
        """The add link (opened on first use), or why this add is refused before it is sent."""
        if self._closed:
            return ShuttingDown("bookie client is closed", address=self.address)
        if len(payload) > self._entry_bytes_max:
            return EntryTooLarge("entry larger than bookie_entry_bytes_max",
                                 size_bytes=len(payload), max_bytes=self._entry_bytes_max)
        if ledger_id < 0 or entry_id < 0 or last_add_confirmed < -1:
            return InvalidArgument("ids must be >= 0 and LAC >= -1",
                                   ledger_id=ledger_id, entry_id=entry_id)
        link = self._add_link
        if link is None:
            link = self._add_link = self._open_link()
        return link

    # --- TCP data links -------------------------------------------------------------------

    def _open_link(self) -> DataLink:
        return DataLink(address=self.address, host=self._host, discover=self._discover_data_port,
                        frame_bytes_max=frame_bytes_max(self._config),
                        add_timeout_s=self._add_timeout_s, clock=self._clock,
                        next_request_id=self._request_id, on_retired=self._link_retired,
                        config=self._config, hello_body=self._credentials.hello_body,
                        ssl_context=self._credentials.ssl_context())

    async def _discover_data_port(self) -> int:
        """The bookie's data port from GetInfo (asked per new link: a restarted bookie may
        listen elsewhere); 0 = it has none."""
        response = await self._unary("GetInfo", pb.GetInfoRequest(), self._add_timeout_s)
        return response.data_port

    def _link_retired(self, link: DataLink) -> None:
        if self._add_link is link:
            self._add_link = None
        if self._read_link is link:
            self._read_link = None

    # --- reads ------------------------------------------------------------------------------

    async def read(self, ledger_id: int, first_entry: int, last_entry: int, *,
                   allow_past_lac: bool = False) -> list[tuple[int, bytes]]:
        """Entries first_entry..last_entry (inclusive), in order (the bookie checked each CRC32C).
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
        if self._closed:
            raise ShuttingDown("bookie client is closed", address=self.address)
        link = self._read_link
        if link is None:
            link = self._read_link = self._open_link()
        await asyncio.shield(link.ready)
        request_id = self._request_id()
        loop = asyncio.get_running_loop()
        pending = PendingRead(ledger_id, first, last, out, loop.create_future())
        link.send_read(pb.ReadRequest(ledger_id=ledger_id, first_entry=first, last_entry=last,
                                      allow_past_lac=allow_past_lac, request_id=request_id),
                       pending)
        timer = loop.call_later(self._read_timeout_s, self._link_read_timed_out, link, request_id)
        try:
            await pending.future
        finally:
            timer.cancel()
            link.reads.pop(request_id, None)

    def _link_read_timed_out(self, link: DataLink, request_id: int) -> None:
        if request_id in link.reads and link.state is LinkState.OPEN:  # answered in order: stuck
            link.fail(BookieUnavailable(
                "read not answered within ledger_read_timeout_ms; data link reset",
                address=self.address, timeout_s=self._read_timeout_s))

    # --- other calls ------------------------------------------------------------------------

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

    async def forget_corrupt(self, entries: list[tuple[int, int]]) -> int:
        """Tell the bookie to stop reporting these (ledger, entry) pairs as corrupt (nothing to
        repair); returns how many it was reporting."""
        request = pb.ForgetCorruptRequest(entries=[pb.CorruptEntry(ledger_id=ledger, entry_id=entry)
                                                   for ledger, entry in entries])
        response = await self._unary("ForgetCorrupt", request, self._add_timeout_s)
        return response.forgotten

    async def list_ledgers(self) -> list[LedgerSummary]:
        response = await self._unary("ListLedgers", pb.ListLedgersRequest(), self._read_timeout_s)
        return [LedgerSummary(ledger_id=s.ledger_id, last_entry_id=s.last_entry_id,
                              last_add_confirmed=s.last_add_confirmed, fenced=s.fenced,
                              payload_bytes=s.bytes) for s in response.ledgers]

    async def info(self) -> BookieInfo:
        r = await self._unary("GetInfo", pb.GetInfoRequest(), self._read_timeout_s)
        return BookieInfo(disk_used_bytes=r.disk_used_bytes, disk_free_bytes=r.disk_free_bytes,
                          ledger_count=r.ledger_count, read_only=r.read_only, bookie_id=r.bookie_id,
                          data_port=r.data_port)

    async def _unary(self, method: str, request, timeout_s: float):
        try:
            response = await getattr(self._ensure_stub(), method)(request, timeout=timeout_s,
                                                                   metadata=self._credentials.metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.UNAUTHENTICATED:
                raise refused_call(self.address, exc) from None
            raise _unavailable(self.address, exc) from None
        if response.error_code:
            raise error_from_code(response.error_code, response.error_message)
        return response

    # --- lifecycle --------------------------------------------------------------------------

    def _ensure_stub(self) -> pb_grpc.BookieStub:
        if self._closed:
            raise ShuttingDown("bookie client is closed", address=self.address)
        if self._stub is None:
            self._channel = self._credentials.channel(self.address, grpc_channel_options(self._config))
            self._stub = pb_grpc.BookieStub(self._channel)
        return self._stub

    async def wait_reachable(self, timeout_s: float) -> None:
        """Wait until a connection to the bookie is up (e.g. after it restarted), at most
        `timeout_s`; raises BookieUnavailable if it is not."""
        self._ensure_stub()
        channel = present(self._channel, "the stub's channel is open")
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout_s)
        except TimeoutError:
            raise BookieUnavailable("bookie not reachable", address=self.address,
                                    timeout_s=timeout_s) from None

    async def close(self) -> None:
        """Fail adds and reads not yet answered (BookieUnavailable), close the data links and
        the channel. Idempotent."""
        if self._closed:
            return
        self._closed = True
        closed = BookieUnavailable("bookie client closed", address=self.address)
        for link in (self._add_link, self._read_link):
            if link is not None:
                link.fail(closed)
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None


def _unavailable(address: str, exc: grpc.aio.AioRpcError) -> BookieUnavailable:
    code = exc.code()
    return BookieUnavailable(f"bookie call failed: {code.name if code else 'unknown'}",
                             address=address, details=exc.details())
