"""`strata cluster up|status|down` as a user runs it: separate, detached processes.

`up` starts PostgreSQL, SeaweedFS, 3 bookies and 2 brokers, prints the multi-host service URL
and both admin URLs, and returns while they keep running; after the official client produced
through that URL, `status -o json` shows every process running and registered, and each bundle
its topics use owned by one of the brokers; a second `up` on the same dir is refused; `down`
stops every process and PostgreSQL. Bad usage exits 2. Every wait is bounded.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from launch.process import pid_alive

REPO = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT_S = 120


def strata_cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", "cluster", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)


def _produce(service_url: str, topics: list[str]) -> None:
    """One message to each topic with the official client, through the multi-host URL."""
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        for topic in topics:
            client.create_producer(topic).send(b"x")
    finally:
        client.close()


def _remove_postgres_files(data_dir: Path) -> None:
    """pytest's 0700 temp dirs keep PostgreSQL (another user) out, so its files went to /tmp."""
    state = json.loads((data_dir / "cluster.json").read_text()) if (data_dir / "cluster.json").exists() else {}
    root = (state.get("postgres") or {}).get("root")
    if root and not Path(root).is_relative_to(data_dir):
        shutil.rmtree(root, ignore_errors=True)


def test_up_status_down(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "cluster")
    up = strata_cluster("up", "--data-dir", data_dir)
    try:
        assert up.returncode == 0, up.stderr
        service = re.search(r"^service URL (pulsar://\S+)$", up.stdout, re.M)
        assert service and len(service.group(1).split(",")) == 2, up.stdout
        assert len(re.findall(r"^admin URL http://127\.0\.0\.1:\d+$", up.stdout, re.M)) == 2
        assert "E/Qw/Qa 3/2/2" in up.stdout and "S3 endpoint http://" in up.stdout

        _produce(service.group(1), [f"persistent://public/default/up-{i}" for i in range(6)])

        status = strata_cluster("status", "--data-dir", data_dir, "-o", "json")
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert doc["service_url"] == service.group(1) and doc["metadata_error"] is None
        assert [(b["state"], b["registered"]) for b in doc["brokers"]] == [("running", True)] * 2
        broker_urls = {b["service_url"] for b in doc["brokers"]}
        owned = [u for u in doc["bundles"] if u["namespace"] == "public/default"]
        assert owned and all(u["owner"] in broker_urls for u in owned), doc["bundles"]
        assert [(b["state"], b["registered"]) for b in doc["bookies"]] == [("running", True)] * 3
        assert doc["s3"]["state"] == "running"
        table = strata_cluster("status", "--data-dir", data_dir)
        assert table.returncode == 0 and "bundle owners" in table.stdout and "bookie-3" in table.stdout

        again = strata_cluster("up", "--data-dir", data_dir)
        assert again.returncode == 1 and "is running" in again.stderr
    finally:
        down = strata_cluster("down", "--data-dir", data_dir)
        _remove_postgres_files(Path(data_dir))
    assert down.returncode == 0, down.stderr
    assert "stopped PostgreSQL" in down.stdout
    pids = [n["pid"] for n in doc["brokers"] + doc["bookies"]] + [doc["s3"]["pid"]]
    assert not any(pid_alive(pid) for pid in pids)
    after = json.loads(strata_cluster("status", "--data-dir", data_dir, "-o", "json").stdout)
    assert {n["state"] for n in after["brokers"] + after["bookies"]} == {"stopped"}
    assert after["metadata_error"] is not None   # PostgreSQL is down too


def test_bad_usage(tmp_path: Path) -> None:
    assert strata_cluster("up", "--data-dir", str(tmp_path / "c"), "--bookies", "0").returncode == 2
    missing = strata_cluster("status", "--data-dir", str(tmp_path / "none"))
    assert missing.returncode == 1 and "no cluster" in missing.stderr
    assert strata_cluster("down", "--data-dir", str(tmp_path / "none")).returncode == 1


def test_down_then_up_brings_the_same_cluster_back(tmp_path: Path) -> None:
    """`up` on a stopped cluster's dir starts it again: same URLs, the message is still there."""
    import pulsar

    data_dir = str(tmp_path / "cluster")
    topic = "persistent://public/default/kept"
    try:
        first = strata_cluster("up", "--data-dir", data_dir, "--no-s3")
        assert first.returncode == 0, first.stderr
        service_url = re.search(r"^service URL (\S+)$", first.stdout, re.M).group(1)
        client = pulsar.Client(service_url, operation_timeout_seconds=30)
        client.subscribe(topic, "s").close()
        client.create_producer(topic).send(b"still here")
        client.close()
        assert strata_cluster("down", "--data-dir", data_dir).returncode == 0

        second = strata_cluster("up", "--data-dir", data_dir)
        assert second.returncode == 0, second.stderr
        assert "starting the stopped cluster" in second.stdout
        assert re.search(r"^service URL (\S+)$", second.stdout, re.M).group(1) == service_url
        client = pulsar.Client(service_url, operation_timeout_seconds=30)
        consumer = client.subscribe(topic, "s")
        assert consumer.receive(timeout_millis=30_000).data() == b"still here"
        client.close()
    finally:
        strata_cluster("down", "--data-dir", data_dir)
        _remove_postgres_files(Path(data_dir))
