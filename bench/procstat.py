"""Server RSS and CPU from /proc: all of a system's server processes summed.

A system's processes are the members of the sessions of the server processes the harness
started (bench/server.py starts each in its own session), so a standalone's bookies, an Erlang
VM's helper processes and the like are counted with their leader. CPU is utime + stime from
/proc/<pid>/stat (clock ticks); RSS is VmRSS from /proc/<pid>/status. A process that exits
between two samples is simply absent from the later one; a sampler thread records peak RSS.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SAMPLE_PERIOD_S = 0.25


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after its last ')'
    return raw[raw.rindex(")") + 2:].split()


def session_pids(session_ids: list[int]) -> list[int]:
    """Every live process whose session id is one of `session_ids`."""
    wanted = set(session_ids)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        # after comm: state(0) ppid(1) pgrp(2) session(3)
        if fields is not None and int(fields[3]) in wanted:
            found.append(int(name))
    return found


def cpu_s(pid: int) -> float:
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # utime is field 14, stime 15 (1-based); here offset by the 2 fields before state
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
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
