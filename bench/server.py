"""Start and stop a peer's server process for the benchmark: own session, log file, bounded waits.
(Strata's own standalone is launched by launch/standalone.py, also in its own session.)

Every server runs in its own session (`start_new_session=True`), so stopping it signals the
whole process group (an Erlang VM's helpers, say) and procstat can find all
of a system's processes by session id. `stop()` sends SIGTERM, waits, then SIGKILLs the group;
it is idempotent and safe to call from `finally`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

STOP_WAIT_S = 30.0


class StartFailed(RuntimeError):
    """A server exited or did not become ready in time; the message ends with its log tail."""


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class ServerProcess:
    """One server command in its own session, output appended to `log_path`."""

    def __init__(self, name: str, cmd: list[str], log_path: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None, user: str | None = None) -> None:
        self.name = name
        self.cmd = cmd
        self.log_path = Path(log_path)
        self.env = env
        self.cwd = cwd
        self.user = user
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, cwd=self.cwd, start_new_session=True,
                                         user=self.user, group=self.user)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_until(self, ready, timeout_s: float, what: str) -> None:
        """Poll `ready()` every 0.1 s until true; raise StartFailed if the process exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise StartFailed(f"{self.name} exited ({code}) before {what}:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.1)
        raise StartFailed(f"{self.name}: no {what} within {timeout_s:.0f}s:\n{self.log_tail()}")

    def wait_port(self, port: int, timeout_s: float = 60.0) -> None:
        self.wait_until(lambda: port_open(port), timeout_s, f"listener on port {port}")

    def wait_log(self, text: str, timeout_s: float = 60.0) -> None:
        def seen() -> bool:
            try:
                return text in self.log_path.read_text(errors="replace")
            except OSError:
                return False
        self.wait_until(seen, timeout_s, f"log line {text!r}")

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """SIGTERM the group, wait up to `wait_s`, then SIGKILL whatever of the group is left."""
        if self.proc is None:
            return
        _signal_group(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
