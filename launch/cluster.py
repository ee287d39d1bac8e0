"""A real local cluster of separate processes: PostgreSQL, bookies, brokers (and SeaweedFS).

Used by `strata cluster up`, `strata perf failover` and, through tests/support/cluster_proc.py,
by the cluster tests. The nodes are launch.broker.BrokerProcess and launch.bookie.BookieProcess:

    with LocalCluster.start(brokers=2, bookies=3, lease_ms=3000) as cluster:
        cluster.service_url                 # pulsar://127.0.0.1:p1,127.0.0.1:p2
        cluster.kafka_bootstrap             # 127.0.0.1:k1,127.0.0.1:k2 (every broker serves Kafka)
        cluster.metadata_url                # postgresql://... (launch.postgres unless given)
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
- PostgreSQL (launch.postgres, run as an unprivileged user when we are root) keeps its files
  under the data dir when that user can reach it, else in the system temp dir; a cluster that
  is not detached removes them on stop.
- `<data dir>/cluster.json` records, per node, its name, kind, pid, node directory (`data_dir`:
  its log, and a bookie's data under `data`), log and ports; `resume` rebuilds the nodes from it.
- Settings reach the nodes through STRATA_* environment variables: quorums E/Qw/Qa, the
  metadata session lease, loopback bind hosts, the S3 cold tier when `s3=True`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from common.errors import StrataError
from common.invariant import present
from common.net import free_port
from launch.bookie import BookieProcess
from launch.broker import BrokerProcess
from launch.postgres import PostgresServer
from launch.process import STOP_TIMEOUT_S, NodeProcess, stop_all, wait_all_ready
from launch.seaweed import EmbeddedS3, EmbeddedS3Ports, load_or_create_credentials

HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
PG_TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


_LIVE: list[LocalCluster] = []


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_LIVE):
        if not cluster.detached:
            cluster.stop()


def pick_ports(count: int, taken: set[int]) -> list[int]:
    """`count` ports free on loopback now, none in `taken` (which grows by them)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(HOST)
        if port not in taken:
            taken.add(port)
            ports.append(port)
    return ports


def _record(node: NodeProcess) -> dict[str, Any]:
    """What cluster.json keeps of every node; `data_dir` is the node's directory (where its log is)."""
    return {"name": node.name, "kind": node.kind, "pid": node.proc.pid if node.proc else None,
            "data_dir": str(node.log_path.parent), "log": str(node.log_path)}


def others_can_enter(path: Path) -> bool:
    """Can PostgreSQL, run as another user when we are root, reach a dir inside `path`?
    (pytest's temp dirs are 0700: then the server goes to the system temp dir.)"""
    if os.geteuid() != 0:
        return True
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


