"""entries.batch: building and opening client-side batches (layout checked against the official
client in test_codec_official_client.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import MalformedPayload
from entries import batch
from entries import entry as entry_format
from proto import pulsar_api_pb2 as pb
from wire import pulsar as codec

ALL = [batch.NONE, batch.LZ4, batch.ZLIB, batch.ZSTD]


def sample(n: int) -> list[batch.BatchMessage]:
    return [batch.BatchMessage(f"message {i}".encode() * (i + 1), {"i": str(i), "z": "last"},
                               partition_key=f"key-{i % 2}", ordering_key=b"ord" if i == 0 else None,
                               event_time_ms=100 + i) for i in range(n)]


@pytest.mark.parametrize("compression", ALL)
def test_build_then_decode_round_trip(compression: int) -> None:
    msgs = sample(25)
    md, payload = batch.build_batch(msgs, producer_name="prod", sequence_id=40, publish_time_ms=5,
                                    compression=compression)
    assert md.num_messages_in_batch == 25 and md.sequence_id == 40 and md.publish_time == 5
    assert md.partition_key == "key-0" and md.ordering_key == b"ord"
    if compression == batch.NONE:
        assert not md.HasField("compression") and not md.HasField("uncompressed_size")
        assert payload == batch.serialize_batch(batch.decode_payload(md, payload))
    else:
        assert md.compression == compression and md.uncompressed_size > len(payload)
    decoded = batch.decode_payload(md, payload)
    assert [m.sequence_id for m in decoded] == list(range(40, 65))
    for got, want in zip(decoded, msgs, strict=True):
        assert (got.payload, got.properties, got.partition_key, got.ordering_key, got.event_time_ms) == \
            (want.payload, want.properties, want.partition_key, want.ordering_key, want.event_time_ms)


def test_serialized_layout_is_size_metadata_payload() -> None:
    raw = batch.serialize_batch([batch.BatchMessage(b"abc", sequence_id=3)])
    smm_size = struct.unpack(">I", raw[:4])[0]
    smm = pb.SingleMessageMetadata.FromString(raw[4:4 + smm_size])
    assert (smm.payload_size, smm.sequence_id) == (3, 3) and raw[4 + smm_size:] == b"abc"


def test_lz4_is_a_raw_block_without_size_prefix() -> None:
    import lz4.block
    md, payload = batch.build_batch(sample(3), producer_name="p", sequence_id=0, publish_time_ms=1,
                                    compression=batch.LZ4)
    raw = lz4.block.decompress(payload, uncompressed_size=md.uncompressed_size)
    assert raw == batch.serialize_batch(batch.decode_payload(md, payload))


@pytest.mark.parametrize("compression", ALL)
def test_encode_send_is_a_valid_send_frame(compression: int) -> None:
    md, payload = batch.build_batch(sample(4), producer_name="p", sequence_id=9, publish_time_ms=1,
                                    compression=compression)
    frame = codec.FrameDecoder(1 << 20).feed(codec.encode_send(3, 9, 4, md, payload))[0]
    send = frame.command.send
    assert (send.producer_id, send.sequence_id, send.num_messages) == (3, 9, 4)
    assert frame.checksum_ok
    info = entry_format.parse_entry(frame.entry)
    assert info.metadata == md and bytes(info.payload(frame.entry)) == payload


def test_unbatched_entry_decodes_as_one_message() -> None:
    md = pb.MessageMetadata(producer_name="p", sequence_id=2, publish_time=3, partition_key="k", event_time=9)
    md.properties.add(key="a", value="b")
    [msg] = batch.decode_payload(md, b"body")
    assert (msg.payload, msg.properties, msg.partition_key, msg.event_time_ms, msg.sequence_id) == \
        (b"body", {"a": "b"}, "k", 9, 2)
    frame = codec.FrameDecoder(1 << 20).feed(codec.encode_send(1, 2, 1, md, b"body"))[0]
    assert not frame.command.send.HasField("num_messages")


def test_empty_batch_is_refused() -> None:
    from common.errors import InvariantViolation
    with pytest.raises(InvariantViolation):
        batch.build_batch([], producer_name="p", sequence_id=0, publish_time_ms=0)


@pytest.mark.parametrize("compression", [batch.LZ4, batch.ZLIB, batch.ZSTD])
def test_corrupt_or_lying_compressed_payloads(compression: int) -> None:
    md, payload = batch.build_batch(sample(5), producer_name="p", sequence_id=0, publish_time_ms=1,
                                    compression=compression)
    with pytest.raises(MalformedPayload):
        batch.decompress(b"\x00garbage" * 4, compression, md.uncompressed_size)
    with pytest.raises(MalformedPayload):
        batch.decompress(payload, compression, md.uncompressed_size - 1)
    with pytest.raises(MalformedPayload):
        batch.decompress(payload, compression, md.uncompressed_size, uncompressed_bytes_max=10)


def test_lying_batch_layouts() -> None:
    raw = batch.serialize_batch(sample(2))
    with pytest.raises(MalformedPayload):
        batch.parse_batch(raw, 3)
    with pytest.raises(MalformedPayload):
        batch.parse_batch(raw[:-1], 2)
    with pytest.raises(MalformedPayload):
        batch.parse_batch(struct.pack(">I", 1000) + raw, 1)
    with pytest.raises(MalformedPayload):
        batch.parse_batch(struct.pack(">I", 3) + b"\xff\xff\xff", 1)
    with pytest.raises(MalformedPayload):
        batch.decompress(b"x", pb.SNAPPY, 1)


member = st.builds(batch.BatchMessage, st.binary(max_size=200),
                   st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
                   st.none() | st.text(max_size=8), st.none() | st.binary(max_size=8),
                   st.none() | st.integers(0, 2**63))


@settings(max_examples=150, deadline=None)
@given(st.lists(member, min_size=1, max_size=20), st.sampled_from(ALL))
def test_property_round_trip(msgs: list[batch.BatchMessage], compression: int) -> None:
    md, payload = batch.build_batch(msgs, producer_name="p", sequence_id=7, publish_time_ms=1,
                                    compression=compression)
    decoded = batch.decode_payload(md, payload)
    assert [(m.payload, m.properties, m.partition_key, m.ordering_key, m.event_time_ms) for m in decoded] == \
        [(m.payload, m.properties, m.partition_key, m.ordering_key, m.event_time_ms) for m in msgs]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 30), st.sampled_from(ALL + [pb.SNAPPY]), st.integers(0, 5000))
def test_decode_fuzz_raises_only_malformed_payload(data: bytes, count: int, compression: int, size: int) -> None:
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0, num_messages_in_batch=count,
                            compression=compression, uncompressed_size=size)
    try:
        batch.decode_payload(md, data)
    except MalformedPayload:
        pass
