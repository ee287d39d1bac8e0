"""The workload's processes, as the runner sees them: start, watch, drain, stop.

    workers = Workers(out_dir)
    workers.start(plan.commands(service_url, out_dir))     # [(name, argv)], one process each
    workers.dead()                                          # names that exited early, with codes
    workers.drain(producers_s=30, quiet_s=5, consumers_s=60)  # stop files, then bounded waits
    workers.stop()                                          # SIGTERM, bounded, then SIGKILL

Each process's stdout and stderr go to `<out>/logs/<name>.log`; it dies with the runner
(PR_SET_PDEATHSIG). Draining follows the workload's contract (chaos/workload): `stop-producers`
makes producers stop sending, settle what is pending and exit; once every consumer's history has
stopped growing for `quiet_s` (or `consumers_s` passed), `stop-consumers` makes consumers and
readers exit.

What must hold: every wait is bounded; `stop` leaves no process behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from chaos.history import HISTORY_DIR
from launch.parent_death import spawn
from launch.process import REPO_ROOT

STOP_PRODUCERS = "stop-producers"
STOP_CONSUMERS = "stop-consumers"
STOP_TIMEOUT_S = 20.0
POLL_S = 0.25


class Workers:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        (self.out_dir / "logs").mkdir(parents=True, exist_ok=True)

    def start(self, commands: list[tuple[str, list[str]]]) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        for name, argv in commands:
            log = open(self.out_dir / "logs" / f"{name}.log", "ab")
            self.procs[name] = spawn(argv, on_parent_death=signal.SIGKILL, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=str(REPO_ROOT), env=env)
            log.close()

    def run_once(self, name: str, argv: list[str], timeout_s: float) -> int | None:
        """Run one process to its end (bounded); its exit code, or None when it was killed."""
        self.start([(name, argv)])
        proc = self.procs.pop(name)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
            return None

    def dead(self) -> dict[str, int]:
        return {name: code for name, proc in self.procs.items() if (code := proc.poll()) is not None}

    def _history_size(self, prefixes: tuple[str, ...]) -> int:
        total = 0
        for path in (self.out_dir / HISTORY_DIR).glob("*.jsonl"):
            if path.name.startswith(prefixes):
                total += path.stat().st_size
        return total

    def drain(self, *, producers_s: float, quiet_s: float, consumers_s: float) -> None:
        (self.out_dir / STOP_PRODUCERS).touch()
        self._wait(lambda n: n.startswith("producer"), producers_s)
        deadline = time.monotonic() + consumers_s
        size, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            now = self._history_size(("consumer",))
            if now != size:
                size, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
            time.sleep(POLL_S)
        (self.out_dir / STOP_CONSUMERS).touch()
        self._wait(lambda _n: True, STOP_TIMEOUT_S)

    def _wait(self, which: object, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for name, proc in list(self.procs.items()):
            if not which(name):  # type: ignore[operator]
                continue
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
