"""The bookie's gRPC control service (grpc.aio) and the `BookieServer` that runs storage behind it.

How it works
- Adds and reads are served over the framed TCP data port only (bookie/data_server.py, which
  answers through bookie/requests.py); `GetInfo` advertises it as `data_port`. gRPC carries
  the control calls: LAC, fence, delete, list, info, and ForgetCorrupt (the auditor has
  nothing to repair for an entry this bookie reported corrupt: bookie/corrupt.py).
- Every rpc is one call into `Storage`. Errors travel as `error_code`/`error_message`
  (codes from common/errors.py); gRPC status codes are left for transport failures.
- With `bookie_metrics_port` set, `BookieServer` serves Prometheus `/metrics` on that port
  (bookie/metrics.py); GC runs are timed and their reclaimed bytes counted for it.
- `BookieServer` also runs the periodic work: checkpoint (`bookie_checkpoint_interval_ms`),
  GC (`bookie_gc_interval_ms`) and the free-disk check (`bookie_disk_check_interval_ms`). A job that fails, with
  any exception, is logged and counted (`periodic_failures`) and tried again after a backoff
  that doubles up to `_PERIODIC_BACKOFF_S_MAX`: a periodic task never dies silently. (A disk
  error inside a job has already turned storage read-only, see bookie/storage.py.)

- Authentication and TLS (bookie/link_auth.py): with `bookie_auth_secret` and/or
  `bookie_tls_client_roles` every control call (GetInfo too) and every data connection must prove
  it comes from a broker (or another holder of the cluster secret); the gRPC interceptor refuses
  the others UNAUTHENTICATED before the servicer runs. With neither set the bookie is open to
  anyone who reaches its ports (dev mode) and says so once, as a WARNING, at start. With
  `bookie_tls_enabled` both ports speak TLS.

What must hold: the data port is served whenever the gRPC port is (a bookie without one could
take no adds); a fence or delete is answered only once durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import grpc
import grpc.aio

from bookie import gc
from bookie import metrics as bookie_metrics
from bookie.client import grpc_channel_options
from bookie.data_server import DataServer
from bookie.fileio import FileSystem
from bookie.link_auth import LinkGuard
from bookie.storage import Storage
from common.config import Config
from common.errors import ShuttingDown, StrataError
from common.histogram import LatencyHistogram
from proto import bookie_pb2 as pb
from proto import bookie_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
# Longest wait between tries of a periodic job that keeps failing (unless its interval is
# longer): long enough not to flood the log, short enough to notice a recovered disk.
_PERIODIC_BACKOFF_S_MAX = 60.0
_GC_RUNTIME_BOUNDS_S = (0.001, 0.01, 0.1, 1.0, 10.0, 60.0, 600.0)


class BookieServicer(pb_grpc.BookieServicer):
    def __init__(self, storage: Storage, data_port: Callable[[], int] = lambda: 0) -> None:
        self._storage = storage
        self._data_port = data_port  # -> the framed data port GetInfo advertises (0 = none)

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

    async def ForgetCorrupt(self, request, context):
        forgotten = sum(self._storage.forget_corrupt(e.ledger_id, e.entry_id) for e in request.entries)
        return pb.ForgetCorruptResponse(forgotten=forgotten)

    async def GetInfo(self, request, context):
        info = self._storage.info()
        return pb.GetInfoResponse(disk_used_bytes=info.disk_used_bytes,
                                  disk_free_bytes=info.disk_free_bytes,
                                  ledger_count=info.ledger_count, read_only=info.read_only,
                                  bookie_id=info.bookie_id, data_port=self._data_port())


class BookieServer:
    """Storage + gRPC server + periodic checkpoint, GC and disk checks, on one event loop."""

    def __init__(self, data_dir: str, config: Config, *, port: int = 0,
                 fs: FileSystem | None = None) -> None:
        self.config = config
        self.storage = Storage(data_dir, config, fs=fs)
        self._host = config.bookie_bind_host  # the gRPC and data ports listen here
        # What other nodes connect to, and the bookie's identity in ledger metadata.
        self._advertised_host = config.bookie_advertised_host or config.bookie_bind_host
        self._requested_port = port
        self.port = 0
        self._server: grpc.aio.Server | None = None
        # The framed TCP data path for adds and reads (bookie/data_server.py); `data_port` is
        # its port once started.
        self._data_server: DataServer | None = None
        self.data_port = 0
        self._tasks: list[asyncio.Task] = []
        # Failures of each periodic job (checkpoint, gc, _check_disk) since start, by name.
        self.periodic_failures: dict[str, int] = {}
        self.gc_runtime = LatencyHistogram(_GC_RUNTIME_BOUNDS_S)   # one GC run, s (/metrics)
        self.gc_reclaimed_bytes = 0                                 # by GC runs since start
        self._metrics: bookie_metrics.MetricsHttpServer | None = None
        self.metrics_port = 0                                       # /metrics HTTP port once started; 0: none

    @property
    def address(self) -> str:
        return f"{self._advertised_host}:{self.port}"

    async def start(self) -> None:
        guard = LinkGuard(self.config)   # reads the secret and certificates: fails before anything starts
        await self.storage.open()
        # No SO_REUSEPORT: gRPC sets it by default, so a second bookie on a taken port would
        # silently share it (and half the adds would go to the other bookie); fail loudly.
        options = [*grpc_channel_options(self.config), ("grpc.so_reuseport", 0)]
        if not guard.required:
            log.warning("bookie accepts any client: neither bookie_auth_secret nor bookie_tls_client_roles "
                        "is set (dev mode)")
        self._server = grpc.aio.server(options=options, interceptors=[guard.interceptor()])
        pb_grpc.add_BookieServicer_to_server(BookieServicer(self.storage, lambda: self.data_port),
                                             self._server)
        self.port = guard.add_port(self._server, f"{self._host}:{self._requested_port}")
        if self.port == 0:
            raise ShuttingDown(f"cannot listen on {self._host}:{self._requested_port}")
        await self._server.start()
        self._data_server = DataServer(self.storage, self.config, host=self._host,
                                       port=self.config.bookie_data_port, guard=guard)
        try:
            await self._data_server.start()
        except OSError as exc:
            await self._server.stop(0)
            raise ShuttingDown(f"cannot listen on data port {self._host}:"
                               f"{self.config.bookie_data_port}: {exc}") from None
        self.data_port = self._data_server.port
        if self.config.bookie_metrics_port:
            await self._start_metrics()
        cfg = self.config
        self._tasks = [
            asyncio.ensure_future(self._every(cfg.bookie_checkpoint_interval_ms / 1000.0,
                                              self.storage.checkpoint)),
            asyncio.ensure_future(self._every(cfg.bookie_gc_interval_ms / 1000.0, self.gc)),
            asyncio.ensure_future(self._every(cfg.bookie_disk_check_interval_ms / 1000.0, self._check_disk)),
        ]

    async def _start_metrics(self) -> None:
        port = self.config.bookie_metrics_port
        self._metrics = bookie_metrics.MetricsHttpServer(bookie_metrics.registry_for(self), self._host, port)
        try:
            await self._metrics.start()
        except OSError as exc:
            self._metrics = None
            await self.stop(0)
            raise ShuttingDown(f"cannot listen on metrics port {self._host}:{port}: {exc}") from None
        self.metrics_port = self._metrics.port

    async def gc(self) -> gc.GcReport:
        started_s = time.monotonic()
        report = await gc.collect(self.storage)
        self.gc_runtime.observe(time.monotonic() - started_s)
        self.gc_reclaimed_bytes += report.reclaimed_bytes
        return report

    async def _check_disk(self) -> None:
        self.storage.check_disk()

    async def _every(self, interval_s: float, job) -> None:
        """Run `job` every `interval_s` for as long as the server runs, whatever it raises."""
        name = getattr(job, "__name__", repr(job))
        delay_s = interval_s
        while True:
            await asyncio.sleep(delay_s)
            try:
                await job()
            except Exception as exc:
                self.periodic_failures[name] = self.periodic_failures.get(name, 0) + 1
                delay_s = min(delay_s * 2, max(interval_s, _PERIODIC_BACKOFF_S_MAX))
                if isinstance(exc, StrataError):
                    log.warning("%s failed (%d so far; next try in %.1f s): %s", name,
                                self.periodic_failures[name], delay_s, exc)
                else:
                    log.exception("%s failed (%d so far; next try in %.1f s)", name,
                                  self.periodic_failures[name], delay_s)
            else:
                delay_s = interval_s

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop taking requests, finish in-flight ones (within `grace_s`, None: the setting
        `bookie_stop_grace_ms`), flush and seal storage."""
        if grace_s is None:
            grace_s = self.config.bookie_stop_grace_ms / 1000
        if self._metrics is not None:
            await self._metrics.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._data_server is not None:
            await self._data_server.stop(grace_s)
        if self._server is not None:
            await self._server.stop(grace_s)
        await self.storage.close()
