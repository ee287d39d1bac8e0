"""Fuzzing FrameDecoder.feed: whatever bytes arrive, in whatever chunks, the decoder either
returns frames or raises a StrataError (which the broker turns into closing that one
connection); no other exception may escape, so the server can never crash on input."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import StrataError
from entries import entry as entry_format
from proto import pulsar_api_pb2 as pb
from wire import pulsar as codec
from wire.pulsar import CommandType as T

LIMIT = 64 * 1024


def _valid_stream() -> bytes:
    entry = entry_format.build_entry(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2,
                                                        num_messages_in_batch=3), b"payload" * 5)
    send = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=1, num_messages=3))
    sub = pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
        topic="t", subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1, request_id=2))
    return b"".join([codec.encode_payload_command(send, entry), codec.encode_command(sub),
                     codec.encode_message(1, 2, 3, -1, 1, [5], entry), codec.encode_ping(),
                     codec.encode_get_last_message_id_response(1, 2, -1)])


VALID = _valid_stream()


def _feed_all(data: bytes, cuts: list[int]) -> None:
    decoder = codec.FrameDecoder(LIMIT)
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    try:
        for a, b in itertools.pairwise(bounds):
            for frame in decoder.feed(data[a:b]):
                assert frame.command.IsInitialized()
                if frame.entry is not None:
                    assert frame.entry[:2] == b"\x0e\x01"
                    _inspect_entry(frame.entry)
    except StrataError:
        return
    assert decoder.buffered_bytes <= LIMIT + 4


def _inspect_entry(entry: bytes) -> None:
    """What the broker does next with a SEND entry must not crash either."""
    entry_format.verify_entry_checksum(entry)
    try:
        info = entry_format.parse_entry(entry)
    except StrataError:
        return
    (info.num_messages, info.sticky_key, info.deliver_at_time_ms, info.highest_sequence_id,
     info.is_last_chunk, info.marker_type, bytes(info.payload(entry)))


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=2048), st.lists(st.integers(0, 2048), max_size=8))
def test_random_bytes_never_escape_as_foreign_exceptions(data: bytes, cuts: list[int]) -> None:
    _feed_all(data, cuts)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=6),
       st.lists(st.integers(0, len(VALID)), max_size=6))
def test_mutated_valid_streams_never_escape(mutations: list[tuple[int, int]], cuts: list[int]) -> None:
    data = bytearray(VALID)
    for index, value in mutations:
        data[index] = value
    _feed_all(bytes(data), cuts)


@FUZZ
@given(st.integers(0, len(VALID)), st.binary(max_size=64), st.lists(st.integers(0, len(VALID) + 64), max_size=6))
def test_truncated_or_spliced_streams_never_escape(cut: int, junk: bytes, cuts: list[int]) -> None:
    _feed_all(VALID[:cut] + junk + VALID[cut:], cuts)


@FUZZ
@given(st.binary(min_size=0, max_size=512))
def test_arbitrary_command_bodies_in_valid_framing(body: bytes) -> None:
    """Well-framed but arbitrary protobuf: the strict parser is the only line of defence."""
    import struct
    _feed_all(struct.pack(">II", len(body) + 4, len(body)) + body, [])


def test_valid_stream_decodes_fully() -> None:
    frames = codec.FrameDecoder(LIMIT).feed(VALID)
    assert [f.command.type for f in frames] == [T.SEND, T.SUBSCRIBE, T.MESSAGE, T.PING,
                                                T.GET_LAST_MESSAGE_ID_RESPONSE]
