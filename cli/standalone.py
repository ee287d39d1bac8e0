"""`strata standalone [--data-dir D] [--port P] [--admin-port A] [--bookies N]`: one machine.

Starts, in order: the SQLite metadata store at `D/metadata.db`; N bookie subprocesses
(`strata bookie`, data under `D/bookie-<i>`); then the broker in this process (uvloop). Prints
`service URL pulsar://...` and `admin URL http://...` once everything serves. SIGINT/SIGTERM stops
the broker first (cursors flushed), then the bookies.

Bookies listen on `bookie_bind_host` (the same settings file and environment reach them), the
broker on `broker_bind_host` / `broker_admin_bind_host`; waits on the bookies are bounded by
`standalone_bookie_start_timeout_ms` and `standalone_bookie_stop_timeout_ms`.

Quorums: one bookie → E=Qw=Qa=1 (like `pulsar standalone`); three → 3/2/2; N → N/min(N,2)/min(N,2).

Bookie ports are chosen once and kept in `D/standalone.json`: ledger metadata names bookies by
address, so a restart must bring each bookie back at the same address to read old ledgers. The
bookies get PR_SET_PDEATHSIG (Linux), so a kill -9 of the standalone takes them down too and a
restart finds their ports free.

What must hold: a restart over the same data dir keeps every topic, message and subscription
position (all state is under D).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Set
from pathlib import Path
from typing import Any

import uvloop

from cli.broker_cmd import serve_until_signal
from common.config import load_config
from common.errors import StrataError, TimeoutExpired
from common.invariant import present
from common.net import free_port

log = logging.getLogger("strata.standalone")

PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata standalone", description="metadata + bookies + broker on one machine")
    parser.add_argument("--data-dir", default="./data", help="where everything is stored (default ./data)")
    parser.add_argument("--port", type=int, default=None, help="binary protocol port (default 6650)")
    parser.add_argument("--admin-port", type=int, default=None, help="admin HTTP port (default 8080)")
    parser.add_argument("--bookies", type=int, default=1, help="bookie processes (default 1)")
    parser.add_argument("--config", default=None, help="TOML file of settings")
    return parser.parse_args(argv)


def quorums(bookies: int) -> tuple[int, int, int]:
    """(E, Qw, Qa) for a standalone with this many bookies."""
    if bookies == 1:
        return 1, 1, 1
    q = min(bookies, 2)
    return bookies, q, q


def bookie_ports(data_dir: Path, count: int, avoid: Set[int] = frozenset(), host: str = "127.0.0.1") -> list[int]:
    """The bookie ports recorded for this data dir, extended with free ones if needed.

    `avoid` holds the broker and admin ports: they are not bound yet when bookies start, and the
    OS readily hands a just-released port (the one a caller probed to pick them) out again."""
    state_path = data_dir / "standalone.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    ports = list(state.get("bookie_ports", []))
    while len(ports) < count:
        port = free_port(host)
        if port not in ports and port not in avoid:
            ports.append(port)
    state["bookie_ports"] = ports
    state_path.write_text(json.dumps(state))
    return ports[:count]


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class BookieProcess:
    """One bookie subprocess; a thread drains its stdout and notes the `bookie ready` line."""

    def __init__(self, data_dir: Path, index: int, port: int, metadata_url: str, config_path: str | None) -> None:
        bookie_dir = data_dir / f"bookie-{index}"
        bookie_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "cli.main", "bookie", "--data-dir", str(bookie_dir),
               "--port", str(port), "--metadata-url", metadata_url]
        if config_path:
            cmd += ["--config", config_path]
        self.port = port
        self.ready = threading.Event()
        with open(bookie_dir / "bookie.log", "ab") as log_file:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in present(self.proc.stdout, "stdout is a pipe"):
            if line.startswith(b"bookie ready"):
                self.ready.set()


def wait_ready(bookies: list[BookieProcess], deadline_s: float) -> None:
    """Wait for every bookie's ready line; raise if one exits or time runs out."""
    for bookie in bookies:
        while not bookie.ready.wait(0.1):
            if bookie.proc.poll() is not None:
                raise StrataError("a bookie exited during start-up", port=bookie.port,
                                  returncode=bookie.proc.returncode)
            if time.monotonic() > deadline_s:
                raise TimeoutExpired("bookie did not become ready", port=bookie.port)


def stop_bookies(bookies: list[BookieProcess], timeout_s: float) -> None:
    """SIGTERM every bookie, wait up to `timeout_s` in all, then SIGKILL those still running."""
    procs = [b.proc for b in bookies]
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.bookies < 1:
        print("strata standalone: --bookies must be at least 1", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    metadata_url = f"sqlite:///{data_dir / 'metadata.db'}"
    e, qw, qa = quorums(args.bookies)
    overrides: dict[str, Any] = {"ledger_ensemble_size": e, "ledger_write_quorum": qw, "ledger_ack_quorum": qa}
    if args.port is not None:
        overrides["broker_port"] = args.port
    if args.admin_port is not None:
        overrides["broker_admin_port"] = args.admin_port
    try:
        config = load_config(args.config, **overrides)
    except StrataError as exc:
        print(f"strata standalone: {exc}", file=sys.stderr)
        return 2
    ports = bookie_ports(data_dir, args.bookies, {config.broker_port, config.broker_admin_port},
                         config.bookie_bind_host)
    bookies: list[BookieProcess] = []
    signal.signal(signal.SIGTERM, _interrupt)  # before the loop runs, SIGTERM acts like Ctrl-C
    try:
        for index, port in enumerate(ports):
            bookies.append(BookieProcess(data_dir, index, port, metadata_url, args.config))
        wait_ready(bookies, time.monotonic() + config.standalone_bookie_start_timeout_ms / 1000)
        log.info("%d bookie(s) listening on %s", len(ports), ports)
        from broker.server import Broker
        broker = Broker(config, metadata_url)
        from common.gc_tuning import tune_for_server
        tune_for_server()
        uvloop.run(serve_until_signal(broker))
    except KeyboardInterrupt:
        pass
    except StrataError as exc:
        print(f"strata standalone: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_bookies(bookies, config.standalone_bookie_stop_timeout_ms / 1000)
    return 0
