"""`SqlMetadataStore`: the MetadataStore on SQLite or PostgreSQL through SQLAlchemy Core.

How it works: each call checks its arguments (`metadata.paths`), then runs one transaction
(`metadata.sql_schema.Database`: writes hold the single write lock, reads take none) with the
statements in `metadata.sql_ops`. A `SessionKeeper` thread keeps this store's session alive and
reaps dead ones (`metadata.sessions`); a `WatchPoller` thread tails the change log for watches
(`metadata.watches`). After each committed write the poller is woken, so watchers in the same
process hear of it at once rather than at the next poll.

Every write runs through `_write`: it refuses with `LeaseLost` unless the `Lease` holds, both
before the transaction and inside it after the statements ran, under the write lock, just before
commit. Because write transactions are totally ordered (`metadata.sql_schema`), nobody can reap
this session or take its keys between that last check and the commit; a stall anywhere earlier
is caught by one of the two checks. So a write commits only if the lease held, by the local
clock, at a point where no other writer could have acted on its lapse.

What must hold: after `close()` the session is gone (its ephemeral keys deleted, logged) and
every call raises `ShuttingDown`; the threads are stopped before the engine is disposed. No
write commits while `lease_valid()` is False (the contract in `metadata.api`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

import sqlalchemy as sa

from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config, default_config
from common.errors import InvalidArgument, LeaseLost, SessionExpired, ShuttingDown, StrataError
from metadata import sql_ops
from metadata.api import MetadataStore, SessionEvent, Versioned, Watch, WatchEvent
from metadata.paths import check_expected_version, check_id_name, check_path, check_prefix, check_value
from metadata.sessions import Lease, SessionKeeper, end_session, open_session
from metadata.sql_schema import Database
from metadata.watches import WatchPoller

T = TypeVar("T")
log = logging.getLogger("strata.metadata.store")


class SqlMetadataStore(MetadataStore):
    """See the module docstring; the method contracts are in `metadata.api.MetadataStore`."""

    def __init__(self, url: str, *, config: Config | None = None, clock: Clock | None = None) -> None:
        self._config = config or default_config()
        self._clock = clock or SYSTEM_CLOCK
        self._db = Database(url, self._config.metadata_op_timeout_ms,
                            pool_connections=self._config.metadata_pool_connections,
                            pool_overflow_max=self._config.metadata_pool_overflow_max)
        self.url = url
        self.session_id: str = uuid.uuid4().hex  # the current session (new_session() changes it)
        self._closed = False  # True once close() began; every call then raises ShuttingDown
        self._close_lock = threading.Lock()
        self._session_lock = threading.Lock()  # one new_session() at a time
        lease_ms = self._config.metadata_session_lease_ms
        try:
            self._db.create_schema()
            started_s = self._clock.monotonic_s()  # before the wall clock that sets the expiry
            open_session(self._db, self.session_id, lease_ms, self._clock.wall_ms())
        except BaseException:
            self._db.dispose()
            raise
        self._lease = Lease(self.session_id, lease_ms, self._clock, started_s)
        self._watches = WatchPoller(self._db, self._config, self._clock.monotonic_s)
        self._keeper = SessionKeeper(self._db, self._lease, lease_ms,
                                     self._config.metadata_changelog_keep_ms, self._clock)
        self._keeper.start()

    @property
    def dialect(self) -> str:
        """"sqlite" or "postgresql"."""
        return self._db.dialect

    @property
    def session_expired(self) -> bool:
        """True once this session's row was found reaped (until `new_session()`)."""
        return self._lease.expired

    def _check_open(self) -> None:
        if self._closed:
            raise ShuttingDown("metadata store is closed")

    # --- the session lease ---------------------------------------------------------------------

    def lease_valid(self) -> bool:
        return self._lease.valid()

    def add_session_listener(self, callback: Callable[[SessionEvent], None]) -> None:
        """`callback(event)` runs on the keeper's threads (or a refused writer's): keep it short."""
        self._check_open()
        self._lease.add_listener(callback)

    def new_session(self) -> str:
        """Open a fresh session and make it this store's; the old one, unless already reaped, is
        ended (its ephemeral keys deleted) and if that fails it is left to be reaped."""
        self._check_open()
        lease_ms = self._config.metadata_session_lease_ms
        with self._session_lock:
            old_id, old_expired = self._lease.session_id, self._lease.expired
            new_id = uuid.uuid4().hex
            started_s = self._clock.monotonic_s()
            open_session(self._db, new_id, lease_ms, self._clock.wall_ms())
            self._lease.reset(new_id, started_s)  # first: the keeper's answers for old_id are ignored
            self.session_id = new_id
            if not old_expired:
                try:
                    end_session(self._db, old_id, self._clock.wall_ms())
                except StrataError as exc:
                    log.warning("ending replaced session %s: %s (it will be reaped)", old_id, exc)
        log.info("metadata session %s replaces %s", new_id, old_id)
        return new_id

    def _require_lease(self) -> None:
        if not self._lease.check():
            raise LeaseLost("metadata lease lapsed: writes are refused until it is renewed",
                            session=self._lease.session_id)

    def _write(self, what: str, fn: Callable[[sa.Connection], T]) -> T:
        """`fn` in a write transaction, refused unless the lease holds both before it and, under
        the write lock, after `fn` ran and just before commit (see the module docstring)."""
        self._require_lease()

        def leased(conn: sa.Connection) -> T:
            result = fn(conn)
            if not self._lease.valid():
                raise LeaseLost("metadata lease lapsed during the write; rolled back",
                                session=self._lease.session_id, op=what)
            return result

        try:
            return self._db.run_write(what, leased)
        except LeaseLost:
            self._lease.check()  # announce LEASE_LOST (outside the transaction) if not yet
            raise

    # --- reads ---------------------------------------------------------------------------------

    def get(self, path: str) -> Versioned | None:
        self._check_open()
        path = check_path(path)
        return self._db.run_read("get", lambda conn: sql_ops.get(conn, path))

    def children(self, path: str) -> list[str]:
        self._check_open()
        path = check_prefix(path)
        return self._db.run_read("children", lambda conn: sql_ops.children(conn, path))

    def list_prefix(self, path: str, *, limit: int | None = None) -> list[tuple[str, Versioned]]:
        """`(path, Versioned)` for `path` itself and every key below it, sorted by path, at most
        `limit` of them, never more than `metadata_list_prefix_keys_max` (raise the setting or
        narrow the prefix if you hit it)."""
        self._check_open()
        path = check_prefix(path)
        keys_max = self._config.metadata_list_prefix_keys_max
        limit = keys_max if limit is None else max(1, min(int(limit), keys_max))
        return self._db.run_read("list_prefix", lambda conn: sql_ops.list_prefix(conn, path, limit))

    # --- writes --------------------------------------------------------------------------------

    def create(self, path: str, value: bytes, *, ephemeral: bool = False) -> int:
        self._check_open()
        path = check_path(path)
        value = check_value(value, self._config.metadata_value_bytes_max)
        now_ms = self._clock.wall_ms()
        if ephemeral and self._lease.expired:
            raise SessionExpired("this store's session has expired", session=self.session_id)
        owner = self._lease.session_id if ephemeral else None

        def create(conn: sa.Connection) -> int:
            if owner is not None:
                sql_ops.check_session_alive(conn, owner, now_ms)
            return sql_ops.create(conn, path, value, owner, now_ms)

        version = self._write("create", create)
        self._watches.wake()
        return version

    def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> int:
        self._check_open()
        path = check_path(path)
        value = check_value(value, self._config.metadata_value_bytes_max)
        expected = check_expected_version(expected_version)
        now_ms = self._clock.wall_ms()
        version = self._write("put", lambda conn: sql_ops.put(conn, path, value, expected, now_ms))
        self._watches.wake()
        return version

    def put_many(self, ops: Sequence[tuple[str, bytes, int | None]], *,
                 watched: bool = True) -> list[int | StrataError]:
        self._check_open()
        ops_max = self._config.metadata_put_many_ops_max
        if len(ops) > ops_max:
            raise InvalidArgument("too many ops in one put_many", ops=len(ops), max=ops_max)
        checked = [(check_path(path), check_value(value, self._config.metadata_value_bytes_max),
                    check_expected_version(expected)) for path, value, expected in ops]
        now_ms = self._clock.wall_ms()
        self._require_lease()  # also for an empty batch: a refused store refuses every write
        if not checked:
            return []
        results = self._write("put_many", lambda conn: sql_ops.put_many(conn, checked, now_ms, watched))
        if watched:
            self._watches.wake()
        return results

    def delete(self, path: str, *, expected_version: int | None = None) -> None:
        self._check_open()
        path = check_path(path)
        expected = check_expected_version(expected_version)
        now_ms = self._clock.wall_ms()
        self._write("delete", lambda conn: sql_ops.delete(conn, path, expected, now_ms))
        self._watches.wake()

    def delete_recursive(self, path: str) -> int:
        """Delete `path` and everything below it in one transaction (children first, each
        logged); returns how many keys were deleted (0 if none existed)."""
        self._check_open()
        path = check_prefix(path)
        now_ms = self._clock.wall_ms()
        deleted = self._write(
            "delete_recursive", lambda conn: sql_ops.delete_where(conn, sql_ops.subtree(path), now_ms))
        self._watches.wake()
        return deleted

    def next_id(self, name: str) -> int:
        self._check_open()
        name = check_id_name(name)
        return self._write("next_id", lambda conn: sql_ops.next_id(conn, name))

    # --- watches and lifecycle -----------------------------------------------------------------

    def watch(self, prefix: str, callback: Callable[[WatchEvent], None]) -> Watch:
        self._check_open()
        prefix = check_prefix(prefix)
        if not callable(callback):
            raise InvalidArgument("watch callback must be callable")
        return self._watches.add(prefix, callback)

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._watches.stop()
            self._keeper.stop()
            if not self._lease.expired:
                end_session(self._db, self._lease.session_id, self._clock.wall_ms())
        finally:
            self._db.dispose()

    def __enter__(self) -> SqlMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlMetadataStore({self._db.dialect}, session={self.session_id[:8]})"
