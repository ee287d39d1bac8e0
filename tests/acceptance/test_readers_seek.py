"""Readers (non-durable subscriptions) and seek, with the official client."""

from __future__ import annotations

import time

import pulsar

from admin_client import request_json
from tests.acceptance.conftest import assert_no_more, receive_all


def _produce(client: pulsar.Client, topic: str, count: int) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(count)]
    producer.close()
    return ids


def _read(reader: pulsar.Reader, count: int) -> list[bytes]:
    return [reader.read_next(10_000).data() for _ in range(count)]


def test_reader_from_earliest_reads_everything(client: pulsar.Client, topic: str) -> None:
    _produce(client, topic, 5)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert _read(reader, 5) == [f"m{i}".encode() for i in range(5)]
    assert not reader.has_message_available()
    reader.close()


def test_reader_from_latest_reads_only_new(client: pulsar.Client, topic: str) -> None:
    _produce(client, topic, 3)
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    producer = client.create_producer(topic)
    producer.send(b"new")
    assert _read(reader, 1) == [b"new"]
    reader.close()


def test_reader_from_message_id_exclusive_and_inclusive(client: pulsar.Client, topic: str) -> None:
    ids = _produce(client, topic, 6)
    after = client.create_reader(topic, ids[2])
    assert _read(after, 3) == [b"m3", b"m4", b"m5"]
    inclusive = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert _read(inclusive, 4) == [b"m2", b"m3", b"m4", b"m5"]
    after.close()
    inclusive.close()


def test_readers_leave_no_subscription_behind(standalone, client: pulsar.Client, topic: str) -> None:
    _produce(client, topic, 2)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    _read(reader, 2)
    reader.close()
    local = topic.split("://", 1)[1]
    deadline = time.monotonic() + 5
    while True:
        stats = request_json("GET", f"{standalone.admin_url}/admin/v2/persistent/{local}/stats")
        if not stats["subscriptions"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert stats["subscriptions"] == {}


def test_seek_by_message_id_replays_from_there(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    ids = _produce(client, topic, 10)
    receive_all(consumer, 10)
    consumer.seek(ids[4])
    got = receive_all(consumer, 5)
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(5, 10)]
    assert_no_more(consumer)


def test_seek_to_earliest_and_by_time(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    _produce(client, topic, 4)
    # Not a wait: publish times are the client's wall clock in ms, so the boundary needs a gap on
    # both sides (a sleep is never shorter than asked, however loaded the machine).
    time.sleep(0.05)
    boundary_ms = int(time.time() * 1000)
    time.sleep(0.05)
    producer = client.create_producer(topic)
    for i in range(4, 8):
        producer.send(f"m{i}".encode())
    receive_all(consumer, 8)
    consumer.seek(boundary_ms)
    assert [m.data() for m in receive_all(consumer, 4)] == [f"m{i}".encode() for i in range(4, 8)]
    consumer.seek(pulsar.MessageId.earliest)
    assert [m.data() for m in receive_all(consumer, 8)] == [f"m{i}".encode() for i in range(8)]
    assert_no_more(consumer)


def test_has_message_available_on_empty_topic(client: pulsar.Client, topic: str) -> None:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert not reader.has_message_available()
    _produce(client, topic, 1)
    assert reader.has_message_available()
    assert _read(reader, 1) == [b"m0"]


def test_has_message_available_stays_true_inside_the_last_batch(client: pulsar.Client, topic: str) -> None:
    """GET_LAST_MESSAGE_ID names the last batch's last member (as Pulsar does), so a reader that
    has read only part of the last batch still has messages available."""
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=20,
                                      batching_max_publish_delay_ms=1000)
    for i in range(20):
        producer.send_async(b"m%d" % i, None)
    producer.flush()
    consumer = client.subscribe(topic, "last-id")
    last = consumer.get_last_message_id()
    assert (last.entry_id(), last.batch_index()) == (0, 19), "the last member of the last batch"
    consumer.close()
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(timeout_millis=5000).data())
    assert got == [b"m%d" % i for i in range(20)]
    reader.close()
