"""Backlog quotas end to end (`broker.retention.backlog_quota`), with the official client (pulsar-client
3.13.0) against a real standalone whose quota check runs every 200 ms (Pulsar's default is 60 s).

Each policy, each in its own namespace with a quota of 8 KiB (or 1 s):
- producer_exception: once the backlog is over, the producer is disconnected and its sends fail
  with `pulsar.ProducerBlockedQuotaExceededException`, and so does a new producer; as soon as
  the consumer has drained the backlog a new producer is accepted at once (no check needed in
  between: the state is measured, not remembered, apache/pulsar#15609).
- producer_request_hold: a new producer gets `pulsar.ProducerBlockedQuotaExceededError`; the
  disconnected producer's send is held, not failed, and is stored once the backlog drains.
- consumer_backlog_eviction: producers are never refused; the slowest subscription's oldest
  messages are skipped until the backlog is at most 90% of the quota (size), or what is older
  than 90% of the quota is acked (age); the eviction is counted in /metrics.
- message_age with producer_exception: a message left unconsumed past the quota blocks new
  producers; once it is consumed they are accepted at once, though the topic's only ledger is
  older than the quota (the case #15609 got wrong).
- One slow Shared consumer over the quota on one topic does not block another topic of the
  same namespace.
- A topic's own quota applies to it alone and wins over the namespace's; removed, the
  namespace's applies again.
- Each partition of a partitioned topic has the quota; partitioned-stats show it.
- Stats show the quota and each subscription's distance to it (so does /metrics:
  strata_subscription_backlog_quota_remaining_bytes / _seconds); a quota at or over the
  retention is refused with 412, and so is a retention at or under a quota;
  `strata admin namespaces set-backlog-quota` and `topics set-backlog-quota` store what
  `get-backlog-quotas` shows.
"""

from __future__ import annotations

import itertools
import json
import threading
import time

import pulsar
import pytest

from tests.acceptance.conftest import make_client
from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call, metrics, topic_get
from tests.support.namespaces import ensure_namespace
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

QUOTA_BYTES = 8 * 1024
PAYLOAD = b"x" * 1024
CHECK_MS = 200
_ids = itertools.count()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    env = {"STRATA_BACKLOG_QUOTA_CHECK_INTERVAL_MS": str(CHECK_MS)}
    with StandaloneProcess.start(tmp_path_factory.mktemp("backlog-quota") / "data", env=env) as sa:
        yield sa


@pytest.fixture
def client(standalone: StandaloneProcess):
    c = make_client(standalone.service_url, operation_timeout_seconds=10)
    yield c
    c.close()


def _namespace(sa: StandaloneProcess, quota: dict, kind: str = "destination_storage") -> str:
    ns = f"public/bq-{next(_ids)}"
    ensure_namespace(sa.admin_url, ns)
    status, body = admin_call(sa.admin_url, "POST", f"/admin/v2/namespaces/{ns}/backlogQuota?backlogQuotaType={kind}",
                              quota)
    assert status == 204, body
    return ns


def _fill(client: pulsar.Client, topic: str, count: int, *, held_ok: bool = False) -> None:
    """`count` messages; with `held_ok`, a send held back by the quota (the periodic check found the
    topic over it first, under load, and closed the producer; "hold" keeps its sends queued until
    they time out) ends the fill: the topic is over its quota, which is what the caller wanted."""
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=5_000 if held_ok else 30_000)
    for _ in range(count):
        try:
            producer.send(PAYLOAD)
        except pulsar.Timeout:
            if not held_ok:
                raise
            break
    try:
        producer.close()
    except pulsar.AlreadyClosed:
        pass


def _drain(consumer: pulsar.Consumer) -> int:
    drained = 0
    while True:
        try:
            msg = consumer.receive(500)
        except pulsar.Timeout:
            return drained
        consumer.acknowledge(msg)
        drained += 1


