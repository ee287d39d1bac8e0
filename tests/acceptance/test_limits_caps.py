"""The caps (Pulsar's max* policies) enforced on a real standalone, with the official client
(`broker.limits.topic_caps`, `broker.topics.caps_keeper`, `broker.limits.topic_count`).

Each cap is refused at limit + 1 with Pulsar's error and text and allowed again after a removal
or a raised limit; a topic's value wins over its namespace's; the unacked limits stop dispatch
and resume it at half, visible in stats and /metrics; a message over the topic's maxMessageSize
gets an error while the producer goes on; maxTopicsPerNamespace refuses REST creation (412) and
auto-creation by a producer.

A policy change reaches the broker through its metadata watch, so each test polls (`_until`)
instead of assuming the next operation sees it.
"""

from __future__ import annotations

import itertools
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from broker.limits.caps import MESSAGE_SIZE_RANGE
from common.errors import PulsarServerError
from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client
from tests.support.admin_http import admin_call
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command

_ids = itertools.count()
Shared = pulsar.ConsumerType.Shared
WAIT_S = 10.0


def _namespace(sa, **policies: int) -> str:
    ns = f"public/caps-{next(_ids)}"
    assert admin_call(sa.admin_url, "PUT", f"/admin/v2/namespaces/{ns}")[0] == 204
    for route, value in policies.items():
        assert admin_call(sa.admin_url, "POST", f"/admin/v2/namespaces/{ns}/{route}", value)[0] == 204
    return ns


def _set(sa, path: str, value: int | None) -> None:
    """POST a policy (DELETE it with None) at `path` (a namespace's or a topic's route)."""
    status = admin_call(sa.admin_url, "DELETE" if value is None else "POST", path, value)[0]
    assert status == 204, (path, status)


def _until(attempt: Callable[[], Any], what: str) -> Any:
    """Retry `attempt` until it returns without raising (a policy change is in flight)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return attempt()
        except Exception:
            if time.monotonic() > deadline:
                raise AssertionError(f"not allowed in time: {what}") from None
            time.sleep(0.2)


def _refused(attempt: Callable[[], Any], error: type[Exception], text: str) -> None:
    """`attempt` fails with `error` naming `text` (retried while a change is in flight)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            made = attempt()
        except error as exc:
            assert text in str(exc) or not text, exc
            return
        made.close()
        assert time.monotonic() < deadline, f"never refused: {text}"
        time.sleep(0.2)


@pytest.fixture
def fast_client(standalone):
    c = make_client(standalone.service_url, operation_timeout_seconds=5)
    yield c
    c.close()


def _stats(sa, topic: str) -> dict:
    return admin_call(sa.admin_url, "GET", f"/admin/v2/persistent/{topic.split('://')[1]}/stats")[1]


def _metrics(sa) -> str:
    with urllib.request.urlopen(f"{sa.admin_url}/metrics", timeout=10) as answer:
        return answer.read().decode()


# --- producers, consumers, subscriptions ------------------------------------------------------------


def test_producers_refused_at_the_topic_value_over_the_namespace_value(standalone, fast_client) -> None:
    ns = _namespace(standalone, maxProducersPerTopic=2)
    topic = f"persistent://{ns}/t"
    first, second = fast_client.create_producer(topic), fast_client.create_producer(topic)
    _refused(lambda: fast_client.create_producer(topic), pulsar.ProducerBusy, "")
    _set(standalone, f"/admin/v2/persistent/{ns}/t/maxProducers", 3)        # the topic's wins
    third = _until(lambda: fast_client.create_producer(topic), "a third producer at maxProducers 3")
    _refused(lambda: fast_client.create_producer(topic), pulsar.ProducerBusy, "")
    third.close()
    fourth = fast_client.create_producer(topic)                              # a place came free
    _set(standalone, f"/admin/v2/persistent/{ns}/t/maxProducers", None)     # the namespace's 2 again
    _refused(lambda: fast_client.create_producer(topic), pulsar.ProducerBusy, "")
    _set(standalone, f"/admin/v2/namespaces/{ns}/maxProducersPerTopic", 0)  # 0: no limit
    _until(lambda: fast_client.create_producer(topic), "a producer with no limit").close()
    for p in (first, second, fourth):
        p.close()
    assert 'strata_cap_refusals_total{cluster="standalone",policy="maxProducersPerTopic"}' in _metrics(standalone)


def test_a_partitioned_topic_counts_producers_per_partition(standalone, fast_client) -> None:
    ns = _namespace(standalone, maxProducersPerTopic=1)
    assert admin_call(standalone.admin_url, "PUT", f"/admin/v2/persistent/{ns}/p/partitions", 2)[0] == 204
    producer = fast_client.create_producer(f"persistent://{ns}/p")   # one per partition: at the limit
    _refused(lambda: fast_client.create_producer(f"persistent://{ns}/p"), pulsar.ProducerBusy, "")
    producer.close()


