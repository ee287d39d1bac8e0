"""Compressed batches with the official client against a real standalone: LZ4, ZLIB, ZSTD and
SNAPPY batches pass through the broker untouched (it never decompresses) and arrive identical;
the stored bytes are the compressed ones."""

from __future__ import annotations

import pulsar
import pytest

from tests.acceptance.conftest import assert_no_more, receive_all
from tests.acceptance.test_admin import http

MESSAGES = 200


@pytest.mark.parametrize("codec", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_compressed_batches_pass_through(standalone, client: pulsar.Client, topic: str, codec: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, compression_type=getattr(pulsar.CompressionType, codec),
                                      batching_enabled=True, batching_max_messages=50,
                                      batching_max_publish_delay_ms=50)
    payloads = [(f"message {i:04d} ".encode() * 64)[:1000] for i in range(MESSAGES)]
    for payload in payloads:
        producer.send_async(payload, None)
    producer.flush()
    got = receive_all(consumer, MESSAGES)
    assert [m.data() for m in got] == payloads
    assert_no_more(consumer)
    stats = http("GET", f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")[1]
    assert stats["msgInCounter"] == MESSAGES
    assert stats["bytesInCounter"] < MESSAGES * 1000 // 4   # stored compressed, as sent