def _refused(client: pulsar.Client, topic: str, error: type[Exception]) -> bool:
    try:
        client.create_producer(topic).close()
    except error:
        return True
    return False


def test_producer_exception_fails_sends_and_clears_once_drained(standalone, client) -> None:
    ns = _namespace(standalone, {"limitSize": QUOTA_BYTES, "policy": "producer_exception"})
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=5_000)
    for _ in range(10):
        producer.send(PAYLOAD)

    def send_refused() -> bool:
        try:
            producer.send(PAYLOAD)
        except pulsar.ProducerBlockedQuotaExceededException:
            return True
        except pulsar.Timeout:       # sent while it was reconnecting: try again
            return False
        return False
    wait_until(send_refused, 20, what="a send refused with ProducerBlockedQuotaExceededException")
    assert _refused(client, topic, pulsar.ProducerBlockedQuotaExceededException)
    stats = topic_get(standalone.admin_url, topic, "stats")
    assert stats["backlogQuotaLimitSize"] == QUOTA_BYTES and stats["backlogQuotaLimitTime"] == -1
    assert stats["subscriptions"]["slow"]["backlogQuotaRemainingSize"] < 0
    assert stats["oldestBacklogMessageSubscriptionName"] == "slow"
    assert _metric(standalone.admin_url, "pulsar_storage_backlog_quota_limit", topic=topic) == QUOTA_BYTES
    assert _metric(standalone.admin_url, "pulsar_storage_backlog_quota_limit_time", topic=topic) == -1
    assert _metric(standalone.admin_url, "strata_subscription_backlog_quota_remaining_bytes", topic=topic,
                   subscription="slow") == stats["subscriptions"]["slow"]["backlogQuotaRemainingSize"]
    assert _drain(consumer) >= 10
    fresh = client.create_producer(topic)           # at once: nothing remembers the exceeded state
    fresh.send(b"after the drain")
    assert consumer.receive(10_000).data() == b"after the drain"


def test_producer_request_hold_holds_the_send_until_drained(standalone, client) -> None:
    ns = _namespace(standalone, {"limitSize": QUOTA_BYTES, "policy": "producer_request_hold"})
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False)
    for _ in range(10):
        producer.send(PAYLOAD)
    wait_until(lambda: _refused(client, topic, pulsar.ProducerBlockedQuotaExceededError), 20,
               what="a new producer refused with ProducerBlockedQuotaExceededError")
    wait_until(lambda: topic_get(standalone.admin_url, topic, "stats")["publishers"] == [], 20,
               what="the producer disconnected by the check")
    done = threading.Event()
    results: list = []
    producer.send_async(b"held", lambda result, msg_id: (results.append(result), done.set()))
    assert not done.wait(1.0), "the send should be held while the backlog is over the quota"
    got = [m.data() for m in _receive_some(consumer)]           # drains the backlog
    assert done.wait(30), "the held send never went out after the drain"
    assert results == [pulsar.Result.Ok]
    got += [m.data() for m in _receive_some(consumer)]
    assert got.count(b"held") == 1 and len(got) == 11


def _receive_some(consumer: pulsar.Consumer) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            msg = consumer.receive(1_000)
        except pulsar.Timeout:
            return out
        consumer.acknowledge(msg)
        out.append(msg)


def _metric(admin_url: str, name: str, **labels: str) -> float:
    for line in metrics(admin_url).splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_consumer_backlog_eviction_by_size_skips_the_oldest(standalone, client) -> None:
    ns = _namespace(standalone, {"limitSize": QUOTA_BYTES, "policy": "consumer_backlog_eviction"})
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "slow", receiver_queue_size=1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(30):
        producer.send(f"{i:04d}".encode() + PAYLOAD)     # never refused
    wait_until(lambda: topic_get(standalone.admin_url, topic, "stats")["backlogSize"] <= 0.9 * QUOTA_BYTES, 20,
               what="the backlog evicted to 90% of the quota")
    assert _metric(standalone.admin_url, "pulsar_storage_backlog_quota_exceeded_evictions_total",
                   topic=topic, quota_type="size") >= 1
    client.create_producer(topic).close()
    first = consumer.receive(10_000)                # one may be in the receiver queue already
    rest = [first, *_receive_some(consumer)]
    assert len(rest) < 30 and rest[-1].data()[:4] == b"0029"


