"""Negative acks, ack timeout and redelivery counts, with the official client on a real standalone.

Shared and Key_Shared redeliveries carry a redelivery_count that goes up by one per nack or ack
timeout (docs/protocol.md §8.5), kept in the cursor so it survives a broker restart (clean or kill -9
after the cursor persisted). Exclusive/Failover redeliver by rewinding and, as in Pulsar, do not
count. Bad input: REDELIVER for unknown positions or unknown consumers is a no-op; a nack storm
loses and duplicates nothing beyond at-least-once.
"""

from __future__ import annotations

import sqlite3
import time

import pulsar
import pytest

from common.topic_names import parse_topic
from cursor.codec import decode
from ledger.ml_metadata import ml_path
from metadata.sql_schema import keys
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until
from wire.pulsar import CommandType as T

Shared = pulsar.ConsumerType.Shared
KeyShared = pulsar.ConsumerType.KeyShared
NACK_DELAY_MS = 200
FAST_CURSOR_PERSIST_ENV = {"STRATA_CURSOR_PERSIST_INTERVAL_MS": "100"}
PERSIST_DEADLINE_S = 30.0   # bound on the count reaching the store (persisted every 100 ms here)


def _persisted_counts(sa: StandaloneProcess, topic: str, subscription: str) -> list[int]:
    """The redelivery counts in the cursor as the metadata store holds it (the standalone's SQLite
    file, read-only: WAL readers take no lock), [] before the first persist."""
    path = f"{ml_path(parse_topic(topic).managed_ledger_name)}/cursors/{subscription}"
    db = sqlite3.connect(f"file:{sa.data_dir / 'metadata.db'}?mode=ro", uri=True, timeout=10)
    try:
        row = db.execute(f"SELECT value FROM {keys.name} WHERE path = ?", (path,)).fetchone()
    finally:
        db.close()
    return [] if row is None else sorted(decode(row[0]).redelivery_counts.values())


def _wait_until_count_persisted(sa: StandaloneProcess, topic: str, subscription: str, count: int) -> None:
    """Poll the store until the cursor persisted there carries redelivery count `count` (the
    broker had it when it sent the message with that count)."""
    wait_until(lambda: _persisted_counts(sa, topic, subscription) == [count], PERSIST_DEADLINE_S,
               what=f"redelivery count {count} persisted", interval_s=0.05)


@pytest.mark.parametrize("sub_type", [Shared, KeyShared], ids=["shared", "key_shared"])
def test_each_nack_increments_the_redelivery_count(client: pulsar.Client, topic: str, sub_type) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=sub_type,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
    producer = client.create_producer(topic)
    producer.send(b"a", partition_key="k1")
    producer.send(b"b", partition_key="k2")
    for expected in range(4):
        got = {}
        for msg in receive_all(consumer, 2, ack=False):
            got[msg.data()] = msg.redelivery_count()
            consumer.negative_acknowledge(msg)
        assert got == {b"a": expected, b"b": expected}
    final = receive_all(consumer, 2)
    assert {m.redelivery_count() for m in final} == {4}
    assert_no_more(consumer)


def test_ack_timeout_redelivers_with_a_count(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared, unacked_messages_timeout_ms=10_000)
    producer = client.create_producer(topic)
    producer.send(b"forgotten")
    producer.send(b"acked")
    first = receive_all(consumer, 2, ack=False)
    consumer.acknowledge(next(m for m in first if m.data() == b"acked"))
    started = time.monotonic()
    again = consumer.receive(20_000)
    assert again.data() == b"forgotten" and again.redelivery_count() == 1
    assert time.monotonic() - started >= 8.0
    consumer.acknowledge(again)
    assert_no_more(consumer)


def test_exclusive_nack_redelivers_without_counting(client: pulsar.Client, topic: str) -> None:
    """Pulsar tracks redelivery counts only for Shared and Key_Shared (docs/protocol.md §8.5)."""
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
    producer = client.create_producer(topic)
    producer.send(b"x")
    msg = consumer.receive(10_000)
    consumer.negative_acknowledge(msg)
    again = consumer.receive(10_000)
    assert again.data() == b"x" and again.redelivery_count() == 0
    consumer.acknowledge(again)


def test_nack_storm_is_bounded_and_loses_nothing(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=100,
                                negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50)
    count = 300
    for i in range(count):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    for round_ in range(3):
        seen = set()
        while len(seen) < count:
            msg = consumer.receive(15_000)
            if msg.redelivery_count() < round_:
                continue   # a duplicate from an earlier round (at-least-once): not nacked again
            seen.add(msg.data())
            consumer.negative_acknowledge(msg)
    done = set()
    while len(done) < count:
        msg = consumer.receive(15_000)
        consumer.acknowledge(msg)
        done.add(msg.data())
    assert done == {f"m{i}".encode() for i in range(count)}
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            consumer.acknowledge(consumer.receive(300))   # trailing duplicates, if any
        except pulsar.Timeout:
            break
    assert_no_more(consumer)


def test_redeliver_of_unknown_positions_and_consumers_is_a_no_op(standalone: StandaloneProcess,
                                                                  client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    producer.send(b"kept")
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        raw.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="sub", subType=pb.CommandSubscribe.Shared, consumer_id=1,
            request_id=1, consumer_name="raw")))
        assert raw.next_command().type == T.SUCCESS
        bogus = [pb.MessageIdData(ledgerId=2**63 - 5, entryId=7), pb.MessageIdData(ledgerId=0, entryId=0),
                 pb.MessageIdData(ledgerId=2**64 - 1, entryId=2**64 - 1)]
        for consumer_id in (1, 99):   # our consumer holds none of them; 99 does not exist
            raw.send(pb.BaseCommand(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                                    redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                                        consumer_id=consumer_id, message_ids=bogus)))
        raw.send(pb.BaseCommand(type=T.PING, ping=pb.CommandPing()))
        assert raw.next_command().type == T.PONG   # still served, nothing sent in between
    finally:
        raw.close()
    msg = consumer.receive(10_000)
    assert msg.data() == b"kept" and msg.redelivery_count() == 0
    consumer.acknowledge(msg)


def test_redelivery_count_survives_a_broker_crash(tmp_path) -> None:
    """The count lives in the cursor, persisted within cursor_persist_interval_ms: even a kill -9
    (no flush on close) keeps it, and MESSAGE carries it after the restart."""
    topic = "persistent://public/default/redelivery-restart"
    with StandaloneProcess.start(tmp_path / "data", env=FAST_CURSOR_PERSIST_ENV) as sa:
        client = make_client(sa.service_url)
        consumer = client.subscribe(topic, "sub", consumer_type=Shared,
                                    negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
        producer = client.create_producer(topic)
        producer.send(b"counted")
        for expected in range(3):
            msg = consumer.receive(10_000)
            assert msg.redelivery_count() == expected
            consumer.negative_acknowledge(msg)
        msg = consumer.receive(10_000)
        assert msg.redelivery_count() == 3
        _wait_until_count_persisted(sa, topic, "sub", 3)
        client.close()
        sa.restart(crash=True)
        client = make_client(sa.service_url)
        consumer = client.subscribe(topic, "sub", consumer_type=Shared,
                                    negative_ack_redelivery_delay_ms=NACK_DELAY_MS)
        msg = consumer.receive(10_000)
        assert msg.data() == b"counted" and msg.redelivery_count() == 3
        consumer.negative_acknowledge(msg)
        msg = consumer.receive(10_000)
        assert msg.redelivery_count() == 4   # counting goes on from the restored value
        consumer.acknowledge(msg)
        assert_no_more(consumer)
        client.close()
