"""Bad input to chunking, dead-letter topics, batch-index acks and compression (issue 7 item 10),
against a real standalone: the official pulsar-client where it can make the bad case, the raw
protocol client where only a misbehaving client could. Whatever comes in, the broker must not
crash, must not lose or block the well-formed messages around it, and must never move
mark-delete past an unacked message.

What the broker does, and what the official consumer (pulsar-client 3.13.0) does with what is
stored, as observed here (the consumer's reactions were checked one by one in a separate
process, since some of them crash it):

- Chunks whose metadata lies are refused before they are stored (SEND_ERROR NotAllowed, the
  producer stays usable; `broker.topics.chunk_check`): num_chunks_from_msg < 1 (the consumer would
  deliver the lone chunk as a whole message), chunk_id outside [0, num_chunks) (it would keep it
  as an ack hole), a chunk larger than its total, and within one producer session a gap, a
  repeat, a changed num_chunks/total, and chunks adding up past their total (the consumer copies
  chunks into a total-sized buffer unchecked: SIGSEGV) or short of it. A refused chunk does not
  count, so the producer can send the right one and the message completes. A gap across a
  reconnect cannot be seen by the session and is stored: the consumer drops that message and
  leaves its chunks unacked (as it would with Pulsar); later messages flow. A chunk over the max
  message size gets SEND_ERROR, or, past the frame limit, the connection is closed.
- Garbage under LZ4/ZLIB/ZSTD/SNAPPY is stored as sent (the broker never decompresses); the
  consumer logs "Failed to decompress", acks it with validation_error (the broker takes that as
  an ack) and goes on. (With LZ4 garbage and an uncompressed_size of about 1 MB or more the
  3.13.0 consumer crashes instead — a client bug the broker cannot see without decompressing.)
  An unknown compression value is refused: the consumer would hand the raw bytes over as if
  uncompressed.
- A dead-letter topic that cannot exist (bad name; the default `<topic>-<sub>-DLQ` over the name
  limit): PARTITIONED_METADATA and PRODUCER answer InvalidTopicName with the reason; the client
  retries the lookup until its operation timeout, logs "Dead letter producer create exception"
  and keeps the message unacked (no longer redelivered to that consumer), so it goes back to the
  subscription when the consumer closes. max_redeliver_count 0 or negative is refused by the
  client itself (ValueError); nothing reaches the broker.
- Batch-index acks that lie (a batch_size other than the entry's, an ack_set longer than the
  batch, empty, on a non-batch entry, on an entry never delivered or past the end, on an entry
  already acked, a batch_size out of range) never take members the client did not ack and never
  hide members it did not ack; a refused id does not stop the others in the same ACK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pulsar
import pytest

from broker.topics.producer import ENTRY_HEADER_SLACK_BYTES
from common.errors import PulsarServerError
from common.topic_names import NAME_BYTES_MAX
from entries.batch import LZ4, SNAPPY, ZLIB, ZSTD, BatchMessage, build_batch
from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import assert_no_more, make_client, receive_all
from tests.acceptance.test_admin import http
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command, encode_send

Shared = pulsar.ConsumerType.Shared
WAIT_S = 20.0


def _now_ms() -> int:
    return int(time.time() * 1000)


def _stats(sa, topic: str) -> dict:
    return http("GET", f"{sa.admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")[1]


def _poll(what, expected, deadline_s: float = WAIT_S):
    """Poll `what()` until it equals `expected` (acks and stats move asynchronously)."""
    seen = None
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        seen = what()
        if seen == expected:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"still {seen!r}, expected {expected!r}")


def _backlog(sa, topic: str, sub: str = "sub") -> int:
    return _stats(sa, topic)["subscriptions"][sub]["msgBacklog"]


class _Wire:
    """A raw protocol connection that keeps what it has read but not yet asked for."""

    def __init__(self, port: int) -> None:
        self.raw = RawClient(port, timeout_s=WAIT_S)
        self.connected = self.raw.connect().connected
        self.seen: list[pb.BaseCommand] = []

    def wait_for(self, match) -> pb.BaseCommand:
        while True:
            for cmd in self.seen:
                if match(cmd):
                    self.seen.remove(cmd)
                    return cmd
            self.seen.append(self.raw.next_command())

    def producer(self, topic: str) -> None:
        assert self.raw.producer(topic).type == T.PRODUCER_SUCCESS

    def close(self) -> None:
        self.raw.close()


# --- chunking -------------------------------------------------------------------------------------

def _send_chunk(wire: _Wire, seq: int, chunk_id: int, chunks: int, payload: bytes, total: int,
                uuid: str = "raw-1", with_uuid: bool = True) -> pb.BaseCommand:
    md = pb.MessageMetadata(producer_name="raw-chunker", sequence_id=seq, publish_time=_now_ms(),
                            chunk_id=chunk_id, num_chunks_from_msg=chunks, total_chunk_msg_size=total)
    if with_uuid:
        md.uuid = uuid
    cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq, is_chunk=True))
    wire.raw.send_bytes(encode_payload_command(cmd, build_entry(md, payload)))
    return wire.wait_for(lambda c: c.type in (T.SEND_RECEIPT, T.SEND_ERROR))


def _refused(reply: pb.BaseCommand, reason: str) -> bool:
    return (reply.type == T.SEND_ERROR and reply.send_error.error == PulsarServerError.NotAllowedError
            and reason in reply.send_error.message)


def test_chunks_whose_metadata_lies_are_refused_and_the_rest_flows(standalone, client, topic) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    wire = _Wire(standalone.port)
    try:
        wire.producer(topic)
        for args, reason in [
            ((3, 3, b"x" * 10, 30), "chunk_id outside"),
            ((-1, 3, b"x" * 10, 30), "chunk_id outside"),
            ((0, 0, b"x" * 10, 10), "num_chunks_from_msg below 1"),
            ((0, -1, b"x" * 10, 10), "num_chunks_from_msg below 1"),
            ((0, 2, b"x" * 10, 5), "larger than total_chunk_msg_size"),
        ]:
            assert _refused(_send_chunk(wire, 0, *args), reason), args
        assert _refused(_send_chunk(wire, 0, 0, 2, b"x", 2, with_uuid=False), "without uuid")
        # one message, sent with a gap, a repeat and a changed total on the way: each refused,
        # the right chunks taken, and the message completes
        seq_parts = [b"A" * 1000, b"B" * 1000, b"C" * 500]
        for chunk_id, part, total, reason in [
            (0, seq_parts[0], 2500, None), (2, seq_parts[2], 2500, "out of sequence"),
            (1, seq_parts[1], 2500, None), (1, seq_parts[1], 2500, "out of sequence"),
            (2, seq_parts[2], 9999, "disagrees with the earlier chunks"), (2, seq_parts[2], 2500, None),
        ]:
            reply = _send_chunk(wire, 1, chunk_id, 3, part, total, uuid="raw-seq")
            taken = reply.type == T.SEND_RECEIPT
            assert taken if reason is None else _refused(reply, reason), (chunk_id, reply)
        # chunks adding up past their total (would crash the official consumer) are refused
        assert _send_chunk(wire, 2, 0, 2, b"D" * 1000, 1500, uuid="raw-sum").type == T.SEND_RECEIPT
        assert _refused(_send_chunk(wire, 2, 1, 2, b"E" * 1000, 1500, uuid="raw-sum"), "more than total")
        assert _refused(_send_chunk(wire, 2, 1, 2, b"E" * 100, 1500, uuid="raw-sum"), "less than total")
        assert _send_chunk(wire, 2, 1, 2, b"E" * 500, 1500, uuid="raw-sum").type == T.SEND_RECEIPT
        # the official producer's chunked (and compressed) messages still pass every check
        producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                                          compression_type=pulsar.CompressionType.LZ4)
        big = os.urandom(5 * 1024 * 1024 + 3)
        producer.send(b"plain after")
        producer.send(big)
        got = [m.data() for m in receive_all(consumer, 4, timeout_ms=30_000)]
        assert got == [b"".join(seq_parts), b"D" * 1000 + b"E" * 500, b"plain after", big]
        assert_no_more(consumer)
        stored = {p["producerName"]: p["msgInCounter"] for p in _stats(standalone, topic)["publishers"]}
        assert stored.pop(producer.producer_name()) >= 3   # "plain after" and big's chunks (2 or more)
        assert list(stored.values()) == [3 + 2]           # none of the refused chunks was stored
        _poll(lambda: _backlog(standalone, topic), 0)
    finally:
        wire.close()


def test_a_gap_across_a_reconnect_is_stored_and_blocks_nothing(standalone, client, topic) -> None:
    """The session that resumes a message cannot know what the last one sent: chunk 0 of 3,
    reconnect, chunk 2 of 3 is stored. The official consumer drops that message (its chunks stay
    in the backlog, unacked, as with Pulsar); every message after it arrives."""
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    for chunk_id in (0, 2):
        wire = _Wire(standalone.port)
        try:
            wire.producer(topic)
            assert _send_chunk(wire, 0, chunk_id, 3, b"g" * 100, 300, uuid="raw-gap").type == T.SEND_RECEIPT
        finally:
            wire.close()
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    producer.send(b"after the gap")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"after the gap"]
    assert_no_more(consumer)
    _poll(lambda: _backlog(standalone, topic), 2)          # the two orphaned chunks, nothing else


def test_a_chunk_over_the_max_message_size_is_refused(standalone, client, topic) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    wire = _Wire(standalone.port)
    try:
        wire.producer(topic)
        limit = wire.connected.max_message_size + ENTRY_HEADER_SLACK_BYTES
        reply = _send_chunk(wire, 0, 0, 2, b"o" * (limit + 10), 2 * limit)
        assert reply.type == T.SEND_ERROR and reply.send_error.error == PulsarServerError.NotAllowedError
        assert "max_message_size" in reply.send_error.message
        huge = encode_payload_command(
            pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=1, is_chunk=True)),
            build_entry(pb.MessageMetadata(producer_name="raw-chunker", sequence_id=1, publish_time=1,
                                           uuid="raw-huge", chunk_id=0, num_chunks_from_msg=2,
                                           total_chunk_msg_size=12 << 20), b"h" * (6 << 20)))
        try:
            wire.raw.send_bytes(huge)
        except (ConnectionResetError, BrokenPipeError):
            pass                                     # closed while we were still sending
        else:
            assert wire.raw.is_closed_by_broker()    # past the frame limit: docs/protocol.md §10
    finally:
        wire.close()
    client.create_producer(topic).send(b"still served")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"still served"]
    assert _stats(standalone, topic)["msgInCounter"] == 1


# --- compression ----------------------------------------------------------------------------------

GARBAGE = bytes(range(256)) * 2
CODECS = {"LZ4": LZ4, "ZLIB": ZLIB, "ZSTD": ZSTD, "SNAPPY": SNAPPY}


def _send_raw_entry(wire: _Wire, seq: int, metadata: bytes, payload: bytes, messages: int) -> pb.BaseCommand:
    send = pb.CommandSend(producer_id=1, sequence_id=seq, num_messages=messages)
    cmd = pb.BaseCommand(type=T.SEND, send=send)
    wire.raw.send_bytes(encode_payload_command(cmd, build_entry(metadata, payload)))
    return wire.wait_for(lambda c: c.type in (T.SEND_RECEIPT, T.SEND_ERROR))


# The consumer that meets the garbage runs in a child process: the official client (C++ 3.13.0)
# has been seen, rarely, to crash the whole process while it decompresses garbage, which took the
# pytest run down with it. A child killed by a signal is run once more on the same subscription
# (nothing it received was acked, so the good messages are all still there); a second crash fails.
_GARBAGE_CONSUMER = """
import json, sys
import pulsar
url, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = pulsar.Client(url, operation_timeout_seconds=20,
                       logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
got = []
while len(got) < count:
    message = consumer.receive(timeout_millis=10_000)
    got.append(message.data().decode())
    consumer.acknowledge(message)
try:
    extra = consumer.receive(timeout_millis=500).data().decode()
except pulsar.Timeout:
    extra = None
print(json.dumps({"got": got, "extra": extra}))
client.close()
"""


def _consume_in_child(url: str, topic: str, count: int) -> dict:
    for attempt in (1, 2):
        done = subprocess.run([sys.executable, "-c", _GARBAGE_CONSUMER, url, topic, str(count)],
                              capture_output=True, text=True, timeout=60)
        if done.returncode >= 0 or attempt == 2:
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads(done.stdout.strip().splitlines()[-1])
        print(f"the official consumer died with signal {-done.returncode}; running it once more")
    raise AssertionError("unreachable")


def test_garbage_under_a_codec_is_stored_and_skipped_by_the_consumer(standalone, client, topic) -> None:
    client.subscribe(topic, "sub", consumer_type=Shared).close()   # the subscription starts here
    wire = _Wire(standalone.port)
    try:
        wire.producer(topic)
        seq = 0
        for codec in CODECS.values():
            for batch in (False, True):
                md = pb.MessageMetadata(producer_name="raw-z", sequence_id=seq, publish_time=_now_ms(),
                                        compression=codec, uncompressed_size=100)
                if batch:
                    md.num_messages_in_batch = 3
                reply = _send_raw_entry(wire, seq, md.SerializeToString(), GARBAGE, 3 if batch else 1)
                assert reply.type == T.SEND_RECEIPT, reply        # stored as sent
                seq += 1
        plain = pb.MessageMetadata(producer_name="raw-z", sequence_id=seq, publish_time=1).SerializeToString()
        unknown_codec = plain + bytes([0x40, 7])                 # field 8 (compression) = 7
        reply = _send_raw_entry(wire, seq, unknown_codec, GARBAGE, 1)
        assert _refused(reply, "unknown compression codec"), reply
    finally:
        wire.close()
    producer = client.create_producer(topic, compression_type=pulsar.CompressionType.LZ4,
                                      batching_enabled=True, batching_max_messages=5,
                                      batching_max_publish_delay_ms=20)
    for i in range(10):
        producer.send_async(f"good-{i}".encode(), None)
    producer.flush()
    seen = _consume_in_child(standalone.service_url, topic, 10)
    assert seen == {"got": [f"good-{i}" for i in range(10)], "extra": None}
    assert _stats(standalone, topic)["msgInCounter"] == 4 * (1 + 3) + 10
    _poll(lambda: _backlog(standalone, topic), 0)   # the garbage was acked as corrupt by the client


# --- dead-letter topics ---------------------------------------------------------------------------

def _long_topic(topic: str) -> str:
    """A topic name near the limit, so that `<topic>-<sub>-DLQ` is over it."""
    prefix, local = topic.rsplit("/", 1)
    return f"{prefix}/{'t' * (NAME_BYTES_MAX - 12 - len(topic))}{local}"


@pytest.mark.parametrize("case", ["bad-name", "default-name-too-long"])
def test_a_dead_letter_topic_that_cannot_exist_loses_nothing(standalone, topic, case) -> None:
    if case == "bad-name":
        dlq, sub = "persistent://public/default/no spaces allowed", "sub"
        policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=dlq)
    else:
        topic, sub = _long_topic(topic), "s" * 20
        dlq = f"{topic}-{sub}-DLQ"
        policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1)
        assert len(topic) <= NAME_BYTES_MAX < len(dlq)
    client = make_client(standalone.service_url, operation_timeout_seconds=3)
    try:
        consumer = client.subscribe(topic, sub, consumer_type=Shared, dead_letter_policy=policy,
                                    negative_ack_redelivery_delay_ms=200)
        producer = client.create_producer(topic)
        producer.send(b"poison")
        producer.send(b"fine")
        counts, fine = [], []
        deadline = time.monotonic() + WAIT_S
        while (len(counts) < 2 or not fine) and time.monotonic() < deadline:
            msg = consumer.receive(10_000)
            if msg.data() == b"fine":
                consumer.acknowledge(msg)
                fine.append(msg)
            else:
                counts.append(msg.redelivery_count())
                consumer.negative_acknowledge(msg)   # the second one sends it to the DLQ: fails
        assert counts == [0, 1] and len(fine) == 1
        # The client now tries to create the DLQ producer and keeps the message unacked when that
        # fails (it logs "Dead letter producer create exception"). The application meets the same
        # refusal creating that producer itself; by then the client's own try has run its course.
        # (the client retries the refused lookup until its operation timeout, 3 s here; what the
        # broker answered, InvalidTopicName, is checked next)
        with pytest.raises(pulsar.Timeout):
            client.create_producer(dlq)
        _check_lookups_refuse(standalone, dlq)
        consumer.close()
        again = client.subscribe(topic, sub, consumer_type=Shared)     # the message is still there
        msg = again.receive(10_000)
        assert msg.data() == b"poison" and msg.redelivery_count() >= 1
        again.acknowledge(msg)
        _poll(lambda: _backlog(standalone, topic, sub), 0)
        again.close()
    finally:
        client.close()


def _check_lookups_refuse(standalone, dlq: str) -> None:
    """What the client got when it tried to create the DLQ producer: a clear InvalidTopicName."""
    wire = _Wire(standalone.port)
    try:
        lookup = pb.CommandPartitionedTopicMetadata(topic=dlq, request_id=7)
        wire.raw.send(pb.BaseCommand(type=T.PARTITIONED_METADATA, partitionMetadata=lookup))
        reply = wire.wait_for(lambda c: c.type == T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
        assert reply.response == pb.CommandPartitionedTopicMetadataResponse.Failed
        assert reply.error == PulsarServerError.InvalidTopicName and "topic name" in reply.message
        reply = wire.raw.producer(dlq, request_id=8)
        assert reply.type == T.ERROR and reply.error.error == PulsarServerError.InvalidTopicName
    finally:
        wire.close()


@pytest.mark.parametrize("count", [0, -1])
def test_max_redeliver_count_below_one_is_refused_by_the_client(client, topic, count) -> None:
    client.create_producer(topic).send(b"kept")
    with pytest.raises(ValueError, match="max_redeliver_count"):
        pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=count)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in receive_all(consumer, 1)] == [b"kept"]


# --- batch-index acks -----------------------------------------------------------------------------

BATCH = 4


def _mid(position: tuple[int, int], ack_set: list[int] | None = None, batch_size: int | None = None):
    mid = pb.MessageIdData(ledgerId=position[0], entryId=position[1])
    if ack_set is not None:
        mid.ack_set.extend(ack_set)
    if batch_size is not None:
        mid.batch_size = batch_size
    return mid


def _unacked(*members: int) -> int:
    """An ack_set word: a set bit is a member still unacked."""
    return sum(1 << m for m in members)


class _BatchScene:
    """Entries 0..4: batches of 4 ("b<entry>-<member>"), entry 5: one plain message "plain",
    entry 6: a batch of 4. A raw Shared consumer takes entries 0..5 (its permits end there)."""

    def __init__(self, standalone, topic: str) -> None:
        self.consumer = _Wire(standalone.port)
        subscribe = pb.CommandSubscribe(topic=topic, subscription="sub", subType=pb.CommandSubscribe.Shared,
                                        consumer_id=1, request_id=1)
        self.consumer.raw.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=subscribe))
        assert self.consumer.wait_for(lambda c: c.type in (T.SUCCESS, T.ERROR)).type == T.SUCCESS
        producer = _Wire(standalone.port)
        try:
            producer.producer(topic)
            for entry in range(7):
                self._produce(producer, entry)
        finally:
            producer.close()
        flow = pb.CommandFlow(consumer_id=1, messagePermits=5 * BATCH + 1)
        self.consumer.raw.send(pb.BaseCommand(type=T.FLOW, flow=flow))
        messages = [self.consumer.wait_for(lambda c: c.type == T.MESSAGE).message for _ in range(6)]
        self.positions = [(m.message_id.ledgerId, m.message_id.entryId) for m in messages]
        ledger, last = self.positions[-1]
        self.positions.append((ledger, last + 1))     # entry 6, never delivered
        self._request_ids = iter(range(100, 10_000))

    @staticmethod
    def _produce(wire: _Wire, entry: int) -> None:
        if entry == 5:
            md = pb.MessageMetadata(producer_name="raw-b", sequence_id=entry * 10, publish_time=1)
            wire.raw.send_bytes(encode_send(1, entry * 10, 1, md, b"plain"))
        else:
            members = [BatchMessage(f"b{entry}-{m}".encode()) for m in range(BATCH)]
            md, payload = build_batch(members, producer_name="raw-b", sequence_id=entry * 10,
                                      publish_time_ms=_now_ms())
            wire.raw.send_bytes(encode_send(1, entry * 10, BATCH, md, payload))
        assert wire.wait_for(lambda c: c.type in (T.SEND_RECEIPT, T.SEND_ERROR)).type == T.SEND_RECEIPT

    def ack(self, *mids: pb.MessageIdData) -> pb.CommandAckResponse:
        request_id = next(self._request_ids)
        self.consumer.raw.send(pb.BaseCommand(type=T.ACK, ack=pb.CommandAck(
            consumer_id=1, ack_type=pb.CommandAck.Individual, message_id=list(mids), request_id=request_id)))
        return self.consumer.wait_for(lambda c: c.type == T.ACK_RESPONSE
                                      and c.ackResponse.request_id == request_id).ackResponse


def test_batch_index_acks_that_lie_take_nothing_unacked(standalone, client, topic) -> None:
    scene = _BatchScene(standalone, topic)
    p = scene.positions
    try:
        ok = [
            # entry 0: members 0 and 1 acked, 2 and 3 not; the set is longer than the batch and
            # claims a batch of 2 (the entry has 4): members 2 and 3 must not be taken
            scene.ack(_mid(p[0], [_unacked(2, 3) | (-1 << 4), -1, -1], batch_size=2)),
            # entry 1: all 4 members acked, bits past the batch set, a batch of 200 claimed:
            # the entry is fully acked (else every later delivery would hide all its members)
            scene.ack(_mid(p[1], [-1 << 4, -1, -1, -1], batch_size=200)),
            # entries 2 and 3: an empty set and an all-zero one are whole-entry acks
            scene.ack(_mid(p[2], [])),
            scene.ack(_mid(p[3], [0, 0])),
            # entry 5 is not a batch: a set saying its one member is unacked changes nothing
            scene.ack(_mid(p[5], [_unacked(0)])),
            # entry 6 was never delivered: members 0 and 2 acked, as Pulsar takes it
            scene.ack(_mid(p[6], [_unacked(1, 3)], batch_size=BATCH)),
            # past the end, a ledger that does not exist, an entry already acked: ignored
            scene.ack(_mid((p[6][0], p[6][1] + 10), [_unacked(0)])),
            scene.ack(_mid((p[6][0] + 1000, 0), [_unacked(0)])),
            scene.ack(_mid(p[2], [_unacked(1)], batch_size=BATCH)),
        ]
        assert [r.HasField("error") for r in ok] == [False] * len(ok), ok
        # on an entry no consumer holds, a batch_size out of range, or implied by an ack_set of
        # 20,000 words, is refused; the good id after them in the same ACK is taken
        refused = scene.ack(_mid(p[6], [_unacked(0)], batch_size=10**7), _mid(p[6], [-1] * 20_000),
                            _mid(p[6], [_unacked(1)], batch_size=BATCH))
        assert refused.error == PulsarServerError.NotAllowedError and "batch_size" in refused.message
        stats = _stats(standalone, topic)["subscriptions"]["sub"]
        assert stats["msgBacklog"] == 4                        # entries 0, 4, 5, 6
        assert stats["markDeletePosition"] == f"{p[0][0]}:{p[0][1] - 1}"
    finally:
        scene.consumer.close()
    consumer = client.subscribe(topic, "sub", consumer_type=Shared, batch_index_ack_enabled=True)
    got = sorted(m.data() for m in receive_all(consumer, 2 + BATCH + 1 + 1, timeout_ms=20_000))
    expected = [b"b0-2", b"b0-3"] + [f"b4-{m}".encode() for m in range(BATCH)] + [b"plain", b"b6-1"]
    assert got == sorted(expected)
    assert_no_more(consumer)
    _poll(lambda: _backlog(standalone, topic), 0)
