"""Non-persistent topics (`non-persistent://`) against a real standalone with the official client.

- Every subscription type receives what is published while it is connected, each message once
  per subscription; receipts carry Pulsar's (0, 0) message id; acks are accepted.
- Nothing is stored: no message published before a consumer subscribed reaches it, no file of
  the standalone holds a payload or the topic's name, a topic without clients is forgotten after
  `broker_non_persistent_idle_ms`, and after a restart the topic is gone (stats 404) while
  clients carry on with a fresh one.
- A consumer that does not keep up loses messages, and the loss is counted (`msgDropCount`,
  `msgDropRate` in the subscription's and the topic's stats).
- Admin: stats / internalStats / the namespace list; what needs stored messages answers 405.
- A pattern consumer (RegexSubscriptionMode NonPersistentOnly) picks the live non-persistent
  topics that match and not a persistent topic of the same name.
- Bad input: a malformed non-persistent name is refused (InvalidTopicName / 400) like a
  persistent one; seek and read_compacted are refused.
- Parity with persistent topics, as Pulsar: producers and consumers go through the schema
  registry (a schema is registered and versioned, an incompatible one refused with
  IncompatibleSchema); producer access modes (Exclusive, WaitForExclusive, ExclusiveWithFencing);
  the topics and their drops in `/metrics` and in `GET /admin/v2/broker-stats/topics`; a
  namespace with live non-persistent topics is not deleted without force (409), and with force
  its clients are closed and its partitioned-topic records go.
"""

from __future__ import annotations

import os
import re
import threading
import time

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String

from common.errors import PulsarServerError
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.support.admin_http import admin_call, metrics
from tests.support.namespaces import ensure_namespace
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until
from wire.pulsar import CommandType as T

SUB_TYPES = {"Exclusive": pulsar.ConsumerType.Exclusive, "Shared": pulsar.ConsumerType.Shared,
             "Failover": pulsar.ConsumerType.Failover, "KeyShared": pulsar.ConsumerType.KeyShared}


@pytest.fixture
def np_topic(topic: str) -> str:
    return topic.replace("persistent://", "non-persistent://", 1)


def _path(topic: str) -> str:
    return "/admin/v2/non-persistent/" + topic.split("://", 1)[1]


def _stats(admin_url: str, topic: str) -> dict:
    status, body = admin_call(admin_url, "GET", _path(topic) + "/stats")
    assert status == 200, body
    return body


@pytest.mark.parametrize("sub_type", list(SUB_TYPES))
def test_each_subscription_type_receives_what_is_published_while_connected(
        standalone: StandaloneProcess, client: pulsar.Client, np_topic: str, sub_type: str) -> None:
    producer = client.create_producer(np_topic, batching_enabled=False)
    early = producer.send(b"before anyone subscribed")
    assert (early.ledger_id(), early.entry_id()) == (0, 0)         # Pulsar's receipt for it
    consumer = client.subscribe(np_topic, "s", consumer_type=SUB_TYPES[sub_type])
    other = client.subscribe(np_topic, "other", consumer_type=pulsar.ConsumerType.Shared)
    sent = [f"m{i}".encode() for i in range(50)]
    for i, data in enumerate(sent):
        producer.send(data, partition_key=f"k{i % 7}")
    for sub in (consumer, other):
        got = [m.data() for m in receive_all(sub, len(sent))]
        assert got == sent
        assert_no_more(sub)
    stats = _stats(standalone.admin_url, np_topic)
    assert stats["msgInCounter"] == 51 and stats["msgOutCounter"] == 100
    assert stats["subscriptions"]["s"]["type"] == sub_type.replace("KeyShared", "Key_Shared")
    assert stats["subscriptions"]["s"]["msgBacklog"] == 0 and stats["storageSize"] == 0
    assert stats["msgDropCount"] == 0
    internal = admin_call(standalone.admin_url, "GET", _path(np_topic) + "/internalStats")[1]
    assert internal["entriesAddedCounter"] == 51 and set(internal["cursors"]) == {"s", "other"}


def test_shared_consumers_split_the_messages(client: pulsar.Client, np_topic: str) -> None:
    consumers = [client.subscribe(np_topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                  consumer_name=f"c{i}") for i in range(2)]
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(40):
        producer.send(f"m{i}".encode())
    got: list[bytes] = []
    for c in consumers:
        while True:
            try:
                msg = c.receive(1000)
            except pulsar.Timeout:
                break
            c.acknowledge(msg)
            got.append(msg.data())
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(40))


