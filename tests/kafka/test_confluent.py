"""confluent-kafka (librdkafka 2.16) against Strata's Kafka listener: it speaks the newest, flexible
versions (ApiVersions 3, Metadata 12, Produce 10, Fetch 16 by topic id; KAFKA-FACTS §1, §3.1) and
writes raw (not xerial-framed) snappy (§4).

Consumers use assign() only: a group.id is set because librdkafka requires one, nothing is committed.
"""

from __future__ import annotations

import itertools
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType

from tests.kafka import scenarios
from tests.kafka.helpers import COMPRESSIONS, POLL_BOUND_S, Rec

CALL_TIMEOUT_S = 20.0
_groups = itertools.count()


def to_rec(msg) -> Rec:
    _type, ts = msg.timestamp()
    return Rec(msg.key(), msg.value(), tuple(msg.headers() or ()), ts, msg.partition(), msg.offset())


def make_consumer(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"never-committed-{next(_groups)}",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "enable.partition.eof": True, "auto.offset.reset": "error",
                     "socket.timeout.ms": 10_000, "session.timeout.ms": 10_000})


def read(consumer: Consumer, partition: int, expect: int) -> list[Rec]:
    """Records until `expect` are in and the partition's end was reached after them (bounded)."""
    got: list[Rec] = []
    at_end = False
    deadline = time.monotonic() + POLL_BOUND_S
    while not (at_end and len(got) >= expect):
        assert time.monotonic() < deadline, f"read {len(got)} of {expect} records in {POLL_BOUND_S} s: {got[-3:]}"
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            err = msg.error()
            if err is None:
                got.append(to_rec(msg))
                at_end = False
            elif err.code() == KafkaError._PARTITION_EOF:
                at_end = True
            else:
                raise AssertionError(f"consumer error: {err}")
    return got


class Confluent:
    name = "confluent"
    compressions = COMPRESSIONS
    null_header = True

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def producer(self, compression: str = "none", idempotent: bool = False, linger_ms: int = 5) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "compression.type": compression,
                         "enable.idempotence": idempotent, "linger.ms": linger_ms,
                         "message.timeout.ms": 20_000, "socket.timeout.ms": 10_000})

    def produce(self, topic: str, recs: list[Rec], compression: str = "none", idempotent: bool = False,
                one_batch: bool = False) -> list[int]:
        # one_batch: everything is queued before linger ends (librdkafka makes one batch per partition)
        producer = self.producer(compression, idempotent, linger_ms=1000 if one_batch else 5)
        offsets: dict[int, int] = {}
        errors: list[str] = []

        def delivered(i: int):
            def cb(err, msg) -> None:
                if err is not None:
                    errors.append(f"record {i}: {err}")
                else:
                    offsets[i] = msg.offset()
            return cb

        for i, r in enumerate(recs):
            producer.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                             headers=list(r.headers), on_delivery=delivered(i))
        left = producer.flush(CALL_TIMEOUT_S)
        assert not errors, errors
        assert left == 0, f"{left} records not acknowledged within {CALL_TIMEOUT_S} s"
        return [offsets[i] for i in range(len(recs))]

    def consume(self, topic: str, partition: int, start: tuple[str, int], expect: int,
                then_produce: list[Rec] | None = None) -> list[Rec]:
        kind, value = start
        offset = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END, "offset": value}[kind]
        consumer = make_consumer(self.bootstrap)
        try:
            consumer.assign([TopicPartition(topic, partition, offset)])
            if then_produce is not None:
                self._wait_position(consumer, topic, partition)
                self.produce(topic, then_produce)
            return read(consumer, partition, expect)
        finally:
            consumer.close()

    @staticmethod
    def _wait_position(consumer: Consumer, topic: str, partition: int) -> None:
        """Until librdkafka has resolved OFFSET_END (ListOffsets) and fetched up to it: the first
        _PARTITION_EOF. (position() can not tell: librdkafka reports the last consumed offset + 1, so
        it stays OFFSET_INVALID until a record has been consumed.)"""
        deadline = time.monotonic() + POLL_BOUND_S
        while True:
            for msg in consumer.consume(num_messages=10, timeout=0.2):
                err = msg.error()
                assert err is not None, f"a record before anything was produced after latest: {msg.offset()}"
                if err.code() == KafkaError._PARTITION_EOF:
                    assert msg.partition() == partition and msg.topic() == topic, (msg.topic(), msg.partition())
                    return
                raise AssertionError(f"consumer error: {err}")
            assert time.monotonic() < deadline, "the consumer never reached the end of the partition"

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        consumer = make_consumer(self.bootstrap)
        try:
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp)], timeout=CALL_TIMEOUT_S)
            assert tp.error is None, tp.error
            return None if tp.offset < 0 else tp.offset
        finally:
            consumer.close()

    def admin(self) -> AdminClient:
        # allow.auto.create.topics: an AdminClient is a producer-type handle, whose default (true) makes
        # list_topics(topic) send Metadata with AllowAutoTopicCreation and so re-create a deleted topic
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10_000,
                            "allow.auto.create.topics": False})

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        admin = self.admin()   # held: a dropped AdminClient fails its futures with _DESTROY
        futures = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)],
                                     request_timeout=CALL_TIMEOUT_S)
        futures[topic].result(CALL_TIMEOUT_S)

    def describe_configs(self, topic: str) -> dict[str, str]:
        admin = self.admin()   # held: a dropped AdminClient fails its futures with _DESTROY
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                        request_timeout=CALL_TIMEOUT_S)
        (entries,) = [f.result(CALL_TIMEOUT_S) for f in futures.values()]
        return {name: entry.value for name, entry in entries.items()}

    def add_partitions(self, topic: str, total: int) -> None:
        admin = self.admin()   # held: a dropped AdminClient fails its futures with _DESTROY
        futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=CALL_TIMEOUT_S)
        futures[topic].result(CALL_TIMEOUT_S)

    def delete_topic(self, topic: str) -> None:
        admin = self.admin()   # held: a dropped AdminClient fails its futures with _DESTROY
        futures = admin.delete_topics([topic], request_timeout=CALL_TIMEOUT_S)
        futures[topic].result(CALL_TIMEOUT_S)

    def partition_count(self, topic: str) -> int | None:
        md = self.admin().list_topics(topic, timeout=CALL_TIMEOUT_S).topics.get(topic)
        if md is None or md.error is not None:
            return None
        return len(md.partitions)


@pytest.fixture(scope="module")
def client(bootstrap: str) -> Confluent:
    return Confluent(bootstrap)


@pytest.fixture(scope="module")
def seeded(client: Confluent, standalone) -> scenarios.Seeded:
    return scenarios.Seeded(client, standalone.admin_url)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_every_compression_and_read_back(client: Confluent, standalone, idempotent: bool) -> None:
    scenarios.produce_and_read_back(client, standalone.admin_url, idempotent)


def test_consume_from_earliest(client: Confluent, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_earliest(client, seeded)


def test_consume_from_an_offset_inside_a_batch(client: Confluent, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_offset_inside_a_batch(client, seeded)


def test_consume_by_timestamp(client: Confluent, seeded: scenarios.Seeded) -> None:
    scenarios.consume_by_timestamp(client, seeded)


def test_consume_from_latest(client: Confluent, standalone) -> None:
    scenarios.consume_from_latest(client, standalone.admin_url)


def test_admin_create_describe_grow_delete(client: Confluent, standalone) -> None:
    scenarios.admin_topic_lifecycle(client, standalone.admin_url)
