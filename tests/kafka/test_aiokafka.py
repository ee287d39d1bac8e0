"""aiokafka 0.14 against Strata's Kafka listener: ApiVersions **v0**, then only classic (non-flexible)
versions: Metadata 5, Produce 7, Fetch 11, ListOffsets 3, InitProducerId 0 (KAFKA-FACTS §1, §3.1).
Its default producer sends acks=1 and a non-idempotent batch with sequence 0 (§4, §10).

Consumers use assign() with group_id=None: no group, no commits. Each adapter call runs its own event
loop under a bound (asyncio.timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.metadata import MetadataRequest

from tests.kafka import scenarios
from tests.kafka.helpers import COMPRESSIONS, POLL_BOUND_S, Rec
from tests.kafka.scenarios import error_codes, names

CALL_BOUND_S = 60.0
TIMEOUTS = {"request_timeout_ms": 20_000}


def bounded(make: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with asyncio.timeout(CALL_BOUND_S):
            return await make()
    return asyncio.run(run())


def to_rec(r) -> Rec:
    return Rec(r.key, r.value, tuple(r.headers or ()), r.timestamp, r.partition, r.offset)


class AioKafka:
    name = "aiokafka"
    compressions = COMPRESSIONS
    null_header = True

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, recs: list[Rec], compression: str = "none", idempotent: bool = False,
                one_batch: bool = False) -> list[int]:
        return bounded(lambda: self._produce(topic, recs, compression, idempotent, one_batch))

    async def _produce(self, topic: str, recs: list[Rec], compression: str, idempotent: bool,
                       one_batch: bool) -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap,
                                    compression_type=None if compression == "none" else compression,
                                    enable_idempotence=idempotent, max_batch_size=1024 * 1024, **TIMEOUTS)
        await producer.start()
        try:
            if one_batch:
                partitions = {r.partition for r in recs}
                assert len(partitions) == 1, "one batch goes to one partition"
                batch = producer.create_batch()
                for r in recs:
                    assert batch.append(key=r.key, value=r.value, timestamp=r.timestamp,
                                        headers=list(r.headers)) is not None
                batch.close()
                meta = await (await producer.send_batch(batch, topic, partition=partitions.pop()))
                return [meta.offset + i for i in range(len(recs))]
            futures = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                           timestamp_ms=r.timestamp, headers=list(r.headers)) for r in recs]
            return [(await f).offset for f in futures]
        finally:
            await producer.stop()

    def consume(self, topic: str, partition: int, start: tuple[str, int], expect: int,
                then_produce: list[Rec] | None = None) -> list[Rec]:
        return bounded(lambda: self._consume(topic, partition, start, expect, then_produce))

    async def _consume(self, topic: str, partition: int, start: tuple[str, int], expect: int,
                       then_produce: list[Rec] | None) -> list[Rec]:
        tp = TopicPartition(topic, partition)
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="none", **TIMEOUTS)
        await consumer.start()
        try:
            consumer.assign([tp])
            kind, value = start
            if kind == "earliest":
                await consumer.seek_to_beginning(tp)
            elif kind == "latest":
                await consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, value)
            await consumer.position(tp)          # resolves earliest/latest now
            if then_produce is not None:
                await self._produce(topic, then_produce, "none", False, False)
            got: list[Rec] = []
            async with asyncio.timeout(POLL_BOUND_S):
                while True:
                    for records in (await consumer.getmany(tp, timeout_ms=300)).values():
                        got += [to_rec(r) for r in records]
                    if len(got) >= expect:
                        end = (await consumer.end_offsets([tp]))[tp]
                        if await consumer.position(tp) >= end:
                            return got
        finally:
            await consumer.stop()

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        async def run() -> int | None:
            tp = TopicPartition(topic, partition)
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, **TIMEOUTS)
            await consumer.start()
            try:
                found = (await consumer.offsets_for_times({tp: timestamp}))[tp]
                return None if found is None else found.offset
            finally:
                await consumer.stop()
        return bounded(run)

    def _admin(self, call: Callable[[AIOKafkaAdminClient], Awaitable[Any]]) -> Any:
        async def run() -> Any:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **TIMEOUTS)
            await admin.start()
            try:
                return await call(admin)
            finally:
                await admin.close()
        return bounded(run)

    @staticmethod
    def _ok(response: Any, topic: str | None = None) -> None:
        obj = response.to_object()
        assert not error_codes(obj), obj
        assert topic is None or names(obj, topic), f"no result for {topic}: {obj}"

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        self._ok(self._admin(lambda a: a.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])),
                 topic)

    def describe_configs(self, topic: str) -> dict[str, str]:
        responses = self._admin(lambda a: a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
        out = {}
        for response in responses:
            self._ok(response)
            for resource in response.to_object()["resources"]:
                for entry in resource["config_entries"]:
                    out[entry["config_names"]] = entry["config_value"]
        return out

    def add_partitions(self, topic: str, total: int) -> None:
        self._ok(self._admin(lambda a: a.create_partitions({topic: NewPartitions(total)})), topic)

    def delete_topic(self, topic: str) -> None:
        self._ok(self._admin(lambda a: a.delete_topics([topic])), topic)

    def partition_count(self, topic: str) -> int | None:
        # not admin.describe_topics: its Metadata asks AllowAutoTopicCreation=true, which would
        # re-create a deleted topic (Strata auto-creates as Kafka's auto.create.topics.enable does)
        request = MetadataRequest([topic], allow_auto_topic_creation=False)
        response = self._admin(lambda a: a._send_request(request))
        (described,) = response.to_object()["topics"]
        if described["error_code"] != 0:
            return None
        return len(described["partitions"])


@pytest.fixture(scope="module")
def client(bootstrap: str) -> AioKafka:
    return AioKafka(bootstrap)


@pytest.fixture(scope="module")
def seeded(client: AioKafka, standalone) -> scenarios.Seeded:
    return scenarios.Seeded(client, standalone.admin_url)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_every_compression_and_read_back(client: AioKafka, standalone, idempotent: bool) -> None:
    scenarios.produce_and_read_back(client, standalone.admin_url, idempotent)


def test_consume_from_earliest(client: AioKafka, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_earliest(client, seeded)


def test_consume_from_an_offset_inside_a_batch(client: AioKafka, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_offset_inside_a_batch(client, seeded)


def test_consume_by_timestamp(client: AioKafka, seeded: scenarios.Seeded) -> None:
    scenarios.consume_by_timestamp(client, seeded)


def test_consume_from_latest(client: AioKafka, standalone) -> None:
    scenarios.consume_from_latest(client, standalone.admin_url)


def test_admin_create_describe_grow_delete(client: AioKafka, standalone) -> None:
    scenarios.admin_topic_lifecycle(client, standalone.admin_url)
