"""Admin HTTP (Pulsar paths and field names) and /metrics, against a real standalone."""

from __future__ import annotations

import json

import pulsar
import pytest

from tests.acceptance.conftest import receive_all
from tests.support.admin_http import call, metrics


def http(method: str, url: str, body: object = None) -> tuple[int, object]:
    return call(method, url, body)


def _path(topic: str) -> str:
    return topic.split("://", 1)[1]


def test_partitioned_topic_create_and_read(standalone, client: pulsar.Client, topic: str) -> None:
    base = f"{standalone.admin_url}/admin/v2/persistent/{_path(topic)}/partitions"
    assert http("PUT", base, 3)[0] == 204
    assert http("GET", base) == (200, {"partitions": 3})
    assert http("PUT", base, 3)[0] == 409
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(9):
        producer.send(f"p{i}".encode())
    got = receive_all(consumer, 9)
    assert sorted(m.data() for m in got) == sorted(f"p{i}".encode() for i in range(9))
    assert {m.message_id().partition() for m in got} == {0, 1, 2}
    status, listed = http("GET", f"{standalone.admin_url}/admin/v2/persistent/public/default/partitioned")
    assert status == 200 and topic in listed


@pytest.mark.parametrize("count", [0, -1, "x", 100_000])
def test_bad_partition_count_is_refused(standalone, topic: str, count: object) -> None:
    status, body = http("PUT", f"{standalone.admin_url}/admin/v2/persistent/{_path(topic)}/partitions", count)
    assert status == (400 if count == "x" else 406)     # Pulsar's NOT_ACCEPTABLE for a count out of range
    assert "reason" in body


def test_namespace_deduplication_switch(standalone) -> None:
    url = f"{standalone.admin_url}/admin/v2/namespaces/public/default/deduplication"
    assert http("POST", url, True)[0] == 204
    assert http("GET", url) == (200, True)
    assert http("POST", url, False)[0] == 204
    assert http("GET", url) == (200, False)
    assert http("POST", url, "maybe")[0] == 400


