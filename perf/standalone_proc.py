"""A real `strata standalone` subprocess: free ports, a data dir, bounded waits, cleanup.

Used by the perf tools and, through tests/support/standalone_proc.py, by the tests:

    with LocalStandalone.start() as sa:        # waits for "admin URL" and a listening port
        sa.service_url, sa.admin_url, sa.pid
        sa.kill9()                             # crash: the whole process group, bookies too
        sa.restart()                           # same data dir and ports

By default it runs with `--no-s3` (no embedded S3 server, as before); tests point it at the
session's SeaweedFS through `env` (tests/support/seaweed.py `standalone_env`).
`embedded_s3=True` starts the standalone's own SeaweedFS (`sa.s3_endpoint`, `sa.s3_credentials()`).
`secure=True` runs `strata standalone --secure` on free TLS ports only: `sa.service_url` is
pulsar+ssl://, `sa.admin_url` https://, and the CA, tokens and certificates are under `sa.security_dir`.

The process runs in its own session (process group) with its bookies as children; `stop()`
sends SIGTERM (clean stop, as Ctrl-C), SIGKILLs the group if it does not stop in time, and
removes the temp data dir it created; if the perf process dies without stopping it, the
standalone gets SIGTERM from the kernel (PR_SET_PDEATHSIG). Output goes to `<data dir>.log`, whose tail is included in
the error when a start fails. Every wait is bounded.

"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common.errors import StrataError, TimeoutExpired
from common.invariant import present
from common.net import free_port

PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
REPO_ROOT = Path(__file__).resolve().parents[1]


def _stop_with_parent() -> None:
    """In the child: SIGTERM (a clean stop, bookies included) when the perf process dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class LocalStandalone:
    """One `strata standalone` process on free loopback ports.

    owns_dir: the data dir is a temp dir this object created and deletes on stop.
    proc: the running process, None when stopped.
    embedded_s3: run the standalone's own SeaweedFS (False passes --no-s3).
    secure: `--secure`, TLS ports only (port/admin_port are then the TLS ones).
    """

    def __init__(self, data_dir: Path, owns_dir: bool, bookies: int = 1,
                 env: dict[str, str] | None = None, embedded_s3: bool = False, secure: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.owns_dir = owns_dir
        self.bookies = bookies
        self.env = dict(env or {})
        self.embedded_s3 = embedded_s3
        self.secure = secure
        self.port = free_port()
        self.admin_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(str(self.data_dir) + ".log")

    @property
    def service_url(self) -> str:
        return f"pulsar{'+ssl' if self.secure else ''}://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http{'s' if self.secure else ''}://127.0.0.1:{self.admin_port}"

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
        return f"http://127.0.0.1:{state['s3_ports']['s3']}"

    def s3_credentials(self) -> dict[str, Any]:
        """The embedded S3 server's credentials (D/s3/credentials.json: access_key, secret_key)."""
        return dict(json.loads((self.data_dir / "s3" / "credentials.json").read_text()))

    @property
    def pid(self) -> int:
        return present(self.proc, "the process was started").pid

    @classmethod
    def start(cls, data_dir: str | Path | None = None, bookies: int = 1,
              env: dict[str, str] | None = None, embedded_s3: bool = False, secure: bool = False) -> LocalStandalone:
        if data_dir is None:
            sa = cls(Path(tempfile.mkdtemp(prefix="strata-perf-")) / "data", True, bookies, env, embedded_s3, secure)
        else:
            sa = cls(Path(data_dir), False, bookies, env, embedded_s3, secure)
        try:
            sa.launch()
        except BaseException:
            sa.stop()
            raise
        return sa

    def launch(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        ports = (["--secure", "--tls-port", str(self.port), "--admin-tls-port", str(self.admin_port)] if self.secure
                 else ["--port", str(self.port), "--admin-port", str(self.admin_port)])
        cmd = [sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(self.data_dir), *ports,
               "--bookies", str(self.bookies)]
        if not self.embedded_s3:
            cmd.append("--no-s3")
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                         preexec_fn=_stop_with_parent)
        self._wait_ready(log_offset)

    def _wait_ready(self, log_offset: int) -> None:
        """Wait for this launch's "admin URL" line (after `log_offset`) and a listening port."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        # --secure prints how to connect after the URLs (one write): wait for it
        marker = "connect with the official Python client:" if self.secure else f"admin URL {self.admin_url}"
        while time.monotonic() < deadline:
            proc = present(self.proc, "the process was started")
            if proc.poll() is not None:
                raise StrataError("standalone exited during start-up", returncode=proc.returncode,
                                  log=self.log_tail())
            with open(self.log_path, "rb") as log:
                log.seek(log_offset)
                text = log.read().decode(errors="replace")
            if marker in text and self._listening():
                return
            time.sleep(0.1)
        self.kill9()
        raise TimeoutExpired("standalone not ready", timeout_s=READY_TIMEOUT_S, log=self.log_tail())

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)  # bookies left behind, or a hung broker
        except (ProcessLookupError, PermissionError):
            pass

    def kill9(self) -> None:
        """Crash: SIGKILL the whole process group (broker and bookies)."""
        if self.proc is None:
            return
        self._kill_group()
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None

    def terminate(self) -> int:
        """Clean stop (SIGTERM, as Ctrl-C); SIGKILL of the group if it does not stop in time,
        which is an error. Returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise TimeoutExpired("standalone did not stop on SIGTERM", log=self.log_tail()) from None
        self._kill_group()  # any bookie left behind
        self.proc = None
        return code

    def restart(self, *, crash: bool = False) -> None:
        """Stop (cleanly, or by kill -9 with crash=True) and start again on the same dir and ports."""
        if crash:
            self.kill9()
        else:
            self.terminate()
        self.launch()

    def stop(self) -> None:
        """Terminate (SIGKILL if it hangs); then remove an owned temp dir. Never raises."""
        try:
            self.terminate()
        except StrataError:
            pass
        if self.owns_dir:
            shutil.rmtree(self.data_dir.parent, ignore_errors=True)

    def __enter__(self) -> LocalStandalone:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
