"""A real `strata standalone` subprocess: free ports, a data dir, bounded waits, cleanup.

Used by the perf tools, the benchmark and, through tests/support/standalone_proc.py, the tests:

    with StandaloneProcess.start() as sa:      # waits for "admin URL" and a listening port
        sa.service_url, sa.admin_url, sa.pid
        sa.kill9()                             # crash: the whole process group, bookies too
        sa.restart()                           # same data dir and ports
        sa.launch()                            # (after kill9) start again and wait

By default it runs with `--no-s3` (no embedded S3 server); tests point it at the session's
SeaweedFS through `env` (tests/support/seaweed.py `standalone_env`). `embedded_s3=True` starts
the standalone's own SeaweedFS (`sa.s3_endpoint`, `sa.s3_credentials()`). `secure=True` runs
`strata standalone --secure` on free TLS ports only: `sa.service_url` is pulsar+ssl://,
`sa.admin_url` https://, and the CA, tokens and certificates are under `sa.security_dir`.

What must hold: the process runs in its own session (process group) with its bookies in it, so
kill9() takes them all and a benchmark finds them by session id; stop() sends SIGTERM (a clean
stop, as Ctrl-C) and SIGKILLs the group if it does not stop in time; close() never raises and
removes the temp data dir it created. If the process that started it dies, the standalone gets
SIGTERM from the kernel (PR_SET_PDEATHSIG): a clean stop, bookies included. Output goes to
`<data dir>.log`, whose tail is in the error when a start fails. Every wait is bounded.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from common.net import free_port
from launch.process import NodeProcess

HOST = "127.0.0.1"
CONNECT_HELP_LINE = "connect with the official Python client:"   # --secure prints it after the URLs


class StandaloneProcess(NodeProcess):
    """One `strata standalone` process on free loopback ports.

    owns_dir: the data dir is a temp dir this object created and deletes on close().
    bookies: its `--bookies`. embedded_s3: run the standalone's own SeaweedFS (False passes --no-s3).
    secure: `--secure`, TLS ports only (port/admin_port are then the TLS ones).
    """

    kind = "standalone"

    def __init__(self, data_dir: Path, owns_dir: bool, bookies: int = 1,
                 env: dict[str, str] | None = None, embedded_s3: bool = False, secure: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.owns_dir = owns_dir
        self.bookies = bookies
        self.embedded_s3 = embedded_s3
        self.secure = secure
        self.port = free_port()
        self.admin_port = free_port()
        self.kafka_port = free_port()
        super().__init__("standalone", Path(str(self.data_dir) + ".log"), env=env,
                         on_parent_death=signal.SIGTERM)

    @classmethod
    def start(cls, data_dir: str | Path | None = None, bookies: int = 1,
              env: dict[str, str] | None = None, embedded_s3: bool = False,
              secure: bool = False) -> StandaloneProcess:
        """A standalone in `data_dir` (a temp dir, removed on close(), when None), serving."""
        if data_dir is None:
            sa = cls(Path(tempfile.mkdtemp(prefix="strata-perf-")) / "data", True, bookies, env, embedded_s3, secure)
        else:
            sa = cls(Path(data_dir), False, bookies, env, embedded_s3, secure)
        try:
            sa.launch()
        except BaseException:
            sa.close()
            raise
        return sa

    @property
    def service_url(self) -> str:
        return f"pulsar{'+ssl' if self.secure else ''}://{HOST}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http{'s' if self.secure else ''}://{HOST}:{self.admin_port}"

    @property
    def kafka_bootstrap(self) -> str:
        """host:port of its Kafka listener (Kafka clients' bootstrap.servers; SASL_SSL when secure)."""
        return f"{HOST}:{self.kafka_port}"

    @property
    def security_dir(self) -> Path:
        """Where `--secure` keeps its CA (ca.cert.pem), tokens (admin.token) and certificates."""
        return self.data_dir / "security"

    @property
    def metadata_url(self) -> str:
        """The standalone's metadata store (what the Spark source's `metadataUrl` option takes)."""
        return f"sqlite:///{self.data_dir.resolve() / 'metadata.db'}"

    @property
    def s3_endpoint(self) -> str:
        """The embedded S3 server's endpoint (embedded_s3=True; recorded in D/standalone.json)."""
        state = json.loads((self.data_dir / "standalone.json").read_text())
        return f"http://{HOST}:{state['s3_ports']['s3']}"

    def s3_credentials(self) -> dict[str, Any]:
        """The embedded S3 server's credentials (D/s3/credentials.json: access_key, secret_key)."""
        return dict(json.loads((self.data_dir / "s3" / "credentials.json").read_text()))

    @property
    def ready_marker(self) -> str:
        return CONNECT_HELP_LINE if self.secure else f"admin URL {self.admin_url}"

    def is_ready(self) -> bool:
        """Its ready line, and its Pulsar port accepting connections."""
        return super().is_ready() and self._listening()

    def _listening(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def prepare(self) -> None:
        super().prepare()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        ports = (["--secure", "--tls-port", str(self.port), "--admin-tls-port", str(self.admin_port)] if self.secure
                 else ["--port", str(self.port), "--admin-port", str(self.admin_port)])
        cmd = [sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(self.data_dir), *ports,
               "--bookies", str(self.bookies),
               "--kafka-tls-port" if self.secure else "--kafka-port", str(self.kafka_port)]
        return cmd if self.embedded_s3 else cmd + ["--no-s3"]

    def close(self) -> None:
        """Stop (SIGKILL if it hangs); then remove an owned temp dir. Never raises."""
        super().close()
        if self.owns_dir:
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)
