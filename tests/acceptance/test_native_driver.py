"""The native perf driver speaks the protocol the way the official client does.

- What the native producer writes (no compression and LZ4; keys, properties, event times; plain
  fast-path batches) is read back by the official `pulsar` consumer payload-identical, in order.
- The fast-path batch encoder is byte-identical to entries.batch's builder (the official client's
  bytes) for every compression and across varint-length boundaries of the sequence id.
- The native consumer reads what the official producer wrote, counts members and decodes them.
"""

from __future__ import annotations

import asyncio
import os

import pulsar
import pytest

from entries.batch import LZ4, NONE, ZLIB, ZSTD, BatchMessage, build_batch
from perf.native_client import EARLIEST, NativeClient, PlainBatchEncoder, batch_sizes
from tests.acceptance.conftest import assert_no_more
from wire.pulsar import encode_send

COMPRESSIONS = {"none": NONE, "lz4": LZ4}


def _messages(batch: int, count: int) -> list[BatchMessage]:
    return [BatchMessage(payload=f"b{batch}-m{i}-".encode() * (i % 7 + 1),
                         properties={"batch": str(batch), "index": str(i)},
                         partition_key=f"key-{batch}-{i}", event_time_ms=1_700_000_000_000 + i)
            for i in range(count)]


async def _produce(service_url: str, topic: str, compression: int) -> tuple[list[BatchMessage], bytes]:
    client = NativeClient(service_url)
    try:
        [producer] = await client.create_producers(topic)
        sent: list[BatchMessage] = []
        receipts = []
        for batch in range(5):  # keyed batches through the general path
            msgs = _messages(batch, 40 + batch)
            receipts.append(await producer.send_batch(msgs, compression=compression))
            sent.extend(msgs)
        plain = os.urandom(1024)
        encoder = PlainBatchEncoder(plain, producer.producer_name, compression)
        for _ in range(3):  # perf fast path: full 1 KiB batches
            receipts.append(await producer.send_plain(encoder, batch_sizes(1024), want_future=True))
        await producer.flush()
        positions = [(r.result().ledger_id, r.result().entry_id) for r in receipts]
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        await producer.close()
        return sent, plain
    finally:
        await client.close()


@pytest.mark.parametrize("compression", sorted(COMPRESSIONS))
def test_official_consumer_reads_native_batches(client: pulsar.Client, standalone, topic: str,
                                                compression: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Exclusive,
                                receiver_queue_size=2000)
    sent, plain = asyncio.run(_produce(standalone.service_url, topic, COMPRESSIONS[compression]))
    for expected in sent:
        msg = consumer.receive(10_000)
        assert msg.data() == expected.payload
        assert msg.partition_key() == expected.partition_key
        assert msg.properties() == expected.properties
        assert msg.event_timestamp() == expected.event_time_ms
        consumer.acknowledge(msg)
    for _ in range(3 * batch_sizes(1024)):
        msg = consumer.receive(10_000)
        assert msg.data() == plain and msg.properties() == {} and msg.partition_key() == ""
        consumer.acknowledge(msg)
    assert_no_more(consumer)


@pytest.mark.parametrize("compression", [NONE, LZ4, ZSTD, ZLIB])
def test_fast_batch_encoder_is_byte_identical_to_the_client_builder(compression: int) -> None:
    payload = os.urandom(300)
    encoder = PlainBatchEncoder(payload, "standalone-0-7", compression)
    for first in (0, 1, 126, 127, 128, 16_383, 16_384, 2**21 - 3, 2**35, 2**63 - 10):
        count = 9
        md, body = build_batch([BatchMessage(payload) for _ in range(count)], producer_name="standalone-0-7",
                               sequence_id=first, publish_time_ms=1_700_000_000_123, compression=compression)
        assert encoder.frame(4, first, count, 1_700_000_000_123) == encode_send(4, first, count, md, body)
    sizes = [0, 1, 127, 128, 300, 20_000]
    payloads = [os.urandom(n) for n in sizes]
    md, body = build_batch([BatchMessage(p) for p in payloads], producer_name="standalone-0-7",
                           sequence_id=16_380, publish_time_ms=5, compression=compression)
    assert encoder.frame_of(4, 16_380, payloads, 5) == encode_send(4, 16_380, len(payloads), md, body)


def test_batch_sizes_follow_the_client_limits() -> None:
    assert batch_sizes(1024) == 128  # 128 KiB of payload
    assert batch_sizes(10) == 1000  # 1,000 messages
    assert batch_sizes(200 * 1024) == 1  # one oversize message still goes alone


async def _consume(service_url: str, topic: str, count: int) -> list[bytes]:
    client = NativeClient(service_url)
    try:
        [consumer] = await client.subscribe(topic, "native", initial_position=EARLIEST)
        out: list[bytes] = []
        while len(out) < count:
            entries = await consumer.receive_entries(timeout_s=10)
            assert entries, "no MESSAGE within 10 s"
            for entry in entries:
                members = entry.messages()
                assert len(members) == entry.num_messages
                out.extend(m.payload for m in members)
                consumer.ack(entry)
        assert await consumer.receive_entries(timeout_s=0.5) == []
        await consumer.close()
        return out
    finally:
        await client.close()


def test_native_consumer_reads_official_batches(client: pulsar.Client, standalone, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      block_if_queue_full=True,
                                      batching_max_publish_delay_ms=5,
                                      compression_type=pulsar.CompressionType.LZ4)
    payloads = [f"official-{i}".encode() for i in range(1500)]
    for payload in payloads:
        producer.send_async(payload, None)
    producer.flush()
    assert asyncio.run(_consume(standalone.service_url, topic, len(payloads))) == payloads