def test_a_slow_consumer_drops_and_the_drop_is_counted(standalone: StandaloneProcess, client: pulsar.Client,
                                                       np_topic: str) -> None:
    slow = client.subscribe(np_topic, "slow", receiver_queue_size=10)     # 10 permits, never refilled
    fast = client.subscribe(np_topic, "fast", receiver_queue_size=1000)
    producer = client.create_producer(np_topic, batching_enabled=False)
    count = 200
    for i in range(count):
        producer.send(f"m{i}".encode())
    assert len(receive_all(fast, count)) == count
    got = []
    while True:
        try:
            got.append(slow.receive(1000).data())
        except pulsar.Timeout:
            break
    assert 0 < len(got) < count
    stats = _stats(standalone.admin_url, np_topic)
    slow_stats = stats["subscriptions"]["slow"]
    # every message the slow subscription did not get was dropped and counted
    assert slow_stats["msgDropCount"] == count - slow_stats["msgOutCounter"] > 0
    assert stats["subscriptions"]["fast"]["msgDropCount"] == 0
    assert stats["msgDropCount"] == slow_stats["msgDropCount"]
    wait_until(lambda: _stats(standalone.admin_url, np_topic)["subscriptions"]["slow"]["msgDropRate"] > 0,
               timeout_s=10, what="msgDropRate of the slow subscription")
    assert stats["publishers"][0]["msgDropRate"] == 0.0
    # the same counts in /metrics (Pulsar's names) and in the broker's topic stats (strata top)
    metrics = _metrics(standalone.admin_url, np_topic)
    assert metrics["pulsar_in_messages_total"] == count
    assert metrics["pulsar_out_messages_total"] == count + slow_stats["msgOutCounter"]
    assert metrics["strata_msg_dropped_total"] == slow_stats["msgDropCount"]
    assert metrics["pulsar_rate_in"] > 0 and "pulsar_rate_out" in metrics
    assert metrics['pulsar_subscription_msg_drop_rate{subscription="slow"}'] > 0
    assert metrics['pulsar_subscription_msg_drop_rate{subscription="fast"}'] == 0
    listed = admin_call(standalone.admin_url, "GET", "/admin/v2/broker-stats/topics")[1]["public/default"]
    by_name = {name: t for bundle in listed.values() for name, t in bundle.get("non-persistent", {}).items()}
    assert by_name[np_topic]["msgInCounter"] == count


def _metrics(admin_url: str, topic: str) -> dict[str, float]:
    """The /metrics samples of `topic`: name (with the subscription label, if any) → value."""
    text = metrics(admin_url)
    out = {}
    for line in text.splitlines():
        match = re.match(r'(\w+)\{(.*)\} (\S+)$', line)
        if match is None or f'topic="{topic}"' not in match.group(2):
            continue
        sub = re.search(r'subscription="([^"]*)"', match.group(2))
        key = match.group(1) + (f'{{subscription="{sub.group(1)}"}}' if sub else "")
        out[key] = float(match.group(3))
    return out


def test_nothing_is_stored_and_a_restart_forgets_the_topic(tmp_path) -> None:
    data_dir = tmp_path / "data"
    local = f"np-restart-{os.getpid()}"
    name = f"non-persistent://public/default/{local}"
    with StandaloneProcess.start(data_dir, env={"STRATA_BROKER_NON_PERSISTENT_IDLE_MS": "500"}) as sa:
        client = make_client(sa.service_url)
        consumer = client.subscribe(name, "s")
        producer = client.create_producer(name, batching_enabled=False)
        marker = f"np-payload-{os.getpid()}-".encode()
        for _ in range(20):
            producer.send(marker * 50)
        assert len(receive_all(consumer, 20)) == 20
        assert _stats(sa.admin_url, name)["msgInCounter"] == 20
        client.close()
        # without clients the topic is forgotten once idle for broker_non_persistent_idle_ms
        wait_until(lambda: admin_call(sa.admin_url, "GET", _path(name) + "/stats")[0] == 404, timeout_s=10,
                   what="the idle topic to be forgotten")
        # no file of the standalone (segments, metadata store, cursors) holds a payload or the name
        files = [p for p in data_dir.rglob("*") if p.is_file() and p.suffix != ".log"]
        assert files
        assert [p for p in files if marker in p.read_bytes() or local.encode() in p.read_bytes()] == []
        status, listed = admin_call(sa.admin_url, "GET", "/admin/v2/persistent/public/default")
        assert status == 200 and not any(local in t for t in listed)
    with StandaloneProcess.start(data_dir) as sa:
        assert admin_call(sa.admin_url, "GET", _path(name) + "/stats")[0] == 404
        client = make_client(sa.service_url)
        consumer = client.subscribe(name, "s")
        client.create_producer(name).send(b"after")
        assert consumer.receive(10_000).data() == b"after"
        assert _stats(sa.admin_url, name)["msgInCounter"] == 1
        client.close()


