"""The launcher base (launch/process.py) on real `strata bookie` processes (launch/bookie.py).

What must hold: a launch waits for this launch's ready line, never an earlier one in the log; a
node that exits during start-up raises with its log (or, `brief_errors`, one line naming its
port and its last log line); one not ready in time is killed; a clean stop returns the exit
code, a node that ignores SIGTERM is SIGKILLed and the stop raises, within the bound; freeze
and thaw stop and resume it; a node in its own session is signalled as a group, one that
shares ours is signalled alone.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from common.errors import StrataError, TimeoutExpired
from common.net import free_port
from launch.bookie import BookieProcess
from launch.process import pid_alive
from tests.support.waiting import wait_until

SIGNAL_WAIT_S = 10   # a signal is delivered asynchronously


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _bad_config(tmp_path: Path) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text("no_such_setting = 1\n")
    return path


def test_start_stop_restart_and_crash(tmp_path):
    with BookieProcess.start(tmp_path / "b") as bookie:
        assert bookie.alive() and bookie.starts == 1
        assert f"bookie ready {bookie.address}" in bookie.log_path.read_text()
        assert os.getsid(bookie.pid) == bookie.pid            # its own session
        assert bookie.stop() == 0 and bookie.proc is None and not bookie.alive()
        bookie.spawn()
        assert not bookie.is_ready()                           # the earlier ready line does not count
        bookie.wait_ready()
        assert bookie.starts == 2
        assert bookie.log_path.read_text().count(f"bookie ready {bookie.address}") == 2
        pid = bookie.pid
        bookie.restart(crash=True)                             # kill -9, then back at its port
        assert not pid_alive(pid) and bookie.alive() and bookie.pid != pid
        pid = bookie.pid
    assert not pid_alive(pid)                                  # the context manager stopped it


def test_an_exit_during_start_up_names_the_node_and_its_log(tmp_path):
    bookie = BookieProcess(tmp_path / "b", free_port(), config_path=_bad_config(tmp_path))
    with pytest.raises(StrataError, match=f"bookie-{bookie.port} exited during start-up") as info:
        bookie.launch()
    assert info.value.details["returncode"] == 1
    assert "unknown setting 'no_such_setting'" in str(info.value.details["log"])


def test_brief_errors_are_one_line_for_a_terminal(tmp_path):
    bookie = BookieProcess(tmp_path / "b", free_port(), config_path=_bad_config(tmp_path), brief_errors=True)
    with pytest.raises(StrataError) as info:
        bookie.launch()
    assert str(info.value).startswith("a bookie exited during start-up (")
    assert info.value.details["port"] == bookie.port
    assert info.value.details["reason"] == f"strata bookie: unknown setting 'no_such_setting' in {tmp_path}/bad.toml"
    assert "\n" not in str(info.value)


def test_a_node_not_ready_in_time_is_killed(tmp_path):
    bookie = BookieProcess(tmp_path / "b", free_port())
    started = time.monotonic()
    with pytest.raises(TimeoutExpired, match=f"bookie-{bookie.port} not ready"):
        bookie.launch(timeout_s=0.05)
    assert time.monotonic() - started < 15
    assert bookie.proc is None and not bookie.alive()


def test_a_node_that_ignores_sigterm_is_killed_after_the_bound(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b")
    try:
        pid = bookie.pid
        os.kill(pid, signal.SIGSTOP)            # hung: SIGTERM stays pending (freeze() would be thawed first)
        started = time.monotonic()
        with pytest.raises(TimeoutExpired, match="did not stop on SIGTERM"):
            bookie.stop(timeout_s=1.0)
        assert 1.0 <= time.monotonic() - started < 15
        assert not pid_alive(pid) and bookie.proc is None
    finally:
        bookie.close()


def test_freeze_and_thaw(tmp_path):
    with BookieProcess.start(tmp_path / "b") as bookie:
        bookie.freeze()
        assert bookie.frozen
        wait_until(lambda: _state(bookie.pid) == "T", SIGNAL_WAIT_S, what="the bookie stopped")
        bookie.thaw()
        assert not bookie.frozen
        wait_until(lambda: _state(bookie.pid) != "T", SIGNAL_WAIT_S, what="the bookie running again")
        bookie.freeze()
        assert bookie.stop() == 0                # a stop thaws first: the SIGTERM is handled


def test_a_node_sharing_our_group_is_signalled_alone(tmp_path):
    bookie = BookieProcess.start(tmp_path / "b", own_session=False)
    try:
        assert os.getpgid(bookie.pid) == os.getpgid(0)
        bookie.freeze()
        wait_until(lambda: _state(bookie.pid) == "T", SIGNAL_WAIT_S, what="the bookie stopped")
        # ... and we were not stopped with it: we are still running this test
        bookie.kill9()
        assert bookie.proc is None
    finally:
        bookie.close()