def test_topic_stats_use_pulsar_field_names(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for _i in range(10):
        producer.send(b"x" * 100)
    got = receive_all(consumer, 10, ack=False)
    for msg in got[:4]:
        consumer.acknowledge(msg)
    consumer.close()  # flushes the acks
    client.subscribe(topic, "other", consumer_type=pulsar.ConsumerType.Exclusive)
    status, stats = http("GET", f"{standalone.admin_url}/admin/v2/persistent/{_path(topic)}/stats")
    assert status == 200
    assert stats["msgInCounter"] == 10
    assert stats["storageSize"] > 1000
    assert len(stats["publishers"]) == 1
    sub = stats["subscriptions"]["sub"]
    assert sub["msgBacklog"] == 6
    assert sub["backlogSize"] > 600
    assert sub["type"] == "Shared"
    assert sub["consumers"] == []
    assert stats["subscriptions"]["other"]["msgBacklog"] == 0
    assert stats["subscriptions"]["other"]["type"] == "Exclusive"
    assert len(stats["subscriptions"]["other"]["consumers"]) == 1
    for name in ("unackedMessages", "msgRateOut", "msgBacklogNoDelayed"):
        assert name in sub


def test_unknown_topic_stats_is_404(standalone, topic: str) -> None:
    assert http("GET", f"{standalone.admin_url}/admin/v2/persistent/{_path(topic)}/stats")[0] == 404


def test_list_topics_of_namespace(standalone, client: pulsar.Client, topic: str) -> None:
    client.create_producer(topic).send(b"x")
    status, topics = http("GET", f"{standalone.admin_url}/admin/v2/persistent/public/default")
    assert status == 200 and topic in topics


def test_metrics_use_pulsar_names(standalone, client: pulsar.Client, topic: str) -> None:
    client.create_producer(topic).send(b"x")
    client.subscribe(topic, "sub")
    text = metrics(standalone.admin_url)
    lines = [line for line in text.splitlines() if f'topic="{topic}"' in line]
    names = {line.split("{", 1)[0] for line in lines}
    assert {"pulsar_in_messages_total", "pulsar_msg_backlog", "pulsar_storage_size",
            "pulsar_subscription_back_log"} <= names
    assert any(line.startswith("pulsar_in_messages_total") and float(line.rsplit(" ", 1)[1]) == 1 for line in lines)
    counters = {line.split("{", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("strata_")}
    assert {"strata_cursor_persists_total", "strata_cursor_writer_saves_total",
            "strata_retention_passes_total", "strata_retention_trimmed_ledgers_total",
            "strata_retention_expired_cursors_total"} <= set(counters)
    assert counters["strata_cursor_persists_total"] >= 1   # the new subscription was persisted


def test_strata_admin_cli(standalone, topic: str, capsys) -> None:
    from tests.support.admin_cli import run_admin as main
    url = ["--admin-url", standalone.admin_url]
    local = topic.rsplit("/", 1)[1]
    assert main(url + ["topics", "create-partitioned-topic", local, "-p", "2"]) == 0
    assert main(url + ["topics", "get-partitioned-topic-metadata", local]) == 0
    assert json.loads(capsys.readouterr().out) == {"partitions": 2}
    assert main(url + ["topics", "create-partitioned-topic", local, "-p", "2"]) == 1
    assert "HTTP 409" in capsys.readouterr().err
    assert main(url + ["namespaces", "set-deduplication", "public/default", "--enable"]) == 0
    assert main(url + ["namespaces", "get-deduplication", "public/default"]) == 0
    assert json.loads(capsys.readouterr().out) is True
    assert main(url + ["namespaces", "set-deduplication", "public/default", "--disable"]) == 0
    assert main(url + ["topics", "list-partitioned-topics", "public/default"]) == 0
    assert topic in json.loads(capsys.readouterr().out)
    assert main(url + ["topics", "stats", "bad//name"]) == 2


def test_strata_admin_cli_retention_and_ttl(standalone, topic: str, capsys) -> None:
    from tests.support.admin_cli import run_admin as main
    url = ["--admin-url", standalone.admin_url]
    ns = f"public/cli-{topic.rsplit('-', 1)[1]}"
    assert main(url + ["namespaces", "create", ns]) == 0
    assert main(url + ["namespaces", "set-retention", ns, "--time", "3h", "--size", "2G"]) == 0
    assert main(url + ["namespaces", "get-retention", ns]) == 0
    assert json.loads(capsys.readouterr().out) == {"retentionTimeInMinutes": 180, "retentionSizeInMB": 2048}
    assert main(url + ["namespaces", "set-message-ttl", ns, "--ttl", "60"]) == 0
    local = f"persistent://{ns}/t"
    assert main(url + ["topics", "set-retention", local, "-t", "10m", "-s", "0"]) == 1   # 10 min, 0 MB
    assert "HTTP 412" in capsys.readouterr().err
    # pulsar-admin 3.x units: a bare time is seconds, a bare size bytes
    assert main(url + ["topics", "set-retention", local, "-t", "1800", "-s", "-1"]) == 0
    assert main(url + ["topics", "set-message-ttl", local, "-t", "5"]) == 0
    assert main(url + ["topics", "get-retention", local]) == 0
    assert json.loads(capsys.readouterr().out) == {"retentionTimeInMinutes": 30, "retentionSizeInMB": -1}
    assert main(url + ["topics", "set-retention", local, "-t", "120", "-s", str(3 * 1024 * 1024)]) == 0
    assert main(url + ["topics", "get-retention", local]) == 0
    assert json.loads(capsys.readouterr().out) == {"retentionTimeInMinutes": 2, "retentionSizeInMB": 3}
    with pytest.raises(SystemExit):       # 4096 bytes would be 0 MB, which turns retention off: refused
        main(url + ["topics", "set-retention", local, "-t", "3h", "-s", "4096"])
    assert "under 1 MiB" in capsys.readouterr().err
    assert main(url + ["topics", "remove-message-ttl", local]) == 0
    assert main(url + ["topics", "get-message-ttl", local, "--applied"]) == 0
    assert json.loads(capsys.readouterr().out) == 60                  # the namespace's again
    with pytest.raises(SystemExit):
        main(url + ["topics", "set-retention", local, "-t", "10x", "-s", "1G"])
