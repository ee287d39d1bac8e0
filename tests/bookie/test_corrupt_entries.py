"""A stored entry whose bytes rot on disk (one flipped payload bit), in process on real files:
the read's CRC check catches it once; the entry is then no longer served (out of the index,
ChecksumMismatch at once, without reading the disk), it is in the to-repair set the
registration reports, and an add of a good copy (a recovery add, so a fenced ledger takes it)
is served again and empties the set. A restart before the repair finds the bad record again
through the sealed segment's .idx; GC keeps that segment until the entry is repaired or
forgotten. Sealed and active segments alike.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bookie import gc
from bookie.corrupt import CorruptEntries
from bookie.record import HEADER_BYTES, RecordKind, RecordScanner
from common.errors import ChecksumMismatch
from tests.bookie.storage_helpers import add, config, entry, opened, read_all


def run(coro):
    return asyncio.run(coro)


def _payload(i: int) -> bytes:
    return b"entry-%d-" % i + bytes(range(256)) * 4


def _flip(segments_dir: Path, ledger_id: int, entry_id: int) -> tuple[Path, int]:
    """Flip one bit in the payload of that entry's record (the first found); (file, offset)."""
    for path in sorted(segments_dir.glob("*.seg")):
        data = path.read_bytes()
        for r in RecordScanner(payload_bytes_max=len(data)).feed(data):
            if r.kind == RecordKind.ADD and (r.ledger_id, r.entry_id) == (ledger_id, entry_id):
                offset = r.offset + HEADER_BYTES + len(r.payload) // 2
                _xor(path, offset)
                return path, offset
    raise AssertionError(f"no record of {ledger_id}:{entry_id}")


def _xor(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:   # a separate fd: the journal's own one is left alone
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x10]))


async def _read_range(s, ledger_id: int, first: int, last: int):
    """(payloads, the error that cut the range short); a range cut at its first entry raises."""
    try:
        entries, error = await s.read(ledger_id, first, last, True)
    except ChecksumMismatch as exc:
        return [], exc
    return [p for _, p, _ in entries], error


def test_corrupt_entry_in_a_sealed_segment_is_dropped_reported_and_repaired(tmp_path):
    async def go():
        s = await opened(tmp_path)
        assert await add(s, [entry(1, i, _payload(i)) for i in range(3)]) == [0] * 3
        await s.close()                                    # sealed: served through its .idx
        path, offset = _flip(tmp_path / "segments", 1, 1)

        s = await opened(tmp_path)
        got, error = await _read_range(s, 1, 0, 2)
        assert got == [_payload(0)] and isinstance(error, ChecksumMismatch)
        assert 1 not in s.ledger(1).entries and (1, 1) in s.corrupt
        assert s.corrupt.report() == [[1, 1]] and s.corrupt.found_total == 1
        await s.close()

        s = await opened(tmp_path)                          # a restart forgets the set ...
        assert len(s.corrupt) == 0
        got, error = await _read_range(s, 1, 1, 1)          # ... and the .idx finds it again
        assert got == [] and isinstance(error, ChecksumMismatch)
        assert s.corrupt.report() == [[1, 1]]
        _xor(path, offset)                                  # the disk is right again, yet the
        got, error = await _read_range(s, 1, 1, 2)          # entry is not served from it
        assert got == [] and isinstance(error, ChecksumMismatch) and "awaiting repair" in error.message
        assert (await _read_range(s, 1, 2, 2))[0] == [_payload(2)]

        await s.fence(1)                                    # the repair is a recovery add
        assert await add(s, [entry(1, 1, _payload(1), lac=-1, recovery=True)], token=b"auditor") == [0]
        assert await read_all(s, 1) == [_payload(i) for i in range(3)]
        assert len(s.corrupt) == 0 and s.corrupt.repaired_total == 1
        assert s.ledger(1).lac == 1                          # the repair's LAC -1 changed nothing
        await s.close()
        _xor(path, offset)                                  # rot the old record again: unused now
        s = await opened(tmp_path)
        assert await read_all(s, 1) == [_payload(i) for i in range(3)]
        assert len(s.corrupt) == 0
        await s.close()
    run(go())


