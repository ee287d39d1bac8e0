"""Journal group commit and failure handling; index locations, .idx and checkpoint files."""

from __future__ import annotations

import errno
import threading
import time
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.fileio import FailingFileSystem, OsFileSystem
from bookie.index import (
    LedgerState,
    decode_checkpoint,
    decode_idx,
    encode_checkpoint,
    encode_idx,
    pack_location,
    unpack_location,
)
from bookie.journal import Journal, JournalState, RollItem, WriteItem
from common.errors import ChecksumMismatch


class _Collector:
    """Stands in for the event loop: runs completions at once, in the journal thread."""

    def __init__(self) -> None:
        self.done: list[tuple[object, BaseException | None]] = []
        self.batches = 0
        self.all_done = threading.Event()
        self.expect = 0

    def call_soon_threadsafe(self, fn, *args) -> None:
        fn(*args)

    def on_done(self, batch, error) -> None:
        self.batches += 1
        self.done += [(item.on_durable, error) for item in batch]
        if len(self.done) >= self.expect:
            self.all_done.set()


def _journal(tmp_path, fs=None, wait_ms=5.0, collector=None):
    c = collector or _Collector()
    j = Journal(fs=fs or OsFileSystem(), directory=str(tmp_path), segment_id=1,
                path=str(tmp_path / "1.seg"), on_done=c.on_done,
                call_soon_threadsafe=c.call_soon_threadsafe, group_commit_wait_ms=wait_ms,
                group_commit_bytes_max=1 << 20, skip_fsync=False)
    return j, c


def test_group_commit_shares_fsyncs_and_keeps_order(tmp_path):
    j, c = _journal(tmp_path)
    c.expect = 500
    for i in range(500):
        j.submit(WriteItem([b"%04d" % i], 4, 1, i))
    assert c.all_done.wait(10)
    j.stop()
    assert [d for d, _ in c.done] == list(range(500))
    assert all(e is None for _, e in c.done)
    assert j.fsyncs < 50  # far fewer fsyncs than adds
    assert (tmp_path / "1.seg").read_bytes() == b"".join(b"%04d" % i for i in range(500))


def test_roll_moves_to_the_next_file(tmp_path):
    j, c = _journal(tmp_path, wait_ms=0)
    c.expect = 3
    j.submit(WriteItem([b"one"], 3, 1, "a"))
    j.submit(RollItem(2, str(tmp_path / "2.seg"), "roll"))
    j.submit(WriteItem([b"two"], 3, 2, "b"))
    assert c.all_done.wait(10)
    j.stop()
    assert (tmp_path / "1.seg").read_bytes() == b"one"
    assert (tmp_path / "2.seg").read_bytes() == b"two"


def test_enospc_truncates_the_torn_batch_and_fails_everything_after(tmp_path):
    fs = FailingFileSystem(fail_after_bytes=10)
    j, c = _journal(tmp_path, fs=fs, wait_ms=0)
    c.expect = 1
    j.submit(WriteItem([b"12345678"], 8, 1, "fits"))
    assert c.all_done.wait(10)
    c.all_done.clear()
    c.expect = 3
    j.submit(WriteItem([b"abcdef"], 6, 1, "torn"))
    j.submit(WriteItem([b"x"], 1, 1, "after"))
    assert c.all_done.wait(10)
    j.stop()
    assert c.done[0] == ("fits", None)
    assert all(isinstance(e, OSError) and e.errno == errno.ENOSPC for _, e in c.done[1:])
    assert j.state is JournalState.FAILED
    assert (tmp_path / "1.seg").read_bytes() == b"12345678"  # torn bytes cut off


def test_a_non_os_error_fails_the_journal_instead_of_killing_its_thread(tmp_path):
    class Buggy(OsFileSystem):
        def open_append(self, path):
            f = super().open_append(path)
            f.write_all = lambda buffers: 1 / 0  # a bug in the writer, not a disk error
            return f

    j, c = _journal(tmp_path, fs=Buggy(), wait_ms=0)
    c.expect = 2
    j.submit(WriteItem([b"abc"], 3, 1, "first"))
    j.submit(WriteItem([b"def"], 3, 1, "second"))
    assert c.all_done.wait(10)
    j.stop()
    assert [d for d, _ in c.done] == ["first", "second"]
    assert all(isinstance(e, ZeroDivisionError) for _, e in c.done)
    assert j.state is JournalState.FAILED


def test_stop_is_bounded_when_fsync_hangs_and_nothing_is_acked_early(tmp_path):
    fs = FailingFileSystem()
    j, c = _journal(tmp_path, fs=fs, wait_ms=0)
    c.expect = 1
    fs.hold_fsync()
    j.submit(WriteItem([b"held"], 4, 1, "held"))
    deadline = time.monotonic() + 30
    while fs.fsyncs_held == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fs.fsyncs_held == 1
    started = time.monotonic()
    assert j.stop(timeout_s=0.3) is False  # gave up waiting: the disk "hangs"
    assert time.monotonic() - started < 5
    assert c.done == []  # not reported durable while its fsync has not returned
    fs.release_fsync()
    assert c.all_done.wait(10)
    assert c.done == [("held", None)]
    assert j.stop() is True


@settings(deadline=None)
@given(st.integers(0, 2**30), st.integers(0, 2**40 - 1), st.integers(0, 2**40 - 1))
def test_location_packing_round_trips(segment_id, offset, length):
    assert unpack_location(pack_location(segment_id, offset, length)) == (segment_id, offset, length)


def test_idx_round_trip_and_corruption_detected():
    quads = array("q", [1, 0, 0, 50, 1, 1, 50, 60, 2**62, 3, 110, 10])
    data = encode_idx(quads)
    assert decode_idx(data) == quads
    damaged = bytearray(data)
    damaged[-3] ^= 1
    with pytest.raises(ChecksumMismatch):
        decode_idx(bytes(damaged))
    with pytest.raises(ChecksumMismatch):
        decode_idx(data[:-8])


def test_checkpoint_round_trip_and_corruption_detected():
    states = [LedgerState(1, fenced=True, lac=5, last_entry_id=6, writer_token=b"\x00tok",
                          first_segment_id=3), LedgerState(2)]
    data = encode_checkpoint(7, states)
    replay_from, got = decode_checkpoint(data)
    assert replay_from == 7
    assert [s.to_json() for s in got] == [s.to_json() for s in states]
    with pytest.raises(ChecksumMismatch):
        decode_checkpoint(data.replace(b'\\"lac\\":5', b'\\"lac\\":9'))
