"""The lifecycle policies enforced on a real standalone, with the official client
(`broker.retention.lifecycle`, `broker.topics.auto_create`):

- inactiveTopicPolicies: an idle topic with no subscriptions is deleted (and explain-storage says
  why); a subscription keeps it under delete_when_no_subscriptions; under
  delete_when_subscriptions_caught_up a caught-up topic goes with its subscription and one with a
  backlog stays; a topic-level policy turned off keeps it; a partitioned topic's partitions go,
  then its metadata (broker_delete_inactive_partitioned_topic_metadata_enabled);
- subscriptionExpirationTime: an idle durable subscription is removed after its minute;
- autoTopicCreation: refused (TopicNotFound) or partitioned with N partitions;
- autoSubscriptionCreation: a new subscription refused (SubscriptionNotFound, which the client
  retries until its timeout), an existing one kept;
- /metrics counts each.

The standalone checks every second and deletes after 3 s of inactivity, so every topic a test
wants kept lives in a namespace whose inactiveTopicPolicies are off. The subscription expiry
(its unit is minutes) starts in a module fixture and is checked last, so its minute overlaps the
other tests.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pulsar
import pytest

from tests.acceptance.conftest import make_client
from tests.support.admin_http import admin_call, metrics
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

ENV = {"STRATA_BROKER_DELETE_INACTIVE_TOPICS_FREQUENCY_SECONDS": "1",
       "STRATA_BROKER_DELETE_INACTIVE_TOPICS_MAX_INACTIVE_DURATION_SECONDS": "3",
       "STRATA_BROKER_DELETE_INACTIVE_PARTITIONED_TOPIC_METADATA_ENABLED": "true"}
KEEP = {"inactiveTopicDeleteMode": "delete_when_no_subscriptions", "maxInactiveDurationSeconds": 3600,
        "deleteWhileInactive": False}
_ids = itertools.count()


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("lifecycle") / "data", env=ENV) as process:
        yield process


@pytest.fixture(scope="module")
def expiring(sa: StandaloneProcess) -> Iterator[tuple[str, float]]:
    """A topic whose subscription `idle` is left without a consumer under a 1-minute expiration
    (and `held`, whose consumer stays); the time it was left."""
    ns = _namespace(sa, {"subscription_expiration_time_minutes": 1})
    topic = f"persistent://{ns}/expiring"
    client = make_client(sa.service_url)
    held = client.subscribe(topic, "held")
    client.subscribe(topic, "idle").close()
    yield topic, time.monotonic()
    held.close()
    client.close()


def _namespace(sa: StandaloneProcess, body: dict | None = None, *, keep: bool = True) -> str:
    ns = f"public/lifecycle-{next(_ids)}"
    fields = dict(body or {})
    if keep:
        fields.setdefault("inactive_topic_policies", KEEP)
    status, answer = admin_call(sa.admin_url, "PUT", f"/admin/v2/namespaces/{ns}", fields)
    assert status == 204, answer
    return ns


def _topics(sa: StandaloneProcess, ns: str) -> list[str]:
    status, body = admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{ns}")
    assert status == 200, body
    return body


def _produce(sa: StandaloneProcess, topic: str, count: int = 3) -> None:
    client = make_client(sa.service_url)
    try:
        producer = client.create_producer(topic)
        for i in range(count):
            producer.send(f"m{i}".encode())
        producer.close()
    finally:
        client.close()


def _counter(sa: StandaloneProcess, name: str) -> float:
    for line in metrics(sa.admin_url).splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_an_idle_topic_without_subscriptions_is_deleted_and_explained(sa, expiring) -> None:
    ns = _namespace(sa, keep=False)
    topic = f"persistent://{ns}/idle"
    _produce(sa, topic)
    assert topic in _topics(sa, ns)
    wait_until(lambda: topic not in _topics(sa, ns), 20, "the idle topic deleted")
    status, body = admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{ns}/idle/explain-storage")
    assert status == 404
    assert body["reason"].startswith("Topic not found: deleted at ") and "inactiveTopicPolicies" in body["reason"]
    assert _counter(sa, "strata_inactive_topics_deleted_total") >= 1


def test_a_subscription_keeps_it_and_caught_up_mode_deletes_with_subscriptions(sa, expiring) -> None:
    kept = f"persistent://{_namespace(sa, keep=False)}/subscribed"
    caught_up_ns = _namespace(sa, {"inactive_topic_policies": {
        "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up", "maxInactiveDurationSeconds": 2,
        "deleteWhileInactive": True}})
    drained, backlogged = f"persistent://{caught_up_ns}/drained", f"persistent://{caught_up_ns}/backlogged"
    client = make_client(sa.service_url)
    try:
        for topic in (kept, backlogged):
            client.subscribe(topic, "s").close()
        consumer = client.subscribe(drained, "s")
        _produce(sa, drained, 2)
        _produce(sa, backlogged, 2)
        _produce(sa, kept, 2)
        for _ in range(2):
            consumer.acknowledge(consumer.receive(timeout_millis=10_000))
        consumer.close()
    finally:
        client.close()
    wait_until(lambda: drained not in _topics(sa, caught_up_ns), 20, "the caught-up topic deleted")
    assert backlogged in _topics(sa, caught_up_ns)
    assert kept in _topics(sa, kept.split("://")[1].rsplit("/", 1)[0])


def test_a_topic_level_policy_off_keeps_an_idle_topic(sa, expiring) -> None:
    ns = _namespace(sa, keep=False)
    topic = f"persistent://{ns}/kept"
    assert admin_call(sa.admin_url, "PUT", f"/admin/v2/persistent/{ns}/kept")[0] == 204
    assert admin_call(sa.admin_url, "POST", f"/admin/v2/persistent/{ns}/kept/inactiveTopicPolicies", KEEP)[0] == 204
    _produce(sa, topic)
    time.sleep(6)
    assert topic in _topics(sa, ns)


def test_a_partitioned_topic_goes_with_its_last_partition(sa, expiring) -> None:
    ns = _namespace(sa, keep=False)
    path = f"/admin/v2/persistent/{ns}/parted/partitions"
    assert admin_call(sa.admin_url, "PUT", path, 2)[0] == 204
    _produce(sa, f"persistent://{ns}/parted", 4)
    wait_until(lambda: admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{ns}/partitioned")[1] == [],
               20, "the partitioned topic deleted")
    assert _topics(sa, ns) == []
    assert _counter(sa, "strata_inactive_partitioned_topics_deleted_total") >= 1


def test_auto_topic_creation_refused_or_partitioned(sa, expiring) -> None:
    closed = _namespace(sa, {"autoTopicCreationOverride": {"allowAutoTopicCreation": False}})
    parted = _namespace(sa, {"autoTopicCreationOverride": {"allowAutoTopicCreation": True,
                                                           "topicType": "partitioned", "defaultNumPartitions": 3}})
    refused_before = _counter(sa, "strata_topic_auto_creation_refused_total")
    client = make_client(sa.service_url, operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.TopicNotFound):
            client.create_producer(f"persistent://{closed}/nope")
        with pytest.raises(pulsar.TopicNotFound):
            client.subscribe(f"persistent://{closed}/nope", "s")
        assert _topics(sa, closed) == []
        assert admin_call(sa.admin_url, "PUT", f"/admin/v2/persistent/{closed}/made")[0] == 204
        client.create_producer(f"persistent://{closed}/made").close()       # an existing topic is served
        producer = client.create_producer(f"persistent://{parted}/auto")
        producer.send(b"x")
        producer.close()
    finally:
        client.close()
    assert admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{parted}/auto/partitions") == \
        (200, {"partitions": 3})
    assert _counter(sa, "strata_topic_auto_creation_refused_total") >= refused_before + 2
    assert _counter(sa, "strata_topics_auto_created_total") >= 1


def test_auto_subscription_creation_refused_for_a_new_subscription_only(sa, expiring) -> None:
    ns = _namespace(sa, {"autoSubscriptionCreationOverride": {"allowAutoSubscriptionCreation": False}})
    topic = f"persistent://{ns}/subs"
    assert admin_call(sa.admin_url, "PUT", f"/admin/v2/persistent/{ns}/subs")[0] == 204
    assert admin_call(sa.admin_url, "PUT", f"/admin/v2/persistent/{ns}/subs/subscription/there")[0] == 204
    client = make_client(sa.service_url, operation_timeout_seconds=3)
    try:
        # SubscriptionNotFound is not fatal to the C++ client (its isResultRetryable): it retries
        # until its operation timeout, as it does against Pulsar
        with pytest.raises((pulsar.SubscriptionNotFound, pulsar.Timeout)):
            client.subscribe(topic, "new")
        assert "new" not in admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{ns}/subs/subscriptions")[1]
        client.subscribe(topic, "there").close()
        client.create_reader(topic, pulsar.MessageId.earliest).close()      # readers are never refused
    finally:
        client.close()
    assert _counter(sa, "strata_subscription_auto_creation_refused_total") >= 1


def test_an_idle_subscription_expires_after_its_minute(sa, expiring) -> None:
    topic, left_at = expiring
    path = f"/admin/v2/persistent/{topic.split('://')[1]}/subscriptions"
    assert sorted(admin_call(sa.admin_url, "GET", path)[1]) == ["held", "idle"]
    wait_until(lambda: admin_call(sa.admin_url, "GET", path)[1] == ["held"], max(5.0, left_at + 75 - time.monotonic()),
               "the idle subscription expired")
    assert time.monotonic() - left_at >= 59          # not before its minute
    status, body = admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{topic.split('://')[1]}/explain-storage")
    assert status == 200
    assert [(d["subscription"], d["reason"]) for d in body["lifecycleDeletions"]] == \
        [("idle", "subscriptionExpirationTimeMinutes")]
    assert _counter(sa, "strata_subscriptions_expired_total") == 1
