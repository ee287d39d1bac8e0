"""Topic lists over the raw protocol against a real standalone: GET_TOPICS_OF_NAMESPACE (modes,
server-side pattern, Pulsar's topics hash and `changed`), the topic-list watchers (PIP-145:
WATCH_TOPIC_LIST / _SUCCESS / WATCH_TOPIC_UPDATE / WATCH_TOPIC_LIST_CLOSE), and bad patterns.

The official client (C++ underneath) sends neither a pattern nor a hash and never watches
(docs/protocol.md), so these commands are checked here byte for byte with `RawClient`.
"""

from __future__ import annotations

import itertools
import time

import pytest

from broker.protocol import topic_lists
from common.errors import InvalidTopicsPattern, PulsarServerError
from proto import pulsar_api_pb2 as pb
from tests.support.admin_http import admin_call
from tests.support.namespaces import ensure_namespace
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T

MODE = pb.CommandGetTopicsOfNamespace
# A watcher hears of a new topic within this, counted from the admin call's return. Measured:
# 0.00 s (the update is on the socket before the call returns; the store's watch polls every
# 0.1 s otherwise). 2.0 s leaves a loaded 2-core machine 20 polls.
UPDATE_WAIT_S = 2.0
_ids = itertools.count(1)


# --- pure functions --------------------------------------------------------------------------------

def test_hash_is_pulsars_crc32c_in_guava_byte_order() -> None:
    # CRC32C("123456789") = 0xE3069283 (the standard check value); Guava prints the int's bytes
    # little-endian, so Pulsar's TopicList.calculateHash gives "839206e3"
    assert topic_lists.calculate_hash(["123456789"]) == "839206e3"
    assert topic_lists.calculate_hash([]) == "00000000"
    # sorted, joined by ","
    assert topic_lists.calculate_hash(["b", "a"]) == topic_lists.calculate_hash(["a", "b"])
    assert topic_lists.calculate_hash(["a,b"]) == topic_lists.calculate_hash(["b", "a"])
    assert topic_lists.calculate_hash(["ab"]) != topic_lists.calculate_hash(["a", "b"])


def test_pattern_matches_the_whole_name_without_domain_or_partition() -> None:
    compiled = topic_lists.compile_pattern("persistent://t/ns/orders-.*")
    assert topic_lists.matches(compiled, "persistent://t/ns/orders-1")
    assert topic_lists.matches(compiled, "persistent://t/ns/orders-1-partition-3")
    assert topic_lists.matches(compiled, "non-persistent://t/ns/orders-1")   # domain is the mode's job
    assert not topic_lists.matches(compiled, "persistent://t/ns/x-orders-1")  # whole name
    assert not topic_lists.matches(compiled, "persistent://t/other/orders-1")
    no_domain = topic_lists.compile_pattern("t/ns/a.")
    assert topic_lists.matches(no_domain, "persistent://t/ns/ab")
    assert not topic_lists.matches(no_domain, "persistent://t/ns/abc")
    assert topic_lists.matches(topic_lists.compile_pattern("^persistent://t/ns/a"), "persistent://t/ns/a")


@pytest.mark.parametrize("bad", ["persistent://t/ns/orders-(", "t/ns/[a-", "*", "weird://t/ns/x"])
def test_bad_pattern_is_refused_with_the_reason(bad: str) -> None:
    with pytest.raises(InvalidTopicsPattern) as info:
        topic_lists.compile_pattern(bad)
    assert bad in str(info.value)


# --- against a standalone ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("topic-lists") / "data") as sa:
        yield sa
        log = sa.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


@pytest.fixture
def ns(standalone: StandaloneProcess) -> str:
    name = f"tl/ns{next(_ids)}"
    ensure_namespace(standalone.admin_url, name)
    return name


@pytest.fixture
def raw(standalone: StandaloneProcess):
    client = RawClient(standalone.port, timeout_s=10)
    connected = client.connect()
    assert connected.connected.feature_flags.supports_topic_watchers
    yield client
    client.close()


def create_topic(sa: StandaloneProcess, topic: str, partitions: int = 0) -> None:
    path = "/admin/v2/persistent/" + topic.split("://", 1)[1]
    if partitions:
        status, body = admin_call(sa.admin_url, "PUT", path + "/partitions", partitions)
    else:
        status, body = admin_call(sa.admin_url, "PUT", path)
    assert status in (200, 204), (status, body)


def delete_topic(sa: StandaloneProcess, topic: str) -> None:
    status, body = admin_call(sa.admin_url, "DELETE", "/admin/v2/persistent/" + topic.split("://", 1)[1])
    assert status in (200, 204), (status, body)


def get_topics(raw: RawClient, ns: str, mode: int | None = None, pattern: str | None = None,
               topics_hash: str | None = None) -> pb.BaseCommand:
    request_id = next(_ids)
    cmd = pb.CommandGetTopicsOfNamespace(request_id=request_id, namespace=ns)
    if mode is not None:
        cmd.mode = mode  # type: ignore[assignment]
    if pattern is not None:
        cmd.topics_pattern = pattern
    if topics_hash is not None:
        cmd.topics_hash = topics_hash
    raw.send(pb.BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=cmd))
    reply = raw.next_command()
    assert reply.type in (T.GET_TOPICS_OF_NAMESPACE_RESPONSE, T.ERROR), reply
    return reply


