"""Sessions and their leases: what keeps ephemeral keys alive, and what removes them.

Each store opens one session (a row in `strata_sessions` with a lease expiry in wall ms) and a
`SessionKeeper` thread that, every `tick_s = min(lease/6, 0.5 s)`:
- renews this session's lease every lease/3 (expiry = now + lease). If the row is gone, another
  store reaped us (we were stalled past the lease): the session is expired for good and
  ephemeral creates raise `SessionExpired` (as with ZooKeeper; open a new store to go on);
- reaps: any expired session, and ephemeral keys whose owner has no session row, are deleted in
  a write transaction that re-checks the expiry under the write lock (so a session renewed in
  between is left alone). Deletions go through the change log, so watchers see them. Any live
  store reaps, so a dead owner's keys vanish within lease + tick after its last renewal;
- prunes change-log rows older than `metadata_changelog_keep_ms` (at most every 1/10 of it).

What must hold: a session row that exists with an expiry in the future keeps its keys; once a
session is reaped its row is gone, so its owner can never renew it back to life.
Clocks: expiry compares wall ms of different hosts, so their clocks must agree to well within a
lease (NTP); the keeper renews at a third of the lease to leave room for that and for stalls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import sqlalchemy as sa

from common.clock import Clock
from common.errors import StrataError
from metadata import sql_ops
from metadata.sql_schema import Database, changes, keys, sessions

log = logging.getLogger("strata.metadata.sessions")

TICK_S_MAX = 0.5


def open_session(db: Database, session_id: str, lease_ms: int, now_ms: int) -> None:
    db.run_write("open session", lambda conn: conn.execute(sessions.insert().values(
        id=session_id, lease_expiry_ms=now_ms + lease_ms, created_ms=now_ms)))


def renew(db: Database, session_id: str, lease_ms: int, now_ms: int) -> bool:
    """Push this session's expiry out; False if the session no longer exists."""
    def renew_row(conn: sa.Connection) -> bool:
        result = conn.execute(sa.update(sessions).where(sessions.c.id == session_id)
                              .values(lease_expiry_ms=now_ms + lease_ms))
        return result.rowcount == 1

    return db.run_write("renew session", renew_row)


def end_session(db: Database, session_id: str, now_ms: int) -> int:
    """Delete this session's ephemeral keys (logged) and its row; returns keys deleted."""
    def end(conn: sa.Connection) -> int:
        deleted = sql_ops.delete_where(conn, keys.c.ephemeral_owner == session_id, now_ms)
        conn.execute(sa.delete(sessions).where(sessions.c.id == session_id))
        return deleted

    return db.run_write("end session", end)


def _orphans() -> sa.ColumnElement[bool]:
    """Ephemeral keys whose owner session row is gone."""
    return sa.and_(keys.c.ephemeral_owner.is_not(None),
                   keys.c.ephemeral_owner.not_in(sa.select(sessions.c.id)))


def _anything_to_reap(conn: sa.Connection, now_ms: int) -> bool:
    expired = conn.execute(sa.select(sessions.c.id).where(sessions.c.lease_expiry_ms < now_ms).limit(1)).first()
    orphan = conn.execute(sa.select(keys.c.path).where(_orphans()).limit(1)).first()
    return expired is not None or orphan is not None


def _reap(conn: sa.Connection, now_ms: int) -> tuple[int, int]:
    # re-checked under the write lock: a session renewed since the read above is left alone
    dead = conn.execute(sa.select(sessions.c.id).where(sessions.c.lease_expiry_ms < now_ms)).scalars().all()
    deleted = 0
    if dead:
        deleted += sql_ops.delete_where(conn, keys.c.ephemeral_owner.in_(dead), now_ms)
        conn.execute(sa.delete(sessions).where(sessions.c.id.in_(dead)))
    deleted += sql_ops.delete_where(conn, _orphans(), now_ms)
    return len(dead), deleted


def reap_expired(db: Database, now_ms: int) -> int:
    """Remove expired sessions and orphaned ephemeral keys; returns keys deleted."""
    if not db.run_read("find expired sessions", lambda conn: _anything_to_reap(conn, now_ms)):
        return 0  # the common case: two indexed reads and no write lock
    sessions_reaped, deleted = db.run_write("reap expired sessions", lambda conn: _reap(conn, now_ms))
    if sessions_reaped or deleted:
        log.info("reaped %d expired session(s), %d ephemeral key(s)", sessions_reaped, deleted)
    return deleted


def prune_changes(db: Database, now_ms: int, keep_ms: int) -> int:
    def prune(conn: sa.Connection) -> int:
        result = conn.execute(sa.delete(changes).where(changes.c.committed_ms < now_ms - keep_ms))
        return result.rowcount or 0

    return db.run_write("prune change log", prune)


class SessionKeeper:
    """The background thread described in the module docstring."""

    def __init__(self, db: Database, session_id: str, lease_ms: int, changelog_keep_ms: int,
                 clock: Clock, on_expired: Callable[[], None]) -> None:
        self._db = db
        self._session_id = session_id
        self._lease_ms = lease_ms
        self._keep_ms = changelog_keep_ms
        self._clock = clock
        self._on_expired = on_expired
        # reaping at lease/6 keeps a dead owner's keys within lease + 1 s with room to spare
        self._tick_s = min(lease_ms / 6000, TICK_S_MAX)
        self._stop = threading.Event()
        # monotonic seconds of the last successful renewal / prune (0.0: not yet)
        self._renewed_s = clock.monotonic_s()
        self._pruned_s = 0.0
        self._expired = False  # True once our row was found gone; never goes back
        self._thread = threading.Thread(target=self._run, name=f"metadata-session-{session_id[:8]}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._db.op_timeout_ms / 1000 * 3)

    def _run(self) -> None:
        while not self._stop.wait(self._tick_s):
            try:
                self.tick()
            except StrataError as exc:  # database down: try again next tick
                log.warning("session keeper: %s", exc)

    def tick(self) -> None:
        """One round of renew / reap / prune, whichever is due."""
        now_s = self._clock.monotonic_s()
        if not self._expired and now_s - self._renewed_s >= self._lease_ms / 3000:
            if renew(self._db, self._session_id, self._lease_ms, self._clock.wall_ms()):
                self._renewed_s = now_s
            else:
                self._expired = True
                log.error("metadata session %s expired; its ephemeral keys are gone", self._session_id)
                self._on_expired()
        reap_expired(self._db, self._clock.wall_ms())
        if now_s - self._pruned_s >= self._keep_ms / 10_000:
            prune_changes(self._db, self._clock.wall_ms(), self._keep_ms)
            self._pruned_s = now_s