def test_consumers_refused_per_topic_and_per_subscription(standalone, fast_client) -> None:
    ns = _namespace(standalone, maxConsumersPerTopic=2)
    topic = f"persistent://{ns}/t"
    a = fast_client.subscribe(topic, "a", consumer_type=Shared)
    b = fast_client.subscribe(topic, "b", consumer_type=Shared)
    _refused(lambda: fast_client.subscribe(topic, "a", consumer_type=Shared), pulsar.ConsumerBusy, "")
    b.close()
    _set(standalone, f"/admin/v2/persistent/{ns}/t/maxConsumersPerSubscription", 1)
    _refused(lambda: fast_client.subscribe(topic, "a", consumer_type=Shared), pulsar.ConsumerBusy, "")
    other = fast_client.subscribe(topic, "c", consumer_type=Shared)    # another subscription has room
    _set(standalone, f"/admin/v2/persistent/{ns}/t/maxConsumersPerSubscription", None)
    _refused(lambda: fast_client.subscribe(topic, "a", consumer_type=Shared), pulsar.ConsumerBusy, "")
    other.close()
    second = _until(lambda: fast_client.subscribe(topic, "a", consumer_type=Shared), "a second consumer of a")
    for c in (a, second):
        c.close()
    metrics = _metrics(standalone)
    for policy in ("maxConsumersPerTopic", "maxConsumersPerSubscription"):
        assert f'strata_cap_refusals_total{{cluster="standalone",policy="{policy}"}}' in metrics


def test_subscriptions_refused_past_the_limit_existing_ones_unaffected(standalone, fast_client) -> None:
    ns = _namespace(standalone)
    topic = f"persistent://{ns}/t"
    path = f"/admin/v2/persistent/{ns}/t"
    assert admin_call(standalone.admin_url, "PUT", path)[0] == 204
    _set(standalone, f"{path}/maxSubscriptionsPerTopic", 2)
    a = fast_client.subscribe(topic, "a")
    b = fast_client.subscribe(topic, "b")
    _refused(lambda: fast_client.subscribe(topic, "c"), pulsar.NotAllowedError, "")
    a.close()
    again = fast_client.subscribe(topic, "a")                  # an existing subscription is not new
    status, body = admin_call(standalone.admin_url, "PUT", f"{path}/subscription/c", {"ledgerId": -1, "entryId": -1})
    assert status == 412 and body["reason"] == f"Exceed the maximum number of subscriptions of the topic: {topic}"
    b.unsubscribe()
    _until(lambda: fast_client.subscribe(topic, "c"), "c once b is gone").close()
    again.close()


# --- unacked messages -------------------------------------------------------------------------------


def _received(consumer: pulsar.Consumer, limit: int) -> list:
    """What the consumer gets within a short wait, up to `limit` messages (nothing acked)."""
    out = []
    while len(out) < limit:
        try:
            out.append(consumer.receive(1500))
        except pulsar.Timeout:
            break
    return out


def test_a_consumer_stops_at_its_unacked_limit_and_resumes_at_half(standalone, client) -> None:
    ns = _namespace(standalone)
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "s", consumer_type=Shared)
    _set(standalone, f"/admin/v2/persistent/{ns}/t/maxUnackedMessagesOnConsumer", 10)   # set while attached
    producer = client.create_producer(topic, batching_enabled=False)
    deadline = time.monotonic() + WAIT_S
    while True:     # the change reaches the consumer: it stops at 10
        for i in range(30):
            producer.send(b"m%d" % i)
        got = _received(consumer, 60)
        sub = _stats(standalone, topic)["subscriptions"]["s"]
        if sub["consumers"][0]["blockedConsumerOnUnackedMsgs"]:
            break
        assert time.monotonic() < deadline, "the consumer was never blocked"
        for m in got:
            consumer.acknowledge(m)
    held = sub["consumers"][0]["unackedMessages"]
    assert held == len(got) and 10 <= held < 20
    for m in got[:held - 5]:           # down to 5: half the limit
        consumer.acknowledge(m)
    more = _received(consumer, 60)
    assert more, "dispatch did not resume at half the limit"
    assert 'strata_consumers_blocked_on_unacked{cluster="standalone"}' in _metrics(standalone)
    consumer.close()


