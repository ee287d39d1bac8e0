"""One launched process: spawn, the bounded wait for its ready line, clean stop, crash, freeze.

    node.launch()        # spawn, then wait (bounded) for its ready line in its log
    node.spawn(); ...; node.wait_ready()     # start several at once, then wait for each
    node.kill9()         # crash: SIGKILL, no flush
    node.stop()          # SIGTERM, bounded wait, SIGKILL after it (TimeoutExpired); the exit code
    node.close()         # stop that never raises (finally blocks, context managers)
    node.freeze(); node.thaw()   # SIGSTOP / SIGCONT: stopped dead, its sockets stay open
    node.restart(crash=True)     # back on the same ports and data

`NodeProcess` is the base of every Strata process kind (bookie.py, broker.py, standalone.py): a
`python -m cli.main <command>` child, run from the directory holding the `cli` package
(REPO_ROOT, the repo root in a source tree) unless told otherwise, with stdout and stderr
appended to its log file. The module also holds the helpers for processes we did not start
(`pid_alive`, `signal_group`, `stop_pid`: `strata cluster down` finds them by pid).

What must hold:
- Every wait is bounded: the ready-wait (launch/ready.py) raises with the log's tail (or, with
  `brief_errors`, one line for a user's terminal) and kills a node that is not ready in time; a
  stop SIGKILLs after its bound; a SIGKILL waits at most STOP_TIMEOUT_S.
- The ready line counts only if this launch wrote it: the log is read from where it ended at spawn.
- A node in its own session (`own_session`, the default) is signalled as a process group, so
  what it started goes too; a node that shares its parent's group (a standalone's bookies) is
  signalled alone, never its parent's group.
- A node dies with the process that started it (`on_parent_death`, launch/parent_death.py)
  unless that is None (detached: `strata cluster up` leaves the nodes running).
"""

from __future__ import annotations

import abc
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from common.errors import StrataError, TimeoutExpired
from common.invariant import present
from launch.parent_death import spawn
from launch.ready import POLL_INTERVAL_S, wait_until_ready

