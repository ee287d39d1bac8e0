"""Sessions and their leases: what keeps ephemeral keys alive, and what removes them.

Each store opens one session (a row in `strata_sessions` with a lease expiry in wall ms) and a
`SessionKeeper` with two threads. The keeper thread, every `tick_s = min(lease/6, 0.5 s)`:
- renews this session's lease every lease/3 (expiry = wall now + lease). If the row is gone, another
  store reaped us (we were stalled past the lease): the session is expired for good and
  ephemeral creates raise `SessionExpired` (as with ZooKeeper) until `new_session()`;
- reaps: any expired session, and ephemeral keys whose owner has no session row, are deleted in
  a write transaction that re-checks the expiry under the write lock (so a session renewed in
  between is left alone). Deletions go through the change log, so watchers see them. Any live
  store reaps, so a dead owner's keys vanish within lease + tick after its last renewal;
- prunes change-log rows older than `metadata_changelog_keep_ms` (at most every 1/10 of it).
Each database call is bounded by `metadata_op_timeout_ms`, so a tick is too; but a tick stuck on
a dead database may outlast the lease, so the lease thread, which touches no database, checks the
`Lease` by the clock alone every `min(lease/20, 0.1 s)` and announces LEASE_LOST on time.

`Lease` is the store's own view of its session (contract in `metadata.api`, "What must hold"):
valid while monotonic now < start of the last successful renewal + lease - lease/10. The start is
read before the wall clock that sets the database's expiry, so the local lease always ends
before the expiry others compare against (given clocks that agree to well within lease/10).

What must hold: a session row that exists with an expiry in the future keeps its keys; once a
session is reaped its row is gone, so its owner can never renew it back to life. Events are
announced under the lease's lock, so each listener sees them in order and EXPIRED only once.
Clocks: expiry compares wall ms of different hosts, so their clocks must agree to well within a
lease (NTP); the keeper renews at a third of the lease to leave room for that and for stalls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import sqlalchemy as sa

from common.clock import Clock
from common.errors import InvalidArgument, StrataError
from common.ratelimited_log import RateLimitedLog
from metadata import sql_ops
from metadata.api import SessionEvent
from metadata.sql_schema import Database, changes, keys, sessions

log = logging.getLogger("strata.metadata.sessions")
_WARN = RateLimitedLog(log, interval_s=5.0)   # the database being away repeats every tick

TICK_S_MAX = 0.5
LEASE_CHECK_S_MAX = 0.1  # how late LEASE_LOST may be announced, at most
LISTENERS_MAX = 64  # session listeners per store (a few components each register one)


def open_session(db: Database, session_id: str, lease_ms: int, now_ms: int) -> None:
    db.run_write("open session", lambda conn: conn.execute(sessions.insert().values(
        id=session_id, lease_expiry_ms=now_ms + lease_ms, created_ms=now_ms)))


def renew(db: Database, session_id: str, lease_ms: int, now_ms: int) -> bool:
    """Push this session's expiry out; False if the session no longer exists.

    Not behind the store's single write lock: a renewal must not queue behind the cluster's other
    metadata writes, or a busy cluster lapses leases with no fault at all. It is still safe
    against the reaper: both touch the session's row, so its row lock orders them. A reap that
    deletes the row first makes this update find nothing (the session is expired for good); a
    renewal that commits first makes the reap's delete, which re-checks the expiry on that row,
    leave it alone (`_reap`)."""
    def renew_row(conn: sa.Connection) -> bool:
        result = conn.execute(sa.update(sessions).where(sessions.c.id == session_id)
                              .values(lease_expiry_ms=now_ms + lease_ms))
        return result.rowcount == 1

    return db.run_write("renew session", renew_row, serialized=False)


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
    # the expiry is re-checked by the delete itself, row by row: a renewal (which takes no write
    # lock) that committed first leaves its row out; one that comes after finds the row gone
    dead = conn.execute(sa.delete(sessions).where(sessions.c.lease_expiry_ms < now_ms)
                        .returning(sessions.c.id)).scalars().all()
    deleted = 0
    if dead:
        deleted += sql_ops.delete_where(conn, keys.c.ephemeral_owner.in_(dead), now_ms)
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


class Lease:
    """Which session this store holds, whether its lease holds by the local clock, and who is
    told when that changes. Thread-safe: the keeper's threads and every writer use it."""

    def __init__(self, session_id: str, lease_ms: int, clock: Clock, started_s: float) -> None:
        self._clock = clock
        self._valid_s = (lease_ms - lease_ms / 10) / 1000  # lease - margin, margin = lease/10
        self._lock = threading.RLock()  # serialises transitions and the announcements they make
        self.session_id = session_id  # the session renewed now; changed only by reset()
        self._started_s = started_s  # monotonic start of the last successful renewal (or open)
        self._lost = False  # LEASE_LOST announced and no successful renewal since
        self._expired = False  # the session row was found gone; only reset() clears it
        self._listeners: list[Callable[[SessionEvent], None]] = []

    @property
    def expired(self) -> bool:
        return self._expired

    @property
    def renewal_started_s(self) -> float:
        return self._started_s

    def valid(self) -> bool:
        return not self._expired and self._clock.monotonic_s() < self._started_s + self._valid_s

    def check(self) -> bool:
        """`valid()`, announcing LEASE_LOST if it has just become False."""
        if self.valid():
            return True
        with self._lock:
            if not self._lost and not self.valid():
                self._lost = True
                log.error("metadata session %s: lease lapsed by the local clock; writes refused",
                          self.session_id)
                self._announce(SessionEvent.LEASE_LOST)
        return False

    def renewed(self, session_id: str, started_s: float) -> None:
        """A renewal of `session_id` that started at monotonic `started_s` succeeded."""
        with self._lock:
            if session_id != self.session_id or self._expired:
                return  # a renewal of a session replaced meanwhile
            self._started_s = max(self._started_s, started_s)
            if self._lost and self.valid():
                self._lost = False
                log.warning("metadata session %s: lease renewed again; writes allowed", session_id)
                self._announce(SessionEvent.LEASE_REGAINED)

    def expire(self, session_id: str) -> None:
        """`session_id`'s row was found gone: invalid until reset(); EXPIRED once."""
        with self._lock:
            if session_id != self.session_id or self._expired:
                return
            self._expired = True
            log.error("metadata session %s expired; its ephemeral keys are gone", session_id)
            if not self._lost:
                self._lost = True
                self._announce(SessionEvent.LEASE_LOST)
            self._announce(SessionEvent.EXPIRED)

    def reset(self, session_id: str, started_s: float) -> None:
        """A new session, opened at monotonic `started_s`, replaces the current one."""
        with self._lock:
            self.session_id = session_id
            self._started_s = started_s
            self._lost = False
            self._expired = False

    def add_listener(self, callback: Callable[[SessionEvent], None]) -> None:
        if not callable(callback):
            raise InvalidArgument("session listener must be callable")
        with self._lock:
            if len(self._listeners) >= LISTENERS_MAX:
                raise InvalidArgument("too many session listeners", max=LISTENERS_MAX)
            self._listeners.append(callback)

    def _announce(self, event: SessionEvent) -> None:
        for callback in list(self._listeners):
            try:
                callback(event)
            except Exception:  # one broken listener must not silence the others or the keeper
                log.exception("session listener failed on %s", event.value)


