"""The admin API of Kafka consumer groups (broker.admin.groups) and the guards on a live group's
subscription, on the session's real standalone (auth off: every caller is a superuser).

- `POST /admin/v2/kafka/groups/{group}/offsets` commits, fetches and forgets a group's offsets on the
  partitions this broker serves (what a coordinator on another broker calls); a bad body is a 400
  with its reason; the group's subscription shows in the topic's stats like any other, with its
  cursor properties as `subscriptionProperties`.
- A live group (a stored record with members, written here straight into the standalone's
  metadata store, as a coordinator would): a Pulsar consumer on its subscription is refused
  (ConsumerBusy), and so are admin moves and deletes (412 with the reason, shown by
  `strata admin topics reset-cursor` too), while expiry acts; once the group is empty both work.
- `GET /admin/v2/kafka/groups[/{group}]` read the stored records.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Iterator

import pulsar
import pytest

from broker.records import groups
from broker.topics import group_offsets
from common.errors import ConsumerBusy
from metadata import open_store
from tests.kafka.helpers import unique_topic
from tests.support.admin_cli import run_admin
from tests.support.admin_http import admin_call, topic_get
from tests.support.standalone_proc import StandaloneProcess

MESSAGES = 5


def offsets_path(group: str) -> str:
    return f"/admin/v2/kafka/groups/{urllib.parse.quote(group, safe='')}/offsets"


def offsets(sa: StandaloneProcess, group: str, op: str, partitions: list[dict]) -> list[dict]:
    status, body = admin_call(sa.admin_url, "POST", offsets_path(group), {"op": op, "partitions": partitions})
    assert status == 200, (op, status, body)
    return body["partitions"]


def sub_path(topic: str, group: str) -> str:
    return (f"/admin/v2/persistent/{topic.split('://', 1)[1]}/subscription/"
            f"{urllib.parse.quote(group, safe='')}")


def new_topic(client: pulsar.Client) -> str:
    """A topic of its own holding MESSAGES single-message entries (offsets 0..4)."""
    topic = f"persistent://public/default/{unique_topic('group-rest')}"
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(MESSAGES):
        producer.send(b"m%d" % i)
    producer.close()
    return topic


def unique_group(prefix: str) -> str:
    return f"{unique_topic(prefix)}/with slash%and space"     # quoted in the path


@contextlib.contextmanager
def stored_group(sa: StandaloneProcess, group_id: str, *, live: bool) -> Iterator[None]:
    """The group's record in the standalone's metadata store (live: one member), deleted after."""
    members = [groups.StoredMember("m-1", None, "client-1", "/127.0.0.1", 300_000, 300_000, b"\x00sub", b"\x00as")]
    record = groups.StoredGroup(group_id, "Stable" if live else "Empty", 1, "consumer", "range", "m-1",
                                members if live else [], [], int(time.time() * 1000))
    store = open_store(sa.metadata_url)
    try:
        store.put(groups.group_path(group_id), record.to_json())
        yield
    finally:
        with contextlib.suppress(Exception):
            store.delete(groups.group_path(group_id))
        store.close()


def test_offsets_endpoint_commits_fetches_and_forgets(standalone, pulsar_client: pulsar.Client) -> None:
    sa = standalone
    topic, group = new_topic(pulsar_client), unique_group("g-rest")
    item = {"topic": topic}
    assert offsets(sa, group, "fetch", [item]) == [{"topic": topic, "offset": -1, "metadata": "", "found": False}]
    assert offsets(sa, group, "commit", [{**item, "offset": 2, "metadata": "m"}]) == [
        {"topic": topic, "offset": 2, "metadata": "m", "found": True}]
    assert offsets(sa, group, "fetch", [item]) == [{"topic": topic, "offset": 2, "metadata": "m", "found": True}]

    stats = topic_get(sa.admin_url, topic, "stats")["subscriptions"][group]
    assert stats["msgBacklog"] == MESSAGES - 2 and stats["isDurable"]
    props = stats["subscriptionProperties"]
    assert props[group_offsets.GROUP] == group and props[group_offsets.OFFSET] == "2"
    assert props[group_offsets.METADATA] == "m"

    bad = offsets(sa, group, "commit", [{"topic": "no:such/name", "offset": 1}, {**item, "offset": 3}])
    assert "error" in bad[0] and bad[1]["found"]                       # one item's failure is its own
    assert offsets(sa, group, "forget", [item]) == [{"topic": topic, "found": True}]
    assert offsets(sa, group, "fetch", [item]) == [{"topic": topic, "offset": -1, "metadata": "", "found": False}]
    assert group not in topic_get(sa.admin_url, topic, "stats")["subscriptions"]
    assert offsets(sa, group, "forget", [item]) == [{"topic": topic, "found": False}]
    assert offsets(sa, group, "fetch", []) == []


T = "persistent://public/default/t"
METADATA_BYTES_MAX = group_offsets.METADATA_CHARS_MAX


@pytest.mark.parametrize(("body", "reason"), [
    ([], "a group offsets body is"),
    ({"op": "seek", "partitions": []}, "op must be one of commit, fetch, forget"),
    ({"op": "fetch"}, "partitions must be a list"),
    ({"op": "fetch", "partitions": ["t"]}, "partitions[0] must be an object"),
    ({"op": "fetch", "partitions": [{"topic": 7}]}, "partitions[0].topic must be a topic name"),
    ({"op": "commit", "partitions": [{"topic": T}]}, "partitions[0].offset must be an integer"),
    ({"op": "commit", "partitions": [{"topic": T, "offset": "5"}]}, "must be an integer"),
    ({"op": "commit", "partitions": [{"topic": T, "offset": True}]}, "must be an integer"),
    ({"op": "commit", "partitions": [{"topic": T, "offset": 1, "metadata": 5}]}, "metadata must be a string or null"),
    ({"op": "commit", "partitions": [{"topic": T, "offset": 1, "metadata": "é" * (METADATA_BYTES_MAX // 2 + 1)}]},
     "bytes, over the"),                                               # 2 bytes a character in UTF-8
])
def test_a_bad_offsets_body_is_a_400_with_its_reason(standalone, body: object, reason: str) -> None:
    status, answer = admin_call(standalone.admin_url, "POST", offsets_path("g-bad"), body)
    assert status == 400 and reason in answer["reason"], answer


def test_a_live_groups_subscription_refuses_pulsar_consumers_and_admin_moves(
        standalone, pulsar_client: pulsar.Client, capsys: pytest.CaptureFixture[str]) -> None:
    sa = standalone
    topic, group = new_topic(pulsar_client), unique_group("g-live")
    offsets(sa, group, "commit", [{"topic": topic, "offset": 1, "metadata": ""}])
    sub = sub_path(topic, group)
    with stored_group(sa, group, live=True):
        with pytest.raises(pulsar.ConsumerBusy):
            pulsar_client.subscribe(topic, group)
        for method, suffix, body in (("POST", "/resetcursor/0", None), ("POST", "/skip_all", None),
                                     ("POST", "/skip/1", None), ("DELETE", "", None), ("DELETE", "?force=true", None),
                                     ("POST", "/resetcursor", {"ledgerId": -1, "entryId": -1})):
            status, answer = admin_call(sa.admin_url, method, sub + suffix, body)
            assert status == 412 and "live members" in answer["reason"], (method, suffix, status, answer)
        assert offsets(sa, group, "fetch", [{"topic": topic}])[0]["offset"] == 1      # nothing moved

        code = run_admin(["--admin-url", sa.admin_url, "topics", "reset-cursor", topic, "-s", group, "-t", "10m"])
        err = capsys.readouterr().err
        assert code == 1 and "HTTP 412" in err and "live members" in err and group in err, err

        status, _ = admin_call(sa.admin_url, "POST", sub + "/expireMessages/0")      # TTL-like: allowed
        assert status == 204
        assert offsets(sa, group, "fetch", [{"topic": topic}])[0]["offset"] == MESSAGES

    with stored_group(sa, group, live=False):                                        # empty: both work again
        consumer = pulsar_client.subscribe(topic, group)
        try:
            answer = offsets(sa, group, "commit", [{"topic": topic, "offset": 0}])[0]
            assert answer["error"]["code"] == ConsumerBusy.code, answer               # not while Pulsar reads
        finally:
            consumer.close()
        status, _ = admin_call(sa.admin_url, "POST", sub + "/resetcursor/0")
        assert status == 204
        assert offsets(sa, group, "fetch", [{"topic": topic}])[0]["offset"] == 0
        status, _ = admin_call(sa.admin_url, "DELETE", sub)
        assert status == 204


def test_groups_are_listed_and_described_from_their_records(standalone) -> None:
    sa = standalone
    group = unique_group("g-describe")
    quoted = urllib.parse.quote(group, safe="")
    status, _ = admin_call(sa.admin_url, "GET", f"/admin/v2/kafka/groups/{quoted}")
    assert status == 404
    with stored_group(sa, group, live=True):
        status, ids = admin_call(sa.admin_url, "GET", "/admin/v2/kafka/groups")
        assert status == 200 and group in ids
        status, record = admin_call(sa.admin_url, "GET", f"/admin/v2/kafka/groups/{quoted}")
        assert status == 200
        assert {k: record[k] for k in ("groupId", "state", "generation", "protocolType", "protocol", "leader",
                                       "partitions", "live")} == {
            "groupId": group, "state": "Stable", "generation": 1, "protocolType": "consumer", "protocol": "range",
            "leader": "m-1", "partitions": [], "live": True}
        assert record["members"] == [{"memberId": "m-1", "instanceId": None, "clientId": "client-1",
                                      "clientHost": "/127.0.0.1", "sessionTimeoutMs": 300_000,
                                      "rebalanceTimeoutMs": 300_000}]
    status, ids = admin_call(sa.admin_url, "GET", "/admin/v2/kafka/groups")
    assert status == 200 and group not in ids
