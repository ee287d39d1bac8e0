"""Cursor writes are fenced by ownership: two cursor instances on one real metadata store (SQLite
and PostgreSQL) play the old owner (a broker that lost the topic but still holds the cursor in
memory) and the new owner (the broker that opened it since).

What must hold: the stale owner never overwrites the new owner's state (acks, a reset), it is
told so with CursorFenced and stops persisting; the new owner keeps persisting; a lost reply to
our own write is not mistaken for another owner; values written before tokens existed load."""

from __future__ import annotations

import asyncio

import pytest

from common.errors import BadVersion, CursorFenced, MetadataUnavailable
from cursor import codec, metrics
from cursor.cursor_store import CursorStore
from cursor.cursor_writer import CursorWriter
from cursor.managed_cursor import CursorState
from ledger.position import EARLIEST, Position
from metadata.aio import ToThreadStore
from tests.support.ledger_view import MemoryLedgerView

P = Position

# A value written by the cursor codec before writer tokens existed (commit a7cb1c3): md (1, 2),
# acked 5, 6, 9 of ledger 1, a partial batch at (1, 7), a redelivery count, a property.
OLD_FORMAT_VALUE = bytes.fromhex(
    "5354435201789c63606048ad564a4a2c49ce482d56b28a8e36d431d731d689368d8d8dd551ca494d494f2d828a1b"
    "9b80847253803c431d2320b3a028bf20b5a82413a4b15a295bc94aa94ca95647a92835253527b32cb5a812aa0fa8"
    "38b696910101ac0c1818207c26060120c9cac0c6c0c900008b33201f")


def view_with(entries: int) -> MemoryLedgerView:
    return MemoryLedgerView([[(100, 1, i) for i in range(entries)]])


def load_md(store, ml: str = "t", name: str = "s") -> Position:
    """The persisted mark-delete, read without claiming the cursor."""
    found = store.get(CursorStore(ToThreadStore(store), ml).path(name))
    return codec.decode(found.value).mark_delete


def test_stale_owner_never_overwrites_the_new_owners_cursor(backend_store):
    """The audited bug: A (stale, md 50 in memory) overwrote B's saved md 10, and B's later
    flushes all lost compare-and-set until its own md passed 50."""
    async def go():
        view = view_with(100)
        a = await CursorStore(ToThreadStore(backend_store), "t").open_cursor(view, "s", start=EARLIEST)
        a.ack_cumulative(P(1, 10))
        await a.flush()                                    # persisted: md 10
        a.ack_cumulative(P(1, 50))                         # in A's memory only
        b = await CursorStore(ToThreadStore(backend_store), "t").load_cursor(view, "s")   # B takes the topic
        assert b.mark_delete_position == P(1, 10)
        fenced = metrics.CURSOR_FENCED_TOTAL
        with pytest.raises(CursorFenced):
            await a.flush()
        assert a.state is CursorState.FENCED and isinstance(a.persist_error, CursorFenced)
        assert metrics.CURSOR_FENCED_TOTAL == fenced + 1
        assert load_md(backend_store) == P(1, 10)    # A wrote nothing
        for entry in (11, 12, 14):
            b.ack([P(1, entry)])
            await b.flush()                                # B persists every time, no BadVersion
            assert b.persist_error is None
        assert load_md(backend_store) == P(1, 12)
        with pytest.raises(CursorFenced):
            a.ack([P(1, 60)])                              # A refuses changes from now on
        await a.close()                                    # and closing writes nothing
        reloaded = await CursorStore(ToThreadStore(backend_store), "t").load_cursor(view, "s")
        assert reloaded.mark_delete_position == P(1, 12) and reloaded.is_acked(P(1, 14))
        assert not reloaded.is_acked(P(1, 13))
    asyncio.run(go())