class SessionKeeper:
    """The two background threads described in the module docstring."""

    def __init__(self, db: Database, lease: Lease, lease_ms: int, changelog_keep_ms: int,
                 clock: Clock) -> None:
        self._db = db
        self._lease = lease
        self._lease_ms = lease_ms
        self._keep_ms = changelog_keep_ms
        self._clock = clock
        # reaping at lease/6 keeps a dead owner's keys within lease + 1 s with room to spare
        self._tick_s = min(lease_ms / 6000, TICK_S_MAX)
        self._check_s = min(lease_ms / 20_000, LEASE_CHECK_S_MAX)
        self._stop = threading.Event()
        self._pruned_s = 0.0  # monotonic seconds of the last prune (0.0: not yet)
        name = lease.session_id[:8]
        self._threads = [threading.Thread(target=self._run, name=f"metadata-session-{name}", daemon=True),
                         threading.Thread(target=self._watch_lease, name=f"metadata-lease-{name}",
                                          daemon=True)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=self._db.op_timeout_ms / 1000 * 3)

    def _run(self) -> None:
        while not self._stop.wait(self._tick_s):
            try:
                self.tick()
            except StrataError as exc:  # database down: try again next tick
                _WARN.warning("session keeper", "session keeper: %s", exc)

    def _watch_lease(self) -> None:
        while not self._stop.wait(self._check_s):
            self._lease.check()

    def tick(self) -> None:
        """One round of renew / reap / prune, whichever is due."""
        self._lease.check()
        self._renew_if_due()
        reap_expired(self._db, self._clock.wall_ms())
        now_s = self._clock.monotonic_s()
        if now_s - self._pruned_s >= self._keep_ms / 10_000:
            prune_changes(self._db, self._clock.wall_ms(), self._keep_ms)
            self._pruned_s = now_s

    def _renew_if_due(self) -> None:
        lease = self._lease
        started_s = self._clock.monotonic_s()  # read before the wall clock that sets the expiry
        if lease.expired or started_s - lease.renewal_started_s < self._lease_ms / 3000:
            return
        session_id = lease.session_id
        if renew(self._db, session_id, self._lease_ms, self._clock.wall_ms()):
            lease.renewed(session_id, started_s)
        else:
            lease.expire(session_id)
