"""bench/procstat.py: the servers' CPU and RSS over an interval, with peak RSS sampled by a process
of its own (no thread in the benchmark's client process, whose event loop it would stall)."""

from __future__ import annotations

import subprocess
import sys
import threading

from bench.procstat import ProcSampler


def test_sampler_counts_a_session_and_starts_no_thread_here() -> None:
    code = "x = bytearray(32 * 1024 * 1024)\nprint('ready', flush=True)\nimport time\ntime.sleep(30)"
    server = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline() == b"ready\n"  # its RSS is there
        sampler = ProcSampler([server.pid])
        assert sampler.pids() == [server.pid]
        threads = threading.active_count()
        sampler.begin()
        assert threading.active_count() == threads
        usage = sampler.end()
        assert usage.rss_bytes_peak >= usage.rss_bytes_end > 32 * 1024 * 1024
        assert usage.cpu_s >= 0.0
    finally:
        server.kill()
        server.wait()
