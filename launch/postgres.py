"""A real PostgreSQL server from the machine's binaries: throw-away for tests and perf tools, or
the metadata store of a local cluster (`strata cluster up`).

    server = PostgresServer(settings={"fsync": "off"}).start()   # initdb + pg_ctl start in a temp dir
    server.url("postgres"); server.create_database("t1")
    server.stop(); server.start()                                 # the same data dir and port
    server.cleanup()                                              # stop, remove the temp dir
    PostgresServer.attach(root, data_dir, port).start()           # a stopped cluster's server again
    stop_recorded({"data_dir": ...})                              # `strata cluster down`

It runs `initdb` and `pg_ctl` on a temp dir, listening on 127.0.0.1 at a free port with its unix
socket inside the temp dir, trust auth for the superuser `strata`. PostgreSQL refuses to run as
root, so as root the commands run through `runuser -u postgres` (or `nobody`) and the temp dir is
handed to that user. `pg_ctl` daemonizes the server: it is not our child and gets no parent-death
signal; its owners stop it (LocalCluster at exit, the test session's fixture).

What must hold: `start()` returns only when the server accepts connections, or raises
`PostgresServerError` with the server log's tail (never hangs: every step has a time bound);
`stop()` leaves no server running; `cleanup()` also removes the temp dir.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from common.errors import StrataError
from common.net import free_port
from launch.ready import wait_until_ready

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
SUPERUSER = "strata"


class PostgresServerError(RuntimeError):
    """The server could not be started or stopped (missing binaries, initdb failed, ...)."""


def find_bin_dir() -> str:
    """The directory holding initdb and pg_ctl: PATH first, then /usr/lib/postgresql/*/bin."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return os.path.dirname(os.path.realpath(found))
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    for candidate in reversed(candidates):
        if os.path.exists(os.path.join(candidate, "pg_ctl")):
            return candidate
    raise PostgresServerError("no PostgreSQL binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql")


def _run_as_user() -> str | None:
    """The unprivileged user to run the server as when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise PostgresServerError("running as root and neither user 'postgres' nor 'nobody' exists")


class PostgresServer:
    """One PostgreSQL server in a temp dir. Use as a context manager or start()/cleanup()."""

    def __init__(self, *, port: int | None = None, settings: dict[str, str] | None = None,
                 base_dir: str | None = None) -> None:
        self.bin_dir = find_bin_dir()
        self.user = _run_as_user()
        self.port = port or free_port()
        self.settings = dict(settings or {})
        self.root = tempfile.mkdtemp(prefix="strata-pg-", dir=base_dir)
        self.data_dir = os.path.join(self.root, "data")
        self.socket_dir = os.path.join(self.root, "sock")
        self.log_path = os.path.join(self.root, "server.log")
        self._initialised = False
        self.running = False
        os.makedirs(self.socket_dir)
        if self.user is not None:
            os.chmod(self.root, 0o755)
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    @classmethod
    def attach(cls, root: str, data_dir: str, port: int) -> PostgresServer:
        """The stopped server a cluster's state records, ready to start() again without initdb.
        Built field by field as __init__ would, since that creates a new temp dir; as root, the
        server runs as the user owning its data dir."""
        server = cls.__new__(cls)
        server.bin_dir = find_bin_dir()
        server.user = _owner_unless_root(data_dir)
        server.port = int(port)
        server.settings = {}
        server.root = root
        server.data_dir = data_dir
        server.socket_dir = os.path.join(root, "sock")
        server.log_path = os.path.join(root, "server.log")
        server._initialised = True
        server.running = False
        return server

    def url(self, database: str = "postgres") -> str:
        """A URL for open_store(): postgresql://strata@127.0.0.1:PORT/DATABASE."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _cmd(self, args: list[str]) -> list[str]:
        exe = [os.path.join(self.bin_dir, args[0])] + args[1:]
        return exe if self.user is None else ["runuser", "-u", self.user, "--"] + exe

    def _run(self, args: list[str], timeout_s: float) -> None:
        try:
            proc = subprocess.run(self._cmd(args), capture_output=True, text=True, timeout=timeout_s,
                                  cwd=self.root)
        except subprocess.TimeoutExpired:
            raise PostgresServerError(f"{args[0]} took longer than {timeout_s}s\n{self.log_tail()}") from None
        if proc.returncode != 0:
            raise PostgresServerError(f"{args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}"
                                      f"\n{self.log_tail()}")

    def start(self) -> PostgresServer:
        if self.running:
            return self
        if not self._initialised:
            self._run(["initdb", "-D", self.data_dir, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                       "--locale=C", "--no-sync"], START_TIMEOUT_S)
            self._initialised = True
        opts = [f"-p {self.port}", f"-k {self.socket_dir}", "-c listen_addresses=127.0.0.1",
                "-c max_connections=200"]
        opts += [f"-c {k}={v}" for k, v in self.settings.items()]
        self._run(["pg_ctl", "-D", self.data_dir, "-l", self.log_path, "-w", "-t", str(int(START_TIMEOUT_S)),
                   "-o", " ".join(opts), "start"], START_TIMEOUT_S + 10)
        self.running = True
        self._wait_accepting()
        return self

    def _wait_accepting(self) -> None:
        wait_until_ready(self._accepting, deadline=time.monotonic() + START_TIMEOUT_S,
                         timed_out=lambda: PostgresServerError(
                             f"server not accepting on port {self.port}\n{self.log_tail()}"))

    def _accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (mode: smart | fast | immediate); the data dir stays for start()."""
        if not self.running:
            return
        self._run(["pg_ctl", "-D", self.data_dir, "-m", mode, "-w", "-t", str(int(STOP_TIMEOUT_S)), "stop"],
                  STOP_TIMEOUT_S + 10)
        self.running = False

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name` (letters, digits, _) and return its URL."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"bad database name {name!r}")
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres",
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "server log tail:\n" + f.read()[-chars:]
        except OSError:
            return "(no server log)"

    def cleanup(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _owner_unless_root(data_dir: str | Path) -> str | None:
    """As root, the (non-root) user owning `data_dir`, whom the server must run as; else None."""
    owner = os.stat(data_dir).st_uid
    return pwd.getpwuid(owner).pw_name if os.geteuid() == 0 and owner != 0 else None


def stop_recorded(recorded: dict[str, Any], timeout_s: int = int(STOP_TIMEOUT_S)) -> None:
    """`pg_ctl stop -m fast` on a server a cluster's state records (`data_dir`), as the user that
    owns its data dir; nothing when it is not running (no postmaster.pid)."""
    data_dir = Path(recorded["data_dir"])
    if not (data_dir / "postmaster.pid").exists():
        return
    cmd = [os.path.join(find_bin_dir(), "pg_ctl"), "-D", str(data_dir), "-m", "fast", "-w", "-t", str(timeout_s),
           "stop"]
    user = _owner_unless_root(data_dir)
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 10)
    if proc.returncode != 0:
        raise StrataError("pg_ctl stop failed", stderr=proc.stderr.strip()[-1000:])