def test_consumer_backlog_eviction_by_age_acks_the_old(standalone, client) -> None:
    ns = _namespace(standalone, {"limitTime": 1, "policy": "consumer_backlog_eviction"}, kind="message_age")
    topic = f"persistent://{ns}/t"
    client.subscribe(topic, "slow", receiver_queue_size=1)
    _fill(client, topic, 5)
    wait_until(lambda: topic_get(standalone.admin_url, topic, "stats")["subscriptions"]["slow"]["msgBacklog"] == 0,
               20, what="messages older than the quota evicted")
    stats = topic_get(standalone.admin_url, topic, "stats")
    assert stats["backlogQuotaLimitTime"] == 1 and stats["oldestBacklogMessageAgeSeconds"] == 0


def test_message_age_blocks_until_consumed_even_with_an_old_ledger(standalone, client) -> None:
    ns = _namespace(standalone, {"limitTime": 1, "policy": "producer_exception"}, kind="message_age")
    topic = f"persistent://{ns}/t"
    consumer = client.subscribe(topic, "sub")
    _fill(client, topic, 1)
    wait_until(lambda: _refused(client, topic, pulsar.ProducerBlockedQuotaExceededException), 20,
               what="a producer refused once the message is older than the quota")
    stats = topic_get(standalone.admin_url, topic, "stats")
    assert stats["oldestBacklogMessageAgeSeconds"] >= 1
    assert _metric(standalone.admin_url, "pulsar_storage_backlog_age_seconds", topic=topic) >= 1
    assert stats["subscriptions"]["sub"]["backlogQuotaRemainingTimeSeconds"] <= 0
    assert _drain(consumer) == 1
    time.sleep(2 * CHECK_MS / 1000)                 # checks run meanwhile; the ledger stays old
    client.create_producer(topic).close()
    assert topic_get(standalone.admin_url, topic, "stats")["oldestBacklogMessageAgeSeconds"] == 0


