"""`strata standalone`'s embedded S3 server (SeaweedFS `weed mini`; the launcher's own tests are in
tests/launch/test_seaweed.py).

What must hold: `strata standalone` starts one by default with its credentials kept in
`D/s3/credentials.json` (mode 0600), refuses other credentials, keeps data and credentials across
a restart and a kill -9 (which takes SeaweedFS down with it), and `--no-s3` or an external
endpoint starts none.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pulsar
import pytest

from admin_client import request
from common.errors import ColdTierAccessDenied
from common.invariant import present
from launch.seaweed import S3Credentials, _client_error, s3_client
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ROLLOVER_ENTRIES = 5
ROLLOVER_ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
                "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}


def _weed_children(pid: int) -> list[int]:
    """PIDs of `weed` processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if comm == "weed" and ppid == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _bucket_keys(endpoint: str, creds: dict, bucket: str = "strata-offload") -> list[str]:
    client = s3_client(endpoint, S3Credentials(creds["access_key"], creds["secret_key"]))
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def _admin(sa: StandaloneProcess, method: str, path: str, body: object = None) -> tuple[int, object]:
    answer = request(method, sa.admin_url + path, body, timeout_s=20)    # an error status raises
    return answer.status, answer.json()


def _produce_and_offload(sa: StandaloneProcess, topic: str, count: int) -> list[bytes]:
    """`count` messages on `topic` (subscription "keep"), then every closed ledger offloaded."""
    payloads = [b"m-%04d" % i for i in range(count)]
    client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        client.subscribe(topic, "keep").close()
        producer = client.create_producer(topic, batching_enabled=False)
        for payload in payloads:
            producer.send(payload)
    finally:
        client.close()
    path = "/admin/v2/" + topic.replace("://", "/")
    newest = _admin(sa, "GET", path + "/internalStats")[1]["ledgers"][-1]["ledgerId"]  # type: ignore[index]
    assert _admin(sa, "PUT", path + "/offload", {"ledgerId": newest, "entryId": 0, "partitionIndex": -1})[0] == 204

    def finished() -> dict | None:
        status = _admin(sa, "GET", path + "/offload")[1]
        assert isinstance(status, dict)
        return status if status["status"] != "RUNNING" else None

    status = wait_until(finished, timeout_s=60, what="the offload to finish")
    assert isinstance(status, dict) and status["status"] == "SUCCESS", status
    return payloads


def _read_all(sa: StandaloneProcess, topic: str, count: int) -> list[bytes]:
    client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        return [reader.read_next(15_000).data() for _ in range(count)]
    finally:
        client.close()


def test_standalone_embeds_s3_and_keeps_credentials_and_data_across_restarts(tmp_path):
    """The standalone's broker offloads into its own SeaweedFS, and reads it back after a clean
    restart and after a kill -9 (which takes SeaweedFS down with it)."""
    from botocore.exceptions import ClientError

    topic = "persistent://public/default/embedded-s3"
    with StandaloneProcess.start(tmp_path / "data", embedded_s3=True, env=ROLLOVER_ENV) as sa:
        assert f"S3 endpoint {sa.s3_endpoint} bucket strata-offload" in sa.log_tail()
        [weed_pid] = _weed_children(sa.pid)
        cred_path = sa.data_dir / "s3" / "credentials.json"
        assert stat.S_IMODE(cred_path.stat().st_mode) == 0o600
        creds, endpoint = sa.s3_credentials(), sa.s3_endpoint
        assert _bucket_keys(endpoint, creds) == []
        payloads = _produce_and_offload(sa, topic, 4 * ROLLOVER_ENTRIES + 3)
        every_key = _bucket_keys(endpoint, creds)
        keys = [k for k in every_key if "!iceberg/" not in k]      # beside them: the topic's Iceberg table
        assert len(keys) == 4 and all(k.startswith("strata/public/default/embedded-s3/ledger-") for k in keys)
        assert any(k.startswith("strata/public/default/embedded-s3!iceberg/metadata/") for k in every_key)
        wrong = s3_client(endpoint, S3Credentials(creds["access_key"], "not-the-secret"))
        with pytest.raises(ClientError) as info:
            wrong.list_objects_v2(Bucket="strata-offload")
        assert isinstance(_client_error(info.value, "strata-offload"), ColdTierAccessDenied)

        sa.restart()  # clean stop: the broker, the bookies, then SeaweedFS
        assert not _alive(weed_pid)
        assert sa.s3_endpoint == endpoint and sa.s3_credentials() == creds
        assert _bucket_keys(endpoint, creds) == every_key
        assert _read_all(sa, topic, len(payloads)) == payloads

        # kill -9 of the standalone alone (not its group): SeaweedFS dies with it
        [weed_pid] = _weed_children(sa.pid)
        os.kill(sa.pid, signal.SIGKILL)
        present(sa.proc, "running").wait(timeout=10)
        wait_until(lambda: not _alive(weed_pid), timeout_s=10, what="weed to die with its parent")
        sa.proc = None
        sa.launch()
        assert sa.s3_credentials() == creds
        assert _read_all(sa, topic, len(payloads)) == payloads


def test_no_s3_and_external_endpoint_embed_nothing(tmp_path, s3_server):
    with StandaloneProcess.start(tmp_path / "a") as sa:  # --no-s3
        assert _weed_children(sa.pid) == []
        assert "S3 endpoint" not in sa.log_tail()
        assert not (sa.data_dir / "s3").exists()
    env = s3_server.standalone_env(s3_server.new_bucket())
    del env["STRATA_OFFLOAD_DRIVER"]  # an endpoint alone selects S3
    with StandaloneProcess.start(tmp_path / "b", env=env, embedded_s3=True) as sa:
        assert _weed_children(sa.pid) == []
        assert f"S3 endpoint {s3_server.endpoint} bucket {env['STRATA_OFFLOAD_S3_BUCKET']}" in sa.log_tail()
        assert not (sa.data_dir / "s3").exists()
