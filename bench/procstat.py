"""Server RSS and CPU (psutil): all of a system's server processes summed.

A system's processes are the members of the sessions of the server processes the harness
started (bench/server.py and launch/standalone.py start each in its own session), so a standalone's bookies, an Erlang
VM's helper processes and the like are counted with their leader. CPU is user + system seconds,
RSS the resident set size, both as psutil reads them. A process that exits between two samples
is simply absent from the later one; a sampler thread records peak RSS.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import psutil

SAMPLE_PERIOD_S = 0.25


def session_pids(session_ids: list[int]) -> list[int]:
    """Every live process whose session id is one of `session_ids`."""
    wanted = set(session_ids)
    found = []
    for pid in psutil.pids():
        try:
            if os.getsid(pid) in wanted:
                found.append(pid)
        except OSError:  # gone since psutil listed it
            continue
    return found


def cpu_s(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def rss_bytes(pid: int) -> int:
    try:
        return psutil.Process(pid).memory_info().rss
    except psutil.Error:
        return 0


@dataclass
class Usage:
    """What the servers used between `ProcSampler.begin()` and `end()`."""
    cpu_s: float          # CPU seconds (user + system) of all server processes
    rss_bytes_end: int    # summed RSS at the end
    rss_bytes_peak: int   # largest summed RSS seen by the sampler


class ProcSampler:
    """CPU delta and RSS of the processes in the given sessions over one measured interval."""

    def __init__(self, session_ids: list[int]) -> None:
        self.session_ids = list(session_ids)
        self._cpu_start: dict[int, float] = {}
        self._peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pids(self) -> list[int]:
        return session_pids(self.session_ids)

    def total_rss_bytes(self) -> int:
        return sum(rss_bytes(pid) for pid in self.pids())

    def total_cpu_s(self) -> float:
        return sum(cpu_s(pid) for pid in self.pids())

    def begin(self) -> None:
        self._cpu_start = {pid: cpu_s(pid) for pid in self.pids()}
        self._peak = self.total_rss_bytes()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            self._peak = max(self._peak, self.total_rss_bytes())

    def end(self) -> Usage:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        pids = self.pids()
        used = sum(cpu_s(pid) - self._cpu_start.get(pid, 0.0) for pid in pids)
        rss = sum(rss_bytes(pid) for pid in pids)
        return Usage(cpu_s=max(0.0, used), rss_bytes_end=rss, rss_bytes_peak=max(self._peak, rss))