def test_modes_list_persistent_non_persistent_and_partitions(standalone, raw, ns) -> None:
    create_topic(standalone, f"persistent://{ns}/plain")
    create_topic(standalone, f"persistent://{ns}/parted", partitions=2)
    expected = [f"persistent://{ns}/parted-partition-0", f"persistent://{ns}/parted-partition-1",
                f"persistent://{ns}/plain"]
    for mode in (None, MODE.PERSISTENT, MODE.ALL):
        r = get_topics(raw, ns, mode).getTopicsOfNamespaceResponse
        assert sorted(r.topics) == expected and not r.filtered and r.changed
        assert r.topics_hash == topic_lists.calculate_hash(expected)
    # non-persistent topics live in memory only; none were made yet
    r = get_topics(raw, ns, MODE.NON_PERSISTENT).getTopicsOfNamespaceResponse
    assert list(r.topics) == [] and r.topics_hash == "00000000"
    # one lives while its producer is connected
    live = f"non-persistent://{ns}/live"
    assert raw.producer(live, producer_id=1, request_id=next(_ids)).type == T.PRODUCER_SUCCESS
    r = get_topics(raw, ns, MODE.NON_PERSISTENT).getTopicsOfNamespaceResponse
    assert list(r.topics) == [live] and r.topics_hash == topic_lists.calculate_hash([live])
    r = get_topics(raw, ns, MODE.ALL).getTopicsOfNamespaceResponse
    assert sorted(r.topics) == sorted([*expected, live])
    assert sorted(get_topics(raw, ns).getTopicsOfNamespaceResponse.topics) == expected
    r = get_topics(raw, ns, MODE.ALL, pattern=f"{ns}/(live|plain)").getTopicsOfNamespaceResponse
    assert sorted(r.topics) == sorted([live, f"persistent://{ns}/plain"]) and r.filtered


def test_pattern_filters_on_the_broker_and_hash_says_unchanged(standalone, raw, ns) -> None:
    for local in ("orders-1", "orders-2", "payments"):
        create_topic(standalone, f"persistent://{ns}/{local}")
    create_topic(standalone, f"persistent://{ns}/orders-p", partitions=2)
    wanted = sorted([f"persistent://{ns}/orders-1", f"persistent://{ns}/orders-2",
                     f"persistent://{ns}/orders-p-partition-0", f"persistent://{ns}/orders-p-partition-1"])
    r = get_topics(raw, ns, pattern=f"persistent://{ns}/orders-.*").getTopicsOfNamespaceResponse
    assert sorted(r.topics) == wanted and r.filtered and r.changed
    assert r.topics_hash == topic_lists.calculate_hash(wanted)
    # the client already has this list: nothing is sent again
    same = get_topics(raw, ns, pattern=f"persistent://{ns}/orders-.*",
                      topics_hash=r.topics_hash).getTopicsOfNamespaceResponse
    assert list(same.topics) == [] and not same.changed and same.topics_hash == r.topics_hash
    # a stale hash: the whole list again
    stale = get_topics(raw, ns, pattern=f"persistent://{ns}/orders-.*",
                       topics_hash="00000000").getTopicsOfNamespaceResponse
    assert sorted(stale.topics) == wanted and stale.changed
    # without the domain, as Pulsar's removeTopicDomainScheme
    bare = get_topics(raw, ns, pattern=f"{ns}/pay.*").getTopicsOfNamespaceResponse
    assert list(bare.topics) == [f"persistent://{ns}/payments"] and bare.filtered


def test_bad_pattern_and_unknown_namespace_get_error(standalone, raw, ns) -> None:
    err = get_topics(raw, ns, pattern=f"persistent://{ns}/orders-(").error
    assert err.error == PulsarServerError.MetadataError
    assert "does not compile" in err.message and "orders-(" in err.message
    err = get_topics(raw, "tl/never-created").error
    assert "tl/never-created" in err.message or "namespace" in err.message.lower()
    # the connection still serves
    assert get_topics(raw, ns).type == T.GET_TOPICS_OF_NAMESPACE_RESPONSE


def watch(raw: RawClient, ns: str, watcher_id: int, pattern: str, topics_hash: str | None = None) -> pb.BaseCommand:
    cmd = pb.CommandWatchTopicList(request_id=next(_ids), watcher_id=watcher_id, namespace=ns,
                                   topics_pattern=pattern)
    if topics_hash is not None:
        cmd.topics_hash = topics_hash
    raw.send(pb.BaseCommand(type=T.WATCH_TOPIC_LIST, watchTopicList=cmd))
    return raw.next_command()


def next_update(raw: RawClient) -> tuple[pb.CommandWatchTopicUpdate, float]:
    started = time.monotonic()
    reply = raw.next_command()
    assert reply.type == T.WATCH_TOPIC_UPDATE, reply
    return reply.watchTopicUpdate, time.monotonic() - started


