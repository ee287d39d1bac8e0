"""What `strata perf produce` and `strata perf consume` share: latency histograms, the server's
CPU (psutil), the server to measure (started here or given), worker processes, the report.

How it works:
- Latencies go into a `LatencyHistogram`: an HDR histogram (hdrh) of microseconds at 3
  significant digits, weighted by message count, mergeable across processes, bounded in size
  whatever the run length.
- Server CPU: user+system CPU (psutil) of the server's root process and of every descendant,
  summed, sampled before and after the run. For a standalone this is the broker (the standalone
  process itself) plus every bookie. With `--service-url` the root is the process listening on
  that port (psutil's view of the TCP sockets), or `--server-pid`.
- Workers (`--producers N`, `--consumers N`) are spawned OS processes: each sets up (connects,
  creates its producer/consumer), reports ready, waits for a common start signal, runs, and puts
  one result dict on a bounded queue. The parent samples CPU around the measured part.

What must hold: every wait has a deadline (`TimeoutExpired`), every queue a maxsize; a worker
that dies or fails makes the run fail with its error, never a silent partial figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import queue
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psutil
from hdrh.histogram import HdrHistogram

from admin_client import AdminClient, Credentials
from common.errors import StrataError, TimeoutExpired

KIB = 1024
MB = 1_000_000
WORKER_READY_TIMEOUT_S = 60.0
ADMIN_TIMEOUT_S = 15.0
DESCENDANTS_MAX = 10_000  # processes counted under one server root


# ------------------------------------------------------------------------------------------------
# Latency histogram


class LatencyHistogram:
    """Latencies in an HDR histogram (`hdrh`): whole microseconds from 1 us to 1 h at 3 significant
    digits (a value is reported within 0.1%), weighted by message count, mergeable across processes
    (`to_dict` / `from_dict` carry its compressed encoding), a fixed size whatever the run length.

    hdrh records in pure Python (about 7 us a value, measured) and recording is the drivers' hot
    path, so values first count in a dict by whole microsecond and are folded into the histogram
    every `PENDING_VALUES_MAX` distinct values and before any read: a record costs a dict update."""

    HIGHEST_US = 3_600_000_000
    SIGNIFICANT_DIGITS = 3
    PENDING_VALUES_MAX = 4096  # distinct microsecond values held before folding into the histogram

    def __init__(self) -> None:
        self._hdr = HdrHistogram(1, self.HIGHEST_US, self.SIGNIFICANT_DIGITS)
        self._pending: dict[int, int] = {}  # whole microseconds -> messages, not yet in _hdr
        self.total = 0                      # messages recorded, folded or not

    def record(self, latency_s: float, count: int = 1) -> None:
        us = int(latency_s * 1e6)
        pending = self._pending
        pending[us] = pending.get(us, 0) + count
        self.total += count
        if len(pending) >= self.PENDING_VALUES_MAX:
            self._fold()

    def _fold(self) -> None:
        highest = self.HIGHEST_US
        for us, count in self._pending.items():
            self._hdr.record_value(min(max(us, 0), highest), count)  # out of range: clamped, kept
        self._pending.clear()

    def merge(self, other: LatencyHistogram) -> None:
        self._fold()
        other._fold()
        self._hdr.add(other._hdr)
        self.total += other.total

    def percentile_ms(self, q: float) -> float | None:
        """The q-th percentile (0 < q <= 100) in ms, to within 0.1%; None when empty."""
        if not self.total:
            return None
        self._fold()
        return round(self._hdr.get_value_at_percentile(q) / 1000.0, 3)

    def to_dict(self) -> dict:
        self._fold()
        return {"hdr": self._hdr.encode().decode("ascii"), "total": self.total}

    @classmethod
    def from_dict(cls, data: dict) -> LatencyHistogram:
        h = cls()
        h._hdr.add(HdrHistogram.decode(data["hdr"].encode("ascii")))
        h.total = data["total"]
        return h


# ------------------------------------------------------------------------------------------------
# Server CPU (psutil)


def process_cpu_s(pid: int) -> float:
    """user + system CPU seconds of one process (not its children's); 0.0 if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def descendants(pid: int) -> list[int]:
    """pid and all its live descendants (pid alone if it is gone)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        children = []
    return [pid] + [child.pid for child in children][:DESCENDANTS_MAX]


def listening_pid(port: int) -> int | None:
    """The pid of the process with a listening TCP socket on `port`, if this user can see it."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return conn.pid
    return None


def rss_bytes(pid: int) -> int:
    """Resident set size of one process in bytes (0 if gone)."""
    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


class ServerCpu:
    """CPU seconds of a server's processes (each root and its descendants), summed."""

    def __init__(self, root_pids: list[int]) -> None:
        self.root_pids = root_pids  # empty = unknown server (figures reported as None)

    def pids(self) -> list[int]:
        seen: list[int] = []
        for root in self.root_pids:
            seen.extend(p for p in descendants(root) if p not in seen)
        return seen

    def sample_s(self) -> float | None:
        if not self.root_pids:
            return None
        return sum(process_cpu_s(pid) for pid in self.pids())


# ------------------------------------------------------------------------------------------------
# The server under test


@dataclass
class Server:
    service_url: str
    admin_url: str
    cpu: ServerCpu
    started_here: bool = False
    token: str = field(default="", repr=False)   # secured server: the clients' token ("" = none)
    tls_trust_file: str = ""                     # secured server: the CA file for pulsar+ssl://


def add_server_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service-url", default=None,
                        help="a running broker (default: start a standalone in a temp dir)")
    parser.add_argument("--admin-url", default=None, help="its admin URL (default http://<host>:8080)")
    parser.add_argument("--server-pid", type=int, action="append", default=[],
                        help="process(es) whose CPU (with descendants) counts as the server's "
                             "(default: the one listening on the service port)")
    parser.add_argument("--bookies", type=int, default=1, help="bookies of a started standalone")


