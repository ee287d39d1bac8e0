"""Lookup and admin on a real 2-broker cluster (issue 14, items 2 and 7), official client.

- A client that knows only broker A's URL produces to and consumes from 20 topics in two
  namespaces; some are owned by B (the client got there through LOOKUP redirects), and the
  owners the lookup API names are the ones the metadata store records under /namespace.
- An admin call on the broker that does not own the topic is answered with a 307 to the owner;
  following it gives the owner's answer. `strata admin` against either broker answers the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pulsar

from tests.cluster.conftest import unique
from tests.cluster.helpers import MetadataView, http, lookup, make_client, owners_by_lookup, seq_of, topic_path
from tests.support.cluster_proc import BrokerProcess, LocalCluster
from tests.support.namespaces import ensure_namespace
from tests.support.waiting import wait_until

MESSAGES_PER_TOPIC = 10
CLI_TIMEOUT_S = 60.0


def test_client_of_one_broker_reaches_topics_owned_by_both(cluster: LocalCluster, metadata: MetadataView) -> None:
    a, b = cluster.brokers
    namespaces = ["public/default", f"public/{unique('second')}"]
    ensure_namespace(a.admin_url, namespaces[1])
    topics = [f"persistent://{ns}/{unique('rt')}" for ns in namespaces for _ in range(10)]
    client = make_client(a.service_url)     # knows only A
    try:
        consumers = {t: client.subscribe(t, "sub", initial_position=pulsar.InitialPosition.Earliest)
                     for t in topics}
        producers = {t: client.create_producer(t) for t in topics}
        for producer in producers.values():
            for i in range(MESSAGES_PER_TOPIC):
                producer.send(str(i).encode())        # raises on any failure
        for t, consumer in consumers.items():
            got = []
            for _ in range(MESSAGES_PER_TOPIC):
                msg = consumer.receive(10_000)
                consumer.acknowledge(msg)
                got.append(seq_of(msg))
            assert got == list(range(MESSAGES_PER_TOPIC)), (t, got)
    finally:
        client.close()

    owners = owners_by_lookup(a.admin_url, topics)
    assert set(owners.values()) <= {a.service_url, b.service_url}, owners
    on_b = sorted(t for t, url in owners.items() if url == b.service_url)
    print(f"\n{len(on_b)} of {len(topics)} topics owned by B, {len(topics) - len(on_b)} by A")
    assert on_b, f"no topic is owned by B: every one of {len(topics)} topics went to A ({owners})"
    assert owners_by_lookup(b.admin_url, topics) == owners, "the two brokers name different owners"

    recorded = metadata.bundle_owners()
    for t in topics:
        bundle = http("GET", f"{a.admin_url}/lookup/v2/topic/{topic_path(t)}/bundle", follow=True)
        assert bundle.status == 200, (bundle.status, bundle.body)
        tenant, ns = t.split("://", 1)[1].split("/")[:2]
        key = f"/namespace/{tenant}/{ns}/{bundle.json()}"
        assert key in recorded, f"{t}: no ownership key {key} (keys: {sorted(recorded)})"
        assert recorded[key][0] == owners[t], (t, key, recorded[key], owners[t])


def _topic_owned_by(cluster: LocalCluster, owner: BrokerProcess, namespace: str, tries: int = 40) -> str:
    """A new topic whose bundle `owner` owns (placing topics by lookup until one lands there)."""
    for _ in range(tries):
        topic = f"persistent://{namespace}/{unique('adm')}"
        if lookup(cluster.brokers[0].admin_url, topic)["brokerUrl"] == owner.service_url:
            return topic
    raise AssertionError(f"none of {tries} new topics in {namespace} was placed on {owner.name}")


def _produce(service_url: str, topic: str, count: int) -> None:
    client = make_client(service_url)
    try:
        client.subscribe(topic, "keep")      # a subscription, so stats have one
        producer = client.create_producer(topic)
        for i in range(count):
            producer.send(str(i).encode())
    finally:
        client.close()


STABLE_STATS = ("msgInCounter", "bytesInCounter", "storageSize")


def test_admin_call_on_the_wrong_broker_is_redirected(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    namespace = f"public/{unique('redirect')}"
    ensure_namespace(a.admin_url, namespace)
    for owner, other in ((b, a), (a, b)):
        topic = _topic_owned_by(cluster, owner, namespace)
        _produce(cluster.service_url, topic, 5)
        path = f"/admin/v2/{topic_path(topic)}/stats"
        wrong = http("GET", other.admin_url + path)
        assert wrong.status == 307, (wrong.status, wrong.body)
        assert wrong.location.startswith(owner.admin_url + path), wrong.location
        followed = http("GET", other.admin_url + path, follow=True)
        direct = http("GET", owner.admin_url + path)
        assert followed.status == direct.status == 200, (followed.status, direct.status, followed.body)
        assert {k: followed.json()[k] for k in STABLE_STATS} == {k: direct.json()[k] for k in STABLE_STATS}
        assert followed.json()["msgInCounter"] == 5
        assert sorted(followed.json()["subscriptions"]) == sorted(direct.json()["subscriptions"]) == ["keep"]

        # a write through the wrong broker: redirected too, and it lands (both read it back)
        retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
        wrong_put = http("POST", f"{other.admin_url}/admin/v2/{topic_path(topic)}/retention", retention)
        assert wrong_put.status == 307, (wrong_put.status, wrong_put.body)
        put = http("POST", f"{other.admin_url}/admin/v2/{topic_path(topic)}/retention", retention, follow=True)
        assert put.status in (200, 204), (put.status, put.body)
        for broker in (a, b):
            got = http("GET", f"{broker.admin_url}/admin/v2/{topic_path(topic)}/retention", follow=True)
            assert got.status == 200 and got.json() == retention, (broker.name, got.status, got.body)


def _cli(admin_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", "admin", "-o", "json", "--admin-url", admin_url, *args],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


def _normal(text: str) -> Any:
    """The CLI's output as data (lists sorted: two brokers may list in different orders)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()
    return sorted(data, key=json.dumps) if isinstance(data, list) else data


