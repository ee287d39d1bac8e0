"""Deduplication with the official client against a real standalone: the per-topic switch, explicit
duplicate sequence ids answered but not stored, resume after a restart and a kill -9 (snapshot +
replay), switching on and off mid-stream (nothing stored is lost), in-flight duplicates."""

from __future__ import annotations

import time

import pulsar
import pytest

from broker.codec import CommandType as T, encode_payload_command
from broker.entry_format import build_entry
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.acceptance.test_admin import http
from tests.broker.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess

# Small snapshot interval: a restart then restores a snapshot AND replays entries after it.
ENV = {"STRATA_BROKER_DEDUP_SNAPSHOT_INTERVAL_ENTRIES": "5"}


@pytest.fixture(scope="module")
def sa(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("dedup") / "data", env=ENV) as proc:
        yield proc


def _dedup_url(sa: StandaloneProcess, topic: str) -> str:
    return f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/deduplicationEnabled"


def _stored(sa: StandaloneProcess, topic: str, expected: int) -> list[bytes]:
    """Every stored message of `topic`, read from the start; exactly `expected` of them."""
    client = make_client(sa.service_url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        got = [reader.read_next(10_000).data() for _ in range(expected)]
        with pytest.raises(pulsar.Timeout):
            reader.read_next(500)
        return got
    finally:
        client.close()


def test_topic_switch_overrides_namespace_and_falls_back(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    ns_url = f"{sa.admin_url}/admin/v2/namespaces/public/default/deduplication"
    assert http("GET", url) == (200, None)
    assert http("GET", url + "?applied=true") == (200, False)        # off by default
    assert http("POST", url, True)[0] == 204
    assert http("GET", url) == (200, True)
    assert http("POST", ns_url, False)[0] == 204
    assert http("GET", url + "?applied=true") == (200, True)         # the topic overrides
    assert http("DELETE", url)[0] == 204
    assert http("GET", url + "?applied=true") == (200, False)        # back to the namespace
    status, body = http("POST", url, "yes")
    assert status == 400 and "reason" in body


def test_explicit_duplicates_are_answered_and_not_stored(sa, topic: str) -> None:
    assert http("POST", _dedup_url(sa, topic), True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="dup-writer")
    assert producer.last_sequence_id() == -1
    for seq in range(5):
        producer.send(f"m{seq}".encode(), sequence_id=seq)
    duplicate = producer.send(b"again-2", sequence_id=2)
    assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
    producer.send(b"again-4", sequence_id=4)
    producer.send(b"m5", sequence_id=5)
    client.close()
    assert _stored(sa, topic, 6) == [f"m{i}".encode() for i in range(6)]


def test_resume_after_restart_and_kill9(sa, topic: str) -> None:
    assert http("POST", _dedup_url(sa, topic), True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="resumer")
    for i in range(12):                     # snapshots at 5 and 10, then 2 entries to replay
        producer.send(f"m{i}".encode())
    client.close()
    for crash in (False, True):
        sa.restart(crash=crash)
        client = make_client(sa.service_url)
        producer = client.create_producer(topic, producer_name="resumer")
        last = producer.last_sequence_id()
        assert last == (11 if not crash else 12)
        duplicate = producer.send(b"dup", sequence_id=last)
        assert duplicate.entry_id() == -1
        producer.send(f"m{last + 1}".encode())        # the client continues at last + 1
        client.close()
    assert _stored(sa, topic, 14) == [f"m{i}".encode() for i in range(14)]


def test_switching_mid_stream_loses_nothing(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="switcher")
    producer.send(b"a0", sequence_id=0)
    producer.send(b"a1", sequence_id=1)
    producer.send(b"a1-again", sequence_id=1)        # off: stored
    assert http("POST", url, True)[0] == 204          # on, with the producer connected
    producer.send(b"b1", sequence_id=1)               # stored before the switch: not known
    producer.send(b"b2", sequence_id=2)
    assert producer.send(b"b2-again", sequence_id=2).entry_id() == -1
    assert producer.send(b"b1-again", sequence_id=1).entry_id() == -1
    assert http("POST", url, False)[0] == 204         # off again
    producer.send(b"c2", sequence_id=2)               # stored: nothing is enforced any more
    client.close()
    assert _stored(sa, topic, 6) == [b"a0", b"a1", b"a1-again", b"b1", b"b2", b"c2"]


def test_new_producer_gets_last_sequence_id_only_while_enabled(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    assert http("POST", url, True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="seq-holder")
    for _ in range(3):
        producer.send(b"x")
    producer.close()
    assert client.create_producer(topic, producer_name="seq-holder").last_sequence_id() == 2
    assert http("POST", url, False)[0] == 204
    assert client.create_producer(topic, producer_name="seq-holder-2").last_sequence_id() == -1
    client.close()


def _send_frame(seq: int, payload: bytes) -> bytes:
    md = pb.MessageMetadata(producer_name="raw-inflight", sequence_id=seq, publish_time=int(time.time() * 1000))
    cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq))
    return encode_payload_command(cmd, build_entry(md, payload))


def test_in_flight_duplicate_gets_send_error_then_receipt(sa, topic: str) -> None:
    assert http("POST", _dedup_url(sa, topic), True)[0] == 204
    raw = RawClient(sa.port)
    try:
        raw.connect()
        assert raw.producer(topic).type == T.PRODUCER_SUCCESS
        raw.send_bytes(_send_frame(7, b"first") + _send_frame(7, b"second"))   # one socket write
        first, second = raw.next_command(), raw.next_command()
        assert first.type == T.SEND_RECEIPT and first.send_receipt.message_id.entryId == 0
        assert second.type == T.SEND_ERROR and second.send_error.sequence_id == 7
        assert second.send_error.error == pb.ServiceNotReady
        raw.send_message(1, 7, b"third", producer_name="raw-inflight")
        third = raw.next_command()
        assert third.type == T.SEND_RECEIPT and third.send_receipt.message_id.ledgerId == 2**64 - 1
    finally:
        raw.close()
    assert _stored(sa, topic, 1) == [b"first"]


def test_oversize_message_without_chunking_is_refused_and_nothing_is_lost(sa, topic: str) -> None:
    client = make_client(sa.service_url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"before")
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (6 * 1024 * 1024))
    producer.send(b"after")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"before", b"after"]
    assert_no_more(consumer)
    client.close()


def test_switched_off_while_unloaded_starts_afresh_when_on_again(sa, topic: str) -> None:
    url = _dedup_url(sa, topic)
    assert http("POST", url, True)[0] == 204
    client = make_client(sa.service_url)
    producer = client.create_producer(topic, producer_name="afresh")
    for _ in range(3):
        producer.send(b"x")
    client.close()
    sa.restart()                                       # nobody has loaded the topic since
    assert http("POST", url, False)[0] == 204
    assert http("POST", url, True)[0] == 204
    client = make_client(sa.service_url)
    assert client.create_producer(topic, producer_name="afresh").last_sequence_id() == -1
    client.close()