def test_watcher_gets_creates_and_deletes_of_matching_topics(standalone, raw, ns) -> None:
    create_topic(standalone, f"persistent://{ns}/orders-1")
    create_topic(standalone, f"persistent://{ns}/other")
    reply = watch(raw, ns, 1, f"persistent://{ns}/orders-.*")
    assert reply.type == T.WATCH_TOPIC_LIST_SUCCESS, reply
    success = reply.watchTopicListSuccess
    assert list(success.topic) == [f"persistent://{ns}/orders-1"] and success.watcher_id == 1
    assert success.topics_hash == topic_lists.calculate_hash([f"persistent://{ns}/orders-1"])

    create_topic(standalone, f"persistent://{ns}/ignored")     # not matching: no update
    create_topic(standalone, f"persistent://{ns}/orders-2")
    update, waited_s = next_update(raw)
    assert list(update.new_topics) == [f"persistent://{ns}/orders-2"] and not update.deleted_topics
    assert waited_s < UPDATE_WAIT_S
    both = [f"persistent://{ns}/orders-1", f"persistent://{ns}/orders-2"]
    assert update.topics_hash == topic_lists.calculate_hash(both)

    create_topic(standalone, f"persistent://{ns}/orders-p", partitions=2)
    news = {next_update(raw)[0].new_topics[0] for _ in range(2)}
    assert news == {f"persistent://{ns}/orders-p-partition-0", f"persistent://{ns}/orders-p-partition-1"}

    delete_topic(standalone, f"persistent://{ns}/orders-1")
    update, waited_s = next_update(raw)
    assert list(update.deleted_topics) == [f"persistent://{ns}/orders-1"] and not update.new_topics
    assert waited_s < UPDATE_WAIT_S

    # re-created with the hash the client has: no topics sent again
    again = watch(raw, ns, 2, f"persistent://{ns}/orders-.*", topics_hash=update.topics_hash)
    assert again.type == T.WATCH_TOPIC_LIST_SUCCESS and list(again.watchTopicListSuccess.topic) == []
    assert again.watchTopicListSuccess.topics_hash == update.topics_hash

    # closing answers SUCCESS; a closed watcher hears nothing more (watcher 2 still does)
    raw.send(pb.BaseCommand(type=T.WATCH_TOPIC_LIST_CLOSE, watchTopicListClose=pb.CommandWatchTopicListClose(
        request_id=900, watcher_id=1)))
    closed = raw.next_command()
    assert closed.type == T.SUCCESS and closed.success.request_id == 900
    create_topic(standalone, f"persistent://{ns}/orders-3")
    update, _ = next_update(raw)
    assert update.watcher_id == 2 and list(update.new_topics) == [f"persistent://{ns}/orders-3"]
    raw.timeout_s = 0.5
    with pytest.raises(TimeoutError):
        raw.next_command()


def test_watcher_sees_topics_made_by_another_client_and_goes_with_its_connection(standalone, ns) -> None:
    watcher = RawClient(standalone.port, timeout_s=10)
    watcher.connect()
    assert watch(watcher, ns, 7, f"{ns}/auto-.*").type == T.WATCH_TOPIC_LIST_SUCCESS
    producer = RawClient(standalone.port, timeout_s=10)
    producer.connect()
    started = time.monotonic()
    # a topic created by its first producer (auto-creation), not through the admin API
    assert producer.producer(f"persistent://{ns}/auto-1", 1, 1).type == T.PRODUCER_SUCCESS
    update, _ = next_update(watcher)
    assert list(update.new_topics) == [f"persistent://{ns}/auto-1"]
    assert time.monotonic() - started < UPDATE_WAIT_S + 1.0   # producer creation included (measured 0.02 s)
    watcher.close()
    producer.close()
    # the broker still serves, with no watcher left behind to write to a dead socket
    create_topic(standalone, f"persistent://{ns}/auto-2")
    fresh = RawClient(standalone.port, timeout_s=10)
    fresh.connect()
    names = get_topics(fresh, ns).getTopicsOfNamespaceResponse.topics
    assert f"persistent://{ns}/auto-2" in names
    fresh.close()


def test_watcher_bad_pattern_and_limit(standalone, ns) -> None:
    raw = RawClient(standalone.port, timeout_s=10)
    raw.connect()
    reply = watch(raw, ns, 1, f"persistent://{ns}/(unclosed")
    assert reply.type == T.ERROR and "does not compile" in reply.error.message
    watchers_max = 100   # broker_topic_list_watchers_per_connection_max's default
    for watcher_id in range(watchers_max):
        assert watch(raw, ns, 1000 + watcher_id, ".*").type == T.WATCH_TOPIC_LIST_SUCCESS
    refused = watch(raw, ns, 5000, ".*")
    assert refused.type == T.ERROR and refused.error.error == PulsarServerError.NotAllowedError
    assert "broker_topic_list_watchers_per_connection_max" in refused.error.message
    # asking again for an existing watcher is answered, not counted
    assert watch(raw, ns, 1000, ".*").type == T.WATCH_TOPIC_LIST_SUCCESS
    raw.close()