@contextlib.contextmanager
def server_from_args(args: argparse.Namespace, *, tls: bool = False, auth: str = "") -> Iterator[Server]:
    """The server to measure: the one given by --service-url, else a fresh standalone; with `tls`
    or `auth` ("token") a fresh secured one (perf.secure), measured through pulsar+ssl:// (tls)
    with a superuser token (auth)."""
    if tls or auth:
        with _secure_standalone(args, tls, auth) as server:
            yield server
        return
    if args.service_url:
        from urllib.parse import urlparse
        parsed = urlparse(args.service_url)
        admin = args.admin_url or f"http://{parsed.hostname}:8080"
        pids = list(args.server_pid)
        if not pids and parsed.hostname in ("127.0.0.1", "localhost") and parsed.port:
            pid = listening_pid(parsed.port)
            pids = [pid] if pid is not None else []
        yield Server(args.service_url, admin, ServerCpu(pids))
        return
    from launch.standalone import StandaloneProcess
    with StandaloneProcess.start(bookies=args.bookies) as sa:
        try:
            yield Server(sa.service_url, sa.admin_url, ServerCpu([sa.pid]), started_here=True)
        except StrataError:  # the log goes with the temp dir: show its end while it is there
            print(f"--- end of the standalone's log ---\n{sa.log_tail()}", file=sys.stderr)
            raise


@contextlib.contextmanager
def _secure_standalone(args: argparse.Namespace, tls: bool, auth: str) -> Iterator[Server]:
    import tempfile
    from pathlib import Path

    from common.net import free_port
    from launch.standalone import StandaloneProcess
    from perf.secure import SecureSetup

    with tempfile.TemporaryDirectory(prefix="strata-perf-secure-") as directory:
        setup = SecureSetup.create(Path(directory), tls_port=free_port(), auth=auth)
        with StandaloneProcess.start(bookies=args.bookies, env=setup.env) as sa:
            try:
                yield Server(setup.service_url if tls else sa.service_url, sa.admin_url, ServerCpu([sa.pid]),
                             started_here=True, token=setup.token,
                             tls_trust_file=str(setup.ca_file) if tls else "")
            except StrataError:
                print(f"--- end of the secured standalone's log ---\n{sa.log_tail()}", file=sys.stderr)
                raise


