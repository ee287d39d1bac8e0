"""The bookie's gRPC service (grpc.aio) and the `BookieServer` that runs storage behind it.

How it works
- `AddEntries`: a reader task takes requests off the stream in order, waits while the add
  queue is full (backpressure: the stream simply stops being read, HTTP/2 flow control pushes
  back on the writer), hands each to `Storage.add_request` and queues the pending result; the
  handler itself writes responses in request order, each once its adds are durable.
- Reads: `ReadEntriesStream` answers the reads of one long-lived stream in order, each like a
  `ReadEntries` call (which remains for single reads), so a reader pays no call set-up per read.
- Every other rpc is one call into `Storage`. Errors travel as `error_code`/`error_message`
  (codes from common/errors.py); gRPC status codes are left for transport failures.
- `BookieServer` also runs the periodic work: checkpoint (`bookie_checkpoint_interval_ms`),
  GC (`bookie_gc_interval_ms`) and the free-disk check (every second).

What must hold: responses on an AddEntries stream come in request order, one per request,
with one result per entry; a success result is sent only after the entry is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
import grpc.aio

from bookie import gc
from bookie.client import grpc_channel_options
from bookie.fileio import FileSystem
from bookie.storage import PendingAdds, Storage
from common.config import Config
from common.errors import BookieError, ShuttingDown, StrataError
from proto import bookie_pb2 as pb
from proto import bookie_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
_DISK_CHECK_INTERVAL_S = 1.0
# A read response carries at most this many payload bytes (one larger entry goes alone).
_READ_RESPONSE_BYTES_MAX = 1024 * 1024
_END = object()


class BookieServicer(pb_grpc.BookieServicer):
    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def AddEntries(self, request_iterator, context):
        pending: asyncio.Queue = asyncio.Queue()
        reader = asyncio.ensure_future(self._read_adds(request_iterator, pending))
        try:
            while True:
                item = await pending.get()
                if item is _END:
                    break
                request_id, entries, adds = item
                await context.write(await _add_response(request_id, entries, adds))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _read_adds(self, request_iterator, pending: asyncio.Queue) -> None:
        storage = self._storage
        try:
            async for request in request_iterator:
                await storage.wait_for_room()
                entries = request.entries
                pending.put_nowait((request.request_id, entries,
                                    storage.add_request(request.writer_token, entries)))
        finally:
            pending.put_nowait(_END)

    async def ReadEntries(self, request, context):
        async for response in self._read_responses(request):
            yield response

    async def ReadEntriesStream(self, request_iterator, context):
        async for request in request_iterator:
            previous = None
            async for response in self._read_responses(request):
                if previous is not None:
                    await context.write(previous)
                response.request_id = request.request_id
                previous = response
            previous.last = True  # _read_responses always yields at least one response
            await context.write(previous)

    async def _read_responses(self, request):
        """The responses to one ReadRequest: entries in chunks, or one error response."""
        try:
            entries, error = await self._storage.read(request.ledger_id, request.first_entry,
                                                      request.last_entry, request.allow_past_lac)
        except StrataError as exc:
            yield pb.ReadResponse(error_code=exc.code, error_message=exc.message,
                                  last_add_confirmed=self._lac(request.ledger_id))
            return
        lac = self._lac(request.ledger_id)
        response = pb.ReadResponse(last_add_confirmed=lac)
        response_bytes = 0
        for entry_id, payload, crc in entries:
            if response_bytes and response_bytes + len(payload) > _READ_RESPONSE_BYTES_MAX:
                yield response
                response, response_bytes = pb.ReadResponse(last_add_confirmed=lac), 0
            response.entries.add(entry_id=entry_id, payload=payload, crc32c=crc)
            response_bytes += len(payload)
        if error is not None:
            response.error_code, response.error_message = error.code, error.message
        yield response

    def _lac(self, ledger_id: int) -> int:
        state = self._storage.index.ledgers.get(ledger_id)
        return -1 if state is None else state.lac

    async def ReadLastAddConfirmed(self, request, context):
        try:
            state = self._storage.ledger(request.ledger_id)
        except StrataError as exc:
            return pb.LacResponse(last_add_confirmed=-1, last_entry_id=-1, error_code=exc.code,
                                  error_message=exc.message)
        return pb.LacResponse(last_add_confirmed=state.lac, last_entry_id=state.last_entry_id)

    async def Fence(self, request, context):
        try:
            lac, last = await self._storage.fence(request.ledger_id)
        except StrataError as exc:
            return pb.FenceResponse(last_add_confirmed=-1, last_entry_id=-1, error_code=exc.code,
                                    error_message=exc.message)
        return pb.FenceResponse(last_add_confirmed=lac, last_entry_id=last)

    async def DeleteLedger(self, request, context):
        try:
            await self._storage.delete_ledger(request.ledger_id)
        except StrataError as exc:
            return pb.DeleteLedgerResponse(error_code=exc.code, error_message=exc.message)
        return pb.DeleteLedgerResponse()

    async def ListLedgers(self, request, context):
        response = pb.ListLedgersResponse()
        for s in self._storage.list_ledgers():
            response.ledgers.add(ledger_id=s.ledger_id, last_entry_id=s.last_entry_id,
                                 last_add_confirmed=s.last_add_confirmed, fenced=s.fenced,
                                 bytes=s.payload_bytes)
        return response

    async def GetInfo(self, request, context):
        info = self._storage.info()
        return pb.GetInfoResponse(disk_used_bytes=info.disk_used_bytes,
                                  disk_free_bytes=info.disk_free_bytes,
                                  ledger_count=info.ledger_count, read_only=info.read_only,
                                  bookie_id=info.bookie_id)


async def _add_response(request_id: int, entries, adds: PendingAdds) -> pb.AddResponse:
    """Wait until the request's adds are durable (or failed) and build its response."""
    failure: BookieError | None = None
    try:
        await adds.durable
    except BookieError as exc:
        failure = exc
    response = pb.AddResponse(request_id=request_id)
    results = response.results
    codes, messages = adds.codes, adds.messages
    for i, entry in enumerate(entries):
        code = codes[i]
        if code:
            results.add(ledger_id=entry.ledger_id, entry_id=entry.entry_id, error_code=code,
                        error_message=messages.get(i, ""))
        elif failure is not None:
            results.add(ledger_id=entry.ledger_id, entry_id=entry.entry_id,
                        error_code=failure.code, error_message=failure.message)
        else:
            results.add(ledger_id=entry.ledger_id, entry_id=entry.entry_id)
    return response


