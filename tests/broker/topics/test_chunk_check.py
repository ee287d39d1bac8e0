"""broker.topics.chunk_check on parsed entries (pure bytes, no broker): which chunk metadata a producer
session refuses, and that well-formed sequences — also one joined in the middle, as after a
reconnect — are never refused."""

from __future__ import annotations

import pytest

from broker.topics.chunk_check import ChunkCheck
from entries.entry import build_entry, parse_entry
from proto import pulsar_api_pb2 as pb


def _chunk(chunk_id: int, chunks: int, payload: bytes, total: int, uuid: str = "p-1"):
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, uuid=uuid,
                            chunk_id=chunk_id, num_chunks_from_msg=chunks, total_chunk_msg_size=total)
    return parse_entry(build_entry(md, payload)), len(payload)


def _run(check: ChunkCheck, *chunks) -> list[str | None]:
    """Each chunk's refusal message (None = accepted)."""
    out = []
    for args in chunks:
        error = check.refusal(*_chunk(*args))
        out.append(None if error is None else str(error).split(" (")[0])
    return out


def test_plain_entries_are_not_chunks() -> None:
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, uuid="only-a-uuid")
    assert ChunkCheck().refusal(parse_entry(build_entry(md, b"x")), 1) is None


def test_well_formed_sequences_pass() -> None:
    check = ChunkCheck()
    assert _run(check, (0, 3, b"aa", 5), (1, 3, b"bb", 5), (2, 3, b"c", 5)) == [None] * 3
    assert _run(check, (0, 1, b"x", 1)) == [None]                       # a one-chunk message
    # joined in the middle (reconnect after chunks 0 and 1 were stored): sizes only bound it
    assert _run(check, (2, 4, b"cc", 8, "p-2"), (3, 4, b"d", 8, "p-2")) == [None, None]
    # interleaved messages are let through (checked against the latest only)
    assert _run(check, (0, 2, b"a", 2, "A"), (0, 2, b"b", 2, "B"), (1, 2, b"a", 2, "A"),
                (1, 2, b"b", 2, "B")) == [None] * 4


@pytest.mark.parametrize("chunk_id,chunks,payload,total,reason", [
    (3, 3, b"x", 3, "chunk_id outside [0, num_chunks_from_msg)"),
    (-1, 3, b"x", 3, "chunk_id outside [0, num_chunks_from_msg)"),
    (0, 0, b"x", 3, "chunk with num_chunks_from_msg below 1"),
    (0, -2, b"x", 3, "chunk with num_chunks_from_msg below 1"),
    (0, 2, b"xxxx", 3, "chunk larger than total_chunk_msg_size"),
    (0, 2, b"x", -1, "chunk larger than total_chunk_msg_size"),
])
def test_metadata_that_cannot_be_right_on_its_own(chunk_id, chunks, payload, total, reason) -> None:
    assert _run(ChunkCheck(), (chunk_id, chunks, payload, total)) == [reason]


def test_chunk_fields_without_uuid_are_refused() -> None:
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, chunk_id=0,
                            num_chunks_from_msg=2, total_chunk_msg_size=2)
    assert "without uuid" in str(ChunkCheck().refusal(parse_entry(build_entry(md, b"x")), 1))


@pytest.mark.parametrize("sequence,expected", [
    ([(0, 3, b"a", 3), (2, 3, b"c", 3)], [None, "chunk out of sequence: a gap or a repeat"]),
    ([(0, 3, b"a", 3), (1, 3, b"b", 3), (1, 3, b"b", 3), (2, 3, b"c", 3)],
     [None, None, "chunk out of sequence: a gap or a repeat", None]),            # repeat skipped
    ([(0, 2, b"a", 2), (0, 2, b"a", 2), (1, 2, b"b", 2)],
     [None, "chunk out of sequence: a gap or a repeat", None]),
    ([(0, 3, b"a", 3), (1, 4, b"b", 3)], [None, "chunk disagrees with the earlier chunks of its message"]),
    ([(0, 3, b"a", 3), (1, 3, b"b", 4)], [None, "chunk disagrees with the earlier chunks of its message"]),
    ([(0, 2, b"aaa", 5), (1, 2, b"bbb", 5)], [None, "chunks add up to more than total_chunk_msg_size"]),
    ([(0, 2, b"a", 5), (1, 2, b"b", 5)], [None, "chunks add up to less than total_chunk_msg_size"]),
])
def test_sequence_that_lies_is_refused_and_does_not_advance(sequence, expected) -> None:
    assert _run(ChunkCheck(), *sequence) == expected


def test_after_a_refusal_the_right_chunk_is_taken() -> None:
    check = ChunkCheck()
    assert _run(check, (0, 2, b"aaa", 5), (1, 2, b"bbbbb", 5), (1, 2, b"bb", 5)) == [
        None, "chunks add up to more than total_chunk_msg_size", None]