def test_stale_owner_cannot_undo_the_new_owners_reset(backend_store):
    async def go():
        view = view_with(100)
        a = await CursorStore(ToThreadStore(backend_store), "t").open_cursor(view, "s", start=EARLIEST)
        a.ack_cumulative(P(1, 50))
        await a.flush()
        b = await CursorStore(ToThreadStore(backend_store), "t").load_cursor(view, "s")
        b.seek(P(1, 5))                                    # reset: md moves back to (1, 4)
        await b.flush()
        a.ack([P(1, 52)])                                  # A still thinks md is 50
        with pytest.raises(CursorFenced):
            await a.flush()
        assert load_md(backend_store) == P(1, 4)
        b.ack([P(1, 5)])
        await b.flush()
        assert load_md(backend_store) == P(1, 5)
    asyncio.run(go())


def test_fenced_in_the_background_stops_persisting(backend_store):
    async def go():
        view = view_with(10)
        a = await CursorStore(ToThreadStore(backend_store), "t").open_cursor(view, "s", start=EARLIEST)
        b = await CursorStore(ToThreadStore(backend_store), "t").load_cursor(view, "s")
        b.ack([P(1, 0), P(1, 1)])
        await b.flush()
        failures = metrics.CURSOR_PERSIST_FAILURES_TOTAL
        a.ack([P(1, 0)])
        await a.persistence.persist_scheduled_now()        # run the scheduled persist now
        assert isinstance(a.persist_error, CursorFenced) and a.state is CursorState.FENCED
        assert metrics.CURSOR_PERSIST_FAILURES_TOTAL == failures + 1
        with pytest.raises(CursorFenced):
            a.ack([P(1, 2)])
        assert not a.persistence.write_scheduled           # nothing scheduled, ever again
        assert load_md(backend_store) == P(1, 1)
    asyncio.run(go())


def test_stale_owner_cannot_delete_the_new_owners_cursor(backend_store):
    async def go():
        view = view_with(10)
        old_store = CursorStore(ToThreadStore(backend_store), "t")
        a = await old_store.open_cursor(view, "s", start=EARLIEST)
        b = await CursorStore(ToThreadStore(backend_store), "t").load_cursor(view, "s")
        b.ack([P(1, 0)])
        await b.flush()
        with pytest.raises(CursorFenced):
            await old_store.delete_cursor(a)               # a stale unsubscribe
        assert load_md(backend_store) == P(1, 0)
        new_store = b.persistence.store
        await new_store.delete_cursor(b)                   # the owner's unsubscribe works
        assert await new_store.names() == []
    asyncio.run(go())


