"""Cursor persistence: the compressed form, coalesced writes, group commit, and, in real
processes on a SQLite metadata store, a round trip across a restart and a kill -9 that loses no
ack older than the persist interval. Fencing is in test_fencing.py, the size limit in
test_state_limit.py."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from pyroaring import BitMap64

import metadata
from common.config import default_config
from common.errors import CursorClosed, CursorError, CursorFenced, InvalidArgument, MetadataUnavailable
from cursor import codec
from cursor.ack_state import AckState
from cursor.cursor_store import CursorStore, escape_segment, unescape_segment
from cursor.cursor_writer import CursorWriter
from ledger.position import EARLIEST, Position
from metadata.aio import AsyncMetadataStore, ToThreadStore
from tests.support.ledger_view import MemoryLedgerView

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path):
    s = metadata.open_store(f"sqlite:///{tmp_path}/meta.db")
    yield s
    s.close()


async def wait_until(condition, deadline_s: float) -> None:
    """Poll `condition` until true; fail after `deadline_s` (generous: CI machines are loaded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    while not condition():
        assert loop.time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.01)


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
    with pytest.raises(CursorError, match="cursor"):
        codec.decode(bad)


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
        stores = [CursorStore(ToThreadStore(store), f"t{i}", writer) for i in range(1_000)]
        quiet = default_config(cursor_persist_interval_ms=60_000)  # no auto-flush: we flush
        cursors = [await s.open_cursor(view, "s", start=EARLIEST, config=quiet) for s in stores]
        for i, cursor in enumerate(cursors):
            cursor.ack_cumulative(Position(1, i % 100))
        # Another owner took cursor 7 over behind our back: our save must be fenced.
        theirs = await CursorStore(ToThreadStore(store), "t7").load_cursor(view, "s", config=quiet)
        theirs.ack_cumulative(Position(1, 99))
        await theirs.flush()
        results = await asyncio.gather(*(c.flush() for c in cursors), return_exceptions=True)
        assert isinstance(results[7], CursorFenced)
        assert all(r is None for i, r in enumerate(results) if i != 7)
        assert writer.saves == 1_000 and writer.transactions <= 10, (writer.saves, writer.transactions)
        for i in (0, 1, 500, 999):
            again = await CursorStore(ToThreadStore(store), f"t{i}").load_cursor(view, "s")
            assert again.mark_delete_position == Position(1, i % 100)
    asyncio.run(go())


def test_writer_fails_every_save_of_a_failed_transaction():
    class DownStore:
        async def put_many(self, ops, watched=True):
            raise MetadataUnavailable("database down")

    async def go():
        writer = CursorWriter(DownStore())
        results = await asyncio.gather(*(writer.put(f"/k{i}", b"v", 1) for i in range(5)),
                                       return_exceptions=True)
        assert all(isinstance(r, MetadataUnavailable) for r in results)
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
        cursors = CursorStore(ToThreadStore(counting), "topic/with/slashes")
        cursor = await cursors.open_cursor(view, "sub", start=EARLIEST,  # creates: no put
                                           config=default_config(cursor_persist_interval_ms=50))
        claim_puts = counting.puts
        for e in range(0, 5000, 2):  # 2,500 acks without yielding: one scheduled persist
            cursor.ack([Position(1, e)])
        assert cursor.persistence.write_scheduled and counting.puts == claim_puts
        # the scheduled write has reached the store (dirty turns False before its put runs in a
        # worker thread, so wait for the put itself), then let it finish: flush() takes the
        # same lock and, with nothing dirty, writes nothing more
        await wait_until(lambda: counting.puts > claim_puts, deadline_s=30)
        await cursor.flush()
        assert not cursor.persistence.dirty
        assert counting.puts == claim_puts + 1       # coalesced: one write for all of them
        assert not cursor.persistence.write_scheduled  # and nothing more is due
        cursor.ack([Position(1, 4999)])
        await cursor.close()
        assert counting.puts == claim_puts + 2
        with pytest.raises(CursorClosed):
            cursor.ack([Position(1, 1)])
        loaded = await CursorStore(ToThreadStore(store), "topic/with/slashes").load_cursor(view, "sub")
        assert loaded.is_acked(Position(1, 4999)) and not loaded.is_acked(Position(1, 1))
        assert loaded.mark_delete_position == Position(1, 0)
    asyncio.run(go())