def test_admin_cli_against_either_broker_gives_the_same_answers(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    namespace = f"public/{unique('cli')}"
    created = _cli(a.admin_url, "namespaces", "create", namespace, "-b", "8")
    assert created.returncode == 0, created.stderr
    on_a = _topic_owned_by(cluster, a, namespace)
    on_b = _topic_owned_by(cluster, b, namespace)
    clusters = http("GET", f"{a.admin_url}/admin/v2/clusters")
    assert clusters.status == 200, (clusters.status, clusters.body)
    cluster_name = clusters.json()[0]
    questions = [
        ("topics", "lookup", on_a), ("topics", "lookup", on_b),
        ("topics", "bundle-range", on_a), ("topics", "bundle-range", on_b),
        ("topics", "get-retention", on_a), ("topics", "get-retention", on_b),
        ("namespaces", "bundles", namespace),
        ("brokers", "list", cluster_name), ("brokers", "leader-broker"),
    ]
    for question in questions:
        answers = [_cli(url, *question) for url in (a.admin_url, b.admin_url)]
        for answer in answers:
            assert answer.returncode == 0, (question, answer.returncode, answer.stdout, answer.stderr)
        assert _normal(answers[0].stdout) == _normal(answers[1].stdout), (question, answers[0].stdout,
                                                                          answers[1].stdout)
    lookups = {t: _normal(_cli(a.admin_url, "topics", "lookup", t).stdout) for t in (on_a, on_b)}
    assert a.service_url in json.dumps(lookups[on_a]) and b.service_url in json.dumps(lookups[on_b]), lookups
    assert _normal(_cli(a.admin_url, "brokers", "list", cluster_name).stdout) == sorted([a.web_id, b.web_id])
    bundles = _normal(_cli(b.admin_url, "namespaces", "bundles", namespace).stdout)
    assert bundles["numBundles"] == 8 and len(bundles["boundaries"]) == 9, bundles
    for url in (a.admin_url, b.admin_url):
        health = _cli(url, "brokers", "healthcheck")
        assert health.returncode == 0, (url, health.stdout, health.stderr)
    # a write through the broker that does not own the topic: the CLI follows the 307 of a PUT
    unloaded = _cli(a.admin_url, "topics", "unload", on_b)
    assert unloaded.returncode == 0, (unloaded.stdout, unloaded.stderr)
    wait_until(lambda: lookup(a.admin_url, on_b)["brokerUrl"] in (a.service_url, b.service_url), 10,
               what="the unloaded topic has an owner again")
