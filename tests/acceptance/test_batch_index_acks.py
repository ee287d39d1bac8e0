"""Batch-index acks (docs/protocol.md §7): the acked members of a partly acked batch never come back.

The broker always keeps batch-index acks (on by default; nothing to switch on): a consumer with
`batch_index_ack_enabled=True` sends ack_set bitmaps, the cursor merges and persists them, and
every MESSAGE for that entry carries the remaining set so the client skips acked members — after
a reconnect, a nack, a seek-free redelivery to another consumer, and a broker restart.
"""

from __future__ import annotations

import pulsar
import pytest

from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.support.standalone_proc import StandaloneProcess

Shared = pulsar.ConsumerType.Shared
BATCH = 6


def _produce_one_batch(client: pulsar.Client, topic: str, count: int = BATCH) -> None:
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=count,
                                      batching_max_publish_delay_ms=1_000)
    for i in range(count):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    producer.close()


def _subscribe(client: pulsar.Client, topic: str, **kwargs) -> pulsar.Consumer:
    kwargs.setdefault("consumer_type", Shared)
    return client.subscribe(topic, "sub", batch_index_ack_enabled=True,
                            initial_position=pulsar.InitialPosition.Earliest, **kwargs)


def _ack_even_members(consumer: pulsar.Consumer) -> list[pulsar.Message]:
    got = receive_all(consumer, BATCH, ack=False)
    assert [m.data() for m in got] == [f"b{i}".encode() for i in range(BATCH)]
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in got}) == 1, "one entry"
    for msg in got[0::2]:
        consumer.acknowledge(msg)
    return got


@pytest.mark.parametrize("sub_type", [Shared, pulsar.ConsumerType.Exclusive], ids=["shared", "exclusive"])
def test_reopen_gets_only_the_unacked_members(client: pulsar.Client, topic: str, sub_type) -> None:
    consumer = _subscribe(client, topic, consumer_type=sub_type)
    _produce_one_batch(client, topic)
    _ack_even_members(consumer)
    consumer.close()                        # flushes the grouped acks
    consumer = _subscribe(client, topic, consumer_type=sub_type)
    assert [m.data() for m in receive_all(consumer, 3)] == [b"b1", b"b3", b"b5"]
    assert_no_more(consumer)
    consumer.close()
    consumer = _subscribe(client, topic, consumer_type=sub_type)
    assert_no_more(consumer)                # the whole entry is acked now


def test_nack_redelivers_only_the_unacked_members(client: pulsar.Client, topic: str) -> None:
    consumer = _subscribe(client, topic, negative_ack_redelivery_delay_ms=200)
    _produce_one_batch(client, topic)
    got = _ack_even_members(consumer)
    consumer.negative_acknowledge(got[1])
    again = receive_all(consumer, 3)
    assert [m.data() for m in again] == [b"b1", b"b3", b"b5"]
    assert all(m.redelivery_count() == 1 for m in again)
    assert_no_more(consumer)


def test_closing_consumer_hands_only_unacked_members_to_another(client: pulsar.Client, topic: str) -> None:
    first = _subscribe(client, topic)
    _produce_one_batch(client, topic)
    _ack_even_members(first)
    second = _subscribe(client, topic)
    first.close()
    assert [m.data() for m in receive_all(second, 3)] == [b"b1", b"b3", b"b5"]
    assert_no_more(second)


def test_partly_acked_batch_survives_restart(tmp_path) -> None:
    topic = "persistent://public/default/batch-index-restart"
    with StandaloneProcess.start(tmp_path / "data") as sa:
        client = make_client(sa.service_url)
        consumer = _subscribe(client, topic)
        _produce_one_batch(client, topic)
        _ack_even_members(consumer)
        client.close()
        sa.restart()
        client = make_client(sa.service_url)
        consumer = _subscribe(client, topic)
        assert [m.data() for m in receive_all(consumer, 3)] == [b"b1", b"b3", b"b5"]
        assert_no_more(consumer)
        client.close()