def create_partitioned_topic(admin_url: str, topic: str, partitions: int, token: str = "") -> None:
    """PUT /admin/v2/persistent/{tenant}/{ns}/{topic}/partitions with body N."""
    path = topic.split("://", 1)[1]
    admin = AdminClient(admin_url, credentials=Credentials.build(token=token), timeout_s=ADMIN_TIMEOUT_S)
    admin.call("PUT", f"/admin/v2/persistent/{path}/partitions", partitions)   # AdminError when refused


def default_topic(kind: str) -> str:
    return f"persistent://public/default/perf-{kind}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------
# Worker processes


@dataclass
class WorkerPool:
    """Spawned worker processes with a ready count, a common start signal and a result queue.

    target(index, kwargs, ready, start, results) must put exactly one item on `results`:
    ("ok", index, result dict) or ("error", index, text).
    """

    target: Callable
    kwargs_list: list[dict]
    ctx: multiprocessing.context.SpawnContext = field(default_factory=lambda: multiprocessing.get_context("spawn"))

    def __post_init__(self) -> None:
        n = len(self.kwargs_list)
        self.ready = self.ctx.Semaphore(0)
        self.start_event = self.ctx.Event()
        self.results = self.ctx.Queue(maxsize=n)
        self.procs = [self.ctx.Process(target=self.target, daemon=True,
                                       args=(i, kw, self.ready, self.start_event, self.results))
                      for i, kw in enumerate(self.kwargs_list)]

    def launch(self, timeout_s: float = WORKER_READY_TIMEOUT_S) -> None:
        """Start every worker and wait until each is set up (connected, producer created ...)."""
        for proc in self.procs:
            proc.start()
        deadline = time.monotonic() + timeout_s
        for _ in self.procs:
            while not self.ready.acquire(timeout=0.2):
                self._check_alive()
                if time.monotonic() > deadline:
                    self.terminate()
                    raise TimeoutExpired("workers not ready", timeout_s=timeout_s)

    def _check_alive(self) -> None:
        try:
            kind, index, payload = self.results.get_nowait()
        except queue.Empty:
            kind = None
        if kind == "error":
            self.terminate()
            raise StrataError("perf worker failed during set-up", worker=index, error=payload)
        if kind == "ok":  # a worker with nothing to wait for; put it back for collect()
            self.results.put((kind, index, payload))
        for proc in self.procs:
            if proc.exitcode not in (None, 0):
                self.terminate()
                raise StrataError("perf worker died", exitcode=proc.exitcode)

    def go(self) -> None:
        self.start_event.set()

    def collect(self, timeout_s: float) -> list[dict]:
        """One result per worker, in worker order; raises on a worker error or the deadline."""
        out: dict[int, dict] = {}
        deadline = time.monotonic() + timeout_s
        while len(out) < len(self.procs):
            try:
                kind, index, payload = self.results.get(timeout=0.5)
            except queue.Empty:
                if time.monotonic() > deadline:
                    self.terminate()
                    raise TimeoutExpired("perf workers did not finish", timeout_s=timeout_s) from None
                if any(p.exitcode not in (None, 0) for p in self.procs):
                    self.terminate()
                    raise StrataError("perf worker died", exitcodes=[p.exitcode for p in self.procs]) from None
                continue
            if kind == "error":
                self.terminate()
                raise StrataError("perf worker failed", worker=index, error=payload)
            out[index] = payload
        for proc in self.procs:
            proc.join(timeout=10)
        return [out[i] for i in range(len(self.procs))]

    def terminate(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(timeout=5)


def worker_main(run: Callable[[dict, Callable[[], None], Callable[[], None]], dict],
                index: int, kwargs: dict, ready, start_event, results) -> None:
    """Body of a worker process: run(kwargs, signal_ready, wait_start) -> result dict."""
    def signal_ready() -> None:
        ready.release()

    def wait_start() -> None:
        if not start_event.wait(timeout=WORKER_READY_TIMEOUT_S * 2):
            raise TimeoutExpired("no start signal")

    try:
        results.put(("ok", index, run(kwargs, signal_ready, wait_start)), timeout=30)
    except BaseException:  # reported to the parent, which fails the run with it
        results.put(("error", index, traceback.format_exc()), timeout=30)


# ------------------------------------------------------------------------------------------------
# The report


def merge_histograms(dicts: list[dict | None]) -> LatencyHistogram:
    h = LatencyHistogram()
    for d in dicts:
        if d:
            h.merge(LatencyHistogram.from_dict(d))
    return h


def throughput(results: list[dict], count_key: str) -> tuple[int, int, float]:
    """(messages, bytes, seconds) over all workers: first start to last end (same machine clock)."""
    messages = sum(r[count_key] for r in results)
    total_bytes = sum(r["bytes"] for r in results)
    seconds = max(r["end_s"] for r in results) - min(r["start_s"] for r in results)
    return messages, total_bytes, max(seconds, 1e-9)


def cpu_per_message_us(cpu_before_s: float | None, cpu_after_s: float | None, messages: int) -> float | None:
    if cpu_before_s is None or cpu_after_s is None or not messages:
        return None
    return round((cpu_after_s - cpu_before_s) * 1e6 / messages, 2)


def print_report(title: str, report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report))
        return
    print(title)
    for key, value in report.items():
        print(f"  {key:24s} {value}")