class BookieServer:
    """Storage + gRPC server + periodic checkpoint, GC and disk checks, on one event loop."""

    def __init__(self, data_dir: str, config: Config, *, host: str = "127.0.0.1", port: int = 0,
                 fs: FileSystem | None = None) -> None:
        self.config = config
        self.storage = Storage(data_dir, config, fs=fs)
        self._host = host
        self._requested_port = port
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    async def start(self) -> None:
        await self.storage.open()
        # No SO_REUSEPORT: gRPC sets it by default, so a second bookie on a taken port would
        # silently share it (and half the adds would go to the other bookie); fail loudly.
        options = [*grpc_channel_options(self.config), ("grpc.so_reuseport", 0)]
        self._server = grpc.aio.server(options=options)
        pb_grpc.add_BookieServicer_to_server(BookieServicer(self.storage), self._server)
        self.port = self._server.add_insecure_port(f"{self._host}:{self._requested_port}")
        if self.port == 0:
            raise ShuttingDown(f"cannot listen on {self._host}:{self._requested_port}")
        await self._server.start()
        cfg = self.config
        self._tasks = [
            asyncio.ensure_future(self._every(cfg.bookie_checkpoint_interval_ms / 1000.0,
                                              self.storage.checkpoint)),
            asyncio.ensure_future(self._every(cfg.bookie_gc_interval_ms / 1000.0, self.gc)),
            asyncio.ensure_future(self._every(_DISK_CHECK_INTERVAL_S, self._check_disk)),
        ]

    async def gc(self) -> gc.GcReport:
        return await gc.collect(self.storage)

    async def _check_disk(self) -> None:
        self.storage.check_disk()

    async def _every(self, interval_s: float, job) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except StrataError as exc:
                log.warning("%s failed: %s", getattr(job, "__name__", job), exc)

    async def stop(self, grace_s: float = 2.0) -> None:
        """Stop taking requests, finish in-flight ones (bounded), flush and seal storage."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.stop(grace_s)
        await self.storage.close()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