def test_admin_list_and_not_allowed_operations(standalone: StandaloneProcess, client: pulsar.Client,
                                               np_topic: str) -> None:
    client.subscribe(np_topic, "s")
    status, listed = admin_call(standalone.admin_url, "GET", "/admin/v2/non-persistent/public/default")
    assert status == 200 and np_topic in listed
    for method, suffix, operation in (("POST", "/terminate", "Termination"), ("PUT", "/compaction", "Compaction"),
                                      ("PUT", "/offload", "Offload"),
                                      ("POST", "/subscription/s/skip/1", "Skip messages"),
                                      ("GET", "/lastMessageId", "GetLastMessageId")):
        status, body = admin_call(standalone.admin_url, method, _path(np_topic) + suffix)
        assert status == 405, (suffix, body)
        assert body["reason"] == f"{operation} on a non-persistent topic is not allowed"


def test_bad_names_seek_and_read_compacted_are_refused(standalone: StandaloneProcess, client: pulsar.Client,
                                                       np_topic: str) -> None:
    raw = RawClient(standalone.port)
    raw.connect()
    for request_id, bad in enumerate(("non-persistent://public/default/sp ace", "non-persistent://only/two")):
        raw.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=bad, request_id=request_id)))
        assert raw.next_command().lookupTopicResponse.error == PulsarServerError.InvalidTopicName
        reply = raw.producer(bad, producer_id=request_id, request_id=100 + request_id)
        assert reply.type == T.ERROR and reply.error.error == PulsarServerError.InvalidTopicName
    status, body = admin_call(standalone.admin_url, "GET", "/admin/v2/non-persistent/public/default/a%20b/stats")
    assert status == 400, body
    with pytest.raises(pulsar.InvalidConfiguration):    # the client refuses it before asking
        client.subscribe(np_topic, "c", is_read_compacted=True)
    consumer = client.subscribe(np_topic, "s")
    with pytest.raises(pulsar.NotAllowedError):
        consumer.seek(0)
    # nothing is stored here: the consumer must still be attached for the next message to reach it
    wait_until(lambda: len(_stats(standalone.admin_url, np_topic)["subscriptions"]["s"]["consumers"]) == 1, 10,
               what="the consumer still attached")
    producer = client.create_producer(np_topic)
    producer.send(b"still works")
    assert consumer.receive(10_000).data() == b"still works"


