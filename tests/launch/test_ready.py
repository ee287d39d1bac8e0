"""The one ready-wait (launch/ready.py) on real processes.

What must hold: it returns as soon as the probe says ready; a process that exits first is
reported at once with its exit code, not at the deadline; the deadline is a bound; a probe that
is true counts even when the process has already exited.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from common.errors import StrataError, TimeoutExpired
from launch.ready import wait_until_ready


def _exited(code: int) -> StrataError:
    return StrataError("exited during start-up", returncode=code)


def _timed_out() -> TimeoutExpired:
    return TimeoutExpired("not ready")


def test_ready_as_soon_as_the_probe_says_so(tmp_path):
    marker = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", f"import time, pathlib; time.sleep(0.3); "
                             f"pathlib.Path({str(marker)!r}).touch(); time.sleep(30)"])
    try:
        started = time.monotonic()
        wait_until_ready(marker.exists, deadline=started + 20, exit_code=proc.poll, exited=_exited,
                         timed_out=_timed_out)
        assert marker.exists() and time.monotonic() - started < 10
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_an_exit_before_ready_is_reported_at_once_with_its_code():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    try:
        started = time.monotonic()
        with pytest.raises(StrataError, match="exited during start-up") as info:
            wait_until_ready(lambda: False, deadline=started + 30, exit_code=proc.poll, exited=_exited,
                             timed_out=_timed_out)
        assert info.value.details["returncode"] == 7
        assert time.monotonic() - started < 10        # long before the deadline
    finally:
        proc.wait(timeout=10)


def test_the_deadline_is_a_bound():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutExpired):
            wait_until_ready(lambda: False, deadline=started + 0.5, exit_code=proc.poll, exited=_exited,
                             timed_out=_timed_out)
        assert 0.5 <= time.monotonic() - started < 2
        assert proc.poll() is None        # the wait only waits: the caller decides what to stop
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_ready_wins_over_an_exit():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=10)
    wait_until_ready(lambda: True, deadline=time.monotonic() + 1, exit_code=proc.poll, exited=_exited,
                     timed_out=_timed_out)
