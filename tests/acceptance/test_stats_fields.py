"""Topic stats fields a new Pulsar user looks for (issue 15), official client, real standalone.

- a subscription's `readPosition` is its dispatcher's (what internalStats' cursor says), not
  the cursor's mark-delete neighbour: after 5 messages dispatched it is the entry after them;
- `nonContiguousDeletedMessagesRanges` counts the ack ranges above the mark-delete (as
  internalStats' `totalNonContiguousDeletedMessagesRange`);
- `earliestMsgPublishTimeInBacklog` is the publish time of the oldest unacked message, and the
  topic's `earliestMsgPublishTimeInBacklogs` the earliest over its subscriptions;
- `averageMsgSize` = msgThroughputIn / msgRateIn while messages flow, per topic and publisher;
- `msgRateRedeliver` > 0 on the consumer that asked for redelivery, the subscription's the sum;
- TTL expiry is counted: `totalMsgExpired`, `lastExpireTimestamp`, `msgRateExpired`;
- consumers and publishers carry `address` ("/host:port"), `connectedSince` (ISO 8601 with
  offset, Pulsar's format) and `clientVersion` (the client's CONNECT).
Rates are sampled every 100 ms over a 2 s window so they show within a test.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import pulsar
import pytest

from tests.acceptance.conftest import make_client, receive_all
from tests.support.admin_http import admin_call, topic_get
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

WAIT_S = 30.0
ENV = {"STRATA_BROKER_STATS_SAMPLE_INTERVAL_MS": "100", "STRATA_BROKER_STATS_RATE_WINDOW_MS": "2000",
       "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": "200"}


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("stats-fields") / "data", env=ENV) as standalone:
        yield standalone


@pytest.fixture
def client(sa: StandaloneProcess) -> Iterator[pulsar.Client]:
    c = make_client(sa.service_url)
    yield c
    c.close()


def _http(sa: StandaloneProcess, method: str, path: str, body: object = None) -> tuple[int, Any]:
    return admin_call(sa.admin_url, method, path, body)


def _get(sa: StandaloneProcess, topic: str, what: str) -> dict:
    return topic_get(sa.admin_url, topic, what)


def _until(what: str, probe: Callable[[], Any]) -> Any:
    """Poll `probe` until it returns something truthy (bounded by WAIT_S)."""
    return wait_until(probe, WAIT_S, what=what, interval_s=0.1)


def _topic(name: str) -> str:
    return f"persistent://public/default/stats-fields-{name}-{time.monotonic_ns()}"


def _produce(client: pulsar.Client, topic: str, count: int, size: int = 10) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"{i:0{size}d}".encode()) for i in range(count)]
    producer.close()
    return ids


def test_read_position_is_the_dispatchers_and_ack_ranges_are_counted(sa: StandaloneProcess, client) -> None:
    topic = _topic("read")
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    ids = _produce(client, topic, 5)
    received = receive_all(consumer, 5, ack=False)
    stats = _until("5 messages out", lambda: (s := _get(sa, topic, "stats"))["msgOutCounter"] == 5 and s)
    sub = stats["subscriptions"]["s"]
    cursor = _get(sa, topic, "internalStats")["cursors"]["s"]
    after_last = f"{ids[-1].ledger_id()}:{ids[-1].entry_id() + 1}"
    assert sub["readPosition"] == cursor["readPosition"] == after_last, (sub, cursor)
    assert sub["markDeletePosition"] == f"{ids[0].ledger_id()}:{ids[0].entry_id() - 1}"
    assert sub["nonContiguousDeletedMessagesRanges"] == 0

    consumer.acknowledge(received[1])
    consumer.acknowledge(received[3])
    sub = _until("two ack ranges", lambda: (s := _get(sa, topic, "stats")["subscriptions"]["s"])
                 ["nonContiguousDeletedMessagesRanges"] == 2 and s)
    cursor = _get(sa, topic, "internalStats")["cursors"]["s"]
    assert cursor["totalNonContiguousDeletedMessagesRange"] == 2
    assert sub["msgBacklog"] == 3
    consumer.close()


def test_earliest_publish_time_in_backlog(sa: StandaloneProcess, client) -> None:
    topic = _topic("earliest")
    slow = client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest)
    fast = client.subscribe(topic, "fast", initial_position=pulsar.InitialPosition.Earliest)
    empty = _get(sa, topic, "stats")
    assert empty["earliestMsgPublishTimeInBacklogs"] == 0
    assert empty["subscriptions"]["slow"]["earliestMsgPublishTimeInBacklog"] == 0
    _produce(client, topic, 3)
    got = receive_all(fast, 3, ack=False)
    fast.acknowledge(got[0])            # fast's oldest unacked is now message 1
    published = [m.publish_timestamp() for m in got]
    stats = _until("fast's ack", lambda: (s := _get(sa, topic, "stats"))["subscriptions"]["fast"]["msgBacklog"] == 2
                   and s)
    assert stats["subscriptions"]["slow"]["earliestMsgPublishTimeInBacklog"] == published[0]
    assert stats["subscriptions"]["fast"]["earliestMsgPublishTimeInBacklog"] == published[1]
    assert stats["earliestMsgPublishTimeInBacklogs"] == published[0]
    assert stats["msgBacklog"] == 3 + 2          # the topic's: the sum over its subscriptions
    slow.close()
    fast.close()


def _connected_since_ms(text: str) -> float:
    moment = datetime.datetime.fromisoformat(text)
    assert moment.utcoffset() is not None, text          # with an offset, as Pulsar prints it
    return moment.timestamp() * 1000


def test_connection_facts_and_average_message_size(sa: StandaloneProcess, client) -> None:
    topic = _topic("facts")
    before_ms = time.time() * 1000 - 1000
    consumer = client.subscribe(topic, "s", consumer_name="c1")
    producer = client.create_producer(topic, producer_name="p1", batching_enabled=False)
    payload = b"x" * 200

    def flowing() -> dict | None:
        for _ in range(20):
            producer.send(payload)
        stats = _get(sa, topic, "stats")
        return stats if stats["msgRateIn"] > 0 and stats["publishers"][0]["msgRateIn"] > 0 else None

    stats = _until("a publish rate", flowing)
    assert stats["averageMsgSize"] == pytest.approx(stats["msgThroughputIn"] / stats["msgRateIn"])
    assert 200 <= stats["averageMsgSize"] < 400, stats["averageMsgSize"]     # payload + metadata
    publisher = stats["publishers"][0]
    assert publisher["averageMsgSize"] == pytest.approx(publisher["msgThroughputIn"] / publisher["msgRateIn"])
    (c,) = stats["subscriptions"]["s"]["consumers"]
    for who in (publisher, c):
        assert who["address"].startswith("/127.0.0.1:"), who
        assert before_ms <= _connected_since_ms(who["connectedSince"]) <= time.time() * 1000 + 1000, who
        assert who["clientVersion"].startswith("Pulsar"), who
    assert c["address"] != "" and c["consumerName"] == "c1" and publisher["producerName"] == "p1"
    producer.close()
    consumer.close()


def test_redelivery_rate(sa: StandaloneProcess, client) -> None:
    topic = _topic("redeliver")
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    _produce(client, topic, 5)
    receive_all(consumer, 5, ack=False)
    consumer.redeliver_unacknowledged_messages()
    sub = _until("a redelivery rate",
                 lambda: (s := _get(sa, topic, "stats")["subscriptions"]["s"])["msgRateRedeliver"] > 0 and s)
    (c,) = sub["consumers"]
    assert c["msgRateRedeliver"] > 0
    assert sub["msgRateRedeliver"] == pytest.approx(c["msgRateRedeliver"])
    receive_all(consumer, 5)                # the 5 come back
    consumer.close()


def test_ttl_expiry_is_counted(sa: StandaloneProcess, client) -> None:
    topic = _topic("ttl")
    client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
    _produce(client, topic, 4)
    fresh = _get(sa, topic, "stats")["subscriptions"]["s"]
    assert (fresh["totalMsgExpired"], fresh["lastExpireTimestamp"], fresh["msgRateExpired"]) == (0, 0, 0.0)
    before_ms = time.time() * 1000
    assert _http(sa, "POST", "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/messageTTL", 1)[0] == 204
    sub = _until("TTL to expire the backlog",
                 lambda: (s := _get(sa, topic, "stats")["subscriptions"]["s"])["msgBacklog"] == 0 and s)
    assert sub["totalMsgExpired"] == 4
    assert before_ms - 1000 <= sub["lastExpireTimestamp"] <= time.time() * 1000 + 1000
    assert sub["earliestMsgPublishTimeInBacklog"] == 0
    _until("an expiry rate", lambda: _get(sa, topic, "stats")["subscriptions"]["s"]["msgRateExpired"] > 0)


def test_partitioned_stats_merge_the_new_fields() -> None:
    """Pulsar's PartitionedTopicStats: counts and rates summed, the earliest non-zero publish
    time, the latest expiry; averageMsgSize of the summed rates (pure function, no broker)."""
    from broker.stats.topic_stats import _SUMMED, partitioned_stats

    def partition(backlog: int, earliest_ms: int, expired: int, expired_at_ms: int, rate_in: float) -> dict:
        sub = {"msgBacklog": backlog, "msgBacklogNoDelayed": backlog, "backlogSize": 10 * backlog,
               "unackedMessages": 0, "msgRateOut": 0.0, "msgThroughputOut": 0.0, "msgOutCounter": 0,
               "bytesOutCounter": 0, "msgRateRedeliver": 1.5, "msgRateExpired": 0.5, "totalMsgExpired": expired,
               "lastExpireTimestamp": expired_at_ms, "earliestMsgPublishTimeInBacklog": earliest_ms,
               "nonContiguousDeletedMessagesRanges": 2, "type": "Shared", "isDurable": True, "consumers": []}
        stats = {key: 0 for key in _SUMMED}
        stats.update({"msgRateIn": rate_in, "msgThroughputIn": 100 * rate_in, "msgBacklog": backlog,
                      "earliestMsgPublishTimeInBacklogs": earliest_ms, "lastOffloadLedgerId": -1,
                      "lastOffloadSuccessTimeStamp": 0, "lastOffloadFailureTimeStamp": 0,
                      "publishers": [], "subscriptions": {"s": sub}})
        return stats

    out = partitioned_stats(3, {"p0": partition(4, 0, 1, 500, 2.0), "p1": partition(5, 2000, 0, 0, 0.0),
                                "p2": partition(6, 1000, 3, 900, 6.0)}, include_partitions=False)
    sub = out["subscriptions"]["s"]
    assert out["msgBacklog"] == sub["msgBacklog"] == 15
    assert out["earliestMsgPublishTimeInBacklogs"] == sub["earliestMsgPublishTimeInBacklog"] == 1000
    assert out["averageMsgSize"] == 100.0
    assert (sub["totalMsgExpired"], sub["lastExpireTimestamp"]) == (4, 900)
    assert sub["msgRateRedeliver"] == 4.5 and sub["nonContiguousDeletedMessagesRanges"] == 6
