"""The parent-death helper (launch/parent_death.py) with real processes: a starter process spawns
`sleep`, prints its pid, and is killed -9.

What must hold: the child gets the signal when its starter dies, also when the starter forked it
from a thread that has ended since (the spawner thread forks it, not the short-lived one); with
no signal asked for (detached) the child outlives its starter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from launch.process import REPO_ROOT, pid_alive
from tests.support.waiting import wait_until

WAIT_S = 20

STARTER = """
import signal, sys, threading, time
from launch.parent_death import spawn
how = sys.argv[1]
sig = None if how == "detached" else signal.SIGKILL
if how == "thread":   # forked on behalf of a thread that ends before we die
    box = []
    t = threading.Thread(target=lambda: box.append(spawn(["sleep", "300"], on_parent_death=sig)))
    t.start(); t.join()
    child = box[0]
else:
    child = spawn(["sleep", "300"], on_parent_death=sig, start_new_session=how == "detached")
print(child.pid, flush=True)
time.sleep(300)
"""


def _start(how: str) -> tuple[subprocess.Popen[str], int]:
    starter = subprocess.Popen([sys.executable, "-c", STARTER, how], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                               text=True)
    line = starter.stdout.readline() if starter.stdout else ""
    assert line.strip().isdigit(), f"the starter printed {line!r}"
    return starter, int(line)


@pytest.mark.parametrize("how", ["main", "thread"])
def test_the_child_dies_with_its_starter(how):
    starter, child = _start(how)
    try:
        if how == "thread":
            assert pid_alive(child), "the forking thread ended: the child must live on"
        starter.kill()
        starter.wait(timeout=WAIT_S)
        wait_until(lambda: not pid_alive(child), timeout_s=WAIT_S, what="the child to die with its starter")
    finally:
        starter.kill()
        starter.wait(timeout=WAIT_S)
        if pid_alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_detached_child_outlives_its_starter():
    starter, child = _start("detached")
    try:
        starter.kill()
        starter.wait(timeout=WAIT_S)
        # give a parent-death signal time to arrive, were there one
        with pytest.raises(AssertionError):
            wait_until(lambda: not pid_alive(child), timeout_s=1.0, what="the detached child to die")
        assert pid_alive(child)
    finally:
        starter.kill()
        starter.wait(timeout=WAIT_S)
        if pid_alive(child):
            os.kill(child, signal.SIGKILL)
