"""Topic admin routes a Pulsar operator uses, against a real standalone with the official client:
create a non-partitioned topic, lastMessageId, stats with getPreciseBacklog, and the CLI's tables."""

from __future__ import annotations

import json
import time

import pulsar

from tests.acceptance.conftest import receive_all
from tests.acceptance.test_admin import http
from tests.support.admin_cli import run_admin


def _base(standalone, topic: str) -> str:
    return f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}"


def test_create_a_non_partitioned_topic(standalone, client: pulsar.Client, topic: str) -> None:
    assert http("GET", _base(standalone, topic) + "/stats")[0] == 404
    assert http("PUT", _base(standalone, topic)) == (204, None)
    status, body = http("PUT", _base(standalone, topic))
    assert status == 409 and "already exists" in body["reason"]
    listed = http("GET", f"{standalone.admin_url}/admin/v2/persistent/public/default")[1]
    assert topic in listed
    status, stats = http("GET", _base(standalone, topic) + "/stats")
    assert status == 200 and stats["msgInCounter"] == 0
    assert client.get_topic_partitions(topic) == [topic]      # not partitioned
    partitioned = topic + "-p"
    assert http("PUT", _base(standalone, partitioned) + "/partitions", 2)[0] == 204
    status, body = http("PUT", _base(standalone, partitioned))
    assert status == 409 and "partitioned" in body["reason"]
    status, body = http("PUT", _base(standalone, partitioned) + "/partitions", 3)
    assert status == 409 and body["reason"].startswith("Partitioned topic already exists")
    assert http("GET", _base(standalone, partitioned) + "/partitions")[1] == {"partitions": 2}


def test_a_partitioned_topic_cannot_hide_an_existing_topic(standalone, client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"kept")
    producer.close()
    status, body = http("PUT", _base(standalone, topic) + "/partitions", 2)
    assert status == 409 and body["reason"].startswith("This topic already exists")
    assert http("GET", _base(standalone, topic) + "/partitions")[1] == {"partitions": 0}    # nothing changed
    assert client.get_topic_partitions(topic) == [topic]
    assert http("GET", _base(standalone, topic) + "/stats")[1]["msgInCounter"] == 1


def test_last_message_id_is_the_last_stored_entry(standalone, client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(5)]
    status, last = http("GET", _base(standalone, topic) + "/lastMessageId")
    assert status == 200
    assert (last["ledgerId"], last["entryId"], last["partitionIndex"]) == (ids[-1].ledger_id(), ids[-1].entry_id(), -1)
    assert http("GET", _base(standalone, topic + "-never") + "/lastMessageId")[0] == 404


def test_precise_backlog_counts_messages_of_batches(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=50)
    for i in range(30):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    status, rough = http("GET", _base(standalone, topic) + "/stats")
    status, precise = http("GET", _base(standalone, topic) + "/stats?getPreciseBacklog=true")
    assert status == 200
    entries = rough["subscriptions"]["sub"]["msgBacklog"]
    assert 1 <= entries < 30                                     # a few batch entries
    assert precise["subscriptions"]["sub"]["msgBacklog"] == 30   # every message
    assert precise["msgBacklog"] == 30
    receive_all(consumer, 30)


def test_cli_prints_tables_by_default_and_json_on_request(standalone, topic: str, capsys) -> None:
    from cli import admin
    url = ["--admin-url", standalone.admin_url]
    assert run_admin(url + ["topics", "create", topic]) == 0
    assert admin.main(url + ["topics", "stats", topic]) == 0
    table = capsys.readouterr().out
    assert "msgInCounter" in table and ("┃" in table or "│" in table)      # a rich table, not JSON
    assert not table.lstrip().startswith("{")
    assert admin.main(url + ["-o", "json", "topics", "last-message-id", topic]) == 0
    assert json.loads(capsys.readouterr().out)["entryId"] == -1
    # destructive without --yes and without a terminal to ask: refused, nothing deleted
    assert admin.main(url + ["topics", "delete", topic]) == 2
    assert "--yes" in capsys.readouterr().err
    assert http("GET", _base(standalone, topic) + "/stats")[0] == 200
    assert admin.main(url + ["topics", "delete", topic, "--yes"]) == 0
    assert http("GET", _base(standalone, topic) + "/stats")[0] == 404


