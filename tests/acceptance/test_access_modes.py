"""Producer access modes with the official client (pulsar-client 3.13.0, `access_mode=`) against a
real standalone (`broker.topics.access_modes`).

- Exclusive: a second Exclusive producer raises `pulsar.ProducerFenced`, a Shared one
  `pulsar.ProducerBusy`; once the first closes, another takes the topic. Stats show each
  publisher's `accessMode` (Pulsar's PublisherStats).
- WaitForExclusive: `create_producer` blocks while another producer holds the topic and returns
  once it closes; the new producer sends.
- ExclusiveWithFencing: takes the topic from an exclusive producer, whose next sends fail with
  `pulsar.ProducerFenced`; the consumer sees the old producer's messages, then the new one's.
- Fencing an exclusive producer in the middle of a burst of async sends: every send it was told
  succeeded is stored, every one it was told failed (ProducerFenced) is not, and nothing of it
  is stored after the new holder's first message.
- An exclusive producer keeps the topic across an unload (it comes back with its topic epoch,
  read again from the managed ledger's record, and is not fenced).
"""

from __future__ import annotations

import threading

import pulsar
import pytest

from tests.acceptance.conftest import make_client, receive_all
from tests.support.admin_http import admin_call, topic_get
from tests.support.waiting import wait_until

Mode = pulsar.ProducerAccessMode


def test_exclusive_refuses_others_until_it_closes(standalone, client: pulsar.Client, topic: str) -> None:
    first = client.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    first.send(b"one")
    assert [p["accessMode"] for p in topic_get(standalone.admin_url, topic, "stats")["publishers"]] == ["Exclusive"]
    first.close()
    second = client.create_producer(topic, access_mode=Mode.Exclusive)
    second.send(b"two")
    second.close()


def test_wait_for_exclusive_gets_the_topic_when_the_holder_closes(standalone, client: pulsar.Client,
                                                                  topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    holder = client.create_producer(topic, access_mode=Mode.Exclusive)
    got: list = []

    def wait_for_it() -> None:
        producer = client.create_producer(topic, access_mode=Mode.WaitForExclusive)
        producer.send(b"from the waiter")
        got.append(producer)
    waiter = threading.Thread(target=wait_for_it, daemon=True)
    waiter.start()
    waiter.join(1.5)
    assert waiter.is_alive() and not got, "the waiter should be queued while the holder is there"
    holder.send(b"from the holder")
    holder.close()
    waiter.join(20)
    assert got, "the waiter never got the topic"
    assert [m.data() for m in receive_all(consumer, 2)] == [b"from the holder", b"from the waiter"]
    got[0].close()


def test_fencing_takes_the_topic_and_the_old_producer_is_fenced(standalone, client: pulsar.Client,
                                                                topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    old = client.create_producer(topic, access_mode=Mode.Exclusive, send_timeout_millis=5_000)
    old.send(b"old")
    new = client.create_producer(topic, access_mode=Mode.ExclusiveWithFencing)
    new.send(b"new")

    def old_fenced() -> bool:
        try:
            old.send(b"after the fence")
        except pulsar.ProducerFenced:
            return True
        except pulsar.Timeout:       # sent while it was reconnecting: try again
            return False
        return False
    wait_until(old_fenced, 20, what="the fenced producer's send refused with ProducerFenced")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"old", b"new"]
    new.send(b"still the holder")
    assert receive_all(consumer, 1)[0].data() == b"still the holder"


def test_an_exclusive_producer_keeps_the_topic_across_an_unload(standalone, client: pulsar.Client,
                                                                topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, access_mode=Mode.Exclusive)
    producer.send(b"before")
    status, _ = admin_call(standalone.admin_url, "PUT", f"/admin/v2/persistent/{topic.split('://', 1)[1]}/unload")
    assert status in (200, 204)
    producer.send(b"after")                 # reconnects with its epoch: the same, not fenced
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic, access_mode=Mode.Exclusive)
    assert [m.data() for m in receive_all(consumer, 2)] == [b"before", b"after"]


def test_fencing_during_a_burst_keeps_receipts_true_and_stores_nothing_after_the_fence(
        standalone, client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    old = client.create_producer(topic, access_mode=Mode.Exclusive, batching_enabled=False,
                                 send_timeout_millis=10_000, max_pending_messages=5_000)
    results: list[str] = []
    lock = threading.Lock()

    def done(result, _msg_id) -> None:
        with lock:
            results.append(str(result))
    fencer_client = make_client(standalone.service_url)
    try:
        for i in range(3_000):
            old.send_async(b"old-%d" % i, done)
            if i == 300:
                fencing = threading.Thread(target=lambda: fencer_client.create_producer(
                    topic, access_mode=Mode.ExclusiveWithFencing, batching_enabled=False).send(b"new"))
                fencing.start()
        fencing.join(20)
        wait_until(lambda: len(results) == 3_000, 30, what="every async send answered")
    finally:
        fencer_client.close()
    stored = []
    while True:
        try:
            msg = consumer.receive(1_000)
        except pulsar.Timeout:
            break
        consumer.acknowledge(msg)
        stored.append(msg.data())
    assert b"new" in stored
    assert not any(m.startswith(b"old") for m in stored[stored.index(b"new"):]), "stored after the fence"
    assert set(results) <= {"Result.Ok", "Result.ProducerFenced"}, set(results)
    assert results.count("Result.Ok") == sum(1 for m in stored if m.startswith(b"old"))
