"""Seek by message id and by publish time, for consumers and readers, inclusive and exclusive
(docs/protocol.md §8.8), with the official client on a real standalone. Complements
test_readers_seek.py (which covers the basic consumer seeks).

Seek past the end is not an error: the subscription is positioned at the end, nothing stored is
lost, and messages produced afterwards arrive.
"""

from __future__ import annotations

import time

import pulsar
import pytest

from tests.acceptance.conftest import assert_no_more, receive_all

Shared = pulsar.ConsumerType.Shared


def _produce(client: pulsar.Client, topic: str, count: int, start: int = 0) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(start, start + count)]
    producer.close()
    return ids


def _payloads(msgs) -> list[bytes]:
    return [m.data() for m in msgs]


def _names(first: int, last: int) -> list[bytes]:
    return [f"m{i}".encode() for i in range(first, last)]


def test_consumer_seek_by_id_inclusive_starts_at_the_id(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest,
                                start_message_id_inclusive=True)
    ids = _produce(client, topic, 6)
    receive_all(consumer, 6)
    consumer.seek(ids[3])
    assert _payloads(receive_all(consumer, 3)) == _names(3, 6)
    assert_no_more(consumer)


def test_shared_seek_disconnects_every_consumer_and_forgets_later_acks(client: pulsar.Client, topic: str) -> None:
    c1 = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=5)
    c2 = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=5)
    ids = _produce(client, topic, 10)
    got = []
    for consumer in (c1, c2):
        try:
            while True:
                msg = consumer.receive(500)
                consumer.acknowledge(msg)
                got.append(msg.data())
        except pulsar.Timeout:
            pass
    assert sorted(got) == sorted(_names(0, 10))
    c1.seek(ids[4])   # exclusive by default: resumes after m4; acks of m5..m9 are forgotten
    again = []
    deadline = time.monotonic() + 15
    while len(again) < 5 and time.monotonic() < deadline:
        for consumer in (c1, c2):
            try:
                msg = consumer.receive(200)
                consumer.acknowledge(msg)
                again.append(msg.data())
            except pulsar.Timeout:
                pass
    assert sorted(again) == sorted(_names(5, 10))


def test_reader_seek_by_id_and_by_time(client: pulsar.Client, topic: str) -> None:
    ids = _produce(client, topic, 4)
    # Not a wait: publish times are the client's wall clock in ms, so the boundary needs a gap on
    # both sides (a sleep is never shorter than asked, however loaded the machine).
    time.sleep(0.05)
    boundary_ms = int(time.time() * 1000)
    time.sleep(0.05)
    _produce(client, topic, 4, start=4)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(10_000).data() for _ in range(8)] == _names(0, 8)
    reader.seek(ids[1])                      # exclusive: after m1
    assert [reader.read_next(10_000).data() for _ in range(6)] == _names(2, 8)
    reader.seek(boundary_ms)                 # by publish time: first at or after the boundary
    assert [reader.read_next(10_000).data() for _ in range(4)] == _names(4, 8)
    reader.close()
    inclusive = client.create_reader(topic, pulsar.MessageId.latest, start_message_id_inclusive=True)
    inclusive.seek(ids[2])
    assert [inclusive.read_next(10_000).data() for _ in range(6)] == _names(2, 8)
    inclusive.close()


def test_seek_past_the_end_is_refused_and_loses_nothing(client: pulsar.Client, topic: str) -> None:
    """A message id after the last message names no message: the seek fails with a clear error
    and nothing moves. A publish time after the last message is Pulsar's way to say "the end"."""
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    ids = _produce(client, topic, 3)
    receive_all(consumer, 2)                 # m2 delivered but not acked
    consumer.receive(10_000)
    last = ids[-1]
    for beyond in (pulsar.MessageId(last.partition(), last.ledger_id() + 1_000, 5, -1),
                   pulsar.MessageId(last.partition(), last.ledger_id(), last.entry_id() + 1, -1)):
        with pytest.raises(pulsar.PulsarException) as refused:
            consumer.seek(beyond)
        assert "NotAllowed" in type(refused.value).__name__ or "not allowed" in str(refused.value).lower()
    _produce(client, topic, 2, start=3)
    assert _payloads(receive_all(consumer, 2)) == _names(3, 5)   # the consumer carried on
    consumer.seek(int(time.time() * 1000) + 3_600_000)   # a publish time in the future: the end
    assert_no_more(consumer)
    consumer.seek(pulsar.MessageId.earliest)             # nothing was deleted by those seeks
    assert _payloads(receive_all(consumer, 5)) == _names(0, 5)
    assert_no_more(consumer)


def test_seek_to_latest_skips_the_backlog(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    _produce(client, topic, 5)
    consumer.seek(pulsar.MessageId.latest)
    assert_no_more(consumer)
    _produce(client, topic, 1, start=5)
    assert _payloads(receive_all(consumer, 1)) == [b"m5"]
