"""The processes one `strata standalone` runs beside its in-process broker: N bookies and the
embedded S3 server (SeaweedFS), with the ports they keep across restarts.

    children = StandaloneChildren(data_dir, config, bookies=3, config_path=None, bookie_env={}, embed_s3=True)
    children.launch()          # S3 starts while the bookies do
    children.wait_bookies()    # bounded by standalone_bookie_start_timeout_ms
    children.wait_s3()
    ...                        # the broker serves
    children.stop()            # S3 and bookies stop together, bounded by standalone_bookie_stop_timeout_ms

Each bookie is launch.bookie.BookieProcess: `strata bookie` with its data under `D/bookie-<i>`,
its log `D/bookie-<i>/bookie.log`, the same settings file and environment as the standalone
(plus `bookie_env`, the `--secure` settings, and STRATA_BOOKIE_METRICS_PORT), listening on
`bookie_bind_host`. They share the standalone's process group (a Ctrl-C in its terminal reaches
them, a benchmark counts them by session) and its working directory (relative paths in the
settings file mean what they mean to the standalone), and get SIGKILL if it dies.

What must hold:
- Ports are chosen once and kept in `D/standalone.json` (`bookie_ports`, `bookie_metrics_ports`,
  `s3_ports`): ledger metadata names bookies by address, so a restart must bring each bookie
  back at the same address to read old ledgers. New ports avoid the broker's ports, which are
  not bound yet when the bookies start.
- A start error is one line for the user's terminal: `a bookie exited during start-up (port=...,
  reason=<its last log line>)`, never a log dump.
- stop() stops everything that started, whatever failed before, within the stop bounds.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Set
from pathlib import Path
from typing import Any

from common.config import Config
from common.net import free_port
from launch.bookie import BookieProcess
from launch.process import stop_all, wait_all_ready
from launch.seaweed import EmbeddedS3, EmbeddedS3Ports, load_or_create_credentials

STATE_FILE = "standalone.json"


def read_state(data_dir: Path) -> dict[str, Any]:
    """The ports recorded for this data dir (`D/standalone.json`), {} before the first start."""
    state_path = data_dir / STATE_FILE
    return json.loads(state_path.read_text()) if state_path.exists() else {}


def bookie_ports(data_dir: Path, count: int, avoid: Set[int] = frozenset(), host: str = "127.0.0.1",
                 key: str = "bookie_ports") -> list[int]:
    """The bookie ports recorded for this data dir under `key` (`bookie_metrics_ports`: their
    /metrics HTTP ports), extended with free ones if needed.

    `avoid` holds the broker and admin ports: they are not bound yet when bookies start, and the
    OS readily hands a just-released port (the one a caller probed to pick them) out again."""
    state = read_state(data_dir)
    ports = list(state.get(key, []))
    while len(ports) < count:
        port = free_port(host)
        if port not in ports and port not in avoid:
            ports.append(port)
    state[key] = ports
    (data_dir / STATE_FILE).write_text(json.dumps(state))
    return ports[:count]


def s3_ports(data_dir: Path, avoid: Set[int], host: str = "127.0.0.1") -> EmbeddedS3Ports:
    """The embedded S3 ports recorded for this data dir, picked (avoiding `avoid`) the first time."""
    state = read_state(data_dir)
    if "s3_ports" in state:
        return EmbeddedS3Ports.from_json(state["s3_ports"])
    ports = EmbeddedS3Ports.pick(host, frozenset(avoid))
    state["s3_ports"] = ports.to_json()
    (data_dir / STATE_FILE).write_text(json.dumps(state))
    return ports


def embedded_s3(data_dir: Path, config: Config, avoid: Set[int]) -> EmbeddedS3 | None:
    """The embedded SeaweedFS for this data dir (not started), or None when an external S3
    endpoint is configured. Its credentials are made once and kept in `D/s3/credentials.json`."""
    if config.offload_s3_endpoint:
        return None
    s3_dir = data_dir / "s3"
    credentials = load_or_create_credentials(s3_dir / "credentials.json")
    return EmbeddedS3(s3_dir / "data", credentials, bucket=config.offload_s3_bucket,
                      ports=s3_ports(data_dir, avoid), region=config.offload_s3_region,
                      log_path=s3_dir / "weed.log")


class StandaloneChildren:
    """The bookies and the embedded S3 server of one standalone in `data_dir`.

    ports / metrics_ports: each bookie's gRPC and /metrics port, index by index.
    s3: the embedded server, None with `embed_s3=False` or an external endpoint configured.
    bookies: the bookie processes launched so far.
    """

    def __init__(self, data_dir: Path, config: Config, *, bookies: int, config_path: str | None,
                 bookie_env: dict[str, str], embed_s3: bool) -> None:
        self.data_dir = data_dir
        self.config = config
        self.metadata_url = f"sqlite:///{data_dir / 'metadata.db'}"
        self.config_path = config_path
        self.bookie_env = dict(bookie_env)
        broker_ports = {config.broker_port, config.broker_admin_port, config.broker_tls_port,
                        config.broker_admin_tls_port}
        host = config.bookie_bind_host
        self.ports = bookie_ports(data_dir, bookies, broker_ports, host)
        self.metrics_ports = bookie_ports(data_dir, bookies, broker_ports | set(self.ports), host,
                                          key="bookie_metrics_ports")
        self.s3 = embedded_s3(data_dir, config, broker_ports | set(self.ports)) if embed_s3 else None
        self.bookies: list[BookieProcess] = []

    def launch(self) -> None:
        """Spawn the S3 server and every bookie, without waiting for them to serve."""
        if self.s3 is not None:
            self.s3.launch()  # starts while the bookies do
        for index, port in enumerate(self.ports):
            bookie_dir = self.data_dir / f"bookie-{index}"
            env = {**self.bookie_env, "STRATA_BOOKIE_METRICS_PORT": str(self.metrics_ports[index])}
            bookie = BookieProcess(bookie_dir, port, name=f"bookie-{index}", host=None, metadata_url=self.metadata_url,
                                   config_path=self.config_path, log_path=bookie_dir / "bookie.log", env=env,
                                   cwd=None, own_session=False, on_parent_death=signal.SIGKILL,
                                   brief_errors=True)
            self.bookies.append(bookie)
            bookie.spawn()

    def wait_bookies(self) -> None:
        """Wait for every bookie's ready line within standalone_bookie_start_timeout_ms."""
        wait_all_ready(self.bookies, self.config.standalone_bookie_start_timeout_ms / 1000)

    def wait_s3(self) -> None:
        """Wait for the S3 server to answer and its bucket to exist (nothing without one)."""
        if self.s3 is not None:
            self.s3.wait_ready()

    def stop(self) -> None:
        """SIGTERM to S3 and every bookie at once; each wait is bounded, SIGKILL after it."""
        if self.s3 is not None:
            self.s3.terminate()  # it stops (2-3 s) while the bookies do
        stop_all(self.bookies, self.config.standalone_bookie_stop_timeout_ms / 1000)
        if self.s3 is not None:
            self.s3.stop()