class LocalCluster:
    """PostgreSQL (unless a metadata URL is given), N bookies, M brokers, optional SeaweedFS.

    owns_dir: data_dir is a temp dir this object created and removes on stop.
    postgres: the PostgresServer it started, None with an external URL.
    s3: the EmbeddedS3 it started (s3=True), else None.
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
        self.postgres: PostgresServer | None = None
        self.s3: EmbeddedS3 | None = None
        self._metadata_url = metadata_url
        self.brokers: list[BrokerProcess] = []
        self.bookies: list[BookieProcess] = []
        self._ports: set[int] = set()

    @property
    def metadata_url(self) -> str:
        return present(self._metadata_url, "the metadata store was started")

    @property
    def service_url(self) -> str:
        """The multi-host URL naming every broker: pulsar://h:p1,h:p2."""
        return "pulsar://" + ",".join(b.broker_id for b in self.brokers)

    @property
    def kafka_bootstrap(self) -> str:
        """Every broker's Kafka listener, comma-separated (Kafka clients' bootstrap.servers)."""
        return ",".join(b.kafka_bootstrap for b in self.brokers)

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
        for i, port in enumerate(pick_ports(bookies, self._ports)):
            self.bookies.append(self._bookie(f"bookie-{i + 1}", self.data_dir / f"bookie-{i + 1}", port, env))
        ports = pick_ports(3 * brokers, self._ports)
        for i in range(brokers):
            self.brokers.append(self._broker(f"broker-{i + 1}", self.data_dir / f"broker-{i + 1}",
                                             ports[3 * i], ports[3 * i + 1], env, kafka_port=ports[3 * i + 2]))
        self._launch_all()

    def _bookie(self, name: str, node_dir: Path, port: int, env: dict[str, str]) -> BookieProcess:
        """A bookie node: data under `<node_dir>/data`, log `<node_dir>/bookie.log`."""
        return BookieProcess(Path(node_dir) / "data", port, name=name, metadata_url=self.metadata_url, host=HOST,
                             log_path=Path(node_dir) / "bookie.log", env=env, on_parent_death=self._death_signal())

    def _broker(self, name: str, node_dir: Path, port: int, admin_port: int, env: dict[str, str],
                kafka_port: int | None = None) -> BrokerProcess:
        return BrokerProcess(name, node_dir, self.metadata_url, env, port, admin_port, kafka_port,
                             on_parent_death=self._death_signal())

    def _death_signal(self) -> int | None:
        """What a node gets when we die: SIGKILL, or nothing when detached (it outlives us)."""
        return None if self.detached else signal.SIGKILL

    def _launch_all(self) -> None:
        """Bookies (and S3) first, then brokers; each group waited for within one bound."""
        for bookie in self.bookies:
            bookie.spawn()
        if self.s3 is not None:
            self.s3.wait_ready()
        wait_all_ready(self.bookies)
        for broker in self.brokers:
            broker.spawn()
        wait_all_ready(self.brokers)
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
            pg = state["postgres"]
            self.postgres = PostgresServer.attach(pg["root"], pg["data_dir"], pg["port"])
            self.postgres.start()
        if state.get("s3"):
            ports = state["s3"].get("ports")
            self._launch_s3(EmbeddedS3Ports.from_json(ports) if ports else None)
        env = self.node_env()
        self.bookies = [self._bookie(b["name"], Path(b["data_dir"]), b["port"], env) for b in state["bookies"]]
        self.brokers = [self._broker(b["name"], Path(b["data_dir"]), b["port"], b["admin_port"], env,
                                     kafka_port=b.get("kafka_port"))   # absent in a cluster.json of before Kafka
                        for b in state["brokers"]]
        self._launch_all()

    def _start_postgres(self) -> None:
        settings = {} if self.detached else dict(PG_TEST_SETTINGS)
        base_dir = str(self.data_dir) if others_can_enter(self.data_dir) else None
        self.postgres = PostgresServer(settings=settings, base_dir=base_dir)
        self.postgres.start()
        self._ports.add(self.postgres.port)
        self._metadata_url = self.postgres.url()

    def _launch_s3(self, ports: EmbeddedS3Ports | None = None) -> None:
        s3_dir = self.data_dir / "s3"
        credentials = load_or_create_credentials(s3_dir / "credentials.json")
        ports = ports or EmbeddedS3Ports.pick(HOST, frozenset(self._ports))
        self._ports.update(ports.all_ports())
        self.s3 = EmbeddedS3(s3_dir / "data", credentials, bucket="strata-offload", ports=ports,
                             log_path=s3_dir / "weed.log", detached=self.detached)
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
            "brokers": [{**_record(b), "port": b.port, "admin_port": b.admin_port, "kafka_port": b.kafka_port,
                         "service_url": b.service_url, "admin_url": b.admin_url} for b in self.brokers],
            "bookies": [{**_record(b), "port": b.port, "address": b.address} for b in self.bookies],
        }

    def write_state(self) -> None:
        (self.data_dir / STATE_FILE).write_text(json.dumps(self.state(), indent=2))

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Brokers first (they release ownership), then bookies, S3, PostgreSQL; every wait
        bounded; an owned temp dir is removed. Never raises."""
        stop_all(self.brokers, timeout_s)
        stop_all(self.bookies, timeout_s)
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