REPO_ROOT = Path(__file__).resolve().parents[1]  # holds the `cli` package the children run
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 60
LAST_LINE_BYTES = 2048  # read from the log's end for its last line
LAST_LINE_CHARS = 400   # of that line, at most, in a one-line error


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
    """One Strata child process. proc: the running process, None when stopped or never started.
    frozen: SIGSTOPped by freeze(). starts: how many times it was spawned (restarts + 1)."""

    kind = "node"

    def __init__(self, name: str, log_path: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = REPO_ROOT, own_session: bool = True,
                 on_parent_death: int | None = signal.SIGKILL, brief_errors: bool = False) -> None:
        self.name = name
        self.log_path = Path(log_path).resolve()
        self.env = dict(env or {})           # on top of this process's environment
        self.cwd = cwd                       # None: this process's working directory
        self.own_session = own_session
        self.on_parent_death = on_parent_death   # None: the node outlives us
        self.brief_errors = brief_errors     # start errors as one line (a user's terminal), no log tail
        self.proc: subprocess.Popen[bytes] | None = None
        self.frozen = False
        self.starts = 0
        self._log_offset = 0                 # the log's size at the last spawn

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The node's command line."""

    @property
    @abc.abstractmethod
    def ready_marker(self) -> str:
        """Text of the log line that says the node serves."""

    @property
    def detached(self) -> bool:
        return self.on_parent_death is None

    @property
    def pid(self) -> int:
        return present(self.proc, "the process was started").pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def is_ready(self) -> bool:
        """Has this launch written its ready line?"""
        return self.ready_marker in self._log_since_spawn()

    def prepare(self) -> None:
        """Before each spawn: the directories the node needs."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)

    def spawn(self) -> None:
        """Start the process without waiting for it to serve."""
        self.prepare()
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = spawn(self.command(), on_parent_death=self.on_parent_death, cwd=self.cwd,
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                              start_new_session=self.own_session)
        self.frozen = False
        self.starts += 1

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S, *, deadline: float | None = None) -> None:
        """Wait (until `deadline`, else `timeout_s` from now) for this launch's ready line. A node
        that exits first raises StrataError; one not ready in time is killed, TimeoutExpired."""
        proc = present(self.proc, "the process was launched")
        if deadline is None:
            deadline = time.monotonic() + timeout_s
        try:
            wait_until_ready(self.is_ready, deadline=deadline, exit_code=proc.poll,
                             exited=self._exited_error, timed_out=lambda: self._not_ready_error(timeout_s))
        except TimeoutExpired:
            self.kill9()
            raise

    def launch(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Spawn and wait (bounded) until it serves."""
        self.spawn()
        self.wait_ready(timeout_s)

    def brief_details(self) -> dict[str, Any]:
        """What names this node in a one-line error (a port, say)."""
        return {}

    def _exited_error(self, returncode: int) -> StrataError:
        if self.brief_errors:
            return StrataError(f"a {self.kind} exited during start-up", **self.brief_details(),
                               returncode=returncode, reason=self.last_log_line())
        return StrataError(f"{self.name} exited during start-up", returncode=returncode, log=self.log_tail())

    def _not_ready_error(self, timeout_s: float) -> TimeoutExpired:
        if self.brief_errors:
            return TimeoutExpired(f"{self.kind} did not become ready", **self.brief_details())
        return TimeoutExpired(f"{self.name} not ready", timeout_s=timeout_s, log=self.log_tail())

    def _log_since_spawn(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def last_log_line(self) -> str:
        """The last line of the log (a child's one-line start error, already redacted by it)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - LAST_LINE_BYTES))
                lines = log.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:LAST_LINE_CHARS] if lines else ""

    def _signal(self, sig: int) -> bool:
        """`sig` to the node's group (own session) or to the node alone; False when it is gone."""
        if self.proc is None:
            return False
        if self.own_session:
            return signal_group(self.proc.pid, sig)
        if self.proc.poll() is not None:
            return False
        self.proc.send_signal(sig)
        return True

    def kill9(self) -> None:
        """Crash: SIGKILL (the group, with its own session), no flush, no deregistration."""
        if self.proc is None:
            return
        self._signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.proc = None
        self.frozen = False

    def signal_term(self) -> None:
        """SIGTERM without waiting (thawing a frozen node first, or the signal stays pending)."""
        if self.alive():
            self.thaw()
            present(self.proc, "alive").send_signal(signal.SIGTERM)

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
        if self.own_session:
            signal_group(self.proc.pid, signal.SIGKILL)   # anything it left in its group
        self.proc = None
        return code

    def close(self) -> None:
        """stop() that never raises: for finally blocks and context managers."""
        try:
            self.stop()
        except (StrataError, subprocess.TimeoutExpired):
            pass

    def freeze(self) -> None:
        """SIGSTOP: the node stops dead, its sockets stay open."""
        if self.alive() and self._signal(signal.SIGSTOP):
            self.frozen = True

    def thaw(self) -> None:
        """SIGCONT."""
        if self.frozen:
            self._signal(signal.SIGCONT)
        self.frozen = False

    def restart(self, *, crash: bool = False, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Stop (cleanly, or kill -9 with crash=True) and start again at the same ports and data."""
        if crash:
            self.kill9()
        else:
            self.stop()
        self.launch(timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_all_ready(nodes: Sequence[NodeProcess], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait for every spawned node's ready line within one shared bound."""
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        node.wait_ready(timeout_s, deadline=max(deadline, time.monotonic() + 0.5))


def stop_all(nodes: Sequence[NodeProcess], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM every node at once, wait within one shared bound, SIGKILL the rest. Never raises."""
    for node in nodes:
        node.signal_term()
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        try:
            node.stop(max(0.1, deadline - time.monotonic()))
        except (StrataError, subprocess.TimeoutExpired):
            pass
