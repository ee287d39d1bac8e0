"""Cursor persistence: the compressed form, the size limit, coalesced writes, CAS, and a round
trip across a real process restart on a SQLite metadata store."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyroaring import BitMap64

import metadata
from common.clock import ManualClock
from common.config import default_config
from common.errors import (BadVersion, CursorClosed, CursorStateTooLarge, InvalidArgument,
                           MetadataUnavailable)
from cursor import codec, metrics
from cursor.ack_state import AckState
from cursor.cursor_store import CursorStore, escape_segment, unescape_segment
from cursor.cursor_writer import CursorWriter
from metadata.aio import AsyncMetadataStore
from cursor.managed_cursor import ManagedCursor
from ledger.position import EARLIEST, Position
from tests.support.ledger_view import MemoryLedgerView

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path):
    s = metadata.open_store(f"sqlite:///{tmp_path}/meta.db")
    yield s
    s.close()


def view_with(entries: int, ledgers: int = 1) -> MemoryLedgerView:
    return MemoryLedgerView([[(100, 1, i) for i in range(entries)] for _ in range(ledgers)])


def test_codec_round_trip_keeps_everything():
    acks = AckState()
    acks.acked[3] = BitMap64([1, 2, 5])
    acks.acked[7] = BitMap64(range(0, 100_000, 2))
    snap = codec.CursorSnapshot(Position(3, -1), acks, {Position(3, 0): 4},
                                {"delayed": "3:0@17", "é": "ü"})
    back = codec.decode(codec.encode(snap))
    assert back.mark_delete == Position(3, -1)
    assert back.acks.acked == {3: BitMap64([1, 2, 5]), 7: BitMap64(range(0, 100_000, 2))}
    assert back.redelivery_counts == {Position(3, 0): 4}
    assert back.properties == {"delayed": "3:0@17", "é": "ü"}


def test_size_follows_holes_not_span():
    acks = AckState()
    acks.acked[1] = BitMap64(range(1, 10_000_000))  # one hole at 0, ten million acked after it
    small = codec.encode(codec.CursorSnapshot(Position(1, -1), acks))
    acks.acked[1] = BitMap64(range(1, 1_000_000, 2))  # alternating
    alternating = codec.encode(codec.CursorSnapshot(Position(1, -1), acks))
    assert len(small) < 2048  # about 4 bytes per 65536-id container, before zlib
    assert len(alternating) < 4096


@pytest.mark.parametrize("bad", [b"", b"XXXX\x01", b"STCR\x09abc", b"STCR\x01notzlib"])
def test_codec_refuses_garbage(bad):
    with pytest.raises(Exception) as info:
        codec.decode(bad)
    assert "cursor" in str(info.value)


def test_names_escape_reversibly():
    for name in ["sub", "a/b c", "%25", ".", "..", "ünï"]:
        segment = escape_segment(name)
        assert unescape_segment(segment) == name
        assert segment not in (".", "..") and "/" not in segment
    with pytest.raises(InvalidArgument):
        escape_segment("")


def test_writer_group_commits_many_cursors_each_with_its_own_compare_and_set(store):
    """A thousand cursors flushing at once ride a few put_many transactions, not a thousand
    commits; one cursor's lost compare-and-set (another owner moved on) fails only that cursor."""
    async def go():
        view = view_with(100)
        writer = CursorWriter(AsyncMetadataStore(store))
        stores = [CursorStore(store, f"t{i}", writer) for i in range(1_000)]
        quiet = default_config(cursor_persist_interval_ms=60_000)  # no auto-flush: we flush
        cursors = [await s.open_cursor(view, "s", start=EARLIEST, config=quiet) for s in stores]
        for i, cursor in enumerate(cursors):
            cursor.ack_cumulative(Position(1, i % 100))
        # Another owner moved cursor 7 ahead behind our back: our save must lose.
        theirs = await CursorStore(store, "t7").load_cursor(view, "s", config=quiet)
        theirs.ack_cumulative(Position(1, 99))
        await theirs.flush()
        results = await asyncio.gather(*(c.flush() for c in cursors), return_exceptions=True)
        assert isinstance(results[7], BadVersion)
        assert all(r is None for i, r in enumerate(results) if i != 7)
        assert writer.saves == 1_000 and writer.transactions <= 10, (writer.saves, writer.transactions)
        for i in (0, 1, 500, 999):
            again = await CursorStore(store, f"t{i}").load_cursor(view, "s")
            assert again.mark_delete_position == Position(1, i % 100)
    asyncio.run(go())


