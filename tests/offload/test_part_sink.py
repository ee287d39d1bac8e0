"""offload.uploader's part sink: whatever sizes pyarrow writes, the parts are the bytes written,
cut at part_bytes, and the tail is the rest."""

from __future__ import annotations

import random

from offload.uploader import _PartSink


def test_parts_are_the_written_bytes_cut_at_part_bytes(seed: int) -> None:
    rng = random.Random(seed)
    for part_bytes in (1, 7, 1000):
        sink = _PartSink(part_bytes)
        written, parts = bytearray(), []
        for _ in range(200):
            data = rng.randbytes(rng.choice((0, 1, rng.randrange(3000))))
            assert sink.write(memoryview(data) if rng.random() < 0.5 else data) == len(data)
            written += data
            parts.extend(sink.take_full())
            assert sink.tell() == len(written)
        tail = sink.take_tail()
        assert all(len(p) == part_bytes for p in parts) and len(tail) < part_bytes
        assert b"".join(parts) + tail == bytes(written)
