"""Session leases, reaping and change-log pruning, driven by a manual clock (no sleeping)."""

from __future__ import annotations

import pytest

from common.clock import ManualClock
from common.config import default_config
from common.errors import LeaseLost, MetadataUnavailable, SessionExpired
from metadata import open_store
from metadata.sessions import prune_changes
from tests.metadata.test_conformance import wait_for


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_a_stalled_session_is_reaped_and_stays_expired(store_url, clock):
    config = default_config(metadata_session_lease_ms=2_000)
    stalled = open_store(store_url, config=config, clock=clock)
    live = open_store(store_url, config=config, clock=clock)
    # The keepers' own threads would tick on the shared clock too (the stalled one could renew
    # itself between advance_s and the tick below): stop them and drive every tick by hand.
    stalled._keeper.stop()
    live._keeper.stop()
    try:
        stalled.create("/owned/a", b"", ephemeral=True)
        stalled.create("/owned/b", b"", ephemeral=True)
        clock.advance_s(2.5)  # both leases ran out; only `live` gets to run its keeper
        live._keeper.tick()  # renews itself, then reaps `stalled`
        assert live.get("/owned/a") is None and live.get("/owned/b") is None
        assert live.children("/owned") == []
        stalled._keeper.tick()  # its renewal finds the session gone
        assert stalled.session_expired
        with pytest.raises(SessionExpired):
            stalled.create("/owned/c", b"", ephemeral=True)
        with pytest.raises(LeaseLost):  # a reaped session's store refuses every write now
            stalled.create("/persistent-no-longer", b"")
        assert stalled.get("/persistent-no-longer") is None
        live.create("/owned/mine", b"", ephemeral=True)
        clock.advance_s(1.0)
        live._keeper.tick()
        assert live.get("/owned/mine") is not None  # a renewed session keeps its keys
    finally:
        stalled.close()
        live.close()


def test_change_log_is_pruned_after_keep_ms(store_url, clock):
    config = default_config(metadata_changelog_keep_ms=10_000, metadata_session_lease_ms=60_000)
    store = open_store(store_url, config=config, clock=clock)
    try:
        for i in range(20):
            store.put("/p", str(i).encode())
        assert prune_changes(store._db, clock.wall_ms(), 10_000) == 0  # all recent: kept
        clock.advance_s(11)
        store.put("/p", b"recent")
        assert prune_changes(store._db, clock.wall_ms(), 10_000) == 20
        seen = []
        store.watch("/p", seen.append)  # seqs are not reused after pruning
        store.put("/p", b"after")
        wait_for(lambda: len(seen) == 1, what="event after pruning")
        assert (seen[0].value, seen[0].version) == (b"after", 22)
    finally:
        store.close()


def test_a_stalled_watch_poller_is_detected(store_url, clock):
    config = default_config(metadata_changelog_keep_ms=10_000, metadata_session_lease_ms=60_000)
    store = open_store(store_url, config=config, clock=clock)
    try:
        store.watch("/w", lambda event: None)
        store._watches.poll_once()
        assert store._watches.stalls == 0
        clock.advance_s(11)  # longer than the change log is kept: rows may be gone
        store._watches.poll_once()
        assert store._watches.stalls >= 1
    finally:
        store.close()


def test_a_renewal_does_not_queue_behind_other_metadata_writes(pg_server):
    """Found by `strata chaos`: every metadata write takes one cluster-wide lock, and renewals took
    it too, so under write load a broker's lease lapsed with no fault at all. A renewal now
    takes only its own row's lock: with the write lock held elsewhere, it still goes through."""
    import psycopg

    from metadata.sessions import renew
    from metadata.sql_schema import WRITE_LOCK_KEY

    url = pg_server.fresh_database_url("meta")
    store = open_store(url, config=default_config(metadata_session_lease_ms=3_000, metadata_op_timeout_ms=2_000))
    holder = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
    try:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))   # held until rollback
        assert renew(store._db, store.session_id, 3_000, store._clock.wall_ms())
        with pytest.raises(MetadataUnavailable):   # a serialized write waits, bounded by the op timeout
            store._db.run_write("blocked write", lambda conn: None)
    finally:
        holder.rollback()
        holder.close()
        store.close()


def test_a_reaped_session_cannot_be_renewed_back(store_url, clock):
    """The reaper deletes a session by re-checking its expiry on the row itself; a renewal after
    that finds nothing (the session stays expired), one before it keeps the row."""
    from metadata.sessions import reap_expired, renew

    config = default_config(metadata_session_lease_ms=2_000)
    a = open_store(store_url, config=config, clock=clock)
    b = open_store(store_url, config=config, clock=clock)
    a._keeper.stop()
    b._keeper.stop()
    try:
        clock.advance_s(2.5)
        assert renew(b._db, b.session_id, 2_000, clock.wall_ms())       # b renews before the reap
        reap_expired(b._db, clock.wall_ms())                               # a is reaped, b is not
        assert not renew(a._db, a.session_id, 2_000, clock.wall_ms())
        assert renew(b._db, b.session_id, 2_000, clock.wall_ms())
    finally:
        a.close()
        b.close()
