"""The data path's frame codec (bookie/frames.py): pure bytes in, frames out."""

from __future__ import annotations

import struct

import pytest

from bookie.frames import FrameDecoder, FrameKind, encode_frame, frame_header
from common.errors import BadRequest


def test_frames_round_trip_whatever_the_chunking():
    frames = [(FrameKind.ADD_REQUEST, b"a" * 10), (FrameKind.READ_REQUEST, b""),
              (FrameKind.ADD_RESPONSE, bytes(range(256)) * 40)]
    wire = b"".join(encode_frame(k, b) for k, b in frames)
    assert frame_header(FrameKind.ADD_REQUEST, 10) + b"a" * 10 == wire[:15]
    for step in (1, 3, 7, 100, len(wire)):
        decoder = FrameDecoder(1 << 20)
        got = []
        for i in range(0, len(wire), step):
            got += decoder.feed(wire[i:i + step])
        assert got == [(int(k), b) for k, b in frames]
        assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("header", [
    struct.pack(">IB", 1001, FrameKind.ADD_REQUEST),   # over the maximum
    struct.pack(">I", 0) + b"\x01",                    # no room for the kind
    struct.pack(">IB", 5, 99),                         # unknown kind
], ids=["oversize", "zero-length", "unknown-kind"])
def test_bad_frame_is_refused_before_buffering_and_the_decoder_stays_dead(header):
    decoder = FrameDecoder(1000)
    good = encode_frame(FrameKind.READ_REQUEST, b"ok")
    assert decoder.feed(good) == [(FrameKind.READ_REQUEST, b"ok")]
    with pytest.raises(BadRequest):
        decoder.feed(header)
    assert decoder.buffered_bytes == 0
    with pytest.raises(BadRequest):
        decoder.feed(good)


def test_random_chunking_of_large_and_small_frames_returns_exact_bodies(seed: int):
    """Frames that arrive whole (views of the chunk) and frames spread over several chunks
    (assembled) come out byte-identical, and the decoder holds nothing between frames."""
    import random

    rng = random.Random(seed)
    frames = [(rng.choice([FrameKind.ADD_REQUEST, FrameKind.READ_RESPONSE]),
               rng.randbytes(rng.choice([0, 1, 100, 4096, 65536, 200_000])))
              for _ in range(60)]
    wire = b"".join(encode_frame(k, b) for k, b in frames)
    decoder = FrameDecoder(1 << 20)
    got, pos = [], 0
    while pos < len(wire):
        step = rng.choice([1, 2, 5, 6, 1000, 65536, 70_000, 300_000])
        got += [(kind, bytes(body)) for kind, body in decoder.feed(wire[pos:pos + step])]
        pos += step
    assert got == [(int(k), b) for k, b in frames]
    assert decoder.buffered_bytes == 0


def test_a_bad_header_split_over_feeds_is_refused_once_complete():
    decoder = FrameDecoder(1000)
    header = struct.pack(">IB", 1001, FrameKind.ADD_REQUEST)
    assert decoder.feed(encode_frame(FrameKind.READ_REQUEST, b"ok") + header[:3]) == \
        [(FrameKind.READ_REQUEST, b"ok")]
    with pytest.raises(BadRequest):
        decoder.feed(header[3:] + b"x" * 500)
    assert decoder.buffered_bytes == 0