def test_writer_fails_every_save_of_a_failed_transaction():
    class DownStore:
        async def put_many(self, ops):
            raise MetadataUnavailable("database down")

    async def go():
        writer = CursorWriter(DownStore())
        results = await asyncio.gather(*(writer.put(f"/k{i}", b"v", 1) for i in range(5)),
                                       return_exceptions=True)
        assert all(isinstance(r, MetadataUnavailable) for r in results)
    asyncio.run(go())


def test_state_over_limit_is_an_error_and_a_metric(store):
    async def go():
        view = view_with(50_000)
        cursors = CursorStore(store, "t")
        cursor = await cursors.open_cursor(view, "s", start=EARLIEST)
        cursor.state_bytes_max = 1024
        rng = random.Random(5)
        cursor.ack([Position(1, e) for e in rng.sample(range(1, 50_000), 20_000)] + [Position(1, 4)])
        before = metrics.CURSOR_STATE_TOO_LARGE_TOTAL
        with pytest.raises(CursorStateTooLarge):
            await cursor.flush()
        assert metrics.CURSOR_STATE_TOO_LARGE_TOTAL == before + 1
        assert isinstance(cursor.persist_error, CursorStateTooLarge)
        assert cursor.is_acked(Position(1, 4))  # acks are kept, just not persisted
        cursor.ack_cumulative(Position(1, 49_999))  # the holes close: the state fits again
        await cursor.flush()
        assert cursor.persist_error is None
        again = await CursorStore(store, "t").load_cursor(view, "s")
        assert again.mark_delete_position == Position(1, 49_999)
    asyncio.run(go())


def test_writes_are_coalesced_and_flushed_on_close(store):
    class CountingStore:
        def __init__(self, inner):
            self.inner, self.puts = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put(self, *args, **kwargs):
            self.puts += 1
            return self.inner.put(*args, **kwargs)

    async def go():
        counting = CountingStore(store)
        view = view_with(5000)
        cursors = CursorStore(counting, "topic/with/slashes")
        cursor = await cursors.open_cursor(view, "sub", start=EARLIEST)
        cursor._persist_interval_s = 0.2
        for e in range(0, 5000, 2):
            cursor.ack([Position(1, e)])
        await asyncio.sleep(0.5)
        assert 1 <= counting.puts <= 3
        cursor.ack([Position(1, 4999)])
        await cursor.close()
        with pytest.raises(CursorClosed):
            cursor.ack([Position(1, 1)])
        loaded = await CursorStore(store, "topic/with/slashes").load_cursor(view, "sub")
        assert loaded.is_acked(Position(1, 4999)) and not loaded.is_acked(Position(1, 1))
        assert loaded.mark_delete_position == Position(1, 0)
    asyncio.run(go())


def test_lost_compare_and_set_is_reported(store):
    async def go():
        view = view_with(10)
        mine = await CursorStore(store, "t").open_cursor(view, "s", start=EARLIEST)
        theirs = await CursorStore(store, "t").open_cursor(view, "s", start=EARLIEST)
        theirs.ack([Position(1, 0)])
        await theirs.flush()
        mine.ack([Position(1, 1)])
        with pytest.raises(BadVersion):
            await mine.flush()
    asyncio.run(go())


def test_a_version_bumped_behind_the_cursor_does_not_stop_persisting(store):
    async def go():
        view = view_with(10)
        cursor = await CursorStore(store, "t").open_cursor(view, "s", start=EARLIEST)
        cursor.ack([Position(1, 0)])
        await cursor.flush()
        path = CursorStore(store, "t").path("s")
        found = store.get(path)
        store.put(path, found.value, expected_version=found.version)  # same state, new version
        conflicts = metrics.CURSOR_PERSIST_CONFLICTS_TOTAL
        cursor.ack([Position(1, 1), Position(1, 2)])
        await cursor.flush()
        assert cursor.persist_error is None
        assert metrics.CURSOR_PERSIST_CONFLICTS_TOTAL == conflicts + 1
        cursor.ack([Position(1, 3)])
        await cursor.flush()                       # and it keeps persisting after that
        loaded = await CursorStore(store, "t").load_cursor(view, "s")
        assert loaded.mark_delete_position == Position(1, 3)
    asyncio.run(go())