def test_partitioned_non_persistent_topic(standalone: StandaloneProcess, client: pulsar.Client, np_topic: str) -> None:
    assert admin_call(standalone.admin_url, "PUT", _path(np_topic) + "/partitions", 3)[0] == 204
    assert admin_call(standalone.admin_url, "GET", _path(np_topic) + "/partitions")[1] == {"partitions": 3}
    # the persistent topic of the same local name is another topic
    persistent = np_topic.replace("non-persistent://", "persistent://", 1)
    assert admin_call(standalone.admin_url, "GET", "/admin/v2/persistent/" + persistent.split("://", 1)[1]
                      + "/partitions")[1] == {"partitions": 0}
    consumer = client.subscribe(np_topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(30):
        producer.send(f"m{i}".encode(), partition_key=f"k{i}")
    got = sorted(m.data() for m in receive_all(consumer, 30))
    assert got == sorted(f"m{i}".encode() for i in range(30))
    stats = admin_call(standalone.admin_url, "GET", _path(np_topic) + "/partitioned-stats")[1]
    assert stats["msgInCounter"] == 30 and stats["metadata"] == {"partitions": 3} and len(stats["partitions"]) == 3
    listed = admin_call(standalone.admin_url, "GET",
                        "/admin/v2/namespaces/public/default/topics?mode=NON_PERSISTENT")[1]
    assert {f"{np_topic}-partition-{i}" for i in range(3)} <= set(listed)
    assert np_topic in admin_call(standalone.admin_url, "GET", "/admin/v2/non-persistent/public/default/partitioned")[1]


def test_batches_and_readers(standalone: StandaloneProcess, client: pulsar.Client, np_topic: str) -> None:
    reader = client.create_reader(np_topic, pulsar.MessageId.latest)
    consumer = client.subscribe(np_topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(np_topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=50)
    for i in range(30):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    expected = [f"m{i}".encode() for i in range(30)]
    assert [m.data() for m in receive_all(consumer, 30)] == expected
    assert [reader.read_next(10_000).data() for _ in range(30)] == expected
    stats = _stats(standalone.admin_url, np_topic)
    assert stats["msgInCounter"] == 30 and stats["msgDropCount"] == 0
    assert [s["isDurable"] for s in stats["subscriptions"].values()].count(False) == 1   # the reader's
    reader.close()
    wait_until(lambda: len(_stats(standalone.admin_url, np_topic)["subscriptions"]) == 1, timeout_s=10,
               what="the reader's subscription to go with the reader")


def test_unsubscribe_and_admin_deletes(standalone: StandaloneProcess, client: pulsar.Client, np_topic: str) -> None:
    admin = standalone.admin_url
    gone = client.subscribe(np_topic, "gone")
    kept = client.subscribe(np_topic, "kept")
    gone.unsubscribe()
    assert set(_stats(admin, np_topic)["subscriptions"]) == {"kept"}
    assert admin_call(admin, "GET", _path(np_topic) + "/subscriptions")[1] == ["kept"]
    assert admin_call(admin, "DELETE", _path(np_topic) + "/subscription/kept")[0] == 412   # a consumer is on it
    assert admin_call(admin, "DELETE", _path(np_topic))[0] == 412                          # clients attached
    assert admin_call(admin, "DELETE", _path(np_topic) + "?force=true")[0] == 204
    wait_until(lambda: admin_call(admin, "GET", _path(np_topic) + "/stats")[0] == 200, timeout_s=20,
               what="the consumer to come back to a fresh topic")
    producer = client.create_producer(np_topic)
    wait_until(lambda: _stats(admin, np_topic)["subscriptions"].get("kept", {}).get("consumers"), timeout_s=20,
               what="the consumer to be attached again")
    producer.send(b"again")
    assert kept.receive(10_000).data() == b"again"


def test_a_pattern_consumer_chooses_live_non_persistent_topics(client: pulsar.Client, np_topic: str) -> None:
    producers = [client.create_producer(f"{np_topic}-{i}", batching_enabled=False) for i in range(2)]
    persistent = client.create_producer(np_topic.replace("non-persistent://", "persistent://", 1) + "-0")
    # (the name has no regex metacharacter; the client needs the mode to accept the domain)
    consumer = client.subscribe(re.compile(np_topic + "-.*"), "pattern",
                                regex_subscription_mode=pulsar.RegexSubscriptionMode.NonPersistentOnly)
    for i, producer in enumerate(producers):
        producer.send(f"np{i}".encode())
    persistent.send(b"persistent")          # another domain: not matched
    assert sorted(m.data() for m in receive_all(consumer, 2)) == [b"np0", b"np1"]
    assert_no_more(consumer)


# Record classes named User (Pulsar compares record names); in the second, `age` changes type
User = type("User", (Record,), {"name": String(), "age": Integer()})
UserAgeText = type("User", (Record,), {"name": String(), "age": String()})


def test_schemas_are_registered_and_checked(standalone: StandaloneProcess, client: pulsar.Client,
                                            np_topic: str) -> None:
    producer = client.create_producer(np_topic, schema=AvroSchema(User))
    consumer = client.subscribe(np_topic, "s", schema=AvroSchema(User))
    status, body = admin_call(standalone.admin_url, "GET", "/admin/v2/schemas/" + np_topic.split("://")[1] + "/schema")
    assert status == 200 and body["type"] == "AVRO" and body["version"] == 0, body
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(np_topic, schema=AvroSchema(UserAgeText))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(np_topic, "wrong", schema=AvroSchema(UserAgeText))
    producer.send(User(name="ann", age=3))
    msg = consumer.receive(10_000)
    assert (msg.value().name, msg.value().age) == ("ann", 3)
    assert msg._message.int_schema_version() == 0           # PRODUCER_SUCCESS's version, in the message
    assert "wrong" not in _stats(standalone.admin_url, np_topic)["subscriptions"]
    raw = RawClient(standalone.port)                          # GET_OR_CREATE_SCHEMA: the same registry
    raw.connect()
    known = pb.Schema(name="x", schema_data=AvroSchema(User).schema_info().schema().encode(), type=pb.Schema.Avro)
    raw.send(pb.BaseCommand(type=T.GET_OR_CREATE_SCHEMA, getOrCreateSchema=pb.CommandGetOrCreateSchema(
        request_id=1, topic=np_topic, schema=known)))
    assert raw.next_command().getOrCreateSchemaResponse.schema_version == (0).to_bytes(8, "big")
    raw.close()


Mode = pulsar.ProducerAccessMode


def test_producer_access_modes(standalone: StandaloneProcess, client: pulsar.Client, np_topic: str) -> None:
    consumer = client.subscribe(np_topic, "s")
    first = client.create_producer(np_topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(np_topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(np_topic)
    got: list = []

    def wait_for_it() -> None:
        got.append(client.create_producer(np_topic, access_mode=Mode.WaitForExclusive))
    waiter = threading.Thread(target=wait_for_it, daemon=True)
    waiter.start()
    waiter.join(1.0)
    assert waiter.is_alive() and not got, "the waiter should be queued while the holder is there"
    first.send(b"first")
    first.close()
    waiter.join(20)
    assert got, "the waiter never got the topic"
    got[0].send(b"waiter")
    got[0].close()
    second = client.create_producer(np_topic, access_mode=Mode.Exclusive, send_timeout_millis=5_000)
    second.send(b"second")
    fencer = client.create_producer(np_topic, access_mode=Mode.ExclusiveWithFencing)
    fencer.send(b"fencer")

    def second_fenced() -> bool:     # it comes back with an older epoch than the topic's
        try:
            second.send(b"after the fence")
        except pulsar.ProducerFenced:
            return True
        except pulsar.Timeout:       # sent while it was reconnecting: try again
            return False
        return False
    wait_until(second_fenced, 20, what="the fenced producer's send refused with ProducerFenced")
    assert [m.data() for m in receive_all(consumer, 4)] == [b"first", b"waiter", b"second", b"fencer"]


def test_deleting_a_namespace_with_live_topics(standalone: StandaloneProcess, client: pulsar.Client) -> None:
    admin = standalone.admin_url
    ns = f"np-delete/ns-{os.getpid()}-{time.monotonic_ns()}"
    ensure_namespace(admin, ns)
    topic = f"non-persistent://{ns}/live"
    producer = client.create_producer(topic, send_timeout_millis=1_500)
    status, body = admin_call(admin, "DELETE", f"/admin/v2/namespaces/{ns}")    # a live topic, nothing stored
    assert status == 409 and body["reason"] == "Cannot delete non empty namespace", body
    assert admin_call(admin, "PUT", f"/admin/v2/non-persistent/{ns}/parted/partitions", 2)[0] == 204
    producer.send(b"still there")
    assert admin_call(admin, "DELETE", f"/admin/v2/namespaces/{ns}?force=true")[0] == 204
    assert admin_call(admin, "GET", f"/admin/v2/non-persistent/{ns}/live/stats")[0] in (404, 412)

    def send_refused() -> bool:
        try:
            producer.send(b"after the delete")
        except pulsar.PulsarException:
            return True
        return False
    wait_until(send_refused, 20, what="the producer of the deleted namespace to be refused")
    assert admin_call(admin, "GET", f"/admin/v2/non-persistent/{ns}/parted/partitions")[0] == 404
    ensure_namespace(admin, ns)      # created again: nothing of the old one is left
    assert admin_call(admin, "GET", f"/admin/v2/non-persistent/{ns}/partitioned")[1] == []
    assert admin_call(admin, "GET", f"/admin/v2/non-persistent/{ns}")[1] == []
