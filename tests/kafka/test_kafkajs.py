"""kafkajs 2.2.4 (Node) against Strata's Kafka listener: ApiVersions v2, then classic versions only
(Metadata 6, Produce 7, Fetch 11, ListOffsets 3, InitProducerId 1; KAFKA-FACTS §1, §3.1); a non-
idempotent batch carries epoch 0 and sequence 0 (§4); only gzip is built in.

The scripts in js/ (installed by `make setup`) take one JSON argument and print one JSON result; each
run is bounded (helpers.node). kafkajs's consumer has no assign(): js/consume.js reads with kafkajs's
own ListOffsets/Fetch/Batch code, without a group.
"""

from __future__ import annotations

import pytest

from tests.kafka import scenarios
from tests.kafka.helpers import Rec, node


class KafkaJS:
    name = "kafkajs"
    compressions = ("none", "gzip")   # snappy/lz4/zstd need plug-ins (KAFKA-FACTS §4)
    null_header = False               # kafkajs's record encoder takes Buffer.byteLength of every header value


    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(self, topic: str, recs: list[Rec], compression: str = "none", idempotent: bool = False,
                one_batch: bool = False) -> list[int]:
        # every send() of produce.js is one batch per partition, one_batch or not
        out = node("produce.js", {"brokers": self.bootstrap, "topic": topic, "compression": compression,
                                  "idempotent": idempotent, "records": [r.to_json() for r in recs]})
        return [int(o) for o in out["offsets"]]

    def consume(self, topic: str, partition: int, start: tuple[str, int], expect: int,
                then_produce: list[Rec] | None = None) -> list[Rec]:
        kind, value = start
        args = {"brokers": self.bootstrap, "topic": topic, "partition": partition, "expect": expect,
                "start": kind if kind in ("earliest", "latest") else {"offset": value}}
        if then_produce is not None:
            args["thenProduce"] = [r.to_json() for r in then_produce]
        return [Rec.from_json(r) for r in node("consume.js", args)["records"]]

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        out = node("consume.js", {"brokers": self.bootstrap, "topic": topic, "partition": partition,
                                  "start": {"timestamp": timestamp}, "expect": 0})
        # -1: ListOffsets found no record that late
        offset = int(out["resolvedOffset"])
        return None if offset < 0 else offset

    def _admin(self, action: str, topic: str, **extra: object) -> dict:
        return node("admin.js", {"brokers": self.bootstrap, "action": action, "topic": topic, **extra})

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        assert self._admin("create", topic, partitions=partitions, configs=configs)["created"] is True

    def describe_configs(self, topic: str) -> dict[str, str]:
        return self._admin("describeConfigs", topic)

    def add_partitions(self, topic: str, total: int) -> None:
        self._admin("addPartitions", topic, total=total)

    def delete_topic(self, topic: str) -> None:
        self._admin("delete", topic)

    def partition_count(self, topic: str) -> int | None:
        return self._admin("partitionCount", topic)["count"]


@pytest.fixture(scope="module")
def client(bootstrap: str) -> KafkaJS:
    return KafkaJS(bootstrap)


@pytest.fixture(scope="module")
def seeded(client: KafkaJS, standalone) -> scenarios.Seeded:
    return scenarios.Seeded(client, standalone.admin_url)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_every_compression_and_read_back(client: KafkaJS, standalone, idempotent: bool) -> None:
    scenarios.produce_and_read_back(client, standalone.admin_url, idempotent)


def test_consume_from_earliest(client: KafkaJS, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_earliest(client, seeded)


def test_consume_from_an_offset_inside_a_batch(client: KafkaJS, seeded: scenarios.Seeded) -> None:
    scenarios.consume_from_offset_inside_a_batch(client, seeded)


def test_consume_by_timestamp(client: KafkaJS, seeded: scenarios.Seeded) -> None:
    scenarios.consume_by_timestamp(client, seeded)


def test_consume_from_latest(client: KafkaJS, standalone) -> None:
    scenarios.consume_from_latest(client, standalone.admin_url)


def test_admin_create_describe_grow_delete(client: KafkaJS, standalone) -> None:
    scenarios.admin_topic_lifecycle(client, standalone.admin_url)
