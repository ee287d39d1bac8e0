"""Server RSS and CPU (psutil): all of a system's server processes summed.

A system's processes are the members of the sessions of the server processes the harness
started (bench/server.py and launch/standalone.py start each in its own session), so a standalone's bookies, an Erlang
VM's helper processes and the like are counted with their leader. CPU is user + system seconds,
RSS the resident set size, both as psutil reads them. A process that exits between two samples
is simply absent from the later one.

Peak RSS is sampled every SAMPLE_PERIOD_S by a separate process (`_sample_peak`), never by a
thread of the benchmark's own process: walking every pid under the GIL stalled the client's
event loop in the measured interval (e2e-5k p99, docs/benchmarks.md "Why the two end-to-end
figures differed"). CPU is read once at `begin()` and once at `end()`, as `strata perf` does.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from multiprocessing.connection import Connection

import psutil

SAMPLE_PERIOD_S = 0.25
SAMPLER_STOP_WAIT_S = 10.0  # bound on end()'s wait for the sampler process's answer


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
    """CPU delta and RSS of the processes in the given sessions over one measured interval.
    _sampler: the peak-RSS sampler process and its pipe while an interval is open, else None."""

    def __init__(self, session_ids: list[int]) -> None:
        self.session_ids = list(session_ids)
        self._cpu_start: dict[int, float] = {}
        self._peak = 0
        self._sampler: tuple[multiprocessing.process.BaseProcess, Connection] | None = None

    def pids(self) -> list[int]:
        return session_pids(self.session_ids)

    def total_rss_bytes(self) -> int:
        return sum(rss_bytes(pid) for pid in self.pids())

    def total_cpu_s(self) -> float:
        return sum(cpu_s(pid) for pid in self.pids())

    def begin(self) -> None:
        self._cpu_start = {pid: cpu_s(pid) for pid in self.pids()}
        self._peak = self.total_rss_bytes()
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=_sample_peak, args=(self.session_ids, theirs), daemon=True)
        proc.start()
        theirs.close()
        self._sampler = (proc, ours)
        # its first sample says it is running: its start-up (an interpreter) stays out of the interval
        if ours.poll(SAMPLER_STOP_WAIT_S):
            self._peak = max(self._peak, int(ours.recv()))

    def _sampled_peak(self) -> int:
        """Stop the sampler process; the peak it saw (0 if it did not answer in time)."""
        if self._sampler is None:
            return 0
        proc, conn = self._sampler
        self._sampler = None
        peak = 0
        try:
            conn.send("stop")
            if conn.poll(SAMPLER_STOP_WAIT_S):
                peak = int(conn.recv())
        except (OSError, EOFError):  # it died: its samples are lost, begin/end still count
            pass
        conn.close()
        proc.join(SAMPLER_STOP_WAIT_S)
        if proc.is_alive():
            proc.kill()
        return peak

    def end(self) -> Usage:
        sampled = self._sampled_peak()
        pids = self.pids()
        used = sum(cpu_s(pid) - self._cpu_start.get(pid, 0.0) for pid in pids)
        rss = sum(rss_bytes(pid) for pid in pids)
        return Usage(cpu_s=max(0.0, used), rss_bytes_end=rss, rss_bytes_peak=max(self._peak, sampled, rss))


def _sample_peak(session_ids: list[int], conn: Connection) -> None:
    """In the sampler process: the largest summed RSS of the sessions, sampled until told to stop."""
    peak = sum(rss_bytes(pid) for pid in session_pids(session_ids))
    conn.send(peak)
    while not conn.poll(SAMPLE_PERIOD_S):
        peak = max(peak, sum(rss_bytes(pid) for pid in session_pids(session_ids)))
    conn.send(peak)
