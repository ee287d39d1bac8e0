"""A broker port another process holds stops `strata standalone` with a message naming it (no
traceback). (The bookies' ports: tests/launch/test_standalone_children.py.)"""

import socket
import subprocess
import sys

from common.net import free_port
from tests.support.standalone_proc import REPO_ROOT


def test_a_port_in_use_is_a_message_not_a_traceback(tmp_path):
    with socket.socket() as holder:     # e.g. a second `strata standalone --secure` on 6651
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        argv = ["standalone", "--data-dir", str(tmp_path / "d"), "--no-s3", "--port", str(held),
                "--admin-port", str(free_port())]
        done = subprocess.run([sys.executable, "-m", "cli.main", *argv], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"('127.0.0.1', {held}): address already in use" in done.stderr
    assert "--port" in done.stderr.splitlines()[-1]
