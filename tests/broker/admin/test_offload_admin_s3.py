"""The offload admin API with a real cold tier (the session's SeaweedFS, `s3_server`): manual
offload (204, 409 while running, SUCCESS with firstUnoffloadedMessage), offload fields in
internalStats, topic stats and /metrics, `strata admin topics offload` / `offload-status -w`,
automatic offload and deletion lag from topic policies, and a broker whose cold tier fails its
start-up check (wrong credentials, missing bucket): one ERROR line, it serves, offload-status
answers ERROR with the reason and an offload request is refused with it.

Ledgers roll every 5 entries; every topic has a durable subscription so retention keeps its
ledgers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from tests.broker.admin.test_offload_admin import NS, _cli, _path, http
from tests.support.admin_cli import run_admin
from tests.support.admin_http import metrics
from tests.support.standalone_proc import StandaloneProcess

ROLLOVER_ENTRIES = 5
OFFLOAD_TIMEOUT_S = 60.0
ENV = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0", "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200"}


@pytest.fixture(scope="module")
def sa(s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    env = {**s3_server.standalone_env(s3_server.new_bucket()), **ENV}
    with StandaloneProcess.start(tmp_path_factory.mktemp("offload-s3") / "data", env=env) as standalone:
        yield standalone


def _client(sa: StandaloneProcess) -> pulsar.Client:
    return pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def _produce(sa: StandaloneProcess, topic: str, messages: int) -> list[bytes]:
    """`messages` messages on `topic`, which keeps a durable subscription "keep" (nothing acked)."""
    payloads = [b"%s-%05d" % (topic.encode(), i) + os.urandom(200) for i in range(messages)]
    client = _client(sa)
    try:
        client.subscribe(topic, "keep").close()
        producer = client.create_producer(topic, batching_enabled=False)
        for payload in payloads:
            producer.send(payload)
    finally:
        client.close()
    return payloads


def _wait_status(sa: StandaloneProcess, topic: str) -> dict:
    deadline = time.monotonic() + OFFLOAD_TIMEOUT_S
    while True:
        status = http(sa, "GET", _path(topic) + "/offload")[1]
        assert isinstance(status, dict)
        if status["status"] != "RUNNING" or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def _metric(sa: StandaloneProcess, name: str, topic: str | None = None) -> float:
    for line in metrics(sa.admin_url).splitlines():
        if line.startswith(name + "{") and (topic is None or f'topic="{topic}"' in line):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name} not found")


def _read_all(sa: StandaloneProcess, topic: str, count: int) -> list[bytes]:
    client = _client(sa)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        return [reader.read_next(15_000).data() for _ in range(count)]
    finally:
        client.close()


def test_manual_offload_runs_once_and_shows_in_every_stat(sa: StandaloneProcess) -> None:
    topic = f"persistent://{NS}/manual-offload-{os.getpid()}"
    payloads = _produce(sa, topic, 12 * ROLLOVER_ENTRIES + 2)
    path = _path(topic)
    before_stats = http(sa, "GET", path + "/internalStats")[1]
    ledgers = before_stats["ledgers"]
    before = {"ledgerId": ledgers[-1]["ledgerId"], "entryId": 0, "partitionIndex": -1}
    assert http(sa, "PUT", path + "/offload", before) == (204, None)
    assert http(sa, "PUT", path + "/offload", before) == (409, {"reason": "Offload already running"})
    status = _wait_status(sa, topic)
    assert status["status"] == "SUCCESS" and status["lastError"] == ""
    assert status["firstUnoffloadedMessage"] == before
    assert status["progress"]["entriesDone"] == status["progress"]["entriesTotal"] == 12 * ROLLOVER_ENTRIES

    after = http(sa, "GET", path + "/internalStats")[1]
    flags = {ledger["ledgerId"]: ledger["offloaded"] for ledger in after["ledgers"]}
    closed = [ledger for ledger in ledgers[:-1] if ledger["entries"] > 0]
    assert all(flags[ledger["ledgerId"]] for ledger in closed)
    assert not flags[before["ledgerId"]], "the open ledger is never offloaded"
    stats = http(sa, "GET", path + "/stats")[1]
    offloaded_bytes = sum(ledger["size"] for ledger in closed)
    assert stats["offloadedStorageSize"] == offloaded_bytes > 0
    assert stats["storageSize"] == after["totalSize"] >= offloaded_bytes
    assert stats["lastOffloadLedgerId"] == closed[-1]["ledgerId"]
    assert stats["lastOffloadSuccessTimeStamp"] > 0 and stats["lastOffloadFailureTimeStamp"] == 0
    assert _metric(sa, "pulsar_storage_offloaded_size", topic) == offloaded_bytes
    assert _read_all(sa, topic, len(payloads)) == payloads


def test_strata_admin_offload_and_wait_for_it(sa: StandaloneProcess, capsys) -> None:
    topic = f"persistent://{NS}/cli-offload-{os.getpid()}"
    _produce(sa, topic, 6 * ROLLOVER_ENTRIES + 1)
    stats = http(sa, "GET", _path(topic) + "/internalStats")[1]
    newest_closed = stats["ledgers"][-2]["ledgerId"]
    # keep the open ledger and the newest closed one: offload everything before the latter
    threshold = str(stats["currentLedgerSize"] + stats["ledgers"][-2]["size"])
    code, out, err = _cli(sa, capsys, "topics", "offload", "-s", threshold, topic)
    assert (code, err) == (0, "")
    assert out == f"Offload triggered for {topic} for messages before {newest_closed}:0:-1\n"
    code, out, _ = _cli(sa, capsys, "topics", "offload-status", "-w", topic)
    assert (code, out) == (0, "Offload was a success\n")
    flags = [ledger["offloaded"] for ledger in http(sa, "GET", _path(topic) + "/internalStats")[1]["ledgers"]]
    assert flags == [True] * (len(flags) - 2) + [False, False]


def test_automatic_offload_and_deletion_lag_from_topic_policies(sa: StandaloneProcess) -> None:
    topic = f"persistent://{NS}/auto-offload-{os.getpid()}"
    path = _path(topic)
    policies = {"managedLedgerOffloadThresholdInBytes": 0, "managedLedgerOffloadDeletionLagInMillis": 0}
    assert http(sa, "POST", path + "/offloadPolicies", policies) == (204, None)
    deleted_before = _metric(sa, "strata_offload_bookie_copies_deleted_total")
    payloads = _produce(sa, topic, 6 * ROLLOVER_ENTRIES + 3)
    deadline = time.monotonic() + OFFLOAD_TIMEOUT_S
    while True:
        ledgers = http(sa, "GET", path + "/internalStats")[1]["ledgers"]
        closed = ledgers[:-1]
        deleted = _metric(sa, "strata_offload_bookie_copies_deleted_total") - deleted_before
        if (all(ledger["offloaded"] for ledger in closed) and deleted >= len(closed)) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(closed) >= 6 and all(ledger["offloaded"] for ledger in closed)
    assert deleted >= len(closed), "the bookie copies went after a lag of 0"
    assert _read_all(sa, topic, len(payloads)) == payloads    # from S3 now


@pytest.mark.parametrize("fault", ["wrong-credentials", "missing-bucket"])
def test_an_unusable_cold_tier_is_reported_and_the_broker_serves(
        s3_server: Any, tmp_path: Any, fault: str) -> None:
    env = {**s3_server.standalone_env(s3_server.new_bucket()), **ENV}
    if fault == "wrong-credentials":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    else:
        env["STRATA_OFFLOAD_S3_BUCKET"] = f"no-such-bucket-{os.getpid()}"
    with StandaloneProcess.start(tmp_path / "data", env=env) as sa:
        topic = f"persistent://{NS}/unusable-tier-{os.getpid()}"
        payloads = _produce(sa, topic, 2 * ROLLOVER_ENTRIES + 1)
        assert _read_all(sa, topic, len(payloads)) == payloads       # the broker serves
        errors = [line for line in sa.log_path.read_text().splitlines()
                  if " ERROR " in line and "cold tier" in line]
        assert len(errors) == 1, errors
        status = http(sa, "GET", _path(topic) + "/offload")[1]
        assert status["status"] == "ERROR" and "cold tier not usable" in status["lastError"]
        ledgers = http(sa, "GET", _path(topic) + "/internalStats")[1]["ledgers"]
        code, answer = http(sa, "PUT", _path(topic) + "/offload", {"ledgerId": ledgers[-1]["ledgerId"], "entryId": 0})
        assert code == 412 and answer["reason"] == status["lastError"]
        assert run_admin(["--admin-url", sa.admin_url, "topics", "offload-status", topic]) == 1
