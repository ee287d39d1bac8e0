"""The bookie link's buffered frame reader (bookie/data_link.py `_FrameReader`).

Frames of every size around the scratch buffer's edge, delivered in arbitrary chunks, come out
whole and in order; a bad length or kind is refused from its header alone and the reader stays
dead."""

from __future__ import annotations

import random

import pytest

from bookie.data_link import _SCRATCH_BYTES, _FrameReader
from bookie.frames import HEADER_BYTES, encode_frame
from common.errors import BadRequest

_SIZES = (0, 1, 10, 5000, _SCRATCH_BYTES - HEADER_BYTES - 1, _SCRATCH_BYTES - HEADER_BYTES,
          _SCRATCH_BYTES - HEADER_BYTES + 1, 20000, 131072, 300000)


def _feed(reader: _FrameReader, stream: bytes, rng: random.Random) -> list[tuple[int, bytes]]:
    got, pos = [], 0
    while pos < len(stream):
        buf = reader.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), rng.randint(1, 70000), len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        pos += n
        got += [(kind, bytes(body)) for kind, body in reader.buffer_updated(n)]
    return got


@pytest.mark.parametrize("seed", range(40))
def test_frames_in_any_chunking_come_out_whole_and_in_order(seed):
    rng = random.Random(seed)
    frames = [(rng.choice((2, 4)), rng.randbytes(rng.choice(_SIZES))) for _ in range(rng.randint(1, 12))]
    reader = _FrameReader(1 << 20)
    assert _feed(reader, b"".join(encode_frame(k, b) for k, b in frames), rng) == frames


@pytest.mark.parametrize("header", [(2000).to_bytes(4, "big") + b"\x04",
                                    (0).to_bytes(4, "big") + b"\x04",
                                    (10).to_bytes(4, "big") + b"\x09"])
def test_bad_header_is_refused_before_buffering_and_the_reader_stays_dead(header):
    reader = _FrameReader(1000)
    reader.get_buffer()[:HEADER_BYTES] = header
    with pytest.raises(BadRequest):
        reader.buffer_updated(HEADER_BYTES)
    assert reader._big is None  # nothing of the bad frame's body was given a buffer
    with pytest.raises(BadRequest):
        reader.buffer_updated(1)