def test_a_slow_shared_consumer_does_not_block_other_topics(standalone, client) -> None:
    ns = _namespace(standalone, {"limitSize": QUOTA_BYTES, "policy": "producer_exception"})
    slow_topic, other_topic = f"persistent://{ns}/slow", f"persistent://{ns}/other"
    client.subscribe(slow_topic, "shared", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1)
    _fill(client, slow_topic, 12)
    wait_until(lambda: _refused(client, slow_topic, pulsar.ProducerBlockedQuotaExceededException), 20,
               what="the slow topic over its quota")
    other_consumer = client.subscribe(other_topic, "shared", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(other_topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"o{i}".encode())
    assert len(_receive_some(other_consumer)) == 20


def test_a_topic_quota_applies_to_that_topic_and_wins_over_the_namespace(standalone, client) -> None:
    ns = _namespace(standalone, {"limitSize": 1024 * 1024, "policy": "producer_exception"})
    limited, free = f"persistent://{ns}/limited", f"persistent://{ns}/free"
    quota_path = f"/admin/v2/persistent/{ns}/limited/backlogQuota"
    assert admin_call(standalone.admin_url, "POST", quota_path, {"limitSize": QUOTA_BYTES,
                                                                 "policy": "producer_request_hold"})[0] == 204
    for topic in (limited, free):
        client.subscribe(topic, "slow")
        _fill(client, topic, 10, held_ok=topic == limited)
    wait_until(lambda: _refused(client, limited, pulsar.ProducerBlockedQuotaExceededError), 20,
               what="the topic's own quota (hold) refusing producers")
    client.create_producer(free).close()                       # the namespace's 1 MiB is far off
    applied = admin_call(standalone.admin_url, "GET", f"/admin/v2/persistent/{ns}/limited/backlogQuotaMap?applied=true")
    assert applied[1]["destination_storage"]["limitSize"] == QUOTA_BYTES
    assert admin_call(standalone.admin_url, "DELETE", quota_path)[0] == 204
    client.create_producer(limited).close()                    # the namespace's quota again: under it
    assert topic_get(standalone.admin_url, limited, "stats")["backlogQuotaLimitSize"] == 1024 * 1024


def test_each_partition_has_the_quota_and_partitioned_stats_show_it(standalone, client) -> None:
    ns = _namespace(standalone, {"limitSize": QUOTA_BYTES, "policy": "producer_exception"})
    topic = f"persistent://{ns}/parted"
    assert admin_call(standalone.admin_url, "PUT", f"/admin/v2/persistent/{ns}/parted/partitions", 2)[0] == 204
    client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=False)     # round-robin over the partitions
    for _ in range(24):
        try:
            producer.send(PAYLOAD)
        except pulsar.ProducerBlockedQuotaExceededException:
            break      # under load the periodic check can come first: the refusal this test wants
    stats = topic_get(standalone.admin_url, topic, "partitioned-stats")
    assert stats["backlogQuotaLimitSize"] == QUOTA_BYTES and stats["oldestBacklogMessageSubscriptionName"] == "sub"
    wait_until(lambda: _refused(client, f"{topic}-partition-0", pulsar.ProducerBlockedQuotaExceededException), 20,
               what="a partition over its own quota")


def test_quota_over_retention_is_refused_412(standalone) -> None:
    ns = f"public/bq-{next(_ids)}"
    ensure_namespace(standalone.admin_url, ns)
    base = f"/admin/v2/namespaces/{ns}"
    assert admin_call(standalone.admin_url, "POST", base + "/retention",
                      {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1})[0] == 204
    status, body = admin_call(standalone.admin_url, "POST", base + "/backlogQuota",
                              {"limitSize": 2 * 1024 * 1024, "policy": "producer_exception"})
    assert status == 412 and "exceeds configured retention quota for namespace" in body["reason"]
    status, body = admin_call(standalone.admin_url, "POST", base + "/backlogQuota?backlogQuotaType=message_age",
                              {"limitTime": 3600, "policy": "producer_exception"})
    assert status == 412
    topic_path = f"/admin/v2/persistent/{ns}/t/backlogQuota"
    status, body = admin_call(standalone.admin_url, "POST", topic_path, {"limit": 2 * 1024 * 1024,
                                                                         "policy": "producer_request_hold"})
    assert status == 412 and "for topic" in body["reason"]
    assert admin_call(standalone.admin_url, "GET", base + "/backlogQuotaMap") == (200, {})
    status, _ = admin_call(standalone.admin_url, "POST", base + "/backlogQuota",
                           {"limitSize": 512 * 1024, "policy": "producer_exception"})
    assert status == 204
    # the other side: a retention at or under a quota in force is refused too
    assert admin_call(standalone.admin_url, "POST", base + "/backlogQuota?backlogQuotaType=message_age",
                      {"limitTime": 300, "policy": "producer_exception"})[0] == 204
    status, body = admin_call(standalone.admin_url, "POST", base + "/retention",
                              {"retentionTimeInMinutes": 5, "retentionSizeInMB": 2})
    assert status == 412 and body["reason"].startswith("Retention Quota must exceed configured backlog quota")
    status, body = admin_call(standalone.admin_url, "POST", f"/admin/v2/persistent/{ns}/t/retention",
                              {"retentionTimeInMinutes": 4, "retentionSizeInMB": 2})
    assert status == 412 and "for topic" in body["reason"]
    assert admin_call(standalone.admin_url, "POST", base + "/retention",
                      {"retentionTimeInMinutes": 10, "retentionSizeInMB": 2})[0] == 204


