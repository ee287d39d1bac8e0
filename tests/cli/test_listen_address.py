"""Every port listens where the settings say: a real `strata standalone` on 127.0.0.2.

The broker's Pulsar port, its admin HTTP port (with /metrics) and the bookie's gRPC and data
ports are bound to `*_bind_host` = 127.0.0.2 (set through STRATA_* environment variables, which
reach the bookie subprocesses too); nothing answers on 127.0.0.1 for those ports; LOOKUP answers
and the bookie's registration carry the advertised 127.0.0.2; the official client produces and
consumes through it. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common.net import free_port
from tests.support.admin_http import metrics
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.2"


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _registered_bookies(data_dir: Path) -> list[dict]:
    import metadata
    store = metadata.open_store(f"sqlite:///{data_dir / 'metadata.db'}")
    try:
        return [json.loads(found.value) for _, found in store.list_prefix("/bookies/available")
                if found.value]
    finally:
        store.close()


@pytest.fixture
def standalone_on_127_0_0_2(tmp_path):
    if not _listening_possible():
        pytest.fail("127.0.0.2 is not a loopback address on this machine")
    port, admin_port = free_port(HOST), free_port(HOST)
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "STRATA_BROKER_BIND_HOST": HOST, "STRATA_BROKER_ADMIN_BIND_HOST": HOST,
           "STRATA_BROKER_ADVERTISED_HOST": HOST, "STRATA_BOOKIE_BIND_HOST": HOST}
    data_dir = tmp_path / "data"
    log_path = tmp_path / "standalone.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(data_dir),
                                 "--port", str(port), "--admin-port", str(admin_port)],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: proc.poll() is not None or f"admin URL http://{HOST}:{admin_port}" in log_path.read_text(),
                   60, what="the standalone's admin URL line")
        assert proc.poll() is None, log_path.read_text()
        yield data_dir, port, admin_port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _listening_possible() -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, 0))
        except OSError:
            return False
    return True


def test_every_port_listens_on_the_configured_host(standalone_on_127_0_0_2):
    data_dir, port, admin_port = standalone_on_127_0_0_2
    assert _listening(HOST, port) and _listening(HOST, admin_port)
    assert not _listening("127.0.0.1", port) and not _listening("127.0.0.1", admin_port)

    bookies = _registered_bookies(data_dir)
    assert len(bookies) == 1, bookies
    bookie_host, bookie_port = bookies[0]["address"].rsplit(":", 1)
    assert bookie_host == HOST
    for p in (int(bookie_port), bookies[0]["data_port"]):      # gRPC and framed data port
        assert _listening(HOST, p) and not _listening("127.0.0.1", p), p

    assert metrics(f"http://{HOST}:{admin_port}", timeout_s=10)        # answers 200

    import pulsar
    client = pulsar.Client(f"pulsar://{HOST}:{port}", operation_timeout_seconds=30)
    try:
        consumer = client.subscribe("listen-address", "sub")
        producer = client.create_producer("listen-address")
        producer.send(b"through 127.0.0.2")
        msg = consumer.receive(30_000)
        assert msg.data() == b"through 127.0.0.2"
        consumer.acknowledge(msg)
    finally:
        client.close()
