"""The web console's message routes against a real standalone, fed by the official client:
`GET .../messages` (newest first, oldest first, from a publish time or a message id, paging with
`next`, batches expanded, key / property / contains filters, the scan bound, Avro / JSON / String /
Protobuf-native schemas decoded, a 4.5 MB payload cut and then shown whole, bad inputs) and
`GET .../tail` (Server-Sent Events of new messages, a browser that does not read gets `dropped`,
the per-broker limit answers 503, an unload ends it). One standalone for the module, with small
tail bounds.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from collections.abc import Iterator

import pulsar
import pytest
from google.protobuf import timestamp_pb2
from pulsar.schema import (
    AvroSchema,
    Float,
    Integer,
    JsonSchema,
    ProtobufNativeSchema,
    Record,
    String,
    StringSchema,
)

from tests.support.admin_http import call
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

TAILS_MAX = 2
TAIL_QUEUE_MESSAGES_MAX = 20
SOCKET_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    env = {"STRATA_CONSOLE_TAILS_MAX": str(TAILS_MAX),
           "STRATA_CONSOLE_TAIL_QUEUE_MESSAGES_MAX": str(TAIL_QUEUE_MESSAGES_MAX)}
    with StandaloneProcess.start(tmp_path_factory.mktemp("console") / "data", env=env) as sa:
        yield sa


class Reading(Record):
    sensor = String()
    value = Float()
    count = Integer()


def route(sa: StandaloneProcess, topic: str, what: str = "messages") -> str:
    return f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/{what}"


def browse(sa: StandaloneProcess, topic: str, **query: object) -> dict:
    status, body = call("GET", route(sa, topic) + "?" + urllib.parse.urlencode(query))
    assert status == 200, body
    return body


def values(answer: dict) -> list[object]:
    return [m["payload"]["value"] for m in answer["messages"]]


def produce_plain(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False, producer_name="plain")
    ids = [producer.send(f"m{i}".encode(), partition_key=f"k{i % 3}", properties={"i": str(i), "even": str(i % 2 == 0)})
           for i in range(count)]
    producer.close()
    return ids


# --- browsing -------------------------------------------------------------------------------------

def test_latest_earliest_paging_and_batches(standalone, client, topic) -> None:
    ids = produce_plain(client, topic, 10)
    batcher = client.create_producer(topic, batching_enabled=True, batching_max_messages=5,
                                     batching_max_publish_delay_ms=1000, producer_name="batcher")
    for i in range(5):
        batcher.send_async(f"b{i}".encode(), None, properties={"b": str(i)})
    batcher.flush()
    batcher.close()
    newest = browse(standalone, topic)
    assert values(newest) == [f"b{i}" for i in range(4, -1, -1)] + [f"m{i}" for i in range(9, -1, -1)]
    assert newest["stoppedBy"] == "end" and newest["next"] is None and newest["topic"] == topic
    first = newest["messages"][0]
    assert first["batchIndex"] == 4 and first["messageId"] == f"{first['ledgerId']}:{first['entryId']}:4"
    assert first["producerName"] == "batcher" and first["properties"] == {"b": "4"} and first["size"] == 2
    assert first["payload"] == {"encoding": "text", "value": "b4", "truncated": False}
    plain = newest["messages"][-1]
    assert (plain["ledgerId"], plain["entryId"], plain["batchIndex"]) == (ids[0].ledger_id(), ids[0].entry_id(), -1)
    assert plain["key"] == "k0" and plain["sequenceId"] == 0 and plain["schemaVersion"] is None
    assert plain["publishTime"] > 0 and plain["eventTime"] is None
    oldest = browse(standalone, topic, **{"from": "earliest", "limit": 12})
    assert values(oldest) == [f"m{i}" for i in range(10)] + ["b0", "b1"]
    assert oldest["stoppedBy"] == "limit" and oldest["next"].endswith(":2")
    rest = browse(standalone, topic, messageId=oldest["next"])
    assert values(rest) == ["b2", "b3", "b4"] and rest["stoppedBy"] == "end"
    page = browse(standalone, topic, limit=3)
    assert values(page) == ["b4", "b3", "b2"]
    older = browse(standalone, topic, before=page["next"], limit=4)
    assert values(older) == ["b1", "b0", "m9", "m8"]
    assert values(browse(standalone, topic, before=older["next"], limit=2)) == ["m7", "m6"]


def test_publish_time_and_message_id(standalone, client, topic) -> None:
    ids = produce_plain(client, topic, 3)
    time.sleep(0.05)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.05)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"later")
    producer.close()
    assert values(browse(standalone, topic, publishTime=cut_ms)) == ["later"]
    assert values(browse(standalone, topic, publishTime=0, limit=2)) == ["m0", "m1"]
    at = f"{ids[1].ledger_id()}:{ids[1].entry_id()}"
    assert values(browse(standalone, topic, messageId=at)) == ["m1", "m2", "later"]
    assert values(browse(standalone, topic, messageId=at + ":-1", limit=1)) == ["m1"]


def test_filters(standalone, client, topic) -> None:
    produce_plain(client, topic, 9)
    assert values(browse(standalone, topic, key="k1", **{"from": "earliest"})) == ["m1", "m4", "m7"]
    assert values(browse(standalone, topic, property="i=5")) == ["m5"]
    assert len(browse(standalone, topic, property="even=True")["messages"]) == 5
    assert len(browse(standalone, topic, property="i")["messages"]) == 9
    assert browse(standalone, topic, property="nope")["messages"] == []
    assert values(browse(standalone, topic, contains="M8")) == ["m8"]
    assert values(browse(standalone, topic, contains="m", key="k2", property="even=False")) == ["m5"]


def test_scan_bound_is_reported(standalone, client, topic) -> None:
    produce_plain(client, topic, 6)
    answer = browse(standalone, topic, maxScanEntries=3, contains="nothing-matches")
    assert (answer["messages"], answer["scannedEntries"], answer["stoppedBy"]) == ([], 3, "scanBound")
    assert answer["next"] is not None
    rest = browse(standalone, topic, before=answer["next"], maxScanEntries=100, contains="nothing-matches")
    assert (rest["scannedEntries"], rest["stoppedBy"]) == (3, "end")
    ascending = browse(standalone, topic, maxScanEntries=4, **{"from": "earliest"}, contains="zzz")
    assert ascending["stoppedBy"] == "scanBound"
    assert values(browse(standalone, topic, messageId=ascending["next"])) == ["m4", "m5"]
    # the bound reached exactly at the last entry: nothing is left, so the scan says "end"
    for direction in ("earliest", "latest"):
        whole = browse(standalone, topic, maxScanEntries=6, **{"from": direction}, contains="zzz")
        assert (whole["scannedEntries"], whole["stoppedBy"], whole["next"]) == (6, "end", None), direction


def test_avro_json_and_string_schemas_are_decoded(standalone, client, topic) -> None:
    avro = client.create_producer(topic + "-avro", schema=AvroSchema(Reading))
    avro.send(Reading(sensor="t1", value=1.5, count=3), partition_key="t1")
    avro.close()
    shown = browse(standalone, topic + "-avro")["messages"][0]
    assert shown["payload"] == {"encoding": "avro", "value": {"sensor": "t1", "value": 1.5, "count": 3},
                                "truncated": False}
    assert shown["schemaVersion"] == 0
    assert browse(standalone, topic + "-avro", contains='"T1"')["messages"]
    js = client.create_producer(topic + "-json", schema=JsonSchema(Reading))
    js.send(Reading(sensor="h", value=2.0, count=1))
    js.close()
    assert browse(standalone, topic + "-json")["messages"][0]["payload"]["value"] == {
        "sensor": "h", "value": 2.0, "count": 1}
    text = client.create_producer(topic + "-str", schema=StringSchema())
    text.send("héllo")
    text.close()
    assert browse(standalone, topic + "-str")["messages"][0]["payload"] == {
        "encoding": "string", "value": "héllo", "truncated": False}
    proto = client.create_producer(topic + "-proto", schema=ProtobufNativeSchema(timestamp_pb2.Timestamp))
    proto.send(timestamp_pb2.Timestamp(seconds=60))
    proto.close()
    assert browse(standalone, topic + "-proto")["messages"][0]["payload"] == {
        "encoding": "protobuf", "value": "1970-01-01T00:01:00Z", "truncated": False}
    raw = client.create_producer(topic + "-raw", batching_enabled=False)
    raw.send(b"\x00\xff\x10")
    raw.close()
    assert browse(standalone, topic + "-raw")["messages"][0]["payload"]["encoding"] == "hex"
    assert browse(standalone, topic + "-raw", contains="00FF")["messages"]


def test_a_large_message_is_cut_then_shown_whole(standalone, client, topic) -> None:
    payload = (b"0123456789abcdef" * (4_500_000 // 16))
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(payload)
    producer.close()
    cut = browse(standalone, topic)["messages"][0]
    assert cut["size"] == len(payload) and cut["payload"]["truncated"] is True
    assert cut["payload"]["value"] == payload[:65_536].decode()
    whole = browse(standalone, topic, messageId=cut["messageId"], limit=1, payloadBytesMax=0)["messages"][0]
    assert whole["payload"] == {"encoding": "text", "value": payload.decode(), "truncated": False}
    small = browse(standalone, topic, payloadBytesMax=10)["messages"][0]["payload"]
    assert small == {"encoding": "text", "value": "0123456789", "truncated": True}


BAD_INPUTS = [
    ("limit=0", "limit must be between 1 and 500"),
    ("limit=501", "limit"),
    ("limit=x", "limit must be an integer"),
    ("maxScanEntries=0", "maxScanEntries"),
    ("maxScanEntries=100001", "maxScanEntries must be between 1 and 100000"),
    ("from=middle", "from must be latest or earliest"),
    ("from=latest&messageId=1:2", "at most one of"),
    ("messageId=12", "messageId must be ledger:entry"),
    ("messageId=a:b", "messageId must be ledger:entry"),
    ("before=1:2:3:4", "before must be ledger:entry"),
    ("publishTime=-1", "publishTime"),
    ("payloadBytesMax=-5", "payloadBytesMax"),
    ("property==x", "property must be name=value"),
    ("contains=", "contains must not be empty"),
]


def test_bad_inputs_are_400_with_a_reason(standalone, client, topic) -> None:
    produce_plain(client, topic, 1)
    for query, words in BAD_INPUTS:
        status, body = call("GET", route(standalone, topic) + "?" + query)
        assert status == 400 and words in body["reason"], (query, body)
    status, body = call("GET", route(standalone, topic, "tail") + "?payloadBytesMax=x")
    assert status == 400 and "payloadBytesMax must be an integer" in body["reason"], body


def test_unknown_and_partitioned_topics(standalone, topic) -> None:
    status, body = call("GET", route(standalone, topic))
    assert status == 404 and "not found" in body["reason"], body
    status, body = call("GET", route(standalone, topic, "tail"))
    assert status == 404, body
    status, body = call("PUT", f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/partitions", 2)
    assert status == 204, body
    for what in ("messages", "tail"):
        status, body = call("GET", route(standalone, topic, what))
        assert status == 405 and f"{topic}-partition-0" in body["reason"], body


# --- the live tail --------------------------------------------------------------------------------

class Tail:
    """A browser's EventSource, reduced: HTTP/1.0 on a socket (the answer ends when the stream does)."""

    def __init__(self, sa: StandaloneProcess, topic: str, query: str = "", rcvbuf_bytes: int | None = None) -> None:
        url = urllib.parse.urlsplit(route(sa, topic, "tail") + ("?" + query if query else ""))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf_bytes is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        self.sock.settimeout(SOCKET_TIMEOUT_S)
        self.sock.connect((url.hostname, url.port))
        self.sock.sendall(f"GET {url.path}?{url.query} HTTP/1.0\r\nHost: {url.hostname}\r\n\r\n".encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        self.status = int(head.split()[1])
        self.head = head.decode()
        self.opened: object = None
        if self.status == 200:       # the first event fixes where the tail starts
            name, self.opened = self.event()
            assert name == "open", (name, self.opened)

    def _more(self) -> None:
        got = self.sock.recv(65536)
        if not got:
            raise EOFError("the stream ended")
        self.buffer += got

    def event(self) -> tuple[str, object]:
        """The next event (comments skipped): (name, data as JSON)."""
        while True:
            while b"\n\n" not in self.buffer:
                self._more()
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            lines = block.decode().split("\n")
            fields = dict(line.split(": ", 1) for line in lines if not line.startswith(":"))
            if fields:
                return fields["event"], json.loads(fields["data"])

    def body(self) -> str:
        return self.buffer.decode()

    def close(self) -> None:
        self.sock.close()


def test_tail_streams_new_messages_only(standalone, client, topic) -> None:
    produce_plain(client, topic, 2)
    tail = Tail(standalone, topic, "property=even")
    try:
        assert tail.status == 200 and "text/event-stream" in tail.head
        assert isinstance(tail.opened, dict) and tail.opened["topic"] == topic and ":" in tail.opened["from"]
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"skipped by the filter")
        producer.send(b"new", partition_key="nk", properties={"even": "yes"})
        name, data = tail.event()
        assert name == "message" and isinstance(data, dict)
        assert data["payload"]["value"] == "new" and data["key"] == "nk" and data["batchIndex"] == -1
        producer.close()
    finally:
        tail.close()


