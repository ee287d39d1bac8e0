"""The codec against the real thing: the official `pulsar-client` 3.13.0 talks to a tiny asyncio
server built only from wire.pulsar, entry_format and batch.

The server answers CONNECT, PARTITIONED_METADATA, LOOKUP (Connect to itself), PRODUCER, SEND
(recording each stored entry), SUBSCRIBE/FLOW (pushing entries it was given as MESSAGE frames),
ACK, CLOSE_* and PING. It is a test vector generator, not a broker: one topic, no persistence.
What this proves: the client accepts every reply we encode (a missing required field would make
it drop the connection), our decoder reads its SEND frames and checksums, our batch decoder reads
its LZ4/ZSTD/ZLIB batches, our batch builder is byte-identical to its batches, and its consumer
reads MESSAGE frames carrying batches we built.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pulsar
import pytest

from common.errors import StrataError
from entries import batch
from entries import entry as entry_format
from proto import pulsar_api_pb2 as pb
from wire import pulsar as codec
from wire.pulsar import CommandType as T

FRAME_BYTES_MAX = 5 * 1024 * 1024 + 64 * 1024
TOPIC = "persistent://public/default/codec-vectors"


class TinyBroker:
    """Serves one connection-agnostic topic from a background thread's event loop."""

    def __init__(self) -> None:
        self.sent_entries: list[tuple[pb.CommandSend, bytes, bool]] = []  # (send, entry, checksum_ok)
        self.to_deliver: list[bytes] = []  # entries pushed to any consumer on FLOW
        self.acks: list[pb.CommandAck] = []
        self.errors: list[BaseException] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TinyBroker:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = codec.FrameDecoder(FRAME_BYTES_MAX)
        state = {"entry_id": 0}
        try:
            while data := await reader.read(256 * 1024):
                for frame in decoder.feed(data):
                    for out in self._answer(frame, state):
                        writer.write(out)
                await writer.drain()
        except (StrataError, AssertionError) as exc:
            self.errors.append(exc)
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, frame: codec.Frame, state: dict) -> list[bytes]:
        cmd = frame.command
        t = cmd.type
        if t == T.CONNECT:
            version = codec.negotiate_protocol_version(cmd.connect.protocol_version)
            return [codec.encode_connected("strata-codec-test", version, 5 * 1024 * 1024)]
        if t == T.PARTITIONED_METADATA:
            return [codec.encode_partitioned_metadata_response(cmd.partitionMetadata.request_id, 0)]
        if t == T.LOOKUP:
            return [codec.encode_lookup_response(cmd.lookupTopic.request_id, self.url)]
        if t == T.PRODUCER:
            name = cmd.producer.producer_name or f"strata-test-{cmd.producer.producer_id}"
            return [codec.encode_producer_success(cmd.producer.request_id, name, -1)]
        if t == T.SEND:
            self.sent_entries.append((cmd.send, frame.entry, frame.checksum_ok))
            state["entry_id"] += 1
            return [codec.encode_send_receipt(cmd.send.producer_id, cmd.send.sequence_id, 7, state["entry_id"])]
        if t == T.SUBSCRIBE:
            return [codec.encode_success(cmd.subscribe.request_id)]
        if t == T.FLOW:
            cid = cmd.flow.consumer_id
            out = [codec.encode_message(cid, 9, i, -1, 0, None, e) for i, e in enumerate(self.to_deliver)]
            self.to_deliver = []
            return out
        if t == T.ACK:
            self.acks.append(cmd.ack)
            return []
        if t in (T.CLOSE_PRODUCER, T.CLOSE_CONSUMER):
            body = cmd.close_producer if t == T.CLOSE_PRODUCER else cmd.close_consumer
            return [codec.encode_success(body.request_id)]
        if t == T.PING:
            return [codec.encode_pong()]
        if t == T.GET_SCHEMA:
            return [codec.encode_get_schema_response(cmd.getSchema.request_id)]
        raise AssertionError(f"unexpected command {cmd}")


@pytest.fixture
def tiny_broker():
    with TinyBroker() as server:
        yield server
        assert server.errors == []


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=10, io_threads=1,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


COMPRESSIONS = {
    "NONE": (pulsar.CompressionType.NONE, pb.NONE),
    "LZ4": (pulsar.CompressionType.LZ4, pb.LZ4),
    "ZLIB": (pulsar.CompressionType.ZLib, pb.ZLIB),
    "ZSTD": (pulsar.CompressionType.ZSTD, pb.ZSTD),
}


def _produce_batched(url: str, compression: object, count: int) -> tuple[str, list[int]]:
    client = _client(url)
    try:
        producer = client.create_producer(
            TOPIC, batching_enabled=True, batching_max_messages=count,
            batching_max_publish_delay_ms=50, compression_type=compression,
            batching_type=pulsar.BatchingType.KeyBased)
        results: list[object] = []
        for i in range(count):
            producer.send_async(f"payload-{i}".encode() * 20, lambda res, _mid: results.append(res),
                                properties={"idx": str(i), "app": "strata"}, partition_key="key-A",
                                event_timestamp=1_700_000_000_000 + i)
        producer.flush()
        deadline = time.monotonic() + 10
        while len(results) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        name = producer.producer_name()
        producer.close()
        return name, results
    finally:
        client.close()