def test_cluster_brokers_health_and_leader(standalone) -> None:
    base = standalone.admin_url + "/admin/v2"
    status, clusters = http("GET", base + "/clusters")
    assert status == 200 and len(clusters) == 1
    name = clusters[0]
    status, data = http("GET", f"{base}/clusters/{name}")
    assert status == 200 and data["serviceUrl"] == standalone.admin_url
    assert data["brokerServiceUrl"] == standalone.service_url
    assert http("GET", base + "/clusters/elsewhere")[0] == 404
    status, brokers = http("GET", f"{base}/brokers/{name}")
    assert status == 200 and len(brokers) == 1
    assert http("GET", base + "/brokers/health") == (200, "ok")
    status, leader = http("GET", base + "/brokers/leaderBroker")
    assert status == 200 and leader["serviceUrl"] == standalone.admin_url


def test_internal_stats_carry_pulsars_fields(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "holes", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"m{i}".encode())
    got = receive_all(consumer, 10, ack=False)
    for msg in (got[2], got[3], got[6]):        # two runs of acks above mark-delete: 2..3 and 6
        consumer.acknowledge(msg)
    waiting = client.subscribe(topic, "waiting", consumer_type=pulsar.ConsumerType.Exclusive,
                               initial_position=pulsar.InitialPosition.Latest)
    stats: dict = {}
    for _ in range(50):                          # acks are flushed by the client shortly
        stats = http("GET", _base(standalone, topic) + "/internalStats")[1]
        if stats["cursors"]["holes"]["individuallyDeletedMessagesCount"] == 3:
            break
        time.sleep(0.1)
    assert stats["entriesAddedCounter"] == 10 and stats["numberOfEntries"] == 10
    assert stats["pendingAddEntriesCount"] == 0
    holes = stats["cursors"]["holes"]
    assert holes["individuallyDeletedMessagesCount"] == 3
    assert holes["totalNonContiguousDeletedMessagesRange"] == 2
    assert (holes["cursorLedger"], holes["cursorLedgerLastEntry"]) == (-1, -1)
    assert stats["cursors"]["waiting"]["waitingReadOp"] is True      # read everything, waits for more
    assert stats["waitingCursorsCount"] >= 1
    assert stats["cursors"]["waiting"]["pendingReadOps"] in (0, 1)
    waiting.close()


def test_cli_get_of_an_unset_policy_prints_null(standalone, topic: str, capsys) -> None:
    from cli import admin
    url = ["--admin-url", standalone.admin_url]
    assert run_admin(url + ["topics", "create", topic]) == 0
    assert run_admin(url + ["topics", "set-retention", topic, "-t", "1h", "-s", "1G"]) == 0
    assert run_admin(url + ["topics", "get-retention", topic]) == 0
    assert json.loads(capsys.readouterr().out) == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}
    assert run_admin(url + ["topics", "remove-retention", topic]) == 0
    capsys.readouterr()
    for getter in ("get-retention", "get-deduplication", "get-message-ttl"):   # as pulsar-admin: null
        assert run_admin(url + ["topics", getter, topic]) == 0
        assert json.loads(capsys.readouterr().out) is None                      # -o json: still JSON
        assert admin.main(url + ["topics", getter, topic]) == 0
        assert capsys.readouterr().out.strip() == "null"


def test_partitions_are_listed_from_creation_and_counts_are_pulsars(standalone, topic: str) -> None:
    base = _base(standalone, topic) + "/partitions"
    listing = f"{standalone.admin_url}/admin/v2/persistent/public/default"
    assert http("PUT", base, 3)[0] == 204
    assert {f"{topic}-partition-{i}" for i in range(3)} <= set(http("GET", listing)[1])
    assert http("POST", base, 5)[0] == 204
    assert {f"{topic}-partition-{i}" for i in range(5)} <= set(http("GET", listing)[1])
    status, stats = http("GET", _base(standalone, topic + "-partition-4") + "/stats")
    assert status == 200 and stats["msgInCounter"] == 0           # a partition nothing used yet
    status, body = http("POST", base, 5)
    assert status == 422 and "greater than existing" in body["reason"]
    status, body = http("PUT", _base(standalone, topic + "-other") + "/partitions", 0)
    assert status == 406 and body["reason"] == "Number of partitions should be more than 0"
    assert http("DELETE", base + "?force=true")[0] == 204
    assert not {f"{topic}-partition-{i}" for i in range(5)} & set(http("GET", listing)[1])
