"""The offload admin API against a real standalone without a cold tier: Pulsar's paths, JSON and
status codes; bad input answers 400/412 with a reason and changes nothing; internalStats and the
offload fields of topic stats and /metrics; `strata admin` offload commands end to end.

Ledgers roll every 5 entries here, so a few dozen messages span several ledgers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pulsar
import pytest

from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call, metrics
from tests.support.standalone_proc import StandaloneProcess

ROLLOVER_ENTRIES = 5
NS = "public/default"
ENV = {"STRATA_OFFLOAD_DRIVER": "", "STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
       "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0"}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("offload-admin") / "data", env=ENV) as sa:
        yield sa


def http(sa: StandaloneProcess, method: str, path: str, body: object = None, raw: bytes | None = None,
         ) -> tuple[int, object]:
    return admin_call(sa.admin_url, method, path, body, raw=raw)


def _topic_with_ledgers(sa: StandaloneProcess, local: str, messages: int = 23) -> str:
    topic = f"persistent://{NS}/{local}-{os.getpid()}"
    client = pulsar.Client(sa.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(topic, "sub-a")
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(messages):
            producer.send(b"m%d" % i)
        for _ in range(3):
            consumer.acknowledge(consumer.receive(10_000))
    finally:
        client.close()
    return topic


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.split("://", 1)[1]


# --- namespace policies ------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", ["offloadThreshold", "offloadThresholdInSeconds"])
def test_namespace_thresholds_default_set_and_refuse_bad_values(standalone, suffix: str) -> None:
    path = f"/admin/v2/namespaces/{NS}/{suffix}"
    assert http(standalone, "GET", path) == (200, -1)
    assert http(standalone, "PUT", path, 10 * 1024 * 1024) == (204, None)
    assert http(standalone, "GET", path) == (200, 10 * 1024 * 1024)
    for bad, status in (("10M", 400), (1.5, 400), (True, 400), (None, 400), ({"v": 1}, 400), (2**63, 412)):
        code, answer = http(standalone, "PUT", path, bad) if bad is not None else \
            http(standalone, "PUT", path, raw=b"")
        assert code == status, (bad, code, answer)
        assert isinstance(answer, dict) and answer["reason"]
        assert http(standalone, "GET", path) == (200, 10 * 1024 * 1024), "nothing changed"
    assert http(standalone, "PUT", path, raw=b"{not json")[0] == 400
    assert http(standalone, "PUT", path, -1) == (204, None)
    assert http(standalone, "GET", path) == (200, -1)


def test_namespace_deletion_lag_get_set_clear(standalone) -> None:
    path = f"/admin/v2/namespaces/{NS}/offloadDeletionLagMs"
    assert http(standalone, "GET", path) == (200, None)
    assert http(standalone, "PUT", path, 600_000) == (204, None)
    assert http(standalone, "GET", path) == (200, 600_000)
    for bad in ("10m", 0.5, [1]):
        code, answer = http(standalone, "PUT", path, bad)
        assert code == 400 and answer["reason"]
    assert http(standalone, "PUT", path, 2**64)[0] == 412
    assert http(standalone, "GET", path) == (200, 600_000), "nothing changed"
    assert http(standalone, "DELETE", path) == (204, None)
    assert http(standalone, "GET", path) == (200, None)


def test_namespace_offload_policies_set_the_three_values_at_once(standalone) -> None:
    ns = f"/admin/v2/namespaces/{NS}"
    assert http(standalone, "GET", ns + "/offloadPolicies") == (200, None)
    body = {"managedLedgerOffloadThresholdInBytes": 1024, "managedLedgerOffloadDeletionLagInMillis": 0,
            "managedLedgerOffloadDriver": "aws-s3"}
    assert http(standalone, "POST", ns + "/offloadPolicies", body) == (204, None)
    stored = {"managedLedgerOffloadThresholdInBytes": 1024, "managedLedgerOffloadThresholdInSeconds": None,
              "managedLedgerOffloadDeletionLagInMillis": 0}
    try:
        assert http(standalone, "GET", ns + "/offloadPolicies") == (200, stored)
        assert http(standalone, "GET", ns + "/offloadThreshold") == (200, 1024)
        assert http(standalone, "GET", ns + "/offloadThresholdInSeconds") == (200, -1)
        assert http(standalone, "GET", ns + "/offloadDeletionLagMs") == (200, 0)
        for bad, status in (("S3", 400), ({"managedLedgerOffloadThresholdInBytes": 1.5}, 400), ({}, 412)):
            code, answer = http(standalone, "POST", ns + "/offloadPolicies", bad)
            assert code == status and answer["reason"], (bad, code, answer)
        assert http(standalone, "GET", ns + "/offloadPolicies") == (200, stored), "nothing changed"
    finally:
        assert http(standalone, "DELETE", ns + "/offloadPolicies") == (204, None)
    assert http(standalone, "GET", ns + "/offloadPolicies") == (200, None)
    assert http(standalone, "GET", ns + "/offloadThreshold") == (200, -1)
    assert http(standalone, "GET", ns + "/offloadDeletionLagMs") == (200, None)


def test_topic_offload_policies_override_the_namespace(standalone) -> None:
    topic = f"persistent://{NS}/offload-policies-{os.getpid()}"
    path = _path(topic) + "/offloadPolicies"
    lag_path = f"/admin/v2/namespaces/{NS}/offloadDeletionLagMs"
    assert http(standalone, "GET", path) == (200, None)
    assert http(standalone, "PUT", lag_path, 60_000) == (204, None)
    try:
        body = {"managedLedgerOffloadThresholdInBytes": 0, "managedLedgerOffloadDriver": "S3"}
        assert http(standalone, "POST", path, body) == (204, None)
        own = {"managedLedgerOffloadThresholdInBytes": 0, "managedLedgerOffloadThresholdInSeconds": None,
               "managedLedgerOffloadDeletionLagInMillis": None}
        assert http(standalone, "GET", path) == (200, own)
        assert http(standalone, "GET", path + "?applied=true") == (200, {
            "managedLedgerOffloadThresholdInBytes": 0, "managedLedgerOffloadThresholdInSeconds": -1,
            "managedLedgerOffloadDeletionLagInMillis": 60_000})
        for bad, status in (([], 400), ({"managedLedgerOffloadThresholdInBytes": "1M"}, 400), ({}, 412),
                            ({"managedLedgerOffloadDeletionLagInMillis": -(2**63) - 1}, 412)):
            code, answer = http(standalone, "POST", path, bad)
            assert code == status and answer["reason"], (bad, code, answer)
        assert http(standalone, "GET", path) == (200, own), "nothing changed"
        assert http(standalone, "DELETE", path) == (204, None)
        assert http(standalone, "GET", path) == (200, None)
    finally:
        http(standalone, "DELETE", lag_path)


# --- offload, status, stats --------------------------------------------------------------------

def test_offload_of_an_unknown_topic_is_404(standalone) -> None:
    path = _path(f"persistent://{NS}/never-created-{os.getpid()}")
    code, answer = http(standalone, "PUT", path + "/offload", {"ledgerId": 1, "entryId": 0, "partitionIndex": -1})
    assert code == 404 and answer["reason"]
    assert http(standalone, "GET", path + "/offload")[0] == 404
    assert http(standalone, "GET", path + "/internalStats")[0] == 404


def test_bad_message_ids_are_refused_and_nothing_starts(standalone) -> None:
    topic = _topic_with_ledgers(standalone, "offload-bad-ids")
    path = _path(topic)
    stats = http(standalone, "GET", path + "/internalStats")[1]
    assert isinstance(stats, dict)
    ledger_ids = [ledger["ledgerId"] for ledger in stats["ledgers"]]
    for body in (None, [], {"ledgerId": ledger_ids[-1]}, {"ledgerId": "1", "entryId": 0},
                 {"ledgerId": ledger_ids[-1], "entryId": 0.5}):
        code, answer = http(standalone, "PUT", path + "/offload", body) if body is not None else \
            http(standalone, "PUT", path + "/offload", raw=b"")
        assert code == 400 and answer["reason"], (body, code, answer)
    missing = max(ledger_ids) + 1000
    for body in ({"ledgerId": missing, "entryId": 0}, {"ledgerId": -1, "entryId": -1},
                 {"ledgerId": ledger_ids[0], "entryId": ROLLOVER_ENTRIES + 1},
                 {"ledgerId": ledger_ids[0], "entryId": -1}):
        code, answer = http(standalone, "PUT", path + "/offload", body)
        assert code == 412 and "Invalid message id" in answer["reason"], (body, code, answer)
    assert http(standalone, "GET", path + "/offload")[1]["status"] == "NOT_RUN"


def test_offload_without_a_cold_tier_is_refused_with_the_reason(standalone) -> None:
    topic = _topic_with_ledgers(standalone, "offload-no-tier")
    path = _path(topic)
    stats = http(standalone, "GET", path + "/internalStats")[1]
    before = {"ledgerId": stats["ledgers"][-1]["ledgerId"], "entryId": 0, "partitionIndex": -1}
    code, answer = http(standalone, "PUT", path + "/offload", before)
    assert code == 412 and "offload" in answer["reason"].lower()
    assert http(standalone, "GET", path + "/offload") == (200, {
        "status": "NOT_RUN", "lastError": "",
        "firstUnoffloadedMessage": {"ledgerId": -1, "entryId": -1, "partitionIndex": -1},
        "progress": {"entriesDone": 0, "entriesTotal": 0}})


def test_internal_stats_have_pulsar_s_fields(standalone) -> None:
    messages = 23
    topic = _topic_with_ledgers(standalone, "internal-stats", messages)
    stats = http(standalone, "GET", _path(topic) + "/internalStats")[1]
    assert isinstance(stats, dict)
    ledgers = stats["ledgers"]
    assert len(ledgers) >= messages // ROLLOVER_ENTRIES
    assert [ledger["ledgerId"] for ledger in ledgers] == sorted(ledger["ledgerId"] for ledger in ledgers)
    for ledger in ledgers:
        assert set(ledger) == {"ledgerId", "entries", "size", "offloaded", "underReplicated"}
        assert ledger["offloaded"] is False and ledger["underReplicated"] is False
    current = ledgers[-1]
    assert (current["entries"], current["size"]) == (0, 0), "the open ledger is listed as Pulsar lists it"
    closed_entries = sum(ledger["entries"] for ledger in ledgers)
    assert stats["numberOfEntries"] == messages == closed_entries + stats["currentLedgerEntries"]
    assert stats["totalSize"] == sum(ledger["size"] for ledger in ledgers) + stats["currentLedgerSize"]
    assert stats["totalSize"] == http(standalone, "GET", _path(topic) + "/stats")[1]["storageSize"]
    last_ledger, last_entry = (int(x) for x in stats["lastConfirmedEntry"].split(":"))
    assert last_ledger in {ledger["ledgerId"] for ledger in ledgers} and last_entry >= 0
    assert stats["state"] == "LedgerOpened"
    assert isinstance(stats["lastLedgerCreatedTimestamp"], str) and "T" in stats["lastLedgerCreatedTimestamp"]
    cursor = stats["cursors"]["sub-a"]
    assert cursor["state"] == "Open" and cursor["active"] is False
    md_ledger, md_entry = (int(x) for x in cursor["markDeletePosition"].split(":"))
    assert (md_ledger, md_entry) == (ledgers[0]["ledgerId"], 2), "three messages acked"
    assert stats["compactedLedger"] == {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False}


def test_topic_stats_and_metrics_carry_the_offload_fields(standalone) -> None:
    topic = _topic_with_ledgers(standalone, "offload-stats")
    stats = http(standalone, "GET", _path(topic) + "/stats")[1]
    assert isinstance(stats, dict)
    assert stats["offloadedStorageSize"] == 0 and stats["storageSize"] > 0
    for key in ("lastOffloadLedgerId", "lastOffloadSuccessTimeStamp", "lastOffloadFailureTimeStamp"):
        assert stats[key] == 0
    text = metrics(standalone.admin_url)
    assert any(line.startswith("pulsar_storage_offloaded_size{") and f'topic="{topic}"' in line
               and float(line.rsplit(" ", 1)[1]) == 0 for line in text.splitlines())
    assert "strata_offload_bookie_copies_deleted_total" in text


# --- strata admin ------------------------------------------------------------------------------

def _cli(sa: StandaloneProcess, capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run_admin(["--admin-url", sa.admin_url, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_strata_admin_offload_commands(standalone, capsys) -> None:
    topic = _topic_with_ledgers(standalone, "offload-cli")
    assert _cli(standalone, capsys, "topics", "offload-status", topic) == (
        0, f"Offload has not been run for {topic} since broker startup\n", "")
    assert _cli(standalone, capsys, "topics", "offload", "-s", "1G", topic) == (0, "Nothing to offload\n", "")
    code, out, err = _cli(standalone, capsys, "topics", "offload", "-s", "0", topic)
    assert code == 1 and "HTTP 412" in err               # no cold tier on this broker
    code, out, _ = _cli(standalone, capsys, "topics", "stats-internal", topic)
    assert code == 0 and json.loads(out)["numberOfEntries"] == 23

    assert _cli(standalone, capsys, "namespaces", "set-offload-threshold", "-s", "10M", "-t", "1h", NS)[0] == 0
    assert _cli(standalone, capsys, "namespaces", "get-offload-threshold", NS) == (
        0, "offloadThresholdInBytes: 10485760\noffloadThresholdInSeconds: 3600\n", "")
    assert _cli(standalone, capsys, "namespaces", "set-offload-threshold", "-s", "-1", NS)[0] == 0
    assert _cli(standalone, capsys, "namespaces", "get-offload-threshold", NS)[1] == (
        "offloadThresholdInBytes: -1\noffloadThresholdInSeconds: -1\n")

    assert _cli(standalone, capsys, "namespaces", "get-offload-deletion-lag", NS)[1] == (
        "Unset for namespace. Defaulting to broker setting.\n")
    assert _cli(standalone, capsys, "namespaces", "set-offload-deletion-lag", "-l", "10m", NS)[0] == 0
    assert http(standalone, "GET", f"/admin/v2/namespaces/{NS}/offloadDeletionLagMs") == (200, 600_000)
    assert _cli(standalone, capsys, "namespaces", "get-offload-deletion-lag", NS)[1] == "10 minute(s)\n"
    assert _cli(standalone, capsys, "namespaces", "clear-offload-deletion-lag", NS)[0] == 0
    assert http(standalone, "GET", f"/admin/v2/namespaces/{NS}/offloadDeletionLagMs") == (200, None)
