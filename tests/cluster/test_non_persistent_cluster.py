"""Non-persistent topics on a real 2-broker cluster: ownership and lookups as for persistent topics.

Topics of one namespace spread over its bundles and so over both brokers (the bundle hashes the
full name, domain included); each is served by its owner only: messages flow through the
official client whichever broker it first connects to; the admin stats of a topic are answered by
its owner and the other broker answers 307 there; the namespace's list of live non-persistent
topics is the same through either broker (each asks the other); after `unload` the clients
reconnect and carry on with a fresh topic.
"""

from __future__ import annotations

import pulsar

from tests.cluster.conftest import unique
from tests.cluster.helpers import http, make_client
from tests.support.cluster_proc import LocalCluster
from tests.support.namespaces import ensure_namespace
from tests.support.waiting import wait_until


def _path(topic: str) -> str:
    return "/admin/v2/non-persistent/" + topic.split("://", 1)[1]


def test_non_persistent_topics_are_served_by_their_owners(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    ns = f"public/{unique('np')}"
    ensure_namespace(a.admin_url, ns, {"bundles": {"numBundles": 8}})
    topics = [f"non-persistent://{ns}/t-{i}" for i in range(8)]
    client = make_client(cluster.service_url)
    try:
        pairs = []
        for topic in topics:
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, batching_enabled=False)
            producer.send(topic.encode())
            assert consumer.receive(10_000).data() == topic.encode()
            pairs.append((producer, consumer))
        owners = set()
        for topic in topics:
            answers = {broker.name: http("GET", broker.admin_url + _path(topic) + "/stats") for broker in (a, b)}
            statuses = sorted(answer.status for answer in answers.values())
            assert statuses == [200, 307], {k: (v.status, v.body) for k, v in answers.items()}
            owners.update(name for name, answer in answers.items() if answer.status == 200)
            stats = http("GET", a.admin_url + _path(topic) + "/stats", follow=True).json()
            assert stats["msgInCounter"] == 1 and stats["subscriptions"]["s"]["msgOutCounter"] == 1
        assert owners == {a.name, b.name}                # both brokers serve some of them
        for broker in (a, b):
            listed = http("GET", f"{broker.admin_url}/admin/v2/non-persistent/{ns}").json()
            assert listed == sorted(topics)
        unloaded = http("PUT", a.admin_url + _path(topics[0]) + "/unload", follow=True)
        assert unloaded.status == 204, unloaded.body
        def reconnected() -> bool:
            answer = http("GET", a.admin_url + _path(topics[0]) + "/stats", follow=True)
            stats = answer.json() if answer.status == 200 else {}
            return bool(stats.get("publishers")) and bool(stats.get("subscriptions", {}).get("s", {}).get("consumers"))

        wait_until(reconnected, timeout_s=20, what="both clients back on a fresh topic")
        producer, consumer = pairs[0]
        producer.send(b"after unload")   # a message sent before the consumer was back would be dropped
        assert consumer.receive(10_000).data() == b"after unload"
    finally:
        client.close()


def test_lookup_of_a_malformed_non_persistent_name_is_refused(cluster: LocalCluster) -> None:
    client = make_client(cluster.service_url, operation_timeout_seconds=3)
    try:
        try:
            client.create_producer("non-persistent://public/default/sp ace")
        except pulsar.PulsarException:
            pass
        else:
            raise AssertionError("a malformed non-persistent name was accepted")
    finally:
        client.close()