def test_corrupt_entry_in_the_active_segment_is_dropped_and_repaired(tmp_path):
    async def go():
        s = await opened(tmp_path)
        assert await add(s, [entry(7, i, _payload(i)) for i in range(4)]) == [0] * 4
        path, _ = _flip(tmp_path / "segments", 7, 2)
        assert path.stem == f"{s.active_segment_id:010d}"
        got, error = await _read_range(s, 7, 0, 3)
        assert got == [_payload(0), _payload(1)] and isinstance(error, ChecksumMismatch)
        assert 2 not in s.ledger(7).entries and s.corrupt.report() == [[7, 2]]
        got, error = await _read_range(s, 7, 2, 3)          # at once, from the set
        assert got == [] and isinstance(error, ChecksumMismatch)
        assert s.corrupt.found_total == 1                    # reported once
        assert await add(s, [entry(7, 2, _payload(2), lac=-1, recovery=True)]) == [0]
        assert await read_all(s, 7) == [_payload(i) for i in range(4)]
        assert len(s.corrupt) == 0
        await s.close()
        s = await opened(tmp_path)                          # the copy came later: it wins
        assert await read_all(s, 7) == [_payload(i) for i in range(4)]
        await s.close()
    run(go())


def test_gc_keeps_a_segment_whose_corrupt_entry_awaits_repair(tmp_path):
    async def go():
        s = await opened(tmp_path)
        assert await add(s, [entry(3, 0, _payload(0))]) == [0]
        await s.close()
        seg, _ = _flip(tmp_path / "segments", 3, 0)
        s = await opened(tmp_path)
        assert isinstance((await _read_range(s, 3, 0, 0))[1], ChecksumMismatch)
        assert s.index.segments[int(seg.stem)].live_bytes == 0   # dead bytes now ...
        await gc.collect(s)
        assert seg.exists()                                  # ... but kept while awaited
        assert s.forget_corrupt(3, 0) and not s.forget_corrupt(3, 0)
        await gc.collect(s)
        assert not seg.exists()
        await s.close()
    run(go())


def test_compaction_hands_a_corrupt_live_record_over_for_repair(tmp_path):
    async def go():
        s = await opened(tmp_path, config(bookie_gc_compact_live_ratio_max=0.9))
        assert await add(s, [entry(4, i, _payload(i)) for i in range(2)]) == [0, 0]
        assert await add(s, [entry(5, 0, b"x" * 20_000)]) == [0]
        await s.close()
        seg, _ = _flip(tmp_path / "segments", 4, 1)
        s = await opened(tmp_path, config(bookie_gc_compact_live_ratio_max=0.9))
        await s.delete_ledger(5)
        await gc.collect(s)                                  # compaction reads 4:1 back: corrupt
        assert s.corrupt.report() == [[4, 1]] and seg.exists()
        assert int(seg.stem) != s.ledger(4).entries[0] >> 80     # 4:0 moved out
        assert await add(s, [entry(4, 1, _payload(1), lac=-1, recovery=True)]) == [0]
        await s.checkpoint()
        await s.wait_sealed()
        await gc.collect(s)
        assert not seg.exists() and await read_all(s, 4) == [_payload(0), _payload(1)]
        await s.close()
    run(go())


def test_the_set_is_bounded_and_counts_what_did_not_fit():
    corrupt = CorruptEntries(entries_max=2)
    assert corrupt.add(1, 0, 5) and corrupt.add(1, 1, 5) and corrupt.add(1, 1, 6)
    assert not corrupt.add(2, 0, 7) and corrupt.overflow_total == 1 and len(corrupt) == 2
    assert corrupt.report(limit=1) == [[1, 0]] and corrupt.held_segments() == {5, 6}
    assert corrupt.repaired(1, 0) and not corrupt.repaired(1, 0)
    corrupt.forget_ledger(1)
    assert len(corrupt) == 0 and corrupt.found_total == 2


@pytest.mark.parametrize("full", [False, True])
def test_a_full_set_leaves_the_entry_indexed(tmp_path, full):
    async def go():
        s = await opened(tmp_path)
        if full:
            s.corrupt = CorruptEntries(entries_max=1)
            s.corrupt.add(99, 0, 1)
        assert await add(s, [entry(1, 0, _payload(0))]) == [0]
        _flip(tmp_path / "segments", 1, 0)
        for _ in range(2):
            assert isinstance((await _read_range(s, 1, 0, 0))[1], ChecksumMismatch)
        assert (0 in s.ledger(1).entries) is full
        assert s.corrupt.overflow_total == (2 if full else 0)
        await s.close()
    run(go())
