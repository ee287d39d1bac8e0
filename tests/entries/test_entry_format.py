"""entries.entry: parsing stored entries and the accessors dispatchers rely on."""

from __future__ import annotations

import base64
import struct

import pytest

from common.errors import MalformedFrame
from entries import entry as ef
from proto import pulsar_api_pb2 as pb


def md(**fields: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="prod", sequence_id=10, publish_time=1_700_000_000_123, **fields)


def test_build_parse_round_trip_and_payload_view() -> None:
    entry = ef.build_entry(md(), b"the payload")
    info = ef.parse_entry(entry)
    assert info.metadata == md()
    assert bytes(info.payload(entry)) == b"the payload"
    assert entry[info.payload_offset:] == b"the payload"
    assert isinstance(info.payload(entry), memoryview)
    assert ef.verify_entry_checksum(entry) and info.checksum == struct.unpack(">I", entry[2:6])[0]
    assert ef.build_entry(md().SerializeToString(), b"the payload") == entry


def test_plain_message_accessors() -> None:
    info = ef.parse_entry(ef.build_entry(md(), b"x"))
    assert (info.num_messages, info.is_batch, info.publish_time_ms) == (1, False, 1_700_000_000_123)
    assert (info.producer_name, info.sequence_id, info.highest_sequence_id) == ("prod", 10, 10)
    assert info.deliver_at_time_ms is None and info.marker_type is None
    assert not info.is_chunk and info.chunk_uuid is None and info.chunk_id is None
    assert info.num_chunks_from_msg is None and not info.is_last_chunk
    assert info.sticky_key == ef.NONE_KEY == b"NONE_KEY"


def test_batch_delay_marker_and_dedup_accessors() -> None:
    info = ef.parse_entry(ef.build_entry(md(num_messages_in_batch=250, highest_sequence_id=259,
                                            deliver_at_time=1_700_000_060_000, marker_type=3), b""))
    assert (info.num_messages, info.is_batch) == (250, True)
    assert info.highest_sequence_id == 259 and info.deliver_at_time_ms == 1_700_000_060_000
    assert info.marker_type == 3
    one = ef.parse_entry(ef.build_entry(md(num_messages_in_batch=1), b""))
    assert one.is_batch and one.num_messages == 1


def test_chunk_accessors() -> None:
    fields = dict(uuid="prod-10", num_chunks_from_msg=3, total_chunk_msg_size=100)
    first = ef.parse_entry(ef.build_entry(md(chunk_id=0, **fields), b"a"))
    last = ef.parse_entry(ef.build_entry(md(chunk_id=2, **fields), b"c"))
    assert first.is_chunk and (first.chunk_uuid, first.chunk_id, first.num_chunks_from_msg) == ("prod-10", 0, 3)
    assert not first.is_last_chunk and last.is_last_chunk


@pytest.mark.parametrize("fields, key", [
    (dict(ordering_key=b"\x00ord", partition_key="pk"), b"\x00ord"),
    (dict(partition_key="pk"), b"pk"),
    (dict(partition_key=""), b""),
    (dict(partition_key=base64.b64encode(b"\xff\x00bin").decode(), partition_key_b64_encoded=True), b"\xff\x00bin"),
    (dict(partition_key="not base64!", partition_key_b64_encoded=True), b"not base64!"),
    (dict(partition_key="ключ"), "ключ".encode()),
    ({}, b"NONE_KEY"),
])
def test_sticky_key(fields: dict, key: bytes) -> None:
    assert ef.parse_entry(ef.build_entry(md(**fields), b"p")).sticky_key == key


def test_checksum_detects_any_flipped_bit_in_the_covered_part() -> None:
    entry = ef.build_entry(md(partition_key="k"), b"0123456789")
    for index in range(6, len(entry)):
        corrupt = bytearray(entry)
        corrupt[index] ^= 0x10
        assert not ef.verify_entry_checksum(bytes(corrupt)), index
    assert not ef.verify_entry_checksum(b"\x0e\x01")
    assert not ef.verify_entry_checksum(b"\x0e\x02" + entry[2:])


def _entry_with_md_bytes(md_bytes: bytes, payload: bytes = b"") -> bytes:
    return ef.build_entry(md_bytes, payload)


@pytest.mark.parametrize("entry", [
    b"",
    b"\x0e\x01\0\0\0\0",
    b"\x0e\x02" + b"\0" * 8,
    b"\x0e\x01" + b"\0" * 4 + struct.pack(">I", 50) + b"short",
    _entry_with_md_bytes(b"\xff\xff\xff"),
    _entry_with_md_bytes(pb.MessageMetadata(producer_name="p").SerializePartialToString()),
], ids=["empty", "no md_size", "wrong magic", "md beyond entry", "garbage md", "md missing required"])
def test_malformed_entries(entry: bytes) -> None:
    with pytest.raises(MalformedFrame):
        ef.parse_entry(entry)


def test_crc32c_from_matches_an_independent_crc32c_of_the_slice() -> None:
    import google_crc32c  # an independent implementation (the code under test uses `crc32c`)
    for size in (0, 10, 16 * 1024 - 1, 16 * 1024 + 7, 300_000):
        data = bytes((i * 31) & 0xFF for i in range(size + 6))
        want = google_crc32c.value(data[6:])
        assert ef.crc32c_from(data, 6) == want
        assert ef.crc32c_from(bytearray(data), 6) == want
        assert ef.crc32c_from(memoryview(data), 6) == want
    assert ef.crc32c_from(b"__123456789", 2) == 0xE3069283
