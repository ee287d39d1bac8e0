"""The compacted ledger's entry format and the keys compaction reads (`broker.compaction.format`),
on entries built exactly as the official client builds them (`entries.batch`, `entries.entry`).
"""

from __future__ import annotations

import pytest

from broker.compaction import format as fmt
from common.errors import MalformedPayload
from entries.batch import LZ4, NONE, ZLIB, BatchMessage, build_batch
from entries.entry import build_entry
from ledger.position import Position
from proto import pulsar_api_pb2 as pb


def _batch(messages: list[BatchMessage], compression: int = NONE) -> bytes:
    md, payload = build_batch(messages, producer_name="p", sequence_id=0, publish_time_ms=1, compression=compression)
    return build_entry(md, payload)


def test_encode_decode_round_trip() -> None:
    mask = fmt.mask_of([True, False, True] + [False] * 60 + [True])
    raw = fmt.encode(Position(7, 42), mask, b"entry-bytes")
    assert fmt.decode(raw) == (Position(7, 42), mask, b"entry-bytes")
    assert fmt.decode_position(raw) == Position(7, 42)
    assert fmt.decode(fmt.encode(Position(1, 0), None, b"x")) == (Position(1, 0), None, b"x")
    with pytest.raises(MalformedPayload):
        fmt.decode(raw[:10])


def test_masks_keep_exactly_their_members() -> None:
    kept = [i % 3 == 0 for i in range(130)]
    mask = fmt.mask_of(kept)
    assert len(mask) == 3 and all(-(2**63) <= w < 2**63 for w in mask)   # signed int64 words
    assert [fmt.mask_keeps(mask, i) for i in range(130)] == kept
    assert not fmt.mask_keeps(mask, 500)
    assert fmt.mask_keeps(None, 5)
    other = fmt.mask_of([i % 2 == 0 for i in range(130)])
    both = fmt.intersect(mask, other)
    assert [fmt.mask_keeps(both, i) for i in range(130)] == [i % 6 == 0 for i in range(130)]
    assert fmt.intersect(None, mask) == mask and fmt.intersect(mask, None) == mask


def test_keys_and_tombstones_of_a_single_message() -> None:
    keyed = build_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, partition_key="k"), b"v")
    assert fmt.entry_keys(keyed) == [("k", False)]
    empty = build_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, partition_key="k"), b"")
    assert fmt.entry_keys(empty) == [("k", True)]
    null = build_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, partition_key="k",
                                          null_value=True), b"x")
    assert fmt.entry_keys(null) == [("k", True)]
    keyless = build_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1), b"v")
    assert fmt.entry_keys(keyless) == [(None, False)]
    chunk = build_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, partition_key="k",
                                           num_chunks_from_msg=3, chunk_id=0, uuid="u", total_chunk_msg_size=9), b"v")
    assert fmt.entry_keys(chunk) == []


@pytest.mark.parametrize("compression", [NONE, LZ4, ZLIB])
def test_keys_of_batch_members(compression: int) -> None:
    members = [BatchMessage(b"a", partition_key="k1"), BatchMessage(b"", partition_key="k2"),
               BatchMessage(b"c"), BatchMessage(b"d", partition_key="k1", null_value=True),
               BatchMessage(b"e", partition_key="k3")]
    assert fmt.entry_keys(_batch(members, compression)) == [("k1", False), ("k2", True), (None, False),
                                                             ("k1", True), ("k3", False)]


def test_a_batch_that_lies_about_its_members_is_refused() -> None:
    entry = _batch([BatchMessage(b"a", partition_key="k1")])
    md, payload = build_batch([BatchMessage(b"a", partition_key="k1")], producer_name="p", sequence_id=0,
                              publish_time_ms=1)
    md.num_messages_in_batch = 3
    with pytest.raises(MalformedPayload):
        fmt.entry_keys(build_entry(md, payload))
    assert fmt.entry_keys(entry) == [("k1", False)]
