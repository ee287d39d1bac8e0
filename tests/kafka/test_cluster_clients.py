"""Kafka clients on a real two-broker cluster: a topic whose partitions are owned by different brokers
(its bundles spread over both) is produced to and read back whole; a client can only do that by sending
each partition's requests to the leader Metadata names (the partition's Pulsar owner). Done with
confluent-kafka (flexible versions) and aiokafka (classic versions).
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient

from metadata import open_store
from tests.cluster.helpers import http, lookup
from tests.kafka.helpers import (
    NAMESPACE,
    Rec,
    assert_same_records,
    create_partitioned,
    pulsar_topic,
    sample_records,
    unique_topic,
)
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


def test_metadata_names_as_leader_only_a_broker_that_owns_the_partition(kafka_cluster: LocalCluster) -> None:
    """Right after an unload nobody owns the bundles. A Metadata answer then names, for each
    partition, the broker that holds it in the metadata store, never one only chosen for it: a
    leader seen to move A -> B -> A quickly can leave librdkafka fetching from B for good
    (`broker.kafka.metadata._confirmed`)."""
    topic, _ = spread_topic(kafka_cluster)
    admin_url = kafka_cluster.brokers[0].admin_url
    bundles = {p: json.loads(http("GET", f"{admin_url}/lookup/v2/topic/persistent/"
                                         f"{pulsar_topic(topic, p).split('://', 1)[1]}/bundle").body)
               for p in range(PARTITIONS)}
    done = http("PUT", f"{admin_url}/admin/v2/namespaces/{NAMESPACE}/unload", follow=True)
    assert done.status == 204, (done.status, done.body)
    answer = AdminClient({"bootstrap.servers": kafka_cluster.brokers[1].kafka_bootstrap}).list_topics(topic, timeout=20)
    by_port = {b.kafka_bootstrap.rsplit(":", 1)[1]: b for b in kafka_cluster.brokers}
    store = open_store(kafka_cluster.metadata_url)
    try:
        for p, meta in answer.topics[topic].partitions.items():
            named = by_port[str(answer.brokers[meta.leader].port)]
            found = store.get(f"/namespace/{NAMESPACE}/{bundles[p]}")
            assert found is not None, f"partition {p}: leader {named.name} named, but nobody owns its bundle"
            owner = json.loads(found.value)["nativeUrl"]
            assert owner == named.service_url, f"partition {p}: leader {named.name} named, owned by {owner}"
    finally:
        store.close()