def test_tail_of_a_slow_browser_drops_and_says_so(standalone, client, topic) -> None:
    client.create_producer(topic).close()
    tail = Tail(standalone, topic, rcvbuf_bytes=4096)
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=500,
                                          batching_max_publish_delay_ms=5)
        payload = b"x" * 4000
        for _ in range(4000):                        # ~16 MB of events: more than the sockets hold
            producer.send_async(payload, None)
        producer.flush()
        producer.close()
        seen, dropped = 0, 0
        while not dropped:
            name, data = tail.event()
            if name == "dropped":
                assert isinstance(data, dict) and "fell behind" in data["reason"]
                dropped = data["dropped"]
            else:
                seen += 1
        assert dropped > 0 and seen + dropped <= 4000
    finally:
        tail.close()


def test_tails_per_broker_are_limited(standalone, client, topic) -> None:
    client.create_producer(topic).close()
    tails: list[Tail] = []
    try:
        def open_one() -> bool:
            t = Tail(standalone, topic)
            if t.status == 200:
                tails.append(t)
            else:
                t.close()
            return len(tails) == TAILS_MAX
        wait_until(open_one, 10, what=f"{TAILS_MAX} tails open (earlier tests' closed ones given back)")
        status, body = call("GET", route(standalone, topic, "tail"))
        assert status == 503 and body["reason"] == (f"too many live tails on this broker ({TAILS_MAX}); "
                                                    "close one and retry"), body
    finally:
        for t in tails:
            t.close()


def test_tail_ends_when_the_topic_is_unloaded(standalone, client, topic) -> None:
    client.create_producer(topic).close()
    tail = wait_until(lambda: _opened(Tail(standalone, topic)), 10, what="a tail slot")
    try:
        status, body = call("PUT", f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/unload")
        assert status == 204, body
        name, data = tail.event()
        assert name == "end" and isinstance(data, dict) and "unloaded" in data["reason"]
    finally:
        tail.close()


def _opened(tail: Tail) -> Tail | None:
    if tail.status == 200:
        return tail
    tail.close()
    return None

