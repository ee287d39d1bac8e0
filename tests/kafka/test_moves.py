"""Bundle moves under an idempotent Kafka producer, on a real two-broker cluster.

A confluent-kafka producer with enable.idempotence=True sends a numbered stream (STREAM records,
key and value carrying the number) to a topic whose partitions are owned by both brokers, while the
test moves the partitions three times through Strata's admin REST: the namespace unloaded, every
bundle holding one of the topic's partitions unloaded to the OTHER broker (destinationBroker, so
each does change owner), the namespace unloaded again. Then every partition is read with assign()
from offset 0. What must hold (stream_check): every record exactly once, in order, at contiguous
offsets equal to the acknowledged ones, and librdkafka never reported a fatal error: the producer's
sequence state follows the partition to its new owner (a forgotten state would be answered with
OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID, which librdkafka treats as fatal).

This module's cluster snapshots the producer state every SNAPSHOT_ENTRIES idempotent batches, so a
new owner rebuilds it from a snapshot plus the entries after it (test_restarts.py's cluster keeps
the default, 1,000: there the state comes from replaying the entries alone).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.cluster.helpers import http, lookup, topic_path
from tests.kafka import wire
from tests.kafka.conftest import CLUSTER_ENV, checked_cluster
from tests.kafka.helpers import NAMESPACE, create_partitioned, pulsar_topic, unique_topic
from tests.kafka.stream_check import NumberedStream, assert_exactly_once, read_partitions
from tests.kafka.test_cluster_clients import PARTITIONS, spread_topic
from tests.kafka.wire import RawKafka, record_batch
from tests.support.cluster_proc import LocalCluster

SNAPSHOT_ENTRIES = 10
STREAM = 3000
PACE_S = 0.002                 # about 6-8 s of sending: the moves land mid-stream


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """conftest's cluster, with frequent producer-state snapshots."""
    env = {**CLUSTER_ENV, "STRATA_KAFKA_PRODUCER_SNAPSHOT_INTERVAL_ENTRIES": str(SNAPSHOT_ENTRIES)}
    with checked_cluster(tmp_path_factory.mktemp("kafka-moves") / "c", env) as c:
        yield c


def owners(admin_url: str, topic: str) -> dict[int, str]:
    return {p: lookup(admin_url, pulsar_topic(topic, p))["brokerUrl"] for p in range(PARTITIONS)}