def test_delete_cursor_and_list(store):
    async def go():
        view = view_with(3)
        cursors = CursorStore(ToThreadStore(store), "persistent://a/b/c")
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
    from metadata.aio import ToThreadStore
    from ledger.position import EARLIEST, Position
    from tests.support.ledger_view import MemoryLedgerView

    async def main():
        store = metadata.open_store(sys.argv[1])
        view = MemoryLedgerView([[(100, 3, i) for i in range(1000)], [(50, 1, 2000 + i) for i in range(1000)]])
        cursors = CursorStore(ToThreadStore(store), "persistent://t/n/topic")
        cursor = await cursors.open_cursor(view, "sub", start=EARLIEST)
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
    from metadata.aio import ToThreadStore
    from ledger.position import Position
    from tests.support.ledger_view import MemoryLedgerView

    async def main():
        store = metadata.open_store(sys.argv[1])
        view = MemoryLedgerView([[(100, 3, i) for i in range(1000)], [(50, 1, 2000 + i) for i in range(1000)]])
        cursor = await CursorStore(ToThreadStore(store), "persistent://t/n/topic").load_cursor(view, "sub")
        acked = [list(p) for p in view.all_positions() if cursor.is_acked(p)]
        print(json.dumps({"md": list(cursor.mark_delete_position), "read": list(cursor.read_position),
                          "acked": acked, "batch": cursor.batch_ack_set(Position(1, 3)),
                          "redelivery": [cursor.redelivery_count(Position(1, 10)),
                                         cursor.redelivery_count(Position(2, 1))],
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


_ACKER = textwrap.dedent("""
    import asyncio, sys, time
    import metadata
    from common.config import default_config
    from cursor.cursor_store import CursorStore
    from metadata.aio import ToThreadStore
    from ledger.position import EARLIEST, Position
    from tests.support.ledger_view import MemoryLedgerView

    async def main():
        store = metadata.open_store(sys.argv[1])
        config = default_config(cursor_persist_interval_ms=int(sys.argv[2]))
        view = MemoryLedgerView([[(100, 1, i) for i in range(int(sys.argv[3]))]])
        cursor = await CursorStore(ToThreadStore(store), "persistent://t/n/kill").open_cursor(
            view, "sub", start=EARLIEST, config=config)
        print("ready", flush=True)
        first = 0
        while first < int(sys.argv[3]):
            cursor.ack([Position(1, e) for e in range(first, first + 10) if e % 5 != 4])
            print(f"acked {first + 9} {time.monotonic()}", flush=True)  # after ack() returned
            first += 10
            await asyncio.sleep(0.005)
        await asyncio.sleep(3600)  # done acking: wait for the kill

    asyncio.run(main())
""")


def _read_lines(stream, out: queue.Queue[str]) -> None:
    for line in stream:
        out.put(line.strip())


def test_kill_9_loses_no_ack_older_than_the_persist_interval(tmp_path):
    """A real process acks continuously (a hole every fifth entry) with a 200 ms persist
    interval and is killed with SIGKILL: every ack made more than the interval (plus a generous
    allowance for a loaded machine's scheduling and the commit itself) before the kill is found
    by the next process; nothing that was never acked is."""
    interval_ms, slack_s, entries = 200, 3.0, 200_000
    url = f"sqlite:///{tmp_path}/meta.db"
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-c", _ACKER, url, str(interval_ms), str(entries)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue(maxsize=1_000_000)
    reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    try:
        assert lines.get(timeout=60) == "ready"
        started = time.monotonic()
        while time.monotonic() - started < slack_s + 3.0:  # ack for a while past the allowance
            time.sleep(0.05)
    finally:
        killed_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    reader.join(timeout=60)
    acked = []  # (last entry of the batch, monotonic time its ack() returned)
    while not lines.empty():
        _, last, at = lines.get().split()
        acked.append((int(last), float(at)))
    must_have = max((last for last, at in acked if at <= killed_at - interval_ms / 1000 - slack_s),
                    default=-1)
    assert must_have >= 100, f"the acker made too little progress to test anything: {acked[-3:]}"
    high = max(last for last, _ in acked)

    async def load():
        store = metadata.open_store(url)
        try:
            view = MemoryLedgerView([[(100, 1, i) for i in range(entries)]])
            cursor = await CursorStore(ToThreadStore(store), "persistent://t/n/kill").load_cursor(view, "sub")
            return {e for e in range(entries) if cursor.is_acked(Position(1, e))}
        finally:
            store.close()

    found = asyncio.run(load())
    expected = {e for e in range(must_have + 1) if e % 5 != 4}
    assert expected <= found, f"lost acks: {sorted(expected - found)[:10]}"
    assert all(e <= high and e % 5 != 4 for e in found), "an ack that never happened"
