"""The one conformance suite every MetadataStore backend must pass (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from common.errors import (
    AlreadyExists,
    BadVersion,
    InvalidArgument,
    InvalidPath,
    NotEmpty,
    NotFound,
    ShuttingDown,
    ValueTooLarge,
)
from metadata import open_store
from metadata.aio import AsyncMetadataStore
from metadata.api import EventKind, Versioned, WatchEvent


def wait_for(predicate, timeout_s: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def test_create_get_and_versions(store):
    assert store.get("/a") is None
    assert store.create("/a", b"one") == 1
    assert store.get("/a") == Versioned(b"one", 1, None)
    with pytest.raises(AlreadyExists):
        store.create("/a", b"again")
    assert store.put("/a", b"two") == 2
    assert store.put("/a", b"three") == 3
    assert store.get("/a") == Versioned(b"three", 3, None)
    assert store.put("/fresh", b"") == 1  # put without expected_version creates
    assert store.get("/fresh").value == b""


def test_put_compare_and_set(store):
    store.create("/cas", b"v1")
    assert store.put("/cas", b"v2", expected_version=1) == 2
    with pytest.raises(BadVersion):
        store.put("/cas", b"lost", expected_version=1)
    assert store.get("/cas") == Versioned(b"v2", 2, None)
    with pytest.raises(NotFound):
        store.put("/absent", b"x", expected_version=1)
    assert store.put("/new", b"x", expected_version=-1) == 1
    with pytest.raises(BadVersion):
        store.put("/new", b"y", expected_version=-1)


def test_put_many_checks_each_op_and_commits_the_rest(store):
    store.create("/many/a", b"a1")
    store.create("/many/b", b"b1")
    seen: list[WatchEvent] = []
    store.watch("/many", seen.append)
    results = store.put_many([("/many/a", b"a2", 1), ("/many/b", b"lost", 7),
                              ("/many/absent", b"x", 1), ("/many/c", b"c1", -1), ("/many/a", b"a3", 2)])
    assert results[0] == 2 and results[3] == 1 and results[4] == 3
    assert isinstance(results[1], BadVersion) and isinstance(results[2], NotFound)
    assert store.get("/many/a") == Versioned(b"a3", 3, None)
    assert store.get("/many/b") == Versioned(b"b1", 1, None)   # the failed op wrote nothing
    assert store.get("/many/absent") is None
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [(e.path, e.version) for e in seen] == [("/many/a", 2), ("/many/c", 1), ("/many/a", 3)]
    assert store.put_many([]) == []
    with pytest.raises(InvalidPath):
        store.put_many([("no-slash", b"x", None)])


def test_delete_compare_and_set(store):
    store.create("/d", b"x")
    store.put("/d", b"y")
    with pytest.raises(BadVersion):
        store.delete("/d", expected_version=1)
    store.delete("/d", expected_version=2)
    assert store.get("/d") is None
    with pytest.raises(NotFound):
        store.delete("/d")
    assert store.create("/d", b"z") == 1  # a re-created key starts again at version 1


def test_children_and_subtrees(store):
    for path in ["/t/a", "/t/b/x", "/t/b/y/z", "/t/c", "/tt/a", "/t-x/q", "/u"]:
        store.create(path, b"")
    assert store.children("/t") == ["a", "b", "c"]
    assert store.children("/t/b") == ["x", "y"]
    assert store.children("/t/a") == []
    assert store.children("/nothing") == []
    assert store.children("/") == ["t", "t-x", "tt", "u"]
    with pytest.raises(NotFound):  # an implicit parent is not a key
        store.delete("/t/b/y")
    store.create("/t/b", b"parent")
    with pytest.raises(NotEmpty):
        store.delete("/t/b")
    listed = [p for p, _ in store.list_prefix("/t/b")]
    assert listed == ["/t/b", "/t/b/x", "/t/b/y/z"]
    assert store.delete_recursive("/t") == 5
    assert store.children("/t") == []
    assert store.get("/tt/a") is not None and store.get("/t-x/q") is not None


def test_next_id_is_a_sequence_per_name(store):
    assert [store.next_id("ledger") for _ in range(5)] == [1, 2, 3, 4, 5]
    assert store.next_id("other") == 1
    assert store.next_id("ledger") == 6


def test_ids_survive_reopen(store_url, fast_config):
    first = open_store(store_url, config=fast_config)
    drawn = [first.next_id("x") for _ in range(3)]
    first.close()
    second = open_store(store_url, config=fast_config)
    try:
        assert second.next_id("x") == drawn[-1] + 1
    finally:
        second.close()


def test_ephemeral_keys_vanish_on_close(store_url, fast_config):
    owner = open_store(store_url, config=fast_config)
    other = open_store(store_url, config=fast_config)
    try:
        owner.create("/live/broker-1", b"addr", ephemeral=True)
        owner.create("/persistent", b"stays")
        seen = other.get("/live/broker-1")
        assert seen is not None and seen.ephemeral_owner == owner.session_id
        assert owner.session_id != other.session_id
        events: list[WatchEvent] = []
        other.watch("/live", events.append)
        owner.close()
        assert other.get("/live/broker-1") is None
        assert other.get("/persistent") is not None
        wait_for(lambda: [e.kind for e in events] == [EventKind.DELETED], what="DELETED event")
        with pytest.raises(ShuttingDown):
            owner.get("/persistent")
    finally:
        owner.close()
        other.close()


def test_watch_sees_every_change_in_order(store):
    events: list[WatchEvent] = []
    root_events: list[WatchEvent] = []
    store.create("/w/before", b"not seen")
    watch = store.watch("/w", events.append)
    store.watch("/", root_events.append)
    store.create("/w/a", b"1")
    store.put("/w/a", b"2", expected_version=1)
    store.create("/wx", b"outside the prefix")
    store.create("/w", b"the prefix itself")
    for i in range(50):
        store.put("/w/b", str(i).encode())
    store.delete("/w/a")
    wait_for(lambda: len(events) == 54, what="54 events")
    assert [(e.kind, e.path, e.version) for e in events[:3]] == [
        (EventKind.CREATED, "/w/a", 1), (EventKind.UPDATED, "/w/a", 2), (EventKind.CREATED, "/w", 1)]
    assert [e.value for e in events[3:53]] == [str(i).encode() for i in range(50)]
    assert events[-1] == WatchEvent(EventKind.DELETED, "/w/a", None, 0)
    wait_for(lambda: len(root_events) == 55, what="root watch events")
    watch.cancel()
    store.create("/w/after-cancel", b"")
    wait_for(lambda: len(root_events) == 56, what="event after cancel")
    assert len(events) == 54


def test_unwatched_writes_are_stored_but_no_watch_sees_them(store):
    """put_many(watched=False) (cursor positions) stays out of the change log: the keys hold the
    values, a watch on the root sees only the watched write made after them."""
    root_events: list[WatchEvent] = []
    store.watch("/", root_events.append)
    assert store.put_many([("/quiet/a", b"1", None), ("/quiet/b", b"2", None)], watched=False) == [1, 1]
    assert store.put_many([("/quiet/a", b"3", 1)], watched=False) == [2]
    store.create("/loud", b"seen")
    wait_for(lambda: len(root_events) >= 1, what="the watched write")
    time.sleep(0.3)
    assert [e.path for e in root_events] == ["/loud"]
    assert store.get("/quiet/a").value == b"3" and store.get("/quiet/b").value == b"2"


def test_watch_sees_changes_from_another_store(store_url, fast_config):
    a = open_store(store_url, config=fast_config)
    b = open_store(store_url, config=fast_config)
    try:
        events: list[WatchEvent] = []
        a.watch("/x", events.append)
        writers = [threading.Thread(target=lambda i=i: [b.put(f"/x/{i}", bytes([n])) for n in range(20)])
                   for i in range(3)]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        wait_for(lambda: len(events) == 60, what="60 events from the other store")
        for i in range(3):  # per key, versions arrive in order 1..20
            assert [e.version for e in events if e.path == f"/x/{i}"] == list(range(1, 21))
    finally:
        a.close()
        b.close()


def test_a_change_reaches_another_stores_watcher_within_about_a_second(store_url):
    """The issue's bound, with the default poll interval: every change by one store reaches a
    watcher on another store (another process in production) within about 1 s. Measured per
    change; the median must be well under it and no change may take more than 1 s plus slack for
    a loaded 2-core machine."""
    a, b = open_store(store_url), open_store(store_url)
    try:
        arrived: dict[bytes, float] = {}
        a.watch("/lat", lambda e: arrived.setdefault(e.value, time.monotonic()))
        delays = []
        for i in range(10):
            value = str(i).encode()
            sent = time.monotonic()
            b.put("/lat/k", value)
            wait_for(lambda value=value: value in arrived, what=f"change {i} at the other store")
            delays.append(arrived[value] - sent)
        delays.sort()
        assert delays[len(delays) // 2] < 0.5, delays
        assert delays[-1] < 1.0 + 1.0, delays
    finally:
        a.close()
        b.close()


def test_bad_input_is_refused(store):
    for bad in ["", "a", "/", "/a/", "//a", "/a//b", "/a b", "/a/./b", "/a/..", "/é", "/" + "a" * 1100, None, 5]:
        with pytest.raises(InvalidPath):
            store.get(bad)
        with pytest.raises(InvalidPath):
            store.create(bad, b"")
    with pytest.raises(InvalidArgument):
        store.create("/s", "text, not bytes")
    with pytest.raises(InvalidArgument):
        store.put("/s", 12)
    with pytest.raises(InvalidArgument):
        store.put("/s", b"", expected_version=0)
    with pytest.raises(InvalidArgument):
        store.put("/s", b"", expected_version="1")
    with pytest.raises(InvalidArgument):
        store.next_id("")
    assert store.create("/ok_A-z.0:=@+%", bytearray(b"bytes-like is fine")) == 1


def test_value_size_limit(store_url, fast_config):
    small = fast_config.replace(metadata_value_bytes_max=2_000, cursor_state_bytes_max=1_024)
    s = open_store(store_url, config=small)
    try:
        s.put("/v", b"x" * 2_000)
        with pytest.raises(ValueTooLarge):
            s.put("/v", b"x" * 2_001)
        assert len(s.get("/v").value) == 2_000
    finally:
        s.close()


def test_async_wrapper(store):
    async def main() -> None:
        astore = AsyncMetadataStore(store)
        assert astore.sync is store and astore.session_id == store.session_id
        got: list[tuple[WatchEvent, bool]] = []
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        done = asyncio.Event()

        def on_event(event: WatchEvent) -> None:
            got.append((event, threading.get_ident() == loop_thread))
            if len(got) == 3:
                done.set()

        await astore.watch("/aio", on_event)
        assert await astore.create("/aio/k", b"1") == 1
        assert await astore.put("/aio/k", b"2", expected_version=1) == 2
        with pytest.raises(BadVersion):
            await astore.put("/aio/k", b"3", expected_version=1)
        assert (await astore.get("/aio/k")).value == b"2"
        assert await astore.children("/aio") == ["k"]
        ids = await asyncio.gather(*(astore.next_id("aio") for _ in range(20)))
        assert sorted(ids) == list(range(1, 21))
        await astore.delete("/aio/k")
        await asyncio.wait_for(done.wait(), 5)
        assert [e.kind for e, _ in got] == [EventKind.CREATED, EventKind.UPDATED, EventKind.DELETED]
        assert all(on_loop for _, on_loop in got)
        assert loop.is_running()
        await astore.close()

    asyncio.run(main())