def test_a_lost_compare_and_set_in_the_background_is_reported_and_retried(store):
    async def go():
        view = view_with(10)
        clock = ManualClock()
        mine = await CursorStore(store, "t").open_cursor(view, "s", start=EARLIEST, clock=clock)
        theirs = await CursorStore(store, "t").open_cursor(view, "s", start=EARLIEST)
        theirs.ack([Position(1, 0), Position(1, 1)])
        await theirs.flush()                       # another owner is ahead: never overwritten
        failures = metrics.CURSOR_PERSIST_FAILURES_TOTAL
        mine.ack([Position(1, 0)])
        await mine._auto_flush()
        assert isinstance(mine.persist_error, BadVersion)
        assert metrics.CURSOR_PERSIST_FAILURES_TOTAL == failures + 1
        loaded = await CursorStore(store, "t").load_cursor(view, "s")
        assert loaded.mark_delete_position == Position(1, 1)
        mine.ack([Position(1, 2)])                 # still dirty: the next change tries again
        assert mine._persist_handle is not None
        mine._persist_handle.cancel()
    asyncio.run(go())


def test_delete_cursor_and_list(store):
    async def go():
        view = view_with(3)
        cursors = CursorStore(store, "persistent://a/b/c")
        one = await cursors.open_cursor(view, "one")
        await cursors.open_cursor(view, "two/x")
        assert await cursors.names() == ["one", "two/x"]
        await cursors.delete_cursor(one)
        assert sorted(await cursors.load_all(view)) == ["two/x"]
    asyncio.run(go())


_WRITER = textwrap.dedent("""
    import asyncio, sys
    import metadata
    from cursor.cursor_store import CursorStore
    from ledger.position import EARLIEST, Position
    from tests.support.ledger_view import MemoryLedgerView

    async def main():
        store = metadata.open_store(sys.argv[1])
        view = MemoryLedgerView([[(100, 3, i) for i in range(1000)], [(50, 1, 2000 + i) for i in range(1000)]])
        cursor = await CursorStore(store, "persistent://t/n/topic").open_cursor(view, "sub", start=EARLIEST)
        cursor.ack([Position(1, e) for e in range(0, 1000) if e % 7 != 3])
        cursor.ack([Position(2, e) for e in range(500, 1000, 2)])
        cursor.ack_batch_indexes(Position(1, 3), [0b101], 3)
        cursor.increment_redelivery([Position(1, 10), Position(1, 10), Position(2, 1)])
        cursor.set_properties({"delayed-index": "rebuild-from-md"})
        await cursor.close()
        store.close()

    asyncio.run(main())
""")

_READER = textwrap.dedent("""
    import asyncio, json, sys
    import metadata
    from cursor.cursor_store import CursorStore
    from ledger.position import Position
    from tests.support.ledger_view import MemoryLedgerView

    async def main():
        store = metadata.open_store(sys.argv[1])
        view = MemoryLedgerView([[(100, 3, i) for i in range(1000)], [(50, 1, 2000 + i) for i in range(1000)]])
        cursor = await CursorStore(store, "persistent://t/n/topic").load_cursor(view, "sub")
        acked = [list(p) for p in view.all_positions() if cursor.is_acked(p)]
        print(json.dumps({"md": list(cursor.mark_delete_position), "read": list(cursor.read_position),
                          "acked": acked, "batch": cursor.batch_ack_set(Position(1, 3)),
                          "redelivery": [cursor.redelivery_count(Position(1, 10)), cursor.redelivery_count(Position(2, 1))],
                          "properties": dict(cursor.properties), "backlog": cursor.stats.backlog_entries}))
        store.close()

    asyncio.run(main())
""")


def test_acks_survive_a_process_restart(tmp_path):
    url = f"sqlite:///{tmp_path}/meta.db"
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", _WRITER, url], check=True, cwd=REPO, env=env, timeout=60)
    out = subprocess.run([sys.executable, "-c", _READER, url], check=True, cwd=REPO, env=env,
                         timeout=60, capture_output=True, text=True)
    state = json.loads(out.stdout)
    expected = [[1, e] for e in range(1000) if e % 7 != 3] + [[2, e] for e in range(500, 1000, 2)]
    assert state["acked"] == expected
    assert state["md"] == [1, 2]
    assert state["read"] == [1, 3]
    assert state["batch"] == [0b101]
    assert state["redelivery"] == [2, 1]
    assert state["properties"] == {"delayed-index": "rebuild-from-md"}
    assert state["backlog"] == 2000 - len(expected)
