"""A Kafka consumer group is a Strata subscription, end to end with real clients on the standalone.

- A confluent-kafka group's commits show in `strata admin topics stats` as the subscription named
  after the group, with its backlog, and in explain-storage as a subscription holding the topic.
- While the group is empty, `strata admin topics skip` and `reset-cursor` on that subscription
  change where the group's next member starts (its OffsetFetch); expire-messages moves it too.
- While the group has members, the same admin moves are refused with a message naming the group.
- Both protocols on one subscription: a Kafka group cannot commit on a subscription that a Pulsar
  consumer is attached to (INCONSISTENT_GROUP_PROTOCOL), and a Pulsar consumer cannot attach to a
  live Kafka group's subscription (ConsumerBusy).
"""

from __future__ import annotations

import time

import pulsar
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.kafka.helpers import pulsar_topic, unique_topic
from tests.support.admin_cli import run_admin
from tests.support.admin_http import topic_get
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

RECORDS = 20
POLL_BOUND_S = 30.0


def produce_one_per_entry(bootstrap: str, topic: str, count: int) -> None:
    """`count` records to partition 0, each its own batch (so each its own entry and offset)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=b"r%d" % i, partition=0)
        producer.flush(10)
    assert producer.flush(30) == 0


def member(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, **extra})


def consume(consumer: Consumer, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + POLL_BOUND_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"consumed {len(got)} of {count} in {POLL_BOUND_S} s"
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    return got


def committed(bootstrap: str, group: str, topic: str) -> int:
    probe = member(bootstrap, group)
    try:
        return probe.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        probe.close()


def admin(standalone: StandaloneProcess, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run_admin(["--admin-url", standalone.admin_url, *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def topic(standalone: StandaloneProcess) -> str:
    name = unique_topic("groupsub")
    run_admin(["--admin-url", standalone.admin_url, "topics", "create-partitioned-topic",
               f"persistent://public/default/{name}", "-p", "1"])
    produce_one_per_entry(standalone.kafka_bootstrap, name, RECORDS)
    return name


def test_the_group_is_a_subscription_in_stats_and_explain_storage(
        standalone: StandaloneProcess, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    group = f"g-{topic}"
    c = member(standalone.kafka_bootstrap, group)
    c.subscribe([topic])
    got = consume(c, 8)
    c.commit(message=got[7], asynchronous=False)       # next to read: offset 8
    stats = topic_get(standalone.admin_url, pulsar_topic(topic, 0), "stats")
    sub = stats["subscriptions"][group]
    assert sub["msgBacklog"] == RECORDS - 8, sub
    assert sub["subscriptionProperties"]["kafka.group"] == group, sub
    assert sub["subscriptionProperties"]["kafka.offset"] == "8", sub
    code, text = admin(standalone, capsys, "topics", "explain-storage", pulsar_topic(topic, 0))
    assert code == 0, text
    assert group in text, text[:2000]
    # live: admin moves are refused with the reason
    code, text = admin(standalone, capsys, "topics", "skip", pulsar_topic(topic, 0), "-s", group, "-n", "2")
    assert code != 0 and "live members" in text, text
    c.close()


def test_admin_moves_on_an_empty_group_are_what_its_next_member_reads(
        standalone: StandaloneProcess, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    group = f"g-{topic}"
    c = member(standalone.kafka_bootstrap, group)
    c.subscribe([topic])
    got = consume(c, 5)
    c.commit(message=got[4], asynchronous=False)
    c.close()                                           # leaves: the group is empty
    assert committed(standalone.kafka_bootstrap, group, topic) == 5
    wait_until(lambda: admin(standalone, capsys, "topics", "skip", pulsar_topic(topic, 0), "-s", group,
                             "-n", "3")[0] == 0, 20, what="skip accepted once the group is empty")
    assert committed(standalone.kafka_bootstrap, group, topic) == 8
    c = member(standalone.kafka_bootstrap, group)
    c.subscribe([topic])
    assert consume(c, 1)[0].offset() == 8
    c.close()
    wait_until(lambda: admin(standalone, capsys, "topics", "reset-cursor", pulsar_topic(topic, 0), "-s", group,
                             "-t", "1h")[0] == 0, 20, what="reset-cursor accepted once the group is empty")
    assert committed(standalone.kafka_bootstrap, group, topic) == 0
    code, text = admin(standalone, capsys, "topics", "clear-backlog", pulsar_topic(topic, 0), "-s", group)
    assert code == 0, text
    assert committed(standalone.kafka_bootstrap, group, topic) == RECORDS


def test_one_subscription_is_never_shared_by_both_protocols(standalone: StandaloneProcess, topic: str) -> None:
    client = pulsar.Client(standalone.service_url)
    try:
        # a Pulsar consumer holds subscription "pulsar-side": a Kafka group of that name cannot commit
        pulsar_side = f"p-{topic}"
        held = client.subscribe(pulsar_topic(topic, 0), pulsar_side)
        c = member(standalone.kafka_bootstrap, pulsar_side)
        c.subscribe([topic])
        # the group starts where the Pulsar subscription is (its end: created at latest)
        wait_until(lambda: c.poll(0.2) is None and c.assignment(), 30, what="the group member assigned")
        produce_one_per_entry(standalone.kafka_bootstrap, topic, 1)
        got = consume(c, 1)
        assert got[0].offset() == RECORDS, got[0].offset()
        with pytest.raises(KafkaException) as refused:
            c.commit(message=got[0], asynchronous=False)
        assert "INCONSISTENT_GROUP_PROTOCOL" in str(refused.value) or "protocol" in str(refused.value).lower(), \
            refused.value
        c.close()
        held.close()
        # a live Kafka group: a Pulsar consumer on its subscription is refused
        kafka_side = f"k-{topic}"
        c = member(standalone.kafka_bootstrap, kafka_side)
        c.subscribe([topic])
        got = consume(c, 1)
        c.commit(message=got[0], asynchronous=False)
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(pulsar_topic(topic, 0), kafka_side)
        c.close()
        # once the group is empty the subscription is an ordinary one again
        consumer = wait_until(lambda: _try_subscribe(client, pulsar_topic(topic, 0), kafka_side), 20,
                              what="a Pulsar consumer accepted once the group is empty")
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == b"r1", msg.data()               # it starts where the group committed (offset 1)
        consumer.close()
    finally:
        client.close()


def _try_subscribe(client: pulsar.Client, topic: str, name: str):
    try:
        return client.subscribe(topic, name)
    except pulsar.ConsumerBusy:
        return None