def test_idempotent_stream_survives_bundle_moves_exactly_once(kafka_cluster: LocalCluster) -> None:
    topic, before = spread_topic(kafka_cluster)
    admin = kafka_cluster.brokers[0].admin_url
    moves: list[str] = []

    def unload_namespace() -> None:
        start = time.monotonic()
        done = http("PUT", f"{admin}/admin/v2/namespaces/{NAMESPACE}/unload", follow=True)
        assert done.status == 204, (done.status, done.body)
        moves.append(f"namespace unload ({time.monotonic() - start:.2f} s)")

    def unload_bundles_to_the_other_broker() -> None:
        start = time.monotonic()
        bundles: dict[str, str] = {}      # bundle -> current owner's pulsar URL
        for p in range(PARTITIONS):
            t = topic_path(pulsar_topic(topic, p))
            bundle = http("GET", f"{admin}/lookup/v2/topic/{t}/bundle", follow=True).json()
            bundles[bundle] = lookup(admin, pulsar_topic(topic, p))["brokerUrl"]
        for bundle, owner in bundles.items():
            destination = next(b for b in kafka_cluster.brokers if b.service_url != owner)
            done = http("PUT", f"{admin}/admin/v2/namespaces/{NAMESPACE}/{bundle}/unload"
                               f"?destinationBroker={destination.web_id}", follow=True)
            assert done.status == 204, (bundle, done.status, done.body)
        moves.append(f"{len(bundles)} bundles unloaded to the other broker ({time.monotonic() - start:.2f} s)")

    stream = NumberedStream(kafka_cluster.kafka_bootstrap, topic, PARTITIONS)
    started = time.monotonic()
    stream.send(range(STREAM), pace_s=PACE_S, at={STREAM // 5: unload_namespace,
                                                  2 * STREAM // 5: unload_bundles_to_the_other_broker,
                                                  3 * STREAM // 5: unload_namespace})
    stream.finish()
    sent_s = time.monotonic() - started
    after = owners(admin, topic)
    print(f"{STREAM} records sent and acknowledged in {sent_s:.1f} s; moves: {moves}; "
          f"owners before {before}, after {after}")
    assert len(moves) == 3, moves
    assert after != before, "no partition changed owner: the moves did not move anything"

    stored = read_partitions(kafka_cluster.kafka_bootstrap, topic, PARTITIONS, stream.expected())
    assert_exactly_once(stream, stored)
    print(f"read back and checked in {time.monotonic() - started - sent_s:.1f} s")


# --- the same, deterministic, over a plain socket (tests/kafka/wire.py) -----------------------

NOT_LEADER_OR_FOLLOWER = 6
RETRIABLE = {NOT_LEADER_OR_FOLLOWER, 5, 7}    # + LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT: the move in progress
SETTLE_S = 20.0


def produce_settled(conn: RawKafka, topic: str, batch: bytes) -> wire.PartitionProduced:
    """Produce, retried (bounded) while the partition is still on its way to this broker."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        answer = conn.produce(topic, 0, batch)
        if answer.error not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


@pytest.mark.parametrize("batches", [3, 2 * SNAPSHOT_ENTRIES + 2], ids=["replayed", "snapshot-and-replayed"])
def test_producer_state_follows_the_partition_to_its_new_owner(kafka_cluster: LocalCluster, batches: int) -> None:
    """`batches` one-record batches (sequences 0..batches-1) to the owner; the bundle is unloaded to
    the other broker; there the old owner answers NOT_LEADER_OR_FOLLOWER, and the new one knows the
    producer: the last batch and an older one of the last 5, retried, get their first offsets back
    and are not stored again; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; the next sequence is stored
    next. (With `batches` under SNAPSHOT_ENTRIES the new owner has only the entries to go by; over
    it, a snapshot and the entries after it.)"""
    admin = kafka_cluster.brokers[0].admin_url
    topic = unique_topic("moves-wire")
    create_partitioned(admin, topic, 1)
    owner_url = lookup(admin, pulsar_topic(topic, 0))["brokerUrl"]
    owner = next(b for b in kafka_cluster.brokers if b.service_url == owner_url)
    other = next(b for b in kafka_cluster.brokers if b is not owner)

    with RawKafka.to(owner.kafka_bootstrap) as conn:
        pid, epoch = conn.init_producer_id()
        sent = [record_batch([(f"k{s}".encode(), f"v{s}".encode())], producer_id=pid, producer_epoch=epoch,
                             base_sequence=s) for s in range(batches)]
        offsets = []
        for batch in sent:
            answer = produce_settled(conn, topic, batch)
            assert answer.error == wire.NONE, answer
            offsets.append(answer.base_offset)
        assert offsets == list(range(batches)), offsets

        bundle = http("GET", f"{admin}/lookup/v2/topic/{topic_path(pulsar_topic(topic, 0))}/bundle", follow=True).json()
        done = http("PUT", f"{admin}/admin/v2/namespaces/{NAMESPACE}/{bundle}/unload"
                           f"?destinationBroker={other.web_id}", follow=True)
        assert done.status == 204, (done.status, done.body)
        assert lookup(admin, pulsar_topic(topic, 0))["brokerUrl"] == other.service_url, "the bundle did not move"
        old_owner = conn.produce(topic, 0, sent[-1])
        assert old_owner.error == NOT_LEADER_OR_FOLLOWER, old_owner

    with RawKafka.to(other.kafka_bootstrap) as conn:
        last = produce_settled(conn, topic, sent[-1])
        assert (last.error, last.base_offset) == (wire.NONE, offsets[-1]), \
            f"the last batch retried on the new owner: {last}, first stored at {offsets[-1]}"
        older = max(0, batches - 4)
        again = conn.produce(topic, 0, sent[older])
        assert (again.error, again.base_offset) == (wire.NONE, offsets[older]), \
            f"batch {older} (one of the last 5) retried on the new owner: {again}"
        gap = conn.produce(topic, 0, record_batch([(None, b"gap")], producer_id=pid, producer_epoch=epoch,
                                                  base_sequence=batches + 1))
        assert gap.error == wire.OUT_OF_ORDER_SEQUENCE_NUMBER, f"a sequence gap on the new owner: {gap}"
        nxt = conn.produce(topic, 0, record_batch([(b"next", b"next")], producer_id=pid, producer_epoch=epoch,
                                                  base_sequence=batches))
        assert (nxt.error, nxt.base_offset) == (wire.NONE, batches), nxt
        error, end = conn.list_offset(topic, 0, -1)
        assert (error, end) == (wire.NONE, batches + 1), "something was stored twice (or a refused batch stored)"