@pytest.mark.parametrize("codec_name", sorted(COMPRESSIONS))
def test_official_batched_producer_round_trip(tiny_broker: TinyBroker, codec_name: str) -> None:
    client_compression, wire_compression = COMPRESSIONS[codec_name]
    count = 40
    name, results = _produce_batched(tiny_broker.url, client_compression, count)
    assert results == [pulsar.Result.Ok] * count
    members: list[batch.BatchMessage] = []
    for send, entry, checksum_ok in tiny_broker.sent_entries:
        assert checksum_ok and entry_format.verify_entry_checksum(entry)
        info = entry_format.parse_entry(entry)
        md = info.metadata
        assert info.is_batch and info.num_messages == send.num_messages
        assert md.producer_name == name and md.sequence_id == send.sequence_id
        assert md.compression == wire_compression
        assert info.sticky_key == b"key-A"
        decoded = batch.decode_payload(md, info.payload(entry))
        members.extend(decoded)
        _assert_builder_matches_client(md, decoded, bytes(info.payload(entry)))
    assert [m.payload for m in members] == [f"payload-{i}".encode() * 20 for i in range(count)]
    assert [m.properties for m in members] == [{"idx": str(i), "app": "strata"} for i in range(count)]
    assert {m.partition_key for m in members} == {"key-A"}
    assert [m.event_time_ms for m in members] == [1_700_000_000_000 + i for i in range(count)]
    assert [m.sequence_id for m in members] == list(range(count))


def _assert_builder_matches_client(md: pb.MessageMetadata, members: list[batch.BatchMessage],
                                   client_payload: bytes) -> None:
    """Our builder, fed the same members, makes the same outer metadata and batch bytes."""
    ours_md, ours_payload = batch.build_batch(
        members, producer_name=md.producer_name, sequence_id=md.sequence_id,
        publish_time_ms=md.publish_time, compression=md.compression)
    assert ours_md.SerializeToString() == md.SerializeToString()
    raw_client = batch.decompress(client_payload, md.compression, md.uncompressed_size)
    assert batch.decompress(ours_payload, md.compression, ours_md.uncompressed_size) == raw_client
    assert batch.serialize_batch(members) == raw_client


def test_official_unbatched_producer_metadata(tiny_broker: TinyBroker) -> None:
    client = _client(tiny_broker.url)
    try:
        producer = client.create_producer(TOPIC, producer_name="named-producer", batching_enabled=False)
        producer.send(b"solo", properties={"a": "1"}, partition_key="pk", event_timestamp=42)
        producer.send(b"ordered", ordering_key="ok-1")
        producer.close()
    finally:
        client.close()
    infos = [(entry_format.parse_entry(e), e) for _, e, ok in tiny_broker.sent_entries if ok]
    assert len(infos) == 2
    (first, e1), (second, _e2) = infos
    assert not first.is_batch and first.num_messages == 1
    assert first.producer_name == "named-producer" and first.sequence_id == 0
    assert bytes(first.payload(e1)) == b"solo" and first.sticky_key == b"pk"
    [msg] = batch.decode_payload(first.metadata, first.payload(e1))
    assert (msg.payload, msg.properties, msg.partition_key, msg.event_time_ms) == (b"solo", {"a": "1"}, "pk", 42)
    assert second.sticky_key == b"ok-1" and second.sequence_id == 1


@pytest.mark.parametrize("codec_name", ["LZ4", "ZSTD", "NONE"])
def test_official_consumer_reads_our_batches(tiny_broker: TinyBroker, codec_name: str) -> None:
    """MESSAGE frames with batches built by entries.batch are read back intact by the official consumer."""
    _, wire_compression = COMPRESSIONS[codec_name]
    msgs = [batch.BatchMessage(f"m{i}".encode(), {"n": str(i)}, partition_key=f"k{i % 3}",
                               event_time_ms=1000 + i) for i in range(10)]
    md, payload = batch.build_batch(msgs[:7], producer_name="native", sequence_id=0,
                                    publish_time_ms=int(time.time() * 1000), compression=wire_compression)
    single_md = pb.MessageMetadata(producer_name="native", sequence_id=7, publish_time=int(time.time() * 1000),
                                   partition_key="solo-key")
    md2, payload2 = batch.build_batch(msgs[7:], producer_name="native", sequence_id=8,
                                      publish_time_ms=int(time.time() * 1000), compression=wire_compression)
    tiny_broker.to_deliver = [entry_format.build_entry(md, payload),
                              entry_format.build_entry(single_md, b"unbatched"),
                              entry_format.build_entry(md2, payload2)]
    client = _client(tiny_broker.url)
    try:
        consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared)
        got = [consumer.receive(timeout_millis=10_000) for _ in range(11)]
        for m in got:
            consumer.acknowledge(m)
        consumer.close()
    finally:
        client.close()
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(7)] + [b"unbatched"] + \
        [f"m{i}".encode() for i in range(7, 10)]
    assert [m.properties() for m in got[:7]] == [{"n": str(i)} for i in range(7)]
    assert [m.partition_key() for m in got] == [f"k{i % 3}" for i in range(7)] + ["solo-key"] + \
        [f"k{i % 3}" for i in range(7, 10)]
    assert [m.event_timestamp() for m in got[:7]] == [1000 + i for i in range(7)]
    ids = [m.message_id() for m in got]
    assert [(i.ledger_id(), i.entry_id(), i.batch_index()) for i in ids[:2]] == [(9, 0, 0), (9, 0, 1)]
    assert ids[7].entry_id() == 1 and ids[8].entry_id() == 2 and ids[0].partition() == -1
    assert tiny_broker.acks, "the consumer acknowledged over the wire"
