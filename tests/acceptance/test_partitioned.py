"""Partitioned topics with the official client against a real standalone: routing round robin and by
key, one consumer over every partition, partitioned stats (with rates), raising the partition
count, deleting, and bad partition counts that change nothing stored. (Failover on partitioned
topics is covered in test_subscriptions.py.)"""

from __future__ import annotations

import collections
import time

import pulsar
import pytest

from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.acceptance.test_admin import http
from tests.support.standalone_proc import StandaloneProcess

ENV = {"STRATA_BROKER_STATS_SAMPLE_INTERVAL_MS": "200", "STRATA_BROKER_STATS_RATE_WINDOW_MS": "5000",
       "STRATA_BROKER_PARTITIONS_MAX": "8"}


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("partitioned") / "data", env=ENV) as proc:
        yield proc


@pytest.fixture
def client(sa):
    c = make_client(sa.service_url)
    yield c
    c.close()


def _base(sa: StandaloneProcess, topic: str) -> str:
    return f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}"


def _create(sa: StandaloneProcess, topic: str, partitions: int) -> None:
    assert http("PUT", _base(sa, topic) + "/partitions", partitions)[0] == 204


def test_round_robin_spreads_over_every_partition(sa, client, topic: str) -> None:
    _create(sa, topic, 3)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(9):
        producer.send(f"m{i}".encode())
    got = receive_all(consumer, 9)
    assert sorted(m.data() for m in got) == sorted(f"m{i}".encode() for i in range(9))
    per_partition = collections.Counter(m.message_id().partition() for m in got)
    assert per_partition == {0: 3, 1: 3, 2: 3}
    assert {m.topic_name() for m in got} == {f"{topic}-partition-{i}" for i in range(3)}


def test_keyed_messages_stay_on_one_partition_in_order(sa, client, topic: str) -> None:
    _create(sa, topic, 4)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    keys = [f"key-{k}" for k in range(6)]
    for i in range(5):
        for key in keys:
            producer.send(f"{key}:{i}".encode(), partition_key=key)
    got = receive_all(consumer, 30)
    partitions_of: dict[str, set[int]] = collections.defaultdict(set)
    order_of: dict[str, list[int]] = collections.defaultdict(list)
    for m in got:
        key, i = m.data().decode().split(":")
        assert m.partition_key() == key
        partitions_of[key].add(m.message_id().partition())
        order_of[key].append(int(i))
    assert all(len(p) == 1 for p in partitions_of.values())
    assert all(order == list(range(5)) for order in order_of.values())
    assert len({next(iter(p)) for p in partitions_of.values()}) > 1


def test_partitioned_stats_sum_the_partitions_with_rates(sa, client, topic: str) -> None:
    _create(sa, topic, 2)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    sent = 0
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        producer.send(b"y" * 100)
        sent += 1
        time.sleep(0.01)   # the load's pace: rates need traffic spread over the sampling interval
    receive_all(consumer, sent)
    # Rates come from counters sampled every broker_stats_sample_interval_ms (1 s), and acks reach
    # the broker after the client's ack grouping: poll until both are visible instead of guessing
    # the sampler's phase.
    deadline = time.monotonic() + 8.0
    while True:
        status, stats = http("GET", _base(sa, topic) + "/partitioned-stats")
        one = http("GET", _base(sa, topic + "-partition-0") + "/stats")[1]
        rates = [stats["msgRateIn"], stats["msgThroughputIn"], stats["msgRateOut"],
                 stats["msgThroughputOut"], one["msgRateIn"], one["publishers"][0]["msgRateIn"]]
        settled = all(r > 0 for r in rates) and stats["subscriptions"]["sub"]["msgBacklog"] == 0
        if status != 200 or settled or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200
    assert stats["metadata"] == {"partitions": 2}
    assert set(stats["partitions"]) == {f"{topic}-partition-{i}" for i in range(2)}
    assert stats["msgInCounter"] == sent
    assert stats["msgInCounter"] == sum(p["msgInCounter"] for p in stats["partitions"].values())
    assert stats["bytesInCounter"] > 100 * sent
    assert stats["msgOutCounter"] == sent
    assert stats["msgRateIn"] > 0 and stats["msgThroughputIn"] > 0
    assert stats["msgRateOut"] > 0 and stats["msgThroughputOut"] > 0
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    assert len(stats["publishers"]) == 2
    assert one["msgRateIn"] > 0 and one["publishers"][0]["msgRateIn"] > 0
    assert http("GET", _base(sa, topic) + "/partitioned-stats?perPartition=false")[1]["partitions"] == {}
    assert http("GET", _base(sa, topic + "-plain") + "/partitioned-stats")[0] == 404


