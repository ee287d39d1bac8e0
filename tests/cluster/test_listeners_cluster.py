"""Advertised listeners and the HTTP service URL on a real 2-broker cluster, official client.

Each broker advertises `internal:pulsar://127.0.0.1:<its port>` and
`external:pulsar://localhost:<its port>` (two names for the port it binds, so clients sent to
either really connect, and the URL shows which one a lookup chose).
- A lookup on broker A for a topic broker B owns answers B's URL for the listener asked: over the
  binary protocol (LOOKUP with `advertised_listener_name`) and over HTTP (`?listenerName=`, after
  the 307 to B when A assigns the bundle to B); the records in the metadata store (B's ownership
  key, both registry entries) carry each broker's listeners.
- The official client given A's HTTP URL as its service URL, and the one given A's binary URL with
  `listener_name='external'`, both produce to and consume from topics owned by A and by B, and
  from a partitioned topic whose partitions are owned by both (partition metadata through A's
  admin API or PARTITIONED_METADATA, each partition looked up on its own).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pulsar
import pytest

from proto import pulsar_api_pb2 as pb
from tests.cluster.conftest import broker_tracebacks, start_cluster, unique
from tests.cluster.helpers import MetadataView, http, lookup, make_client, seq_of, topic_path
from tests.support.cluster_proc import BrokerProcess, LocalCluster
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T

MESSAGES_PER_TOPIC = 5
PLACEMENT_TRIES = 40


def _listeners_env(broker: BrokerProcess) -> str:
    return f"internal:pulsar://127.0.0.1:{broker.port},external:pulsar://localhost:{broker.port}"


def _external(broker: BrokerProcess) -> str:
    return f"pulsar://localhost:{broker.port}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The module's cluster, each broker restarted with its own listeners (the env is per node)."""
    c = start_cluster(tmp_path_factory.mktemp("listeners") / "c")
    try:
        for broker in c.brokers:
            broker.env["STRATA_ADVERTISED_LISTENERS"] = _listeners_env(broker)
            broker.restart()
        yield c
        problems = broker_tracebacks(c)
    finally:
        c.stop()
    assert not problems, "a broker logged a traceback:\n" + "\n".join(problems)


def _topic_owned_by(cluster: LocalCluster, owner: BrokerProcess) -> str:
    for _ in range(PLACEMENT_TRIES):
        topic = f"persistent://public/default/{unique('lst')}"
        if lookup(cluster.brokers[0].admin_url, topic)["brokerUrl"] == owner.service_url:
            return topic
    raise AssertionError(f"no topic landed on {owner.name} in {PLACEMENT_TRIES} lookups")


def _raw_lookup(broker: BrokerProcess, topic: str, listener: str) -> pb.CommandLookupTopicResponse:
    raw = RawClient(broker.port)
    try:
        raw.connect()
        raw.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(
            topic=topic, request_id=1, advertised_listener_name=listener)))
        reply = raw.next_command()
        assert reply.type == T.LOOKUP_RESPONSE, reply
        return reply.lookupTopicResponse
    finally:
        raw.close()


