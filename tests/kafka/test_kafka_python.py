"""kafka-python 3.0 against Strata's Kafka listener: ApiVersions v4, Metadata 12, Produce 9, Fetch 12,
ListOffsets 10 (KAFKA-FACTS §1, §3.1); its producer is idempotent by DEFAULT (InitProducerId first),
so the "plain" producer here turns idempotence off explicitly. Snappy is xerial-framed (§4).

Consumers use assign() with group_id=None: no group, no commits.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from tests.kafka import scenarios
from tests.kafka.helpers import COMPRESSIONS, POLL_BOUND_S, Rec

CALL_TIMEOUT_S = 20.0
# kafka-python 3.0 names the wait for the first ApiVersions answer bootstrap_timeout_ms (2.x:
# api_version_auto_timeout_ms, which 3.0 refuses as an unrecognized config)
TIMEOUTS = {"request_timeout_ms": 20_000, "bootstrap_timeout_ms": 10_000}


def to_rec(r) -> Rec:
    return Rec(r.key, r.value, tuple(r.headers or ()), r.timestamp, r.partition, r.offset)


def read(consumer: KafkaConsumer, tp: TopicPartition, expect: int) -> list[Rec]:
    """Records until `expect` are in and the position reached the end offset (bounded)."""
    got: list[Rec] = []
    deadline = time.monotonic() + POLL_BOUND_S
    while True:
        for records in consumer.poll(timeout_ms=300).values():
            got += [to_rec(r) for r in records]
        if len(got) >= expect:
            end = consumer.end_offsets([tp], timeout_ms=CALL_TIMEOUT_S * 1000)[tp]
            if consumer.position(tp, timeout_ms=CALL_TIMEOUT_S * 1000) >= end:
                return got
        assert time.monotonic() < deadline, f"read {len(got)} of {expect} records in {POLL_BOUND_S} s: {got[-3:]}"


class KafkaPython:
    name = "kafka-python"
    compressions = COMPRESSIONS
    null_header = False         # KafkaProducer.send refuses a header value that is not bytes (TypeError)

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, recs: list[Rec], compression: str = "none", idempotent: bool = False,
                one_batch: bool = False) -> list[int]:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap,
                                 compression_type=None if compression == "none" else compression,
                                 enable_idempotence=idempotent, linger_ms=500 if one_batch else 0,
                                 batch_size=1024 * 1024, **TIMEOUTS)
        try:
            futures = [producer.send(topic, value=r.value, key=r.key, headers=list(r.headers),
                                     partition=r.partition, timestamp_ms=r.timestamp) for r in recs]
            producer.flush(timeout=CALL_TIMEOUT_S)
            return [f.get(timeout=CALL_TIMEOUT_S).offset for f in futures]
        finally:
            producer.close(timeout=5)

    def consumer(self) -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", **TIMEOUTS)

    def consume(self, topic: str, partition: int, start: tuple[str, int], expect: int,
                then_produce: list[Rec] | None = None) -> list[Rec]:
        tp = TopicPartition(topic, partition)
        consumer = self.consumer()
        try:
            consumer.assign([tp])
            kind, value = start
            if kind == "earliest":
                consumer.seek_to_beginning(tp)
            elif kind == "latest":
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, value)
            consumer.position(tp, timeout_ms=CALL_TIMEOUT_S * 1000)   # resolves earliest/latest now
            if then_produce is not None:
                self.produce(topic, then_produce)
            return read(consumer, tp, expect)
        finally:
            consumer.close()

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        tp = TopicPartition(topic, partition)
        consumer = self.consumer()
        try:
            found = consumer.offsets_for_times({tp: timestamp}, timeout_ms=CALL_TIMEOUT_S * 1000)[tp]
            return None if found is None else found.offset
        finally:
            consumer.close()

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, **TIMEOUTS)

    def _admin(self, call):
        admin = self.admin()
        try:
            return call(admin)
        finally:
            admin.close()

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        answer = self._admin(lambda a: a.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1,
                                                                "configs": configs}}))
        assert scenarios.names(answer, topic), f"no result for {topic}: {answer}"

    def describe_configs(self, topic: str) -> dict[str, str]:
        answer = self._admin(lambda a: a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                                          config_filter="all"))
        return {name: config["value"] for name, config in answer["topic"][topic].items()}

    def add_partitions(self, topic: str, total: int) -> None:
        answer = self._admin(lambda a: a.create_partitions({topic: total})).to_dict()   # a response object
        assert scenarios.names(answer, topic), f"no result for {topic}: {answer}"

    def delete_topic(self, topic: str) -> None:
        answer = self._admin(lambda a: a.delete_topics([topic]))
        assert scenarios.names(answer, topic), f"no result for {topic}: {answer}"

    def partition_count(self, topic: str) -> int | None:
        (described,) = self._admin(lambda a: a.describe_topics([topic]))
        if described["error_code"] != 0:
            return None
        return len(described["partitions"])


@pytest.fixture(scope="module")
def client(bootstrap: str) -> KafkaPython:
    return KafkaPython(bootstrap)


@pytest.fixture(scope="module")
def seeded(client: KafkaPython, standalone) -> scenarios.Seeded:
    return scenarios.Seeded(client, standalone.admin_url)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_every_compression_and_read_back(client: KafkaPython, standalone, idempotent: bool) -> None:
    scenarios.produce_and_read_back(client, standalone.admin_url, idempotent)


def test_default_producer_is_idempotent_and_works(client: KafkaPython, standalone) -> None:
    """A KafkaProducer with no settings at all sends InitProducerId first (KAFKA-FACTS §1.2)."""
    from tests.kafka.helpers import assert_same_records, create_partitioned, sample_records, unique_topic

    topic = unique_topic("kafka-python-default")
    create_partitioned(standalone.admin_url, topic, 1)
    producer = KafkaProducer(bootstrap_servers=client.bootstrap, **TIMEOUTS)
    try:
        recs = sample_records("default", 5, null_header=client.null_header)
        futures = [producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), partition=0,
                                 timestamp_ms=r.timestamp) for r in recs]
        producer.flush(timeout=CALL_TIMEOUT_S)
        offsets = [f.get(timeout=CALL_TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(timeout=5)
    got = client.consume(topic, 0, scenarios.EARLIEST, expect=5)
    assert_same_records(recs, got, "default (idempotent) kafka-python producer")
    assert [r.offset for r in got] == offsets


def test_consume_from_earliest(client: KafkaPython, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_earliest(client, seeded)


def test_consume_from_an_offset_inside_a_batch(client: KafkaPython, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_offset_inside_a_batch(client, seeded)


def test_consume_by_timestamp(client: KafkaPython, seeded: scenarios.Seeded) -> None:
    scenarios.consume_by_timestamp(client, seeded)


def test_consume_from_latest(client: KafkaPython, standalone) -> None:
    scenarios.consume_from_latest(client, standalone.admin_url)


def test_admin_create_describe_grow_delete(client: KafkaPython, standalone) -> None:
    scenarios.admin_topic_lifecycle(client, standalone.admin_url)
