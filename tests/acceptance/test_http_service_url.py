"""The official client (pulsar-client 3.13.0, C++ HTTPLookupService underneath) given the admin
HTTP URL as its service URL, against a real standalone.

What that client calls, and so what these tests exercise end to end:
- `GET /admin/v2/{domain}/{t}/{ns}/{topic}/partitions?checkAllowAutoCreation=true` → `{"partitions": N}`
  (0 for a topic that is not partitioned, including one nothing has used yet);
- `GET /lookup/v2/topic/{domain}/{t}/{ns}/{topic}` → LookupData, whose `brokerUrl` it then
  connects to over the binary protocol (each partition looked up on its own);
- `GET /admin/v2/namespaces/{t}/{ns}/topics?mode=PERSISTENT` for a pattern consumer, which it
  filters with the regex itself.
Persistent, partitioned and non-persistent topics and a pattern consumer each produce and consume;
a topic of a namespace that does not exist fails at once. Any HTTP error status is a failed
lookup for that client (curl's FAILONERROR); a 307 is followed (the 2-broker case is in
tests/cluster/test_listeners_cluster.py).
"""

from __future__ import annotations

import os
import re
import time

import pulsar
import pytest

from tests.acceptance.conftest import make_client, receive_all
from tests.support.admin_http import admin_call
from tests.support.namespaces import ensure_namespace
from tests.support.standalone_proc import StandaloneProcess


@pytest.fixture
def http_client(standalone: StandaloneProcess):
    c = make_client(standalone.admin_url)
    yield c
    c.close()


def test_produce_and_consume_through_the_http_service_url(http_client: pulsar.Client, topic: str) -> None:
    consumer = http_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = http_client.create_producer(topic)
    for i in range(20):
        producer.send(f"m{i}".encode(), partition_key=f"k{i % 3}")
    assert [m.data() for m in receive_all(consumer, 20)] == [f"m{i}".encode() for i in range(20)]
    reader = http_client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"m0"


def test_partitioned_topic_through_the_http_service_url(standalone: StandaloneProcess,
                                                        http_client: pulsar.Client, topic: str) -> None:
    path = "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/partitions"
    assert admin_call(standalone.admin_url, "PUT", path, 3)[0] == 204
    assert admin_call(standalone.admin_url, "GET", path + "?checkAllowAutoCreation=true") == (200, {"partitions": 3})
    assert http_client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = http_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = http_client.create_producer(topic, batching_enabled=False,
                                           message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(30):
        producer.send(f"m{i}".encode())
    got = sorted(m.data() for m in receive_all(consumer, 30))
    assert got == sorted(f"m{i}".encode() for i in range(30))
    stats = admin_call(standalone.admin_url, "GET", path.removesuffix("/partitions") + "/partitioned-stats")[1]
    assert stats["metadata"]["partitions"] == 3 and stats["msgInCounter"] == 30, stats


def test_pattern_consumer_through_the_http_service_url(standalone: StandaloneProcess,
                                                       http_client: pulsar.Client) -> None:
    ns = f"public/http-pattern-{os.getpid()}"
    ensure_namespace(standalone.admin_url, ns)
    plain = make_client(standalone.service_url)
    try:
        for name in ("orders-a", "orders-b", "other"):
            plain.create_producer(f"persistent://{ns}/{name}").close()
        consumer = http_client.subscribe(re.compile(f"persistent://{ns}/orders-.*"), "sub",
                                         initial_position=pulsar.InitialPosition.Earliest)
        for name in ("orders-a", "orders-b", "other"):
            p = plain.create_producer(f"persistent://{ns}/{name}")
            p.send(name.encode())
            p.close()
        got = sorted(m.data() for m in receive_all(consumer, 2))
        assert got == [b"orders-a", b"orders-b"]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(500)
    finally:
        plain.close()


def test_a_topic_of_a_namespace_that_does_not_exist_fails_fast(standalone: StandaloneProcess,
                                                               http_client: pulsar.Client) -> None:
    started = time.monotonic()
    # the C++ client's HTTP lookup reports any error status of the broker as ConnectError ...
    with pytest.raises(pulsar.ConnectError):
        http_client.create_producer("persistent://public/no-such-ns-http/t")
    assert time.monotonic() - started < 10.0
    # ... so what the broker answered to that lookup is checked here: 404, not a dead broker
    status, _ = admin_call(standalone.admin_url, "GET",
                           "/admin/v2/persistent/public/no-such-ns-http/t/partitions?checkAllowAutoCreation=true")
    assert status == 404


def test_lookup_answers_and_errors(standalone: StandaloneProcess, topic: str) -> None:
    local = topic.split("://", 1)[1]
    status, data = admin_call(standalone.admin_url, "GET", f"/lookup/v2/topic/persistent/{local}")
    assert status == 200
    assert data == {"brokerUrl": standalone.service_url, "brokerUrlTls": "", "httpUrl": standalone.admin_url,
                    "httpUrlTls": "", "nativeUrl": standalone.service_url}
    status, body = admin_call(standalone.admin_url, "GET", "/lookup/v2/topic/persistent/public/no-such-ns-http/t")
    assert status == 404 and body["reason"] == "Namespace does not exist", (status, body)
    status, body = admin_call(standalone.admin_url, "GET", "/lookup/v2/topic/bogus/public/default/t")
    assert status in (400, 404), (status, body)


def test_non_persistent_topic_through_the_http_service_url(standalone: StandaloneProcess,
                                                          http_client: pulsar.Client) -> None:
    topic = f"non-persistent://public/default/http-np-{os.getpid()}"
    status, data = admin_call(standalone.admin_url, "GET", f"/lookup/v2/topic/{topic.replace('://', '/')}")
    assert (status, data["brokerUrl"]) == (200, standalone.service_url), (status, data)
    consumer = http_client.subscribe(topic, "sub")
    producer = http_client.create_producer(topic)
    for i in range(5):
        producer.send(f"n{i}".encode())
    assert [m.data() for m in receive_all(consumer, 5)] == [f"n{i}".encode() for i in range(5)]