# ------------------------------------------------------------------------------------------------
# Options both commands take, and their topic


def add_load_args(parser: argparse.ArgumentParser, messages_default: int) -> None:
    parser.add_argument("--driver", choices=("native", "pulsar-client"), default="native",
                        help="native: Strata's protocol-level load generator (measures the broker); "
                             "pulsar-client: the official Python client (client-bound)")
    parser.add_argument("--messages", type=int, default=messages_default, help="messages in total")
    parser.add_argument("--size", type=int, default=KIB, help="payload bytes per message (default 1024)")
    parser.add_argument("--topic", default=None, help="topic (default: a fresh perf-* topic)")
    parser.add_argument("--partitions", type=int, default=0, help="create the topic with N partitions")
    parser.add_argument("--compression", choices=("none", "lz4", "zstd", "zlib"), default="none")
    parser.add_argument("--max-pending", type=int, default=10_000,
                        help="messages sent and not yet receipted, per producer process")
    parser.add_argument("--batch-delay-ms", type=float, default=1.0,
                        help="batching delay: at a fixed --rate, a batch gathers this long")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="give up after this long")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_server_args(parser)


def check_load_args(args: argparse.Namespace) -> str | None:
    """An error message for impossible options, else None."""
    if args.messages < 1 or args.size < 1:
        return "--messages and --size must be positive"
    if args.partitions < 0 or args.max_pending < 1:
        return "--partitions must be >= 0 and --max-pending >= 1"
    return None


def prepare_topic(server: Server, args: argparse.Namespace, kind: str) -> str:
    topic = args.topic or default_topic(kind)
    if "://" not in topic:
        topic = f"persistent://public/default/{topic}"
    if args.partitions:
        create_partitioned_topic(server.admin_url, topic, args.partitions, server.token)
    return topic


def split(total: int, parts: int) -> list[int]:
    """total as `parts` near-equal shares."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def producer_kwargs(args: argparse.Namespace, server: Server, topic: str, processes: int,
                    rate: float | None) -> list[dict]:
    return [{"service_url": server.service_url, "topic": topic, "messages": share, "size": args.size,
             "rate": (rate / processes) if rate else None, "max_pending": args.max_pending,
             "compression": args.compression, "batch_delay_ms": args.batch_delay_ms,
             "token": server.token, "tls_trust_file": server.tls_trust_file}
            for share in split(args.messages, processes) if share]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def install_sigterm_cleanup() -> None:
    """SIGTERM acts like Ctrl-C, so the started standalone and the workers are stopped on the way out."""
    signal.signal(signal.SIGTERM, _interrupt)
