"""Kafka clients on a real two-broker cluster: a topic whose partitions are owned by different brokers
(its bundles spread over both) is produced to and read back whole; a client can only do that by sending
each partition's requests to the leader Metadata names (the partition's Pulsar owner). Done with
confluent-kafka (flexible versions) and aiokafka (classic versions).
"""

from __future__ import annotations

import pytest

from tests.cluster.helpers import lookup
from tests.kafka.helpers import Rec, assert_same_records, create_partitioned, pulsar_topic, sample_records, unique_topic
from tests.kafka.test_aiokafka import AioKafka
from tests.kafka.test_confluent import Confluent
from tests.support.cluster_proc import LocalCluster

PARTITIONS = 8
TOPIC_TRIES = 4


def spread_topic(cluster: LocalCluster) -> tuple[str, dict[int, str]]:
    """A partitioned topic whose partitions have owners on both brokers (a few names tried: placement
    is by bundle hash and load); partition -> owner URL."""
    admin = cluster.brokers[0].admin_url
    owners: dict[int, str] = {}
    for _ in range(TOPIC_TRIES):
        topic = unique_topic("spread")
        create_partitioned(admin, topic, PARTITIONS)
        owners = {p: lookup(admin, pulsar_topic(topic, p))["brokerUrl"] for p in range(PARTITIONS)}
        if len(set(owners.values())) == 2:
            return topic, owners
    raise AssertionError(f"{TOPIC_TRIES} topics of {PARTITIONS} partitions all had one owner: {owners}")


@pytest.mark.parametrize("client_cls", [Confluent, AioKafka], ids=["confluent", "aiokafka"])
def test_partitions_on_both_brokers_are_produced_and_read_back(kafka_cluster: LocalCluster, client_cls) -> None:
    topic, owners = spread_topic(kafka_cluster)
    client = client_cls(kafka_cluster.kafka_bootstrap)
    sent: list[Rec] = []
    for p in range(PARTITIONS):
        sent += [Rec(r.key, r.value, r.headers, r.timestamp, p)
                 for r in sample_records(f"p{p}", 4, null_header=client.null_header)]
    offsets = client.produce(topic, sent, compression="gzip")
    assert len(offsets) == len(sent)
    for p in range(PARTITIONS):
        mine = [r for r in sent if r.partition == p]
        got = client.consume(topic, p, ("earliest", 0), expect=len(mine))
        assert_same_records(mine, got, f"{client.name} partition {p} owned by {owners[p]}")
