"""The SeaweedFS launcher (launch/seaweed.py), through the session's S3 server (tests/support/seaweed.py).

What must hold: the server serves S3 with the credentials it was started with and refuses others
(403, a typed error); a restart keeps data and credentials, also when it is made from a
short-lived thread (the parent-death signal follows the forking thread); a server dies with the
process that started it, a detached one outlives it in a session of its own.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from common.errors import ColdTierAccessDenied
from launch.process import REPO_ROOT, pid_alive
from launch.seaweed import _client_error
from tests.support.waiting import wait_until

CHILD_TIMEOUT_S = 60
WARM_UP_S = 30   # a restarted server may answer 500 to reads for a moment (see _read_after_restart)


def _read_after_restart(s3_server, bucket: str, key: str) -> bytes:
    """The object, read from a just-restarted server. `weed mini` answers S3 (and lists and creates
    buckets, which is what start() waits for) a moment before its volume server has registered
    again: until then a read gets 500 InternalError, which the cold tier treats as retriable
    (ColdTierUnavailable). So the first read is retried, bounded; a lost object still fails."""
    from botocore.exceptions import ClientError

    def read() -> bytes | None:
        try:
            return bytes(s3_server.boto3_client().get_object(Bucket=bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if exc.response["ResponseMetadata"]["HTTPStatusCode"] < 500:
                raise
            return None
    return bytes(wait_until(read, WARM_UP_S, what=f"{key} readable after the restart", interval_s=0.2))


def test_session_server_serves_and_keeps_data_across_restart(s3_server):
    bucket = s3_server.new_bucket()
    client = s3_server.boto3_client()
    client.put_object(Bucket=bucket, Key="a/b", Body=b"payload")
    s3_server.restart()
    assert _read_after_restart(s3_server, bucket, "a/b") == b"payload"
    env = s3_server.standalone_env(bucket, prefix="p")
    assert env["STRATA_OFFLOAD_S3_ENDPOINT"] == s3_server.endpoint
    assert env["STRATA_OFFLOAD_S3_BUCKET"] == bucket and env["STRATA_OFFLOAD_DRIVER"] == "s3"


def _sigkill_pending(pid: int) -> bool:
    """SIGKILL queued on the process (thread-directed or process-wide), from /proc/<pid>/status."""
    masks = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)
    return any(int(masks[field], 16) & (1 << (signal.SIGKILL - 1)) for field in ("SigPnd", "ShdPnd"))


def test_server_restarted_from_a_short_lived_thread_outlives_it(s3_server):
    """PR_SET_PDEATHSIG follows the forking thread: a restart from asyncio.to_thread (whose
    executor ends with its loop) must not leave a server that dies with that thread."""
    bucket = s3_server.new_bucket()
    s3_server.boto3_client().put_object(Bucket=bucket, Key="k", Body=b"v")

    def restart_here() -> int:
        s3_server.restart()
        return threading.get_native_id()

    async def restart() -> int:
        return await asyncio.to_thread(restart_here)

    thread_id = asyncio.run(restart())  # the executor's threads exit here
    # The kernel sends a death signal tied to that thread while the thread exits, before it leaves
    # /proc/self/task. Once it has left, the server either got SIGKILL (pending, or already dead)
    # or never will: no grace period to guess.
    wait_until(lambda: not os.path.exists(f"/proc/self/task/{thread_id}"), 10,
               what="the restarting thread gone from the OS")
    assert s3_server.running and not _sigkill_pending(s3_server.server.proc.pid)
    assert _read_after_restart(s3_server, bucket, "k") == b"v"


def test_bad_credentials_are_refused(s3_server):
    from botocore.exceptions import ClientError

    bucket = s3_server.new_bucket()
    for access_key, secret_key in ((s3_server.access_key, "wrong-secret"), ("UNKNOWNKEY", "x" * 20)):
        client = s3_server.boto3_client(access_key, secret_key)
        with pytest.raises(ClientError) as info:
            client.list_objects_v2(Bucket=bucket)
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert isinstance(_client_error(info.value, bucket), ColdTierAccessDenied)


# A process that starts a SeaweedFS server, prints its pid and waits to be killed.
STARTER = """
import sys, time
from pathlib import Path
from launch.seaweed import EmbeddedS3, S3Credentials
root = Path(sys.argv[1])
s3 = EmbeddedS3(root / "data", S3Credentials.generate(), bucket="strata-test", log_path=root / "weed.log",
                detached=sys.argv[2] == "detached")
s3.start()
print(s3.proc.pid, flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("detached", [False, True])
def test_a_server_dies_with_its_starter_unless_detached(tmp_path, detached):
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path), "detached" if detached else "tied"],
                               cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    weed_pid = 0
    try:
        line = starter.stdout.readline() if starter.stdout else ""
        assert line.strip().isdigit(), f"the starter printed {line!r}; weed.log:\n{_tail(tmp_path / 'weed.log')}"
        weed_pid = int(line)
        assert (os.getsid(weed_pid) == weed_pid) == detached     # detached: a session of its own
        starter.kill()
        starter.wait(timeout=CHILD_TIMEOUT_S)
        if detached:
            time.sleep(1.0)
            assert pid_alive(weed_pid), "a detached server must outlive its starter"
        else:
            wait_until(lambda: not pid_alive(weed_pid), timeout_s=10, what="weed to die with its starter")
    finally:
        starter.kill()
        starter.wait(timeout=CHILD_TIMEOUT_S)
        if weed_pid and pid_alive(weed_pid):
            os.kill(weed_pid, signal.SIGKILL)


def _tail(path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return "(no log)"
