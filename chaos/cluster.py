"""The cluster a chaos run drives: launch.cluster's processes, every link behind a proxy.

    with ChaosCluster.start(out_dir, brokers=2, bookies=3, lease_ms=3000) as cluster:
        cluster.service_url        # pulsar://127.0.2.1:p1,127.0.2.2:p2 (the brokers' proxies)
        cluster.hub                # chaos.proxy.ProxyHub: partitions, S3 slowdown
        cluster.postgres_kill9(); cluster.postgres_start()
        cluster.fill_disk("bookie-2"); cluster.free_disk("bookie-2")

It is `launch.cluster.LocalCluster` (the processes of `strata cluster up`: PostgreSQL, SeaweedFS,
bookies, brokers) with each node told to advertise an address on its own loopback IP, where a
proxy (chaos/proxy.py) listens and forwards to the node:
- bookie N advertises 127.0.1.N (its gRPC and data ports); brokers reach it through that proxy;
- broker N advertises 127.0.2.N (binary protocol, admin and Kafka ports): clients, and the other
  brokers (ownership probes, unloads), reach it there; `kafka_bootstrap` names every broker's
  Kafka listener at its advertised address;
- S3 is reached at 127.0.3.1 (on a port of its own); PostgreSQL through one proxy per node (127.0.4.N), so the link
  from one node to the metadata store can be cut alone.
When we are root, each bookie's data dir is a small tmpfs of its own (`BOOKIE_DISK_MB`), so one
bookie's disk can be filled (`fill_disk`: a ballast file takes every free byte) and freed again;
otherwise disk faults are not offered (`disk_faults` is False).

What must hold: every node, and every proxy, is gone after `stop()` (tmpfs mounts too); a
proxy's address carries the same port as the node behind it (S3's excepted); the PostgreSQL faults signal the
postmaster and every backend, as a crash of its machine would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psutil

from chaos.proxy import Link, ProxyHub
from common.invariant import present
from launch.bookie import BookieProcess
from launch.broker import BrokerProcess
from launch.cluster import HOST, LocalCluster, others_can_enter, pick_ports
from launch.postgres import PostgresServer

BOOKIE_DISK_MB = 1024
BALLAST = "chaos-ballast"
PG_RESTART_TIMEOUT_S = 60.0


def _bookie_ip(n: int) -> str:
    return f"127.0.1.{n}"


def _broker_ip(n: int) -> str:
    return f"127.0.2.{n}"


S3_IP = "127.0.3.1"


def _pg_ip(k: int) -> str:
    return f"127.0.4.{k}"


def _index(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def socket_inode(ip: str, port: int) -> int | None:
    """The inode of the IPv4 TCP socket whose local address is (ip, port), from /proc/net/tcp.
    Entries with inode 0 are skipped: a closed connection in TIME_WAIT that had the same local
    port belongs to no process, and may be listed before the live one."""
    a, b, c, d = (int(x) for x in ip.split("."))
    local = f"{d:02X}{c:02X}{b:02X}{a:02X}:{port:04X}"
    try:
        with open("/proc/net/tcp", encoding="ascii") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1] == local and fields[9] != "0":
                    return int(fields[9])
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return None


class ChaosBroker(BrokerProcess):
    """A broker that advertises `advertised_ip` (its proxy), listening on 127.0.0.1."""

    def __init__(self, *args: Any, advertised_ip: str, **kwargs: Any) -> None:
        self.advertised_ip = advertised_ip
        super().__init__(*args, **kwargs)

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.advertised_ip}:{self.port}"

    @property
    def broker_id(self) -> str:
        return f"{self.advertised_ip}:{self.port}"

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.advertised_ip}:{present(self.kafka_port, 'the broker serves Kafka')}"

    @property
    def ready_marker(self) -> str:
        return f"admin URL http://{self.advertised_ip}:{self.admin_port}"

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--advertised-host") + 1] = self.advertised_ip
        return cmd


class ChaosCluster(LocalCluster):
    """LocalCluster with a proxy in front of every node (see the module's docstring)."""

    hub: ProxyHub
    tmpfs: list[Path]

    @classmethod
    def start(cls, data_dir: str | Path | None = None, brokers: int = 2, bookies: int = 3,
              e: int = 3, qw: int = 2, qa: int = 2, lease_ms: int | None = None,
              env: dict[str, str] | None = None, metadata_url: str | None = None,
              s3: bool = True, detached: bool = False) -> ChaosCluster:
        cluster = super().start(data_dir, brokers, bookies, e, qw, qa, lease_ms, env, metadata_url, s3, detached)
        assert isinstance(cluster, ChaosCluster)
        return cluster

    def _start_all(self, brokers: int, bookies: int, s3: bool) -> None:
        self.hub = ProxyHub(self.node_of_socket)
        self.tmpfs = []
        self._pg_links: dict[str, str] = {}
        self.disk_faults = os.geteuid() == 0
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._start_postgres()
        self.hub.start()
        super()._start_all(brokers, bookies, s3)

    def _start_postgres(self) -> None:
        """PostgreSQL with its durable defaults, not the test suite's fast settings: with
        `synchronous_commit=off` a commit is acknowledged before its WAL leaves PostgreSQL's
        memory, so a kill -9 of PostgreSQL loses acknowledged metadata writes, and with them
        acknowledged messages (the first 100-fault soak lost a whole ledger that way)."""
        base_dir = str(self.data_dir) if others_can_enter(self.data_dir) else None
        self.postgres = PostgresServer(settings={}, base_dir=base_dir)
        self.postgres.start()
        self._ports.add(self.postgres.port)
        self._metadata_url = self.postgres.url()

    # -- nodes, each behind its proxies --------------------------------------------------------

    def _pg_url_for(self, node: str) -> str:
        """The metadata URL `node` uses: PostgreSQL through a proxy of its own."""
        if node not in self._pg_links:
            pg = self._pg()
            ip = _pg_ip(len(self._pg_links) + 1)
            self.hub.add(Link("postgres", (ip, pg.port), (HOST, pg.port), source=node))
            parts = urlsplit(self.metadata_url)
            self._pg_links[node] = urlunsplit(parts._replace(netloc=f"{parts.username}@{ip}:{pg.port}"))
        return self._pg_links[node]

    def _pg(self) -> PostgresServer:
        assert self.postgres is not None, "chaos runs start their own PostgreSQL"
        return self.postgres

    def _bookie(self, name: str, node_dir: Path, port: int, env: dict[str, str]) -> BookieProcess:
        n = _index(name)
        data_port = pick_ports(1, self._ports)[0]
        ip = _bookie_ip(n)
        for p in (port, data_port):
            self.hub.add(Link(name, (ip, p), (HOST, p)))
        data = Path(node_dir) / "data"
        self._mount_disk(data)
        return BookieProcess(data, port, name=name, metadata_url=self._pg_url_for(name), host=HOST,
                             log_path=Path(node_dir) / "bookie.log", on_parent_death=self._death_signal(),
                             env={**env, "STRATA_BOOKIE_DATA_PORT": str(data_port)},
                             extra_args=["--advertised-host", ip])

    def _broker(self, name: str, node_dir: Path, port: int, admin_port: int, env: dict[str, str],
                kafka_port: int | None = None) -> BrokerProcess:
        # the Kafka listener too, behind its own link: clients reach it at the advertised IP
        ip = _broker_ip(_index(name))
        for p in (port, admin_port, kafka_port):
            if p is not None:
                self.hub.add(Link(name, (ip, p), (HOST, p)))
        return ChaosBroker(name, node_dir, self._pg_url_for(name), env, port, admin_port, kafka_port,
                           on_parent_death=self._death_signal(), advertised_ip=ip)

    def _launch_s3(self, ports: Any = None) -> None:
        super()._launch_s3(ports)
        s3 = self.s3
        assert s3 is not None
        # its own port: weed checks that its ports are free on every address
        self._s3_proxy_port = pick_ports(1, self._ports)[0]
        self.hub.add(Link("s3", (S3_IP, self._s3_proxy_port), (HOST, s3.ports.s3), http=True))

    def node_env(self) -> dict[str, str]:
        env = super().node_env()
        if self.s3 is not None:
            env["STRATA_OFFLOAD_S3_ENDPOINT"] = f"http://{S3_IP}:{self._s3_proxy_port}"
        return env

    @property
    def admin_url(self) -> str:
        """A broker's admin URL, direct (the runner's own calls bypass the proxies)."""
        return self.brokers[0].admin_url

    def nodes(self) -> list[Any]:
        return [*self.brokers, *self.bookies]

    def node(self, name: str) -> Any:
        for node in self.nodes():
            if node.name == name:
                return node
        raise KeyError(name)

    def node_of_socket(self, ip: str, port: int) -> str | None:
        """Which node's process owns the TCP socket bound to (ip, port), or None (a client)."""
        inode = socket_inode(ip, port)
        if inode is None:
            return None
        owners = [(n.name, n.proc.pid) for n in self.nodes() if n.proc is not None]
        if self.s3 is not None and self.s3.proc is not None:
            owners.append(("s3", self.s3.proc.pid))
        target = f"socket:[{inode}]"
        for name, pid in owners:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return name
        return None

    # -- PostgreSQL faults -----------------------------------------------------------------------

    def _pg_processes(self) -> list[psutil.Process]:
        pid_file = Path(self._pg().data_dir) / "postmaster.pid"
        try:
            root = psutil.Process(int(pid_file.read_text().split()[0]))
            return [root, *root.children(recursive=True)]
        except (OSError, ValueError, IndexError, psutil.Error):
            return []

    def postgres_signal(self, sig: int) -> int:
        """`sig` to the postmaster and every backend; how many processes got it."""
        sent = 0
        for proc in self._pg_processes():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
                sent += 1
        return sent

    def postgres_kill9(self) -> None:
        procs = self._pg_processes()
        self.postgres_signal(signal.SIGKILL)
        psutil.wait_procs(procs, timeout=PG_RESTART_TIMEOUT_S)
        self._pg().running = False

    def postgres_start(self) -> None:
        self._pg().start()

    # -- disks -----------------------------------------------------------------------------------

    def _mount_disk(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if not self.disk_faults or os.path.ismount(path):
            return
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={BOOKIE_DISK_MB}m", "tmpfs", str(path)],
                                 check=False, timeout=30, capture_output=True)
        if mounted.returncode != 0:   # root without the right to mount (a container): no disk faults
            self.disk_faults = False
            return
        self.tmpfs.append(path)

    def fill_disk(self, bookie: str) -> int:
        """Take every free byte of `bookie`'s disk with a ballast file; the bytes taken."""
        fd = os.open(self.node(bookie).data_dir / BALLAST, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        taken = 0
        try:
            for size in (1 << 20, 4096, 1):
                block = b"\0" * size
                with contextlib.suppress(OSError):
                    while True:
                        taken += os.write(fd, block)
        finally:
            os.close(fd)
        return taken

    def free_disk(self, bookie: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.node(bookie).data_dir / BALLAST).unlink()

    def stop(self, timeout_s: float = 30.0) -> None:
        with contextlib.suppress(Exception):
            self.hub.heal_all()
        with contextlib.suppress(Exception):
            for proc in self._pg_processes():
                proc.send_signal(signal.SIGCONT)
        for node in self.nodes():
            with contextlib.suppress(Exception):
                node.thaw()
        if self.s3 is not None and self.s3.proc is not None:
            with contextlib.suppress(Exception):
                self.s3.proc.send_signal(signal.SIGCONT)
        owns, self.owns_dir = self.owns_dir, False
        super().stop(timeout_s)
        with contextlib.suppress(Exception):
            self.hub.stop()
        for path in self.tmpfs:
            subprocess.run(["umount", "-l", str(path)], check=False, timeout=30)
        self.tmpfs = []
        if owns:
            shutil.rmtree(self.data_dir, ignore_errors=True)