class LostReplyStore:
    """A real store whose next write commits but whose reply is lost (the caller sees
    MetadataUnavailable), as when the connection drops after the commit."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.lose_next_reply = False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _maybe_lose(self, result):
        if self.lose_next_reply:
            self.lose_next_reply = False
            raise MetadataUnavailable("reply lost after commit")
        return result

    def put(self, *args, **kwargs):
        return self._maybe_lose(self.inner.put(*args, **kwargs))

    def put_many(self, ops, watched=True):
        return self._maybe_lose(self.inner.put_many(ops, watched=watched))


@pytest.mark.parametrize("group_commit", [False, True])
def test_a_lost_reply_to_our_own_write_is_written_over(backend_store, group_commit):
    async def go():
        view = view_with(10)
        lossy = LostReplyStore(backend_store)
        writer = CursorWriter(ToThreadStore(lossy)) if group_commit else None
        cursor = await CursorStore(ToThreadStore(lossy), "t", writer).open_cursor(view, "s", start=EARLIEST)
        cursor.ack([P(1, 0), P(1, 3)])
        lossy.lose_next_reply = True
        with pytest.raises(MetadataUnavailable):
            await cursor.flush()                           # committed, but we do not know it
        assert load_md(backend_store) == P(1, 0)
        conflicts = metrics.CURSOR_PERSIST_CONFLICTS_TOTAL
        cursor.ack([P(1, 1)])
        await cursor.flush()                               # lost CAS, our token: write over it
        assert cursor.persist_error is None and cursor.state is CursorState.ACTIVE
        assert metrics.CURSOR_PERSIST_CONFLICTS_TOTAL == conflicts + 1
        assert load_md(backend_store) == P(1, 1)
        cursor.ack([P(1, 2)])
        await cursor.flush()                               # and it goes on persisting
        assert load_md(backend_store) == P(1, 3)
    asyncio.run(go())


def test_a_lost_reply_after_a_takeover_is_still_fenced(backend_store):
    """Our write committed, its reply was lost, then a new owner took over: the stored token
    is theirs, so we must not write over it."""
    async def go():
        view = view_with(10)
        lossy = LostReplyStore(backend_store)
        a = await CursorStore(ToThreadStore(lossy), "t").open_cursor(view, "s", start=EARLIEST)
        a.ack([P(1, 0)])
        lossy.lose_next_reply = True
        with pytest.raises(MetadataUnavailable):
            await a.flush()
        b = await CursorStore(ToThreadStore(backend_store), "t").load_cursor(view, "s")
        assert b.mark_delete_position == P(1, 0)           # B took over A's committed write
        a.ack([P(1, 1)])
        with pytest.raises(CursorFenced):
            await a.flush()
        assert load_md(backend_store) == P(1, 0)
    asyncio.run(go())


def test_an_admin_touch_of_our_own_value_does_not_stop_persisting(backend_store):
    async def go():
        view = view_with(10)
        cursor = await CursorStore(ToThreadStore(backend_store), "t").open_cursor(view, "s", start=EARLIEST)
        cursor.ack([P(1, 0)])
        await cursor.flush()
        path = CursorStore(ToThreadStore(backend_store), "t").path("s")
        found = backend_store.get(path)
        backend_store.put(path, found.value, expected_version=found.version)  # same value, new version
        cursor.ack([P(1, 1), P(1, 2)])
        await cursor.flush()
        assert cursor.persist_error is None
        assert load_md(backend_store) == P(1, 2)
    asyncio.run(go())


def test_a_value_of_the_old_format_loads_and_is_claimed(backend_store):
    async def go():
        view = view_with(20)
        assert codec.writer_of(OLD_FORMAT_VALUE) is None
        cursors = CursorStore(ToThreadStore(backend_store), "t")
        backend_store.create(cursors.path("s"), OLD_FORMAT_VALUE)
        cursor = await cursors.load_cursor(view, "s")
        assert cursor.mark_delete_position == P(1, 2)
        assert [p for p in view.all_positions() if cursor.is_acked(p)] == \
            [P(1, 0), P(1, 1), P(1, 2), P(1, 5), P(1, 6), P(1, 9)]
        assert cursor.batch_ack_set(P(1, 7)) == [0b101]
        assert cursor.redelivery_count(P(1, 3)) == 2 and cursor.properties == {"k": "v"}
        stored = backend_store.get(cursors.path("s")).value
        assert codec.writer_of(stored) == cursor.writer_token is not None
        cursor.ack([P(1, 3), P(1, 4)])
        await cursor.flush()
        assert load_md(backend_store) == P(1, 6)
    asyncio.run(go())


def test_a_second_lost_race_while_writing_over_our_value_is_bad_version(backend_store):
    """Losing three times in a row over our own value (someone keeps touching it) is reported
    as BadVersion, and the cursor stays dirty and ACTIVE (it is not fenced)."""
    class TouchingStore(LostReplyStore):
        def put(self, path, value, *, expected_version=None):
            found = self.inner.get(path)
            self.inner.put(path, found.value, expected_version=found.version)  # a touch
            return self.inner.put(path, value, expected_version=expected_version)

    async def go():
        view = view_with(10)
        touching = TouchingStore(backend_store)
        cursor = await CursorStore(ToThreadStore(backend_store), "t").open_cursor(view, "s", start=EARLIEST)
        cursor.persistence.store.metadata = ToThreadStore(touching)
        cursor.ack([P(1, 0)])
        with pytest.raises(BadVersion):
            await cursor.flush()
        assert cursor.state is CursorState.ACTIVE and cursor.persistence.dirty
        cursor.persistence.store.metadata = ToThreadStore(backend_store)
        await cursor.flush()
        assert load_md(backend_store) == P(1, 0)
    asyncio.run(go())
