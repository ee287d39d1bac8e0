"""Start `strata standalone` as a real subprocess for tests: free ports, temp data dir, bounded waits.

    with StandaloneProcess.start(tmp_path / "data") as sa:   # waits for the "admin URL" line
        client = pulsar.Client(sa.service_url)
        ...
        sa.kill9()        # the whole process group: broker and its bookies
        sa.restart()      # same data dir and ports

The process runs in its own session (process group), so `kill9()` takes down the bookies with
the broker, as a crash of the machine would. Output goes to `<data dir>.log`, printed when a start
fails. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneProcess:
    def __init__(self, data_dir: Path, port: int, admin_port: int, bookies: int = 1,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.admin_port = admin_port
        self.bookies = bookies
        self.env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(str(self.data_dir) + ".log")

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @classmethod
    def start(cls, data_dir: Path, *, bookies: int = 1, env: dict[str, str] | None = None) -> "StandaloneProcess":
        sa = cls(data_dir, free_port(), free_port(), bookies, env)
        sa.launch()
        return sa

    def launch(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(self.data_dir),
               "--port", str(self.port), "--admin-port", str(self.admin_port),
               "--bookies", str(self.bookies)]
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._wait_ready(offset)

    def _wait_ready(self, log_offset: int) -> None:
        """Wait for this launch's "admin URL" line (after `log_offset`) and a listening port."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"standalone exited with {self.proc.returncode}:\n{self.log_tail()}")
            with open(self.log_path, "rb") as log:
                log.seek(log_offset)
                text = log.read().decode(errors="replace")
            if f"admin URL http://127.0.0.1:{self.admin_port}" in text and self._listening():
                return
            time.sleep(0.1)
        self.kill9()
        raise RuntimeError(f"standalone not ready in {READY_TIMEOUT_S}s:\n{self.log_tail()}")

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

    def kill9(self) -> None:
        """Crash: SIGKILL the whole process group (broker and bookies)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None

    def terminate(self) -> int:
        """Clean stop (SIGTERM, as Ctrl-C would); SIGKILL if it does not stop in time."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise RuntimeError(f"standalone did not stop on SIGTERM:\n{self.log_tail()}")
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # any bookie left behind
        except ProcessLookupError:
            pass
        self.proc = None
        return code

    def restart(self, *, crash: bool = False) -> None:
        if crash:
            self.kill9()
        else:
            self.terminate()
        self.launch()

    def __enter__(self) -> "StandaloneProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            try:
                self.terminate()
            except RuntimeError:
                pass
