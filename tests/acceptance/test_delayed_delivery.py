"""Delayed delivery (deliver_at / deliver_after) with the official client against a real standalone.

Shared and Key_Shared hold a delayed message until its deliver_at (never early, within about a
second after); messages that are not delayed are never held back by delayed ones; Exclusive and
Failover deliver at once (Pulsar semantics); a deliver_at in the past or negative means "now".
The module's standalone has a small delayed index (20 entries) so overflow can be seen; the
restart test runs its own standalone.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pulsar
import pytest

from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command

Shared = pulsar.ConsumerType.Shared
KeyShared = pulsar.ConsumerType.KeyShared
INDEX_ENTRIES_MAX = 20
LATE_MS_MAX = 1_500   # "about 1 s": tick 200 ms plus slack for a busy 2-core machine (measured: 1-106 ms)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("standalone") / "data"
    env = {"STRATA_BROKER_DELAYED_DELIVERY_ENTRIES_MAX": str(INDEX_ENTRIES_MAX)}
    with StandaloneProcess.start(data_dir, env=env) as sa:
        yield sa


def now_ms() -> int:
    return int(time.time() * 1000)


def receive_timed(consumer: pulsar.Consumer, count: int, timeout_ms: int = 15_000) -> list[tuple[bytes, int]]:
    """(payload, wall ms at receipt) for `count` messages, each acked."""
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_ms)
        out.append((msg.data(), now_ms()))
        consumer.acknowledge(msg)
    return out


def check_on_time(received: list[tuple[bytes, int]], due: dict[bytes, int]) -> None:
    for payload, at in received:
        if payload in due:
            assert at >= due[payload], f"{payload!r} came {due[payload] - at} ms early"
            assert at - due[payload] <= LATE_MS_MAX, f"{payload!r} came {at - due[payload]} ms late"


@pytest.mark.parametrize("sub_type", [Shared, KeyShared], ids=["shared", "key_shared"])
def test_delayed_never_early_on_time_and_do_not_hold_back_others(client: pulsar.Client, topic: str,
                                                                 sub_type) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=sub_type)
    producer = client.create_producer(topic)
    start = now_ms()
    due: dict[bytes, int] = {}
    for i in range(3):
        at = start + 1_500 + 500 * i
        payload = f"late-{i}".encode()
        producer.send(payload, deliver_at=at, partition_key="same-key")
        due[payload] = at
        producer.send(f"now-{i}".encode(), partition_key="same-key")
    first = receive_timed(consumer, 3)
    assert [p for p, _ in first] == [b"now-0", b"now-1", b"now-2"]
    assert all(at < start + 1_500 for _, at in first), "immediate messages waited for delayed ones"
    late = receive_timed(consumer, 3)
    assert [p for p, _ in late] == [b"late-0", b"late-1", b"late-2"]
    check_on_time(late, due)
    assert_no_more(consumer)


def test_deliver_after_is_relative_to_send_time(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    sent = now_ms()
    producer.send(b"after", deliver_after=timedelta(seconds=1))
    [(payload, at)] = receive_timed(consumer, 1)
    assert payload == b"after"
    assert 1_000 <= at - sent <= 1_000 + LATE_MS_MAX


@pytest.mark.parametrize("sub_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover],
                         ids=["exclusive", "failover"])
def test_exclusive_and_failover_deliver_at_once(client: pulsar.Client, topic: str, sub_type) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=sub_type)
    producer = client.create_producer(topic)
    producer.send(b"delayed-but-exclusive", deliver_after=timedelta(seconds=60))
    producer.send(b"plain")
    got = receive_timed(consumer, 2, timeout_ms=5_000)
    assert [p for p, _ in got] == [b"delayed-but-exclusive", b"plain"]


def test_past_deliver_at_means_now_and_a_negative_one_is_refused(standalone: StandaloneProcess,
                                                                  client: pulsar.Client, topic: str) -> None:
    """A deliver_at in the past is not an error: the message is delivered at once (Pulsar). A
    negative deliver_after is just that: the client turns it into a deliver_at in the past. A
    negative deliver_at_time on the wire is no time at all (the official client refuses to send
    one): SEND_ERROR, nothing stored, and the producer goes on."""
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    producer.send(b"past", deliver_at=now_ms() - 60_000)
    producer.send(b"negative-after", deliver_after=timedelta(seconds=-5))
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        assert raw.producer(topic, producer_id=7).type == T.PRODUCER_SUCCESS
        for seq, (at, payload) in enumerate([(-5_000, b"negative-at"), (now_ms(), b"after-refusal")]):
            md = pb.MessageMetadata(producer_name="raw-neg", sequence_id=seq, publish_time=now_ms(),
                                    deliver_at_time=at)
            cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=7, sequence_id=seq))
            raw.send_bytes(encode_payload_command(cmd, build_entry(md, payload)))
        refused, stored = raw.next_command(), raw.next_command()
        assert refused.type == T.SEND_ERROR and refused.send_error.sequence_id == 0
        assert refused.send_error.error == pb.NotAllowedError
        assert "negative" in refused.send_error.message
        assert stored.type == T.SEND_RECEIPT and stored.send_receipt.sequence_id == 1
    finally:
        raw.close()
    start = now_ms()
    got = receive_timed(consumer, 3, timeout_ms=5_000)
    assert sorted(p for p, _ in got) == [b"after-refusal", b"negative-after", b"past"]
    assert all(at - start < 1_000 for _, at in got)
    assert_no_more(consumer)


def test_a_full_index_holds_back_nothing_and_loses_nothing(client: pulsar.Client, topic: str) -> None:
    """More delayed messages than the index holds: the plain ones behind them come at once; the
    delayed ones that did not fit are found again in storage and come on time, each once."""
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    start = now_ms()
    due = {}
    for i in range(INDEX_ENTRIES_MAX + 10):
        payload = f"d{i}".encode()
        due[payload] = start + 3_000 - 50 * (i % 10)   # the overflowed ones are not due last
        producer.send(payload, deliver_at=due[payload])
    plain = [f"n{i}".encode() for i in range(5)]
    for payload in plain:
        producer.send(payload)
    first = receive_timed(consumer, len(plain))
    assert [p for p, _ in first] == plain
    assert all(at < min(due.values()) for _, at in first), "plain messages waited for the full index"
    got = receive_timed(consumer, len(due))
    assert sorted(p for p, _ in got) == sorted(due)
    check_on_time(got, due)
    assert_no_more(consumer)


def test_nacked_delayed_message_comes_back_without_a_new_delay(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared, negative_ack_redelivery_delay_ms=200)
    producer = client.create_producer(topic)
    at = now_ms() + 1_000
    producer.send(b"once-delayed", deliver_at=at)
    msg = consumer.receive(10_000)
    assert now_ms() >= at
    consumer.negative_acknowledge(msg)
    again = consumer.receive(5_000)
    assert again.data() == b"once-delayed" and again.redelivery_count() == 1
    consumer.acknowledge(again)


def test_restart_keeps_pending_delayed_messages_delayed(tmp_path) -> None:
    """apache/pulsar#20638: after a broker restart the index is rebuilt from the stored entries
    (rescan from mark-delete), so pending delayed messages still wait for their own due times."""
    with StandaloneProcess.start(tmp_path / "data") as sa:
        topic = "persistent://public/default/delayed-restart"
        client = make_client(sa.service_url)
        consumer = client.subscribe(topic, "sub", consumer_type=Shared)
        producer = client.create_producer(topic)
        start = now_ms()
        due = {b"d-early": start + 9_000, b"d-late": start + 13_000}
        producer.send(b"d-late", deliver_at=due[b"d-late"])
        producer.send(b"d-early", deliver_at=due[b"d-early"])
        for i in range(3):
            producer.send(f"n{i}".encode())
        assert sorted(p for p, _ in receive_timed(consumer, 3)) == [b"n0", b"n1", b"n2"]
        client.close()
        sa.restart()
        client = make_client(sa.service_url)
        consumer = client.subscribe(topic, "sub", consumer_type=Shared)
        subscribed = now_ms()
        got = receive_timed(consumer, 2, timeout_ms=20_000)
        assert [p for p, _ in got] == [b"d-early", b"d-late"]
        for payload, at in got:
            assert at >= due[payload], f"{payload!r} released early after restart"
            assert at - max(due[payload], subscribed) <= LATE_MS_MAX, f"{payload!r} late after restart"
        assert subscribed < due[b"d-late"] - 1_000, "restart too slow for this test to mean anything"
        assert got[1][1] - got[0][1] >= 3_000, "restart released the delayed messages at once"
        assert_no_more(consumer)
        client.close()