def test_a_subscription_stops_at_its_unacked_limit_and_resumes_under_half(standalone, client) -> None:
    ns = _namespace(standalone, maxUnackedMessagesPerSubscription=10)
    topic = f"persistent://{ns}/t"
    one = client.subscribe(topic, "s", consumer_type=Shared, consumer_name="one")
    two = client.subscribe(topic, "s", consumer_type=Shared, consumer_name="two")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(40):
        producer.send(b"m%d" % i)
    got = [(one, m) for m in _received(one, 40)] + [(two, m) for m in _received(two, 40)]
    sub = _stats(standalone, topic)["subscriptions"]["s"]
    assert sub["blockedSubscriptionOnUnackedMsgs"] is True
    assert 10 <= len(got) < 40 and sub["unackedMessages"] == len(got)
    metrics = _metrics(standalone)
    assert 'strata_subscriptions_blocked_on_unacked{cluster="standalone"} 1.0' in metrics
    assert (f'pulsar_subscription_blocked_on_unacked_messages{{cluster="standalone",namespace="{ns}",'
            f'subscription="s",topic="{topic}"}} 1.0') in metrics
    for consumer, m in got[:len(got) - 4]:       # 4 left: under half of 10
        consumer.acknowledge(m)
    later = _received(one, 40) + _received(two, 40)
    assert later, "dispatch did not resume under half the limit"
    one.close()
    two.close()


# --- message size and topics per namespace ------------------------------------------------------------


def test_a_message_over_the_topics_max_size_is_refused_and_the_producer_goes_on(standalone) -> None:
    ns = _namespace(standalone)
    path = f"/admin/v2/persistent/{ns}/t"
    assert admin_call(standalone.admin_url, "PUT", path)[0] == 204
    status, body = admin_call(standalone.admin_url, "POST", f"{path}/maxMessageSize", 64 << 20)
    assert (status, body["reason"]) == (412, MESSAGE_SIZE_RANGE)     # over the broker's: nothing stored
    assert admin_call(standalone.admin_url, "GET", f"{path}/maxMessageSize") == (200, None)
    _set(standalone, f"{path}/maxMessageSize", 1024)
    wire = RawClient(standalone.port, timeout_s=WAIT_S)
    try:
        wire.connect()
        assert wire.producer(f"persistent://{ns}/t").type == T.PRODUCER_SUCCESS
        deadline = time.monotonic() + WAIT_S
        for seq in itertools.count():      # until the broker has read the new value
            reply = _send(wire, seq, b"x" * 4096)
            if reply.type == T.SEND_ERROR:
                break
            assert time.monotonic() < deadline, "a message over maxMessageSize was stored"
            time.sleep(0.2)
        assert reply.send_error.error == PulsarServerError.NotAllowedError
        assert reply.send_error.message == "Exceed maximum message size"
        assert _send(wire, seq + 1, b"small").type == T.SEND_RECEIPT     # same connection, same producer
    finally:
        wire.close()
    assert 'strata_cap_refusals_total{cluster="standalone",policy="maxMessageSize"}' in _metrics(standalone)


def _send(wire: RawClient, seq: int, payload: bytes) -> pb.BaseCommand:
    md = pb.MessageMetadata(producer_name="raw-caps", sequence_id=seq, publish_time=int(time.time() * 1000))
    cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq))
    wire.send_bytes(encode_payload_command(cmd, build_entry(md, payload)))
    while True:
        reply = wire.next_command()
        if reply.type in (T.SEND_RECEIPT, T.SEND_ERROR):
            return reply


def test_topics_per_namespace_over_rest_and_by_auto_creation(standalone, fast_client) -> None:
    ns = _namespace(standalone, maxTopicsPerNamespace=3)
    url = standalone.admin_url
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/p/partitions", 2)[0] == 204   # 2 topics
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/one")[0] == 204               # 3
    refusal = (412, {"reason": "Exceed maximum number of topics in namespace."})
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/two") == refusal
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/q/partitions", 1) == refusal
    with pytest.raises(pulsar.PulsarException):
        fast_client.create_producer(f"persistent://{ns}/auto")
    fast_client.create_producer(f"persistent://{ns}/one").close()     # an existing topic still serves
    _set(standalone, f"/admin/v2/namespaces/{ns}/maxTopicsPerNamespace", 4)
    _until(lambda: fast_client.create_producer(f"persistent://{ns}/auto"), "auto-creation under 4").close()
    assert admin_call(url, "PUT", f"/admin/v2/persistent/{ns}/two") == refusal
    _set(standalone, f"/admin/v2/namespaces/{ns}/maxTopicsPerNamespace", 5)   # room for 1, not for 2
    partitioned = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 2}
    assert admin_call(url, "POST", f"/admin/v2/namespaces/{ns}/autoTopicCreation", partitioned)[0] == 204
    time.sleep(1.0)                                                     # both changes reach the broker
    with pytest.raises(pulsar.PulsarException):
        fast_client.create_producer(f"persistent://{ns}/autop")         # 2 partitions would make 6
    assert admin_call(url, "GET", f"/admin/v2/persistent/{ns}/autop/partitions") == (200, {"partitions": 0})
