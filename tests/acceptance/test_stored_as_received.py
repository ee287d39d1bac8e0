"""Entries are stored and dispatched exactly as received: the bytes after the MESSAGE command are
the bytes after the SEND command, checksum and all, for plain messages and for client batches in
every codec (never opened, never recompressed). Raw protocol client against a real standalone,
and the official client reads the same entries back."""

from __future__ import annotations

import time

import pulsar

from entries.batch import LZ4, NONE, ZLIB, ZSTD, BatchMessage, build_batch
from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T
from wire.pulsar import encode_payload_command


def _entries() -> list[bytes]:
    now = int(time.time() * 1000)
    plain = pb.MessageMetadata(producer_name="raw-verbatim", sequence_id=0, publish_time=now,
                               partition_key="k", event_time=now - 5, properties=[
                                   pb.KeyValue(key="a", value="1")])
    out = [build_entry(plain, b"plain payload")]
    for seq, codec in enumerate((NONE, LZ4, ZLIB, ZSTD), start=1):
        members = [BatchMessage(b"member-%d-%d" % (seq, i) * 20, properties={"i": str(i)})
                   for i in range(5)]
        md, payload = build_batch(members, producer_name="raw-verbatim", sequence_id=seq * 10,
                                  publish_time_ms=now, compression=codec)
        md.sequence_id = seq
        out.append(build_entry(md, payload))
    return out


def test_message_bytes_are_the_send_bytes(standalone, topic: str) -> None:
    entries = _entries()
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        raw.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="raw", subType=pb.CommandSubscribe.Exclusive, consumer_id=1,
            request_id=1, initialPosition=pb.CommandSubscribe.Earliest)))
        assert raw.next_command().type == T.SUCCESS
        assert raw.producer(topic, producer_id=1, request_id=2).type == T.PRODUCER_SUCCESS
        for seq, entry in enumerate(entries):
            cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq))
            raw.send_bytes(encode_payload_command(cmd, entry))
            assert raw.next_command().type == T.SEND_RECEIPT
        raw.send(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=1000)))
        delivered = []
        while len(delivered) < len(entries):
            frame = raw.next_frame()
            if frame.command.type == T.MESSAGE:
                assert frame.checksum_ok
                delivered.append(frame.entry)
    finally:
        raw.close()
    assert delivered == entries, "an entry changed between SEND and MESSAGE"


def test_the_official_client_reads_them(standalone, client: pulsar.Client, topic: str) -> None:
    entries = _entries()
    consumer = client.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
    raw = RawClient(standalone.port)
    try:
        raw.connect()
        assert raw.producer(topic, producer_id=1, request_id=2).type == T.PRODUCER_SUCCESS
        for seq, entry in enumerate(entries):
            cmd = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq))
            raw.send_bytes(encode_payload_command(cmd, entry))
            assert raw.next_command().type == T.SEND_RECEIPT
    finally:
        raw.close()
    first = consumer.receive(10_000)
    assert (first.data(), first.partition_key(), first.properties()) == (b"plain payload", "k", {"a": "1"})
    got = [consumer.receive(10_000) for _ in range(20)]
    assert [m.data() for m in got] == [b"member-%d-%d" % (seq, i) * 20 for seq in range(1, 5) for i in range(5)]
    assert [m.properties()["i"] for m in got] == [str(i) for _ in range(4) for i in range(5)]
    consumer.acknowledge_cumulative(got[-1])
