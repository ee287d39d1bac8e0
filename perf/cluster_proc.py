"""A real local cluster of separate processes: PostgreSQL, bookies, brokers (and SeaweedFS).

Used by `strata cluster up`, `strata perf failover` and, through tests/support/cluster_proc.py,
by the cluster tests:

    with LocalCluster.start(brokers=2, bookies=3, lease_ms=3000) as cluster:
        cluster.service_url                 # pulsar://127.0.0.1:p1,127.0.0.1:p2
        cluster.metadata_url                # postgresql://... (perf.pg_server unless given)
        broker = cluster.brokers[0]         # .service_url .admin_url .broker_id .pid
        broker.kill9(); broker.restart()    # crash, then back at the same ports
        broker.freeze(); broker.thaw()      # SIGSTOP / SIGCONT
        broker.stop()                       # SIGTERM, bounded wait (SIGKILL after it)
        cluster.bookies[1].kill9()          # bookies: the same methods, .address
        cluster.postgres.stop(); cluster.postgres.start()   # the metadata database restarts

What must hold:
- Every node is a `python -m cli.main broker|bookie` subprocess in its own process group,
  on free loopback ports chosen once (a restart comes back at the same ports and data dir).
- Every wait is bounded: start-up waits for each node's ready line (`admin URL ...` for a
  broker, `bookie ready ...` for a bookie) and raises with the node's log tail otherwise; a stop
  sends SIGTERM and SIGKILLs the group after the bound.
- Nodes die with the process that started them (PR_SET_PDEATHSIG, SIGKILL) unless the cluster is
  `detached` (what `strata cluster up` uses: the nodes outlive the command and `down` stops them
  by the pids in `<data dir>/cluster.json`). A cluster still running at interpreter exit is
  stopped by an atexit hook, PostgreSQL included.
- PostgreSQL (perf.pg_server, run as an unprivileged user when we are root) keeps its files
  under the data dir when that user can reach it, else in the system temp dir; a cluster that
  is not detached removes them on stop.
- Settings reach the nodes through STRATA_* environment variables: quorums E/Qw/Qa, the
  metadata session lease, loopback bind hosts, the S3 cold tier when `s3=True`.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common.errors import StrataError, TimeoutExpired
from common.invariant import present
from common.net import free_port
from offload.embedded_s3 import EmbeddedS3, EmbeddedS3Ports, load_or_create_credentials

PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.05
HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
REPO_ROOT = Path(__file__).resolve().parents[1]
PG_TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _die_with_parent() -> None:
    """In the child: SIGKILL when the starting thread dies (a frozen node must die too)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group `pid` leads; False when it is gone."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_pid(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGCONT+SIGTERM to the group of a process we did not start (no Popen), wait up to
    `timeout_s` for it to exit, then SIGKILL the group. True when it stopped on SIGTERM."""
    signal_group(pid, signal.SIGCONT)
    if not signal_group(pid, signal.SIGTERM):
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(POLL_INTERVAL_S)
    signal_group(pid, signal.SIGKILL)
    return False


class NodeProcess(abc.ABC):
    """One broker or bookie subprocess. proc: the running process, None when stopped."""

    kind = "node"

    def __init__(self, name: str, data_dir: Path, metadata_url: str, env: dict[str, str],
                 detached: bool = False) -> None:
        self.name = name
        self.data_dir = Path(data_dir).resolve()
        self.metadata_url = metadata_url
        self.env = dict(env)
        self.detached = detached
        self.proc: subprocess.Popen[bytes] | None = None
        self.frozen = False
        self.log_path = self.data_dir / f"{self.kind}.log"
        self._log_offset = 0

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The node's command line."""

    @property
    @abc.abstractmethod
    def ready_marker(self) -> str:
        """The log line that says the node is ready."""

    @property
    def pid(self) -> int:
        return present(self.proc, "the process was started").pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        """Spawn the process (its own process group) without waiting for it to serve."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                preexec_fn=None if self.detached else _die_with_parent)
        self.frozen = False

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait (bounded) for this launch's ready line; kill the node and raise otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            proc = present(self.proc, "the process was launched")
            if self.ready_marker in self._log_since_launch():
                return
            if proc.poll() is not None:
                raise StrataError(f"{self.name} exited during start-up", returncode=proc.returncode,
                                  log=self.log_tail())
            time.sleep(POLL_INTERVAL_S)
        self.kill9()
        raise TimeoutExpired(f"{self.name} not ready", timeout_s=timeout_s, log=self.log_tail())

    def _log_since_launch(self) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill9(self) -> None:
        """Crash: SIGKILL the process group, no flush, no deregistration."""
        if self.proc is None:
            return
        signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None
        self.frozen = False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Clean stop: SIGTERM (after SIGCONT if frozen) and wait up to `timeout_s`; a node
        still running then is SIGKILLed and TimeoutExpired raised. Returns the exit code."""
        if self.proc is None:
            return 0
        self.signal_term()
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise TimeoutExpired(f"{self.name} did not stop on SIGTERM", timeout_s=timeout_s,
                                 log=self.log_tail()) from None
        signal_group(self.proc.pid, signal.SIGKILL)   # anything it left in its group
        self.proc = None
        return code

    def signal_term(self) -> None:
        """SIGTERM without waiting (thawing a frozen node first, or the signal stays pending)."""
        if self.alive():
            self.thaw()
            present(self.proc, "alive").send_signal(signal.SIGTERM)

    def freeze(self) -> None:
        """SIGSTOP the group: the node stops dead, its sockets stay open."""
        if self.alive() and signal_group(self.pid, signal.SIGSTOP):
            self.frozen = True

    def thaw(self) -> None:
        """SIGCONT the group."""
        if self.proc is not None and self.frozen:
            signal_group(self.proc.pid, signal.SIGCONT)
        self.frozen = False

    def restart(self, *, crash: bool = False, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Stop (cleanly, or kill -9 with crash=True) and start again at the same ports and dir."""
        if crash:
            self.kill9()
        else:
            self.stop()
        self.launch()
        self.wait_ready(timeout_s)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "pid": self.proc.pid if self.proc else None,
                "data_dir": str(self.data_dir), "log": str(self.log_path)}


class BrokerNode(NodeProcess):
    """`strata broker` at HOST:port (Pulsar protocol) and HOST:admin_port (admin HTTP)."""

    kind = "broker"

    def __init__(self, name: str, data_dir: Path, metadata_url: str, env: dict[str, str],
                 port: int, admin_port: int, detached: bool = False) -> None:
        super().__init__(name, data_dir, metadata_url, env, detached)
        self.port = port
        self.admin_port = admin_port

    @property
    def service_url(self) -> str:
        return f"pulsar://{HOST}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    @property
    def broker_id(self) -> str:
        """host:pulsarPort, the address its binary protocol listens on."""
        return f"{HOST}:{self.port}"

    @property
    def web_id(self) -> str:
        """host:webPort, the name under /loadbalance/brokers and in `brokers list`."""
        return f"{HOST}:{self.admin_port}"

    @property
    def ready_marker(self) -> str:
        return f"admin URL {self.admin_url}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "cli.main", "broker", "--metadata-url", self.metadata_url,
                "--port", str(self.port), "--admin-port", str(self.admin_port),
                "--advertised-host", HOST]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "port": self.port, "admin_port": self.admin_port,
                "service_url": self.service_url, "admin_url": self.admin_url}


class BookieNode(NodeProcess):
    """`strata bookie` at HOST:port, registered in the metadata store."""

    kind = "bookie"

    def __init__(self, name: str, data_dir: Path, metadata_url: str, env: dict[str, str],
                 port: int, detached: bool = False) -> None:
        super().__init__(name, data_dir, metadata_url, env, detached)
        self.port = port

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def ready_marker(self) -> str:
        return f"bookie ready {self.address}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "cli.main", "bookie", "--data-dir", str(self.data_dir / "data"),
                "--port", str(self.port), "--host", HOST, "--metadata-url", self.metadata_url]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "port": self.port, "address": self.address}


_LIVE: list[LocalCluster] = []


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_LIVE):
        if not cluster.detached:
            cluster.stop()


def wait_all_ready(nodes: list[NodeProcess], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait for every node's ready line within one shared bound."""
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        node.wait_ready(max(0.5, deadline - time.monotonic()))


def stop_all(nodes: list[NodeProcess], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM every node at once, wait within one shared bound, SIGKILL the rest. Never raises."""
    for node in nodes:
        node.signal_term()
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        try:
            node.stop(max(0.1, deadline - time.monotonic()))
        except (StrataError, subprocess.TimeoutExpired):
            pass


def _pick_ports(count: int, taken: set[int]) -> list[int]:
    """`count` ports free on loopback now, none in `taken` (which grows by them)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(HOST)
        if port not in taken:
            taken.add(port)
            ports.append(port)
    return ports


def attach_postgres(recorded: dict[str, Any]) -> Any:
    """The stopped PostgreSQL server a cluster's state records (root, data_dir, port), ready to
    start() again without initdb. Built field by field as PostgresServer.__init__ would, since
    that creates a new temp dir; as root, the server runs as the user owning its data dir."""
    import pwd

    from perf.pg_server import PostgresServer, find_bin_dir

    server = PostgresServer.__new__(PostgresServer)
    server.bin_dir = find_bin_dir()
    owner = os.stat(recorded["data_dir"]).st_uid
    server.user = pwd.getpwuid(owner).pw_name if os.geteuid() == 0 and owner != 0 else None
    server.port = int(recorded["port"])
    server.settings = {}
    server.root = recorded["root"]
    server.data_dir = recorded["data_dir"]
    server.socket_dir = os.path.join(server.root, "sock")
    server.log_path = os.path.join(server.root, "server.log")
    server._initialised = True
    server.running = False
    return server


def _others_can_enter(path: Path) -> bool:
    """Can PostgreSQL, run as another user when we are root, reach a dir inside `path`?
    (pytest's temp dirs are 0700: then the server goes to the system temp dir.)"""
    if os.geteuid() != 0:
        return True
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


class LocalCluster:
    """PostgreSQL (unless a metadata URL is given), N bookies, M brokers, optional SeaweedFS.

    owns_dir: data_dir is a temp dir this object created and removes on stop.
    postgres: the perf.pg_server.PostgresServer it started, None with an external URL.
    s3: the offload.embedded_s3.EmbeddedS3 it started (s3=True), else None.
    """

    def __init__(self, data_dir: Path, owns_dir: bool, *, e: int, qw: int, qa: int,
                 lease_ms: int | None, env: dict[str, str] | None, metadata_url: str | None,
                 detached: bool) -> None:
        if not 1 <= qa <= qw <= e:
            raise StrataError("quorums must satisfy 1 <= Qa <= Qw <= E", e=e, qw=qw, qa=qa)
        self.data_dir = Path(data_dir).resolve()
        self.owns_dir = owns_dir
        self.e, self.qw, self.qa = e, qw, qa
        self.lease_ms = lease_ms
        self.user_env = dict(env or {})
        self.detached = detached
        self.postgres: Any = None
        self.s3: EmbeddedS3 | None = None
        self._metadata_url = metadata_url
        self.brokers: list[BrokerNode] = []
        self.bookies: list[BookieNode] = []
        self._ports: set[int] = set()

    @property
    def metadata_url(self) -> str:
        return present(self._metadata_url, "the metadata store was started")

    @property
    def service_url(self) -> str:
        """The multi-host URL naming every broker: pulsar://h:p1,h:p2."""
        return "pulsar://" + ",".join(b.broker_id for b in self.brokers)

    @property
    def admin_urls(self) -> list[str]:
        return [b.admin_url for b in self.brokers]

    @classmethod
    def start(cls, data_dir: str | Path | None = None, brokers: int = 2, bookies: int = 3,
              e: int = 3, qw: int = 2, qa: int = 2, lease_ms: int | None = None,
              env: dict[str, str] | None = None, metadata_url: str | None = None,
              s3: bool = False, detached: bool = False) -> LocalCluster:
        """Start everything and wait (bounded) until every node serves; on failure stop what
        started and raise."""
        if bookies < e:
            raise StrataError("a cluster needs at least E bookies", bookies=bookies, e=e)
        if data_dir is None:
            root = Path(tempfile.mkdtemp(prefix="strata-cluster-"))
            os.chmod(root, 0o755)   # PostgreSQL runs as another user when we are root
            cluster = cls(root, True, e=e, qw=qw, qa=qa, lease_ms=lease_ms, env=env,
                          metadata_url=metadata_url, detached=detached)
        else:
            cluster = cls(Path(data_dir), False, e=e, qw=qw, qa=qa, lease_ms=lease_ms, env=env,
                          metadata_url=metadata_url, detached=detached)
        _LIVE.append(cluster)
        try:
            cluster._start_all(brokers, bookies, s3)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start_all(self, brokers: int, bookies: int, s3: bool) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._metadata_url is None:
            self._start_postgres()
        if s3:
            self._launch_s3()
        env = self.node_env()
        for i, port in enumerate(_pick_ports(bookies, self._ports)):
            self.bookies.append(BookieNode(f"bookie-{i + 1}", self.data_dir / f"bookie-{i + 1}",
                                           self.metadata_url, env, port, self.detached))
        ports = _pick_ports(2 * brokers, self._ports)
        for i in range(brokers):
            self.brokers.append(BrokerNode(f"broker-{i + 1}", self.data_dir / f"broker-{i + 1}",
                                           self.metadata_url, env, ports[2 * i], ports[2 * i + 1],
                                           self.detached))
        self._launch_all()

    def _launch_all(self) -> None:
        """Bookies (and S3) first, then brokers; each group waited for within one bound."""
        for bookie in self.bookies:
            bookie.launch()
        if self.s3 is not None:
            self.s3.wait_ready()
        wait_all_ready(list(self.bookies))
        for broker in self.brokers:
            broker.launch()
        wait_all_ready(list(self.brokers))
        self.write_state()

    @classmethod
    def resume(cls, data_dir: str | Path, detached: bool = False) -> LocalCluster:
        """Start again the stopped cluster recorded in `<data_dir>/cluster.json`: the same
        ports, data dirs, PostgreSQL server and S3 data, so every topic and message is back."""
        state = json.loads((Path(data_dir) / STATE_FILE).read_text())
        e, qw, qa = state["quorums"]
        cluster = cls(Path(data_dir), False, e=e, qw=qw, qa=qa, lease_ms=state["lease_ms"], env=None,
                      metadata_url=state["metadata_url"], detached=detached)
        _LIVE.append(cluster)
        try:
            cluster._resume_all(state)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _resume_all(self, state: dict[str, Any]) -> None:
        if state.get("postgres"):
            self.postgres = attach_postgres(state["postgres"])
            self.postgres.start()
        if state.get("s3"):
            ports = state["s3"].get("ports")
            self._launch_s3(EmbeddedS3Ports.from_json(ports) if ports else None)
        env = self.node_env()
        self.bookies = [BookieNode(b["name"], Path(b["data_dir"]), self.metadata_url, env, b["port"],
                                   self.detached) for b in state["bookies"]]
        self.brokers = [BrokerNode(b["name"], Path(b["data_dir"]), self.metadata_url, env, b["port"],
                                   b["admin_port"], self.detached) for b in state["brokers"]]
        self._launch_all()

    def _start_postgres(self) -> None:
        from perf.pg_server import PostgresServer

        settings = {} if self.detached else dict(PG_TEST_SETTINGS)
        base_dir = str(self.data_dir) if _others_can_enter(self.data_dir) else None
        self.postgres = PostgresServer(settings=settings, base_dir=base_dir)
        self.postgres.start()
        self._ports.add(self.postgres.port)
        self._metadata_url = self.postgres.url()

    def _launch_s3(self, ports: EmbeddedS3Ports | None = None) -> None:
        s3_dir = self.data_dir / "s3"
        credentials = load_or_create_credentials(s3_dir / "credentials.json")
        ports = ports or EmbeddedS3Ports.pick(HOST, frozenset(self._ports))
        self._ports.update(ports.all_ports())
        server_class = DetachedS3 if self.detached else EmbeddedS3
        self.s3 = server_class(s3_dir / "data", credentials, bucket="strata-offload", ports=ports,
                               log_path=s3_dir / "weed.log")
        self.s3.launch()

    def node_env(self) -> dict[str, str]:
        """The STRATA_* settings (and S3 credentials) every node gets."""
        env = {"STRATA_LEDGER_ENSEMBLE_SIZE": str(self.e), "STRATA_LEDGER_WRITE_QUORUM": str(self.qw),
               "STRATA_LEDGER_ACK_QUORUM": str(self.qa), "STRATA_BOOKIE_BIND_HOST": HOST,
               "STRATA_BROKER_BIND_HOST": HOST, "STRATA_BROKER_ADMIN_BIND_HOST": HOST,
               "STRATA_BROKER_ADVERTISED_HOST": HOST}
        if self.lease_ms is not None:
            env["STRATA_METADATA_SESSION_LEASE_MS"] = str(self.lease_ms)
        if self.s3 is not None:
            env.update(self.s3.credentials.env())
            env.update({"STRATA_OFFLOAD_DRIVER": "s3", "STRATA_OFFLOAD_S3_ENDPOINT": self.s3.endpoint,
                        "STRATA_OFFLOAD_S3_BUCKET": self.s3.bucket})
        return {**env, **self.user_env}

    def state(self) -> dict[str, Any]:
        """What `strata cluster status|down` need to find every process again."""
        pg = self.postgres
        return {
            "service_url": self.service_url, "admin_urls": self.admin_urls,
            "metadata_url": self.metadata_url, "quorums": [self.e, self.qw, self.qa],
            "lease_ms": self.lease_ms,
            "postgres": None if pg is None else {"root": pg.root, "data_dir": pg.data_dir, "port": pg.port},
            "s3": None if self.s3 is None else {"endpoint": self.s3.endpoint, "bucket": self.s3.bucket,
                                                "pid": present(self.s3.proc, "started").pid,
                                                "ports": self.s3.ports.to_json()},
            "brokers": [b.describe() for b in self.brokers],
            "bookies": [b.describe() for b in self.bookies],
        }

    def write_state(self) -> None:
        (self.data_dir / STATE_FILE).write_text(json.dumps(self.state(), indent=2))

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Brokers first (they release ownership), then bookies, S3, PostgreSQL; every wait
        bounded; an owned temp dir is removed. Never raises."""
        stop_all(list(self.brokers), timeout_s)
        stop_all(list(self.bookies), timeout_s)
        if self.s3 is not None:
            with contextlib.suppress(Exception):
                self.s3.stop()
        if self.postgres is not None:
            with contextlib.suppress(Exception):
                if not self.detached:
                    self.postgres.cleanup()
                else:
                    self.postgres.stop()
        if self in _LIVE:
            _LIVE.remove(self)
        if self.owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class DetachedS3(EmbeddedS3):
    """SeaweedFS that outlives the command that started it (`strata cluster up`): its own
    session, no parent-death signal; `strata cluster down` stops it by pid."""

    def launch(self) -> None:
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._deadline = time.monotonic() + self.start_timeout_s
        env = {**os.environ, **self.credentials.env()}
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(self.command(), stdout=log_file, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, cwd=self.data_dir,
                                         start_new_session=True)
