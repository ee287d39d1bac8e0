"""Chunking with the official client against a real standalone: a 7 MiB message is split by the
client into chunks under max_message_size, each stored as its own entry with its own receipt,
and reassembled at the consumer; with dedup on, only the last chunk is checked; a chunk sequence
a producer abandons part-way (sent with the raw protocol client) blocks no other message."""

from __future__ import annotations

import os
import time

import pulsar
import pytest

from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, receive_all
from tests.acceptance.test_admin import http
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command

SEVEN_MIB = 7 * 1024 * 1024


def _dedup_url(sa, topic: str) -> str:
    return f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/deduplicationEnabled"


def _producer(client: pulsar.Client, topic: str, **kwargs) -> pulsar.Producer:
    return client.create_producer(topic, chunking_enabled=True, batching_enabled=False, **kwargs)


def test_seven_mib_message_is_chunked_and_reassembled(standalone, client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = _producer(client, topic)
    big = os.urandom(SEVEN_MIB)
    producer.send(big)
    producer.send(b"small")
    got = receive_all(consumer, 2, timeout_ms=30_000)
    assert got[0].data() == big
    assert got[1].data() == b"small"
    assert_no_more(consumer)
    stats = http("GET", f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")[1]
    assert stats["msgInCounter"] == 3                 # two chunks and the small message
    assert stats["bytesInCounter"] > SEVEN_MIB


def test_chunked_messages_count_once_for_dedup(standalone, client: pulsar.Client, topic: str) -> None:
    # The C++ client numbers a chunked message itself (an explicit sequence_id is ignored), so
    # the official client shows that a chunked message advances the high mark once, not per chunk.
    assert http("POST", _dedup_url(standalone, topic), True)[0] == 204
    consumer = client.subscribe(topic, "sub")
    producer = _producer(client, topic, producer_name="chunker")
    big = os.urandom(SEVEN_MIB)
    producer.send(big)
    producer.send(b"after")
    producer.close()
    assert _producer(client, topic, producer_name="chunker").last_sequence_id() == 1
    got = receive_all(consumer, 2, timeout_ms=30_000)
    assert got[0].data() == big and got[1].data() == b"after"
    assert_no_more(consumer)


def _send_chunk(raw: RawClient, seq: int, chunk_id: int, chunks: int, payload: bytes,
                producer_name: str = "raw-chunker") -> None:
    md = pb.MessageMetadata(producer_name=producer_name, sequence_id=seq, publish_time=int(time.time() * 1000),
                            uuid=f"{producer_name}-{seq}", chunk_id=chunk_id, num_chunks_from_msg=chunks,
                            total_chunk_msg_size=len(payload) * chunks)
    cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq, is_chunk=True))
    raw.send_bytes(encode_payload_command(cmd, build_entry(md, payload)))


def test_dedup_checks_only_the_last_chunk(standalone, topic: str) -> None:
    assert http("POST", _dedup_url(standalone, topic), True)[0] == 204
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        assert raw.producer(topic).type == T.PRODUCER_SUCCESS
        stored = []
        for _attempt in range(2):              # the same two-chunk message, sent twice
            for chunk_id in range(2):
                _send_chunk(raw, 5, chunk_id, 2, b"part%d" % chunk_id)
                receipt = raw.next_command()
                assert receipt.type == T.SEND_RECEIPT, receipt
                stored.append(receipt.send_receipt.message_id.entryId != 2**64 - 1)
        assert stored == [True, True, True, False]    # only the second last chunk is a duplicate
    finally:
        raw.close()


@pytest.mark.parametrize("sub_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Shared])
def test_chunks_of_a_partly_sent_message_do_not_block_others(standalone, client: pulsar.Client, topic: str,
                                                              sub_type: pulsar.ConsumerType) -> None:
    """A raw producer sends chunk 0 of a 3-chunk message and never the rest (it stays
    connected, as a stuck client would). Messages sent after it by the official client — a
    plain one and a chunked 5 MiB one — are delivered whole and in order; the partial message
    is never delivered."""
    consumer = client.subscribe(topic, "sub", consumer_type=sub_type)
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        assert raw.producer(topic).type == T.PRODUCER_SUCCESS
        _send_chunk(raw, 0, 0, 3, b"abandoned" * 1000, producer_name="raw-abandoner")
        receipt = raw.next_command()
        assert receipt.type == T.SEND_RECEIPT, receipt                # chunk 0 is stored...
        producer = _producer(client, topic)
        producer.send(b"complete")
        big = os.urandom(5 * 1024 * 1024 + 1)
        producer.send(big)
        got = receive_all(consumer, 2, timeout_ms=30_000)            # ...and blocks nothing
        assert got[0].data() == b"complete"
        assert got[1].data() == big
        assert_no_more(consumer, timeout_ms=2_000)                  # the partial one never comes
        stats = http("GET", f"{standalone.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")[1]
        assert stats["msgInCounter"] == 4      # the abandoned chunk, "complete", two chunks of `big`
    finally:
        raw.close()