def test_a_lookup_on_one_broker_answers_the_owners_listener(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    on_b = _topic_owned_by(cluster, b)
    answer = _raw_lookup(a, on_b, "external")
    assert (answer.response, answer.brokerServiceUrl) == (pb.CommandLookupTopicResponse.Connect, _external(b))
    assert _raw_lookup(a, on_b, "").brokerServiceUrl == b.service_url
    refused = _raw_lookup(a, on_b, "nope")
    assert refused.response == pb.CommandLookupTopicResponse.Failed and refused.error == pb.NotAllowedError
    via_http = http("GET", f"{a.admin_url}/lookup/v2/topic/{topic_path(on_b)}?listenerName=external", follow=True)
    assert via_http.status == 200 and via_http.json()["brokerUrl"] == _external(b), (via_http.status, via_http.body)


def test_a_new_topic_assigned_to_the_other_broker_is_redirected_with_its_listener(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    for _ in range(PLACEMENT_TRIES):   # an unowned bundle: A assigns it (to itself or to B) on this lookup
        topic = f"persistent://public/default/{unique('new')}"
        first = http("GET", f"{a.admin_url}/lookup/v2/topic/{topic_path(topic)}?listenerName=external")
        if first.status == 307:
            assert first.location.startswith(b.admin_url) and "listenerName=external" in first.location, first.location
            followed = http("GET", first.location)
            assert followed.status == 200 and followed.json()["brokerUrl"] == _external(b), followed.body
            return
        assert first.status == 200 and first.json()["brokerUrl"] in (_external(a), _external(b)), first.body
    raise AssertionError(f"A never assigned a new bundle to B in {PLACEMENT_TRIES} lookups")


def test_records_in_the_metadata_store_carry_each_brokers_listeners(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    on_b = _topic_owned_by(cluster, b)
    view = MetadataView(cluster.metadata_url)
    try:
        brokers = {data["pulsarServiceUrl"]: data for data, _ in view.brokers().values()}
        bundle = http("GET", f"{a.admin_url}/lookup/v2/topic/{topic_path(on_b)}/bundle", follow=True).json()
        found = view.store.get(f"/namespace/public/default/{bundle}")
    finally:
        view.close()
    for broker in (a, b):
        listeners = brokers[broker.service_url]["advertisedListeners"]
        assert {n: v["brokerServiceUrl"] for n, v in listeners.items()} == \
            {"internal": broker.service_url, "external": _external(broker)}
    assert found is not None
    record = json.loads(found.value)
    assert record["nativeUrl"] == b.service_url
    assert record["advertisedListeners"]["external"]["brokerServiceUrl"] == _external(b)


def _round_trip(client: pulsar.Client, topics: list[str]) -> None:
    consumers = {t: client.subscribe(t, "sub", initial_position=pulsar.InitialPosition.Earliest) for t in topics}
    for t in topics:
        producer = client.create_producer(t)
        for i in range(MESSAGES_PER_TOPIC):
            producer.send(str(i).encode())
        producer.close()
    for t, consumer in consumers.items():
        got = []
        for _ in range(MESSAGES_PER_TOPIC):
            msg = consumer.receive(10_000)
            consumer.acknowledge(msg)
            got.append(seq_of(msg))
        assert got == list(range(MESSAGES_PER_TOPIC)), (t, got)


@pytest.mark.parametrize("how", ["http-service-url", "listener-name"])
def test_official_client_reaches_topics_owned_by_both_brokers(cluster: LocalCluster, how: str) -> None:
    a, b = cluster.brokers
    topics = [_topic_owned_by(cluster, a), _topic_owned_by(cluster, b)]
    topics += [f"persistent://public/default/{unique('fresh')}" for _ in range(4)]   # assigned by this client
    client = make_client(a.admin_url) if how == "http-service-url" else \
        make_client(a.service_url, listener_name="external")
    try:
        _round_trip(client, topics)
    finally:
        client.close()


def _partitioned_over_both(cluster: LocalCluster, partitions: int) -> str:
    a, b = cluster.brokers
    for _ in range(PLACEMENT_TRIES):
        topic = f"persistent://public/default/{unique('lstp')}"
        made = http("PUT", f"{a.admin_url}/admin/v2/{topic_path(topic)}/partitions", partitions, follow=True)
        assert made.status in (200, 204), (made.status, made.body)
        owners = {lookup(a.admin_url, f"{topic}-partition-{i}")["brokerUrl"] for i in range(partitions)}
        if owners == {a.service_url, b.service_url}:
            return topic
    raise AssertionError(f"no partitioned topic spread over both brokers in {PLACEMENT_TRIES} tries")


@pytest.mark.parametrize("how", ["http-service-url", "listener-name"])
def test_official_client_reaches_a_partitioned_topic_spread_over_both_brokers(cluster: LocalCluster,
                                                                              how: str) -> None:
    a, _ = cluster.brokers
    topic = _partitioned_over_both(cluster, 4)
    client = make_client(a.admin_url) if how == "http-service-url" else \
        make_client(a.service_url, listener_name="external")
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        count = 4 * MESSAGES_PER_TOPIC
        for i in range(count):
            producer.send(str(i).encode())       # round robin over the partitions
        got, partitions = [], set()
        for _ in range(count):
            msg = consumer.receive(10_000)
            consumer.acknowledge(msg)
            got.append(seq_of(msg))
            partitions.add(msg.topic_name())
        assert sorted(got) == list(range(count))
        assert partitions == {f"{topic}-partition-{i}" for i in range(4)}
    finally:
        client.close()
