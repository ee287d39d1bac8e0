"""Subscription operations of the admin REST API against a real standalone, each one's effect seen by
the official client: create (latest, earliest, an id), unsubscribe (412 with consumers, then
forced), skip, clear-backlog, reset by time and by id (connected consumers get the messages
again), expire, peek / examine / get-by-id (payload and `X-Pulsar-*` headers, a batch, properties,
compression), a partitioned topic's fan-out, and a table of bad inputs that change nothing.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pulsar
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entries.batch import parse_batch
from tests.acceptance.conftest import assert_no_more, receive_all
from tests.support.admin_http import exchange
from tests.support.waiting import wait_until

HTTP_TIMEOUT_S = 20


def call(method: str, url: str, body: object = None) -> tuple[int, object]:
    status, _headers, raw = call_raw(method, url, body)
    try:
        return status, (json.loads(raw) if raw else None)
    except ValueError:
        return status, raw


def call_raw(method: str, url: str, body: object = None, raw_body: bytes | None = None,
             ) -> tuple[int, dict[str, str], bytes]:
    answer = exchange(method, url, body, raw=raw_body, timeout_s=HTTP_TIMEOUT_S)
    return answer.status, answer.headers, answer.body


def base_url(standalone, topic: str) -> str:
    return f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}"


def sub_stats(standalone, topic: str, sub: str) -> dict:
    status, stats = call("GET", base_url(standalone, topic) + "/stats")
    assert status == 200, stats
    assert isinstance(stats, dict)
    return stats["subscriptions"][sub]


def produce(client: pulsar.Client, topic: str, count: int, start: int = 0) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(start, start + count)]
    producer.close()
    return ids


def payloads(msgs) -> list[bytes]:
    return [m.data() for m in msgs]


def names(first: int, last: int) -> list[bytes]:
    return [f"m{i}".encode() for i in range(first, last + 1)]


def earliest(client: pulsar.Client, topic: str, sub: str, **kwargs) -> pulsar.Consumer:
    return client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest, **kwargs)


# --- create, list, unsubscribe -------------------------------------------------------------------

def test_create_at_latest_earliest_and_an_id(standalone, client: pulsar.Client, topic: str) -> None:
    ids = produce(client, topic, 5)
    url = base_url(standalone, topic)
    assert call("PUT", url + "/subscription/at-latest")[0] == 204
    assert call("PUT", url + "/subscription/at-earliest",
                {"ledgerId": -1, "entryId": -1, "partitionIndex": -1})[0] == 204
    third = {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id(), "partitionIndex": -1}
    assert call("PUT", url + "/subscription/at-third", third)[0] == 204
    assert call("PUT", url + "/subscription/at-third") == (409, {"reason": "Subscription already exists for topic"})
    status, listed = call("GET", url + "/subscriptions")
    assert status == 200 and listed == ["at-earliest", "at-latest", "at-third"]
    assert sub_stats(standalone, topic, "at-earliest")["msgBacklog"] == 5
    assert sub_stats(standalone, topic, "at-latest")["msgBacklog"] == 0
    assert payloads(receive_all(client.subscribe(topic, "at-earliest"), 5)) == names(0, 4)
    assert payloads(receive_all(client.subscribe(topic, "at-third"), 3)) == names(2, 4)
    at_latest = client.subscribe(topic, "at-latest")
    produce(client, topic, 1, start=5)
    assert payloads(receive_all(at_latest, 1)) == [b"m5"]


def test_unsubscribe_is_refused_with_consumers_then_forced(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = earliest(client, topic, "busy")
    produce(client, topic, 3)
    for _ in range(3):     # delivered (not acked): the client comes back after them, not at earliest
        consumer.receive(10_000)
    url = base_url(standalone, topic) + "/subscription/busy"
    assert call("DELETE", url) == (412, {"reason": "Subscription has active connected consumers"})
    assert sub_stats(standalone, topic, "busy")["msgBacklog"] == 3     # nothing changed
    assert call("DELETE", url + "?force=true")[0] == 204
    # the consumer was disconnected; the client comes back and subscribes again at latest:
    # the old cursor (3 unacked) is gone
    wait_until(lambda: call("GET", base_url(standalone, topic) + "/stats")[1]["subscriptions"]
               .get("busy", {}).get("msgBacklog", 0) == 0, 10, what="the forced unsubscribe")
    consumer.close()
    assert call("DELETE", url)[0] in (204, 404)      # the client's re-subscription, if it made one
    assert call("DELETE", url) == (404, {"reason": f"Subscription busy not found for topic {topic}"})
    assert call("GET", base_url(standalone, topic) + "/subscriptions") == (200, [])


# --- moving the cursor ----------------------------------------------------------------------------

def test_skip_moves_the_next_delivery_on(standalone, client: pulsar.Client, topic: str) -> None:
    produce(client, topic, 10)
    url = base_url(standalone, topic)
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    assert call("POST", url + "/subscription/s/skip/3")[0] == 204
    assert sub_stats(standalone, topic, "s")["msgBacklog"] == 7
    consumer = client.subscribe(topic, "s")
    assert payloads(receive_all(consumer, 7)) == names(3, 9)
    assert_no_more(consumer)


def test_clear_backlog_with_a_consumer_attached(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = earliest(client, topic, "s", receiver_queue_size=1)
    produce(client, topic, 20)
    wait_until(lambda: sub_stats(standalone, topic, "s")["msgBacklog"] == 20, 10, what="the backlog")
    assert call("POST", base_url(standalone, topic) + "/subscription/s/skip_all")[0] == 204
    stats = sub_stats(standalone, topic, "s")
    assert stats["msgBacklog"] == 0 and stats["unackedMessages"] == 0
    # at most what the client had prefetched before the clear comes through; then the new message
    produce(client, topic, 1, start=20)
    got = []
    while not got or got[-1] != b"m20":
        got.append(consumer.receive(10_000).data())
    assert len(got) <= 3


def test_reset_by_time_rewinds_a_connected_consumer(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = earliest(client, topic, "s")
    produce(client, topic, 5)
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(client, topic, 5, start=5)
    assert payloads(receive_all(consumer, 10)) == names(0, 9)
    wait_until(lambda: sub_stats(standalone, topic, "s")["msgBacklog"] == 0, 10, what="acks")
    assert call("POST", base_url(standalone, topic) + f"/subscription/s/resetcursor/{middle_ms}")[0] == 204
    assert payloads(receive_all(consumer, 5)) == names(5, 9)
    assert_no_more(consumer)


def test_reset_by_id_rewinds_a_connected_consumer(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = earliest(client, topic, "s")
    ids = produce(client, topic, 5)
    assert payloads(receive_all(consumer, 5)) == names(0, 4)
    url = base_url(standalone, topic) + "/subscription/s/resetcursor"
    body = {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id(), "partitionIndex": -1,
            "batchIndex": -1, "isExcluded": False}
    assert call("POST", url, body)[0] == 204
    assert payloads(receive_all(consumer, 3)) == names(2, 4)
    assert call("POST", url, {**body, "isExcluded": True})[0] == 204
    assert payloads(receive_all(consumer, 2)) == names(3, 4)
    assert_no_more(consumer)


EXPIRE_S = 4   # the expiry of test_expire_keeps_only_newer_messages (Pulsar takes whole seconds)


def test_expire_keeps_only_newer_messages(standalone, client: pulsar.Client, topic: str) -> None:
    url = base_url(standalone, topic)
    for sub in ("a", "b", "c"):
        assert call("PUT", url + f"/subscription/{sub}", {"ledgerId": -1, "entryId": -1})[0] == 204
    # The first 3 messages must be older than EXPIRE_S at each expiry, the last 2 younger: the
    # sleep makes the first true; the second holds while everything from the last 2's publish to
    # the last expiry takes under EXPIRE_S (measured 0.01 s; it was 2 s of room, now 4).
    produce(client, topic, 3)
    time.sleep(EXPIRE_S + 0.2)
    produce(client, topic, 2, start=3)
    newer_at = time.monotonic()
    assert call("POST", url + f"/subscription/a/expireMessages/{EXPIRE_S}")[0] == 204
    assert sub_stats(standalone, topic, "a")["msgBacklog"] == 2
    assert sub_stats(standalone, topic, "a")["totalMsgExpired"] == 3        # counted, as Pulsar counts it
    assert sub_stats(standalone, topic, "b")["msgBacklog"] == 5       # only "a" was asked
    assert payloads(receive_all(client.subscribe(topic, "a"), 2)) == names(3, 4)
    assert call("POST", url + f"/all_subscription/expireMessages/{EXPIRE_S}")[0] == 204
    assert time.monotonic() - newer_at < EXPIRE_S, "too slow: the newer messages may have expired too"
    assert [sub_stats(standalone, topic, s)["msgBacklog"] for s in ("b", "c")] == [2, 2]
    assert call("POST", url + "/all_subscription/expireMessages/0")[0] == 204
    assert [sub_stats(standalone, topic, s)["msgBacklog"] for s in ("b", "c")] == [0, 0]


def test_expire_up_to_a_message_id(standalone, client: pulsar.Client, topic: str) -> None:
    ids = produce(client, topic, 5)
    url = base_url(standalone, topic)
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    body = {"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id(), "isExcluded": False}
    assert call("POST", url + "/subscription/s/expireMessages", body)[0] == 204
    assert sub_stats(standalone, topic, "s")["msgBacklog"] == 3
    assert payloads(receive_all(client.subscribe(topic, "s"), 3)) == names(2, 4)


# --- reading messages -------------------------------------------------------------------------------

def test_peek_examine_and_get_by_id(standalone, client: pulsar.Client, topic: str) -> None:
    url = base_url(standalone, topic)
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    plain = client.create_producer(topic, producer_name="peeker", batching_enabled=False,
                                   compression_type=pulsar.CompressionType.LZ4)
    first = plain.send(b"hello " * 50, properties={"trace": "t-1", "k": "v"}, partition_key="key-1",
                       event_timestamp=1_600_000_000_123)
    batcher = client.create_producer(topic, batching_enabled=True, batching_max_messages=3,
                                     batching_max_publish_delay_ms=60_000)
    for i in range(3):
        batcher.send_async(f"b{i}".encode(), None, properties={"i": str(i)})
    batcher.flush()
    wait_until(lambda: sub_stats(standalone, topic, "s")["msgBacklog"] == 2, 10, what="two entries")

    status, headers, body = call_raw("GET", url + "/subscription/s/position/1")
    assert status == 200 and body == b"hello " * 50
    assert headers["X-Pulsar-Message-ID"] == f"{first.ledger_id()}:{first.entry_id()}"
    assert json.loads(headers["X-Pulsar-PROPERTY"]) == {"trace": "t-1", "k": "v"}
    assert headers["X-Pulsar-partition-key"] == "key-1"
    assert headers["X-Pulsar-producer-name"] == "peeker"
    assert headers["X-Pulsar-sequence-id"] == "0"
    assert headers["X-Pulsar-compression"] == "LZ4"
    assert headers["X-Pulsar-uncompressed-size"] == str(len(b"hello " * 50))
    assert headers["X-Pulsar-event-time"] == "2020-09-13T12:26:40.123Z"
    assert headers["X-Pulsar-publish-time"].endswith("Z") and headers["X-Pulsar-publish-time"][:2] == "20"
    assert headers["X-Pulsar-Is-Encrypted"] == "false"
    assert "X-Pulsar-num-batch-message" not in headers

    status, headers, body = call_raw("GET", url + "/subscription/s/position/2")
    assert status == 200 and headers["X-Pulsar-num-batch-message"] == "3"
    assert int(headers["X-Pulsar-batch-size"]) == len(body) + 10   # Pulsar counts the entry head too
    members = parse_batch(body, 3)
    assert [m.payload for m in members] == [b"b0", b"b1", b"b2"]
    assert [m.properties for m in members] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
    batch_id = headers["X-Pulsar-Message-ID"]

    assert call("GET", url + "/subscription/s/position/3")[0] == 404
    assert sub_stats(standalone, topic, "s")["msgBacklog"] == 2        # peeking consumed nothing
    status, headers, _ = call_raw("GET", url + "/examinemessage?initialPosition=earliest&messagePosition=1")
    assert status == 200 and headers["X-Pulsar-Message-ID"] == f"{first.ledger_id()}:{first.entry_id()}"
    status, headers, _ = call_raw("GET", url + "/examinemessage?initialPosition=latest&messagePosition=1")
    assert status == 200 and headers["X-Pulsar-Message-ID"] == batch_id
    ledger, entry = batch_id.split(":")
    status, headers, body = call_raw("GET", url + f"/ledger/{ledger}/entry/{entry}")
    assert status == 200 and headers["X-Pulsar-num-batch-message"] == "3" and parse_batch(body, 3)[2].payload == b"b2"


# --- partitioned topics -------------------------------------------------------------------------------

def test_partitioned_topic_fans_out(standalone, client: pulsar.Client, topic: str) -> None:
    url = base_url(standalone, topic)
    assert call("PUT", url + "/partitions", 3)[0] == 204
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    assert call("PUT", url + "/subscription/s")[0] == 409         # every partition has it
    assert call("GET", url + "/subscriptions") == (200, ["s"])
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(9):
        producer.send(f"p{i}".encode(), partition_key=f"k{i}")

    def backlog() -> int:
        status, stats = call("GET", url + "/partitioned-stats")
        assert status == 200, stats
        return stats["subscriptions"]["s"]["msgBacklog"]

    assert backlog() == 9
    assert call("POST", url + "/subscription/s/skip_all")[0] == 204
    assert backlog() == 0
    assert call("POST", url + "/subscription/s/resetcursor/0")[0] == 204
    assert backlog() == 9
    assert call("POST", url + "/all_subscription/expireMessages/0")[0] == 204
    assert backlog() == 0
    assert call("POST", url + "/subscription/s/resetcursor/0")[0] == 204
    assert call("POST", url + "/subscription/s/expireMessages/0")[0] == 204
    assert backlog() == 0
    status, body = call("GET", url + "/subscription/s/position/1")
    assert status == 405 and f"{topic}-partition-0" in body["reason"]
    assert call("POST", url + "/subscription/s/skip/1")[0] == 405
    assert call("POST", f"{url}-partition-0/subscription/s/skip/1")[0] == 204   # one partition: allowed
    assert call("DELETE", url + "/subscription/s")[0] == 204
    assert call("GET", url + "/subscriptions") == (200, [])
    assert call("DELETE", url + "/subscription/s")[0] == 404


# --- bad input ------------------------------------------------------------------------------------------

BAD_INPUTS = [
    # (method, suffix, body, status, words of the reason)
    ("POST", "/subscription/s/skip/abc", None, 400, "numMessages must be an integer"),
    ("POST", "/subscription/s/skip/0", None, 400, "numMessages must be between 1"),
    ("POST", "/subscription/s/skip/-2", None, 400, "numMessages must be between 1"),
    ("POST", "/subscription/nosuch/skip/1", None, 404, "Subscription nosuch not found"),
    ("POST", "/subscription/nosuch/skip_all", None, 404, "Subscription nosuch not found"),
    ("GET", "/subscription/s/position/0", None, 400, "messagePosition must be between 1"),
    ("GET", "/subscription/s/position/x", None, 400, "messagePosition must be an integer"),
    ("GET", "/subscription/s/position/99", None, 404, "Message not found"),
    ("POST", "/subscription/s/resetcursor/soon", None, 400, "timestamp (ms) must be an integer"),
    ("POST", "/subscription/s/resetcursor/-5", None, 400, "timestamp (ms) must be between 0"),
    ("POST", "/subscription/s/resetcursor", "garbage", 400, "request body is not JSON"),
    ("POST", "/subscription/s/resetcursor", '"text"', 400, "message id body must be an object"),
    ("PUT", "/subscription/other", "{", 400, "request body is not JSON"),
    ("POST", "/subscription/s/resetcursor", {"ledgerId": "a", "entryId": 1}, 400, "ledgerId must be an integer"),
    ("POST", "/subscription/s/resetcursor", {"ledgerId": 3}, 400, "needs ledgerId and entryId"),
    ("POST", "/subscription/s/resetcursor", {"ledgerId": -3, "entryId": 1}, 400, "Invalid message ID"),
    ("POST", "/subscription/s/resetcursor", {"ledgerId": 1, "entryId": 0, "isExcluded": "yes"}, 400,
     "isExcluded must be true or false"),
    ("POST", "/subscription/s/resetcursor", {"ledgerId": 10**9, "entryId": 0}, 412,
     "Unable to find position for position specified"),
    ("PUT", "/subscription/s", None, 409, "Subscription already exists for topic"),
    ("PUT", "/subscription/other", {"ledgerId": 10**9, "entryId": 5}, 412, "Unable to find position"),
    ("DELETE", "/subscription/nosuch", None, 404, "Subscription nosuch not found for topic"),
    ("POST", "/subscription/s/expireMessages/xyz", None, 400, "expireTimeInSeconds must be an integer"),
    ("POST", "/subscription/s/expireMessages/-1", None, 400, "expireTimeInSeconds must be between 0"),
    ("POST", "/all_subscription/expireMessages/1h", None, 400, "expireTimeInSeconds must be an integer"),
    ("GET", "/examinemessage?initialPosition=middle", None, 400, "initialPosition must be earliest or latest"),
    ("GET", "/examinemessage?initialPosition=earliest&messagePosition=0", None, 400, "messagePosition"),
    ("GET", "/examinemessage?initialPosition=earliest&messagePosition=1000", None, 404, "Message not found"),
    ("GET", "/ledger/x/entry/0", None, 400, "ledgerId must be an integer"),
    ("GET", "/ledger/1/entry/-1", None, 400, "entryId must be between 0"),
    ("GET", "/ledger/999999999/entry/0", None, 404, "Message not found"),
]


def test_bad_inputs_are_refused_and_change_nothing(standalone, client: pulsar.Client, topic: str) -> None:
    url = base_url(standalone, topic)
    produce(client, topic, 3)
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    assert call("POST", url + "/subscription/s/skip/1")[0] == 204
    before = sub_stats(standalone, topic, "s")
    for method, suffix, body, status, reason in BAD_INPUTS:
        raw = body.encode() if isinstance(body, str) else None
        got, _headers, answer = call_raw(method, url + suffix, None if raw else body, raw_body=raw)
        assert got == status, (method, suffix, answer)
        assert reason in json.loads(answer)["reason"], (method, suffix, answer)
    after = sub_stats(standalone, topic, "s")
    assert (after["msgBacklog"], after["backlogSize"]) == (before["msgBacklog"], before["backlogSize"]) == \
        (2, before["backlogSize"])
    assert call("GET", url + "/subscriptions") == (200, ["s"])


@pytest.mark.parametrize("suffix", ["/subscriptions", "/subscription/s/skip_all", "/examinemessage"],
                         ids=["list", "clear", "examine"])
def test_unknown_topic_is_404(standalone, topic: str, suffix: str) -> None:
    method = "POST" if "skip" in suffix else "GET"
    status, body = call(method, base_url(standalone, topic) + suffix)
    assert status == 404 and body == {"reason": f"Topic {topic} not found"}


# --- bad input, generated --------------------------------------------------------------------------

_NOT_A_NUMBER = st.text(alphabet="abcxyz-+_~²٣ ", min_size=1, max_size=8).filter(
    lambda t: not (t.strip().isascii() and t.strip().lstrip("-").isdigit()))
_BAD_COUNT = st.one_of(_NOT_A_NUMBER, st.integers(max_value=0).map(str), st.integers(min_value=2**63).map(str))
_BAD_TIME = st.one_of(_NOT_A_NUMBER, st.integers(max_value=-1).map(str))
_BAD_ID_FIELD = st.one_of(st.text(max_size=5), st.booleans(), st.floats(allow_nan=False), st.none(),
                          st.lists(st.integers(), max_size=2))
_BAD_BODY = st.one_of(
    st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=3), st.booleans(),
    st.fixed_dictionaries({"ledgerId": _BAD_ID_FIELD, "entryId": st.integers(min_value=0, max_value=10)}),
    st.fixed_dictionaries({"ledgerId": st.integers(max_value=-2), "entryId": st.integers()}),
    st.fixed_dictionaries({"ledgerId": st.integers(min_value=0, max_value=2**62),
                           "entryId": st.integers(max_value=-1)}),
    st.fixed_dictionaries({"ledgerId": st.just(1), "entryId": st.just(0), "isExcluded": st.text(max_size=3)}),
    st.fixed_dictionaries({"entryId": st.integers()}))


def _quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="")


_BAD_CALLS = st.one_of(
    _BAD_COUNT.map(lambda n: ("POST", f"/subscription/s/skip/{_quoted(n)}", None)),
    _BAD_COUNT.map(lambda n: ("GET", f"/subscription/s/position/{_quoted(n)}", None)),
    _BAD_TIME.map(lambda t: ("POST", f"/subscription/s/resetcursor/{_quoted(t)}", None)),
    _BAD_TIME.map(lambda t: ("POST", f"/subscription/s/expireMessages/{_quoted(t)}", None)),
    _BAD_TIME.map(lambda t: ("POST", f"/all_subscription/expireMessages/{_quoted(t)}", None)),
    _BAD_BODY.map(lambda b: ("POST", "/subscription/s/resetcursor", b)),
    _BAD_BODY.map(lambda b: ("POST", "/subscription/s/expireMessages", b)),
    _BAD_BODY.map(lambda b: ("PUT", "/subscription/other", b)),
    _BAD_COUNT.map(lambda n: ("GET", f"/examinemessage?initialPosition=earliest&messagePosition={_quoted(n)}", None)),
    _NOT_A_NUMBER.map(lambda p: ("GET", f"/examinemessage?initialPosition={_quoted(p)}", None)),
    _BAD_TIME.map(lambda n: ("GET", f"/ledger/{_quoted(n)}/entry/0", None)),
    _BAD_TIME.map(lambda n: ("GET", f"/ledger/1/entry/{_quoted(n)}", None)),
)


def test_generated_bad_inputs_are_refused_and_change_nothing(standalone, client: pulsar.Client, topic: str) -> None:
    url = base_url(standalone, topic)
    produce(client, topic, 3)
    assert call("PUT", url + "/subscription/s", {"ledgerId": -1, "entryId": -1})[0] == 204
    assert call("POST", url + "/subscription/s/skip/1")[0] == 204
    before = sub_stats(standalone, topic, "s")

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_BAD_CALLS)
    def refused(bad: tuple[str, str, object]) -> None:
        method, suffix, body = bad
        status, _headers, answer = call_raw(method, url + suffix, body)
        assert status in (400, 404, 412), (method, suffix, body, status, answer)
        reason = json.loads(answer)["reason"]
        assert isinstance(reason, str) and reason, (method, suffix, body, answer)

    refused()
    after = sub_stats(standalone, topic, "s")
    assert (after["msgBacklog"], after["backlogSize"]) == (before["msgBacklog"], before["backlogSize"]) == \
        (2, before["backlogSize"])
    assert call("GET", url + "/subscriptions") == (200, ["s"])
    log = standalone.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