def test_cli_sets_gets_and_removes_quotas(standalone, capsys) -> None:
    ns = f"public/bq-{next(_ids)}"
    ensure_namespace(standalone.admin_url, ns)
    url = ["--admin-url", standalone.admin_url]
    assert run_admin([*url, "namespaces", "set-backlog-quota", ns, "--limitSize", "10M", "--limitTime", "1h",
                      "--policy", "producer_exception", "--type", "destination_storage"]) == 0
    assert run_admin([*url, "namespaces", "set-backlog-quota", ns, "-lt", "30m", "-p", "consumer_backlog_eviction",
                      "-t", "message_age"]) == 0
    capsys.readouterr()
    assert run_admin([*url, "namespaces", "get-backlog-quotas", ns]) == 0
    quotas = json.loads(capsys.readouterr().out)
    assert quotas["destination_storage"]["limitSize"] == 10 * 1024 * 1024
    assert quotas["destination_storage"]["policy"] == "producer_exception"
    assert quotas["message_age"] == {"limit": -1, "limitSize": -1, "limitTime": 1800,
                                     "policy": "consumer_backlog_eviction"}
    assert run_admin([*url, "namespaces", "remove-backlog-quota", ns, "-t", "message_age"]) == 0
    capsys.readouterr()
    assert run_admin([*url, "namespaces", "get-backlog-quotas", ns]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"destination_storage"}
    topic = f"persistent://{ns}/t"
    assert run_admin([*url, "topics", "set-backlog-quota", topic, "-l", "1M", "-p", "producer_request_hold"]) == 0
    capsys.readouterr()
    assert run_admin([*url, "topics", "get-backlog-quotas", topic]) == 0
    assert json.loads(capsys.readouterr().out)["destination_storage"]["limitSize"] == 1024 * 1024
    assert run_admin([*url, "topics", "get-backlog-quotas", topic, "--applied"]) == 0
    assert json.loads(capsys.readouterr().out)["destination_storage"]["policy"] == "producer_request_hold"


def test_cli_needs_the_limit_of_the_type_and_sets_only_that_one(standalone, capsys) -> None:
    """pulsar-admin 3.x: destination_storage needs -l, message_age needs -lt; the other limit is
    not set (it stays -1) even when given."""
    ns = f"public/bq-{next(_ids)}"
    ensure_namespace(standalone.admin_url, ns)
    url = ["--admin-url", standalone.admin_url]
    assert run_admin([*url, "namespaces", "set-backlog-quota", ns, "-lt", "1h", "-p", "producer_exception"]) == 2
    assert "needs a size limit" in capsys.readouterr().err
    assert run_admin([*url, "namespaces", "set-backlog-quota", ns, "-l", "1M", "-p", "producer_exception",
                      "-t", "message_age"]) == 2
    assert "needs a time limit" in capsys.readouterr().err
    assert admin_call(standalone.admin_url, "GET", f"/admin/v2/namespaces/{ns}/backlogQuotaMap") == (200, {})
    assert run_admin([*url, "namespaces", "set-backlog-quota", ns, "-l", "1M", "-lt", "1h",
                      "-p", "producer_exception"]) == 0
    assert run_admin([*url, "namespaces", "set-backlog-quota", ns, "-l", "1M", "-lt", "100m",
                      "-p", "producer_request_hold", "-t", "message_age"]) == 0
    status, quotas = admin_call(standalone.admin_url, "GET", f"/admin/v2/namespaces/{ns}/backlogQuotaMap")
    assert status == 200
    assert quotas["destination_storage"] == {"limit": 1024 * 1024, "limitSize": 1024 * 1024, "limitTime": -1,
                                             "policy": "producer_exception"}
    assert quotas["message_age"] == {"limit": -1, "limitSize": -1, "limitTime": 6000,
                                     "policy": "producer_request_hold"}
