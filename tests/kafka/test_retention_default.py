"""Topics created through Kafka keep their data when the broker's retention task runs.

Strata's own default retention (0, 0) keeps, on a topic nobody subscribes to, nothing but the open
ledger; Kafka consumers read by offset and subscribe to nothing, so a topic created through Kafka
gets Kafka's default instead, retention.ms 604800000 (7 days, `kafka_default_retention_ms`), set
on the topic. Checked on a standalone of this module's own that rolls a ledger every
ROLLOVER_ENTRIES entries and runs the retention task every RETENTION_CHECK_MS:

- a topic from CreateTopics without configs, and one auto-created by a producer's Metadata request,
  both describe retention.ms 604800000;
- each gets records in separate batches (one entry each), so its log spans several ledgers;
- a control topic made through Strata's admin REST (no retention anywhere) gets the same and loses
  its closed ledgers: its earliest offset moves up, which shows rollover and retention passes ran;
- after that (and two more passes) both Kafka topics still start at offset 0 and read back whole.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from admin_client.client import AdminClient as StrataAdmin
from tests.kafka.conftest import tracebacks, wait_kafka_port
from tests.kafka.helpers import create_partitioned, pulsar_topic, unique_topic
from tests.kafka.test_confluent import CALL_TIMEOUT_S, make_consumer, read
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ROLLOVER_ENTRIES = 3
RETENTION_CHECK_MS = 300
BATCHES = 15                   # one record each: 5 ledgers
TRIM_WAIT_S = 40.0
KAFKA_DEFAULT_RETENTION_MS = "604800000"


@pytest.fixture(scope="module")
def rolling_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    env = {"STRATA_MANAGED_LEDGER_ROLLOVER_ENTRIES": str(ROLLOVER_ENTRIES),
           "STRATA_MANAGED_LEDGER_ROLLOVER_MIN_AGE_MS": "0",
           "STRATA_BROKER_RETENTION_CHECK_INTERVAL_MS": str(RETENTION_CHECK_MS)}
    with StandaloneProcess.start(tmp_path_factory.mktemp("kafka-retention") / "data", env=env) as sa:
        wait_kafka_port(sa.kafka_bootstrap, "the standalone", sa.log_path)
        yield sa
        problems = tracebacks([("standalone", sa.log_path)])
    assert not problems, "the standalone logged a traceback:\n" + "\n".join(problems)


def produce_batches(bootstrap: str, topic: str, tag: str) -> None:
    """BATCHES records, each flushed alone (one batch, one entry)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 20_000})
    for i in range(BATCHES):
        p.produce(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode(), partition=0)
        assert p.flush(CALL_TIMEOUT_S) == 0, f"{topic}: record {i} not acknowledged"


def earliest(consumer: Consumer, topic: str) -> int:
    low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=CALL_TIMEOUT_S)
    return low


def ledgers(admin_url: str, topic: str) -> list[dict]:
    path = pulsar_topic(topic, 0).replace("://", "/", 1)
    return StrataAdmin(admin_url).call("GET", f"/admin/v2/{path}/internalStats")["ledgers"]


def test_kafka_created_topics_keep_offset_0_through_retention(rolling_standalone: StandaloneProcess) -> None:
    sa = rolling_standalone
    bootstrap = sa.kafka_bootstrap
    created, auto, control = unique_topic("ret-created"), unique_topic("ret-auto"), unique_topic("ret-control")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(created, 1, 1)], request_timeout=CALL_TIMEOUT_S).values():
        future.result(timeout=CALL_TIMEOUT_S)
    create_partitioned(sa.admin_url, control, 1)

    produce_batches(bootstrap, created, "created")
    produce_batches(bootstrap, auto, "auto")          # librdkafka's Metadata request creates it
    produce_batches(bootstrap, control, "control")

    for topic in (created, auto):
        (described,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                              request_timeout=CALL_TIMEOUT_S).values()
        configs = described.result(timeout=CALL_TIMEOUT_S)
        assert configs["retention.ms"].value == KAFKA_DEFAULT_RETENTION_MS, \
            (topic, {k: v.value for k, v in configs.items()})

    consumer = make_consumer(bootstrap)
    try:
        start = time.monotonic()
        wait_until(lambda: earliest(consumer, control) > 0, TRIM_WAIT_S,
                   what="the control topic (no retention) trimmed by a retention pass")
        print(f"control topic trimmed {time.monotonic() - start:.1f} s after the last record: earliest offset "
              f"{earliest(consumer, control)}; ledgers: control {len(ledgers(sa.admin_url, control))}, "
              f"created {len(ledgers(sa.admin_url, created))}, auto {len(ledgers(sa.admin_url, auto))}")
        time.sleep(3 * RETENTION_CHECK_MS / 1000)      # and further passes
        for topic in (created, auto):
            assert len(ledgers(sa.admin_url, topic)) > 1, f"{topic}: the log never rolled to a new ledger"
            assert earliest(consumer, topic) == 0, f"{topic}: retention trimmed a topic created through Kafka"
    finally:
        consumer.close()

    for topic, tag in ((created, "created"), (auto, "auto")):
        c = make_consumer(bootstrap)
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got = read(c, 0, BATCHES)
        finally:
            c.close()
        assert [(r.offset, r.value) for r in got] == [(i, f"{tag}-value-{i}".encode()) for i in range(BATCHES)], topic