def test_raise_partition_count(sa, client, topic: str) -> None:
    _create(sa, topic, 2)
    base = _base(sa, topic) + "/partitions"
    assert http("POST", base, 4)[0] == 204
    assert http("GET", base) == (200, {"partitions": 4})
    assert len(client.get_topic_partitions(topic)) == 4
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(8):
        producer.send(f"m{i}".encode())
    assert {m.message_id().partition() for m in receive_all(consumer, 8)} == {0, 1, 2, 3}
    status, body = http("POST", base, 3)                  # never lowered (Pulsar: 422)
    assert status == 422 and "greater than existing" in body["reason"]
    assert http("POST", base, 4)[0] == 422                # nor left as it is
    assert http("POST", base, 0)[0] == 406                # Pulsar's NOT_ACCEPTABLE
    assert http("POST", base, "4")[0] == 400
    assert http("POST", _base(sa, topic + "-never") + "/partitions", 4)[0] == 404
    assert http("GET", base) == (200, {"partitions": 4})


def test_delete_partitioned_topic(sa, client, topic: str) -> None:
    _create(sa, topic, 2)
    base = _base(sa, topic) + "/partitions"
    producer = client.create_producer(topic)
    for _i in range(4):
        producer.send(b"old")
    status, body = http("DELETE", base)                   # a producer is attached
    assert status == 412 and "reason" in body
    producer.close()
    assert http("DELETE", base)[0] == 204
    assert http("GET", base) == (200, {"partitions": 0})
    listed = http("GET", f"{sa.admin_url}/admin/v2/persistent/public/default/partitioned")[1]
    assert topic not in listed
    assert http("DELETE", base)[0] == 404
    _create(sa, topic, 2)                                 # a new topic of the same name is empty
    reader_client = make_client(sa.service_url)
    consumer = reader_client.subscribe(topic, "fresh", initial_position=pulsar.InitialPosition.Earliest)
    assert_no_more(consumer, 1000)
    reader_client.close()


@pytest.mark.parametrize("count,status", [(0, 406), (-1, 406), (9, 406), ("x", 400), (1.5, 400), (None, 400)])
def test_bad_partition_counts_change_nothing(sa, client, topic: str, count: object, status: int) -> None:
    _create(sa, topic, 2)
    producer = client.create_producer(topic)
    producer.send(b"kept")
    assert http("PUT", _base(sa, topic) + "/partitions", count)[0] == status
    got_status, body = http("POST", _base(sa, topic) + "/partitions", count)
    assert got_status == status and body["reason"]
    other = topic + "-new"
    assert http("PUT", _base(sa, other) + "/partitions", count)[0] == status
    assert http("GET", _base(sa, other) + "/partitions") == (200, {"partitions": 0})
    assert http("GET", _base(sa, topic) + "/partitions") == (200, {"partitions": 2})
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    assert receive_all(consumer, 1)[0].data() == b"kept"


def test_strata_admin_cli_partitions_and_topic_dedup(sa, topic: str, capsys) -> None:
    import json

    from tests.support.admin_cli import run_admin as main
    url = ["--admin-url", sa.admin_url]
    local = topic.rsplit("/", 1)[1]
    assert main(url + ["topics", "create-partitioned-topic", local, "-p", "2"]) == 0
    assert main(url + ["topics", "update-partitioned-topic", local, "-p", "3"]) == 0
    assert main(url + ["topics", "partitioned-stats", local]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"] == {"partitions": 3}
    assert main(url + ["topics", "set-deduplication", local, "--enable"]) == 0
    assert main(url + ["topics", "get-deduplication", local]) == 0
    assert json.loads(capsys.readouterr().out) is True
    assert main(url + ["topics", "remove-deduplication", local]) == 0
    assert main(url + ["topics", "delete-partitioned-topic", local]) == 0
    assert main(url + ["topics", "delete-partitioned-topic", local]) == 1
    assert "HTTP 404" in capsys.readouterr().err
