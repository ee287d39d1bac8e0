"""Fixtures for the Kafka listener's client tests: a real `strata standalone` serving Kafka, a real
two-broker cluster, and the official Pulsar client for interop.

- `standalone`: ONE per run (session scope), shared by every module here: the tests only add topics
  of their own (helpers.unique_topic) and never restart it, so sharing keeps tests/kafka within its
  time budget. Ready only once its Kafka port accepts connections (bounded wait).
- `kafka_cluster`: one per module that asks for it: PostgreSQL, 2 bookies, 2 brokers, each broker with
  a Kafka port (launch/broker.py `kafka_port`); `kafka_cluster.kafka_bootstrap` names both.
- A log with a Traceback fails the run at teardown: an exception in the Kafka front end is a finding
  even when the client saw the right answer.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.support.cluster_proc import LocalCluster
from tests.support.standalone_proc import StandaloneProcess

KAFKA_READY_TIMEOUT_S = 30.0
CLUSTER_ENV = {"STRATA_BROKER_LOAD_REPORT_INTERVAL_MS": "1000"}


def wait_kafka_port(bootstrap: str, what: str, log: Path) -> None:
    """Every host:port of `bootstrap` accepts TCP connections within the bound, or fail with the log tail."""
    deadline = time.monotonic() + KAFKA_READY_TIMEOUT_S
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=1.0):
                    break
            except OSError as e:
                if time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
                    raise AssertionError(f"{what}: its Kafka listener {address} never accepted a connection "
                                         f"within {KAFKA_READY_TIMEOUT_S} s ({e}); log tail:\n{tail}") from e
                time.sleep(0.1)


def tracebacks(logs: list[tuple[str, Path]]) -> list[str]:
    found = []
    for name, path in logs:
        text = path.read_text(errors="replace") if path.exists() else ""
        if "Traceback" in text:
            at = text.index("Traceback")
            found.append(f"{name}:\n{text[max(0, at - 500):at + 3000]}")
    return found


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    data_dir = tmp_path_factory.mktemp("kafka-standalone") / "data"
    # one broker for the whole Kafka suite: a topic some test made and left idle past a minute (no
    # Pulsar subscription, a retention.ms shorter than Kafka's default) would be deleted as inactive
    # (broker_delete_inactive_topics_enabled, on by default as in Pulsar) while a later test expects it
    env = {"STRATA_BROKER_DELETE_INACTIVE_TOPICS_ENABLED": "false"}
    with StandaloneProcess.start(data_dir, env=env) as sa:
        wait_kafka_port(sa.kafka_bootstrap, "the standalone", sa.log_path)
        yield sa
        problems = tracebacks([("standalone", sa.log_path)])
    assert not problems, "the standalone logged a traceback:\n" + "\n".join(problems)


@pytest.fixture(scope="session")
def bootstrap(standalone: StandaloneProcess) -> str:
    return standalone.kafka_bootstrap


@contextlib.contextmanager
def checked_cluster(directory: Path, env: dict[str, str]) -> Iterator[LocalCluster]:
    """Two brokers serving Kafka (ready once the port accepts); a broker traceback fails the module."""
    c = LocalCluster.start(directory, brokers=2, bookies=2, e=2, qw=2, qa=2, lease_ms=3000, env=env)
    try:
        wait_kafka_port(c.kafka_bootstrap, "the cluster", c.brokers[0].log_path)
        yield c
        problems = tracebacks([(b.name, b.log_path) for b in c.brokers])
    finally:
        c.stop()
    assert not problems, "a broker logged a traceback:\n" + "\n".join(problems)


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with checked_cluster(tmp_path_factory.mktemp("kafka-cluster") / "c", CLUSTER_ENV) as c:
        yield c


def make_pulsar_client(service_url: str) -> pulsar.Client:
    """The official client, quiet, with bounded operations."""
    return pulsar.Client(service_url, operation_timeout_seconds=15,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


@pytest.fixture(scope="module")
def pulsar_client(standalone: StandaloneProcess) -> Iterator[pulsar.Client]:
    client = make_pulsar_client(standalone.service_url)
    yield client
    client.close()
