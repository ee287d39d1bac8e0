"""The SQL adapter: tables, engines for SQLite and PostgreSQL, transactions, error translation.

This is the only module that knows SQLAlchemy's and the drivers' exceptions; everything it lets
out is a `common.errors` error. A database that cannot be reached, is locked past the bound or
times out becomes `MetadataUnavailable` (retriable).

Tables:
- `strata_keys`: one row per key: path (compared bytewise: collation "C" on PostgreSQL, BINARY
  on SQLite, so a subtree is one index range), value, version (1 on create, +1 per put),
  ephemeral_owner (session id, NULL = persistent), created/modified wall ms.
- `strata_changes`: the change log, one row per create/update/delete, written in the same
  transaction as the change. `seq` is autoincrement and never reused (SQLite AUTOINCREMENT,
  PostgreSQL BIGSERIAL), so a watcher's "last seen seq" stays meaningful after pruning.
- `strata_sessions`: one row per live session: id and lease expiry (wall ms).
- `strata_counters`: next_id() sequences: name and the last id handed out.

One writer at a time (what must hold). Every write transaction holds the database's single
write lock from its first statement to its commit: `BEGIN IMMEDIATE` on SQLite, a
transaction-level advisory lock (`pg_advisory_xact_lock(WRITE_LOCK_KEY)`) taken first thing on
PostgreSQL. So write transactions are totally ordered, across threads, processes and hosts:
- compare-and-set is a plain read-check-write inside the transaction, and a version is won once;
- change-log seqs are allocated in commit order (a seq is drawn under the lock and the lock is
  released only after commit), so a watcher that reads `seq > last_seen` never skips a row that
  commits late: there is no "late" row. This is why we did not need a re-scan window;
- multi-key transactions (reaping a session, recursive delete) cannot deadlock.
The cost is that writes do not run in parallel; metadata writes are small and short, and the
benchmark (`strata perf metadata`) measures what this gives. Reads take no lock (WAL on SQLite,
MVCC on PostgreSQL).
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc

from common import retry
from common.errors import InvalidArgument, MetadataError, MetadataUnavailable
from common.redact import redact_url
from metadata.sql_watchdog import Watchdog

T = TypeVar("T")

# Any constant works; it only has to be the same in every Strata process on the database.
WRITE_LOCK_KEY = 0x5354_5241_5441  # "STRATA"

_PATH = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: INTEGER PK AUTOINCREMENT

schema = sa.MetaData()

keys = sa.Table(
    "strata_keys", schema,
    sa.Column("path", _PATH, primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("ephemeral_owner", sa.String(64), nullable=True, index=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("modified_ms", sa.BigInteger, nullable=False),
)

changes = sa.Table(
    "strata_changes", schema,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("path", _PATH, nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("value", sa.LargeBinary, nullable=True),
    sa.Column("committed_ms", sa.BigInteger, nullable=False, index=True),
    sqlite_autoincrement=True,
)

sessions = sa.Table(
    "strata_sessions", schema,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("lease_expiry_ms", sa.BigInteger, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

counters = sa.Table(
    "strata_counters", schema,
    sa.Column("name", _PATH, primary_key=True),
    sa.Column("last_id", sa.BigInteger, nullable=False),
)


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Turn SQLAlchemy/driver exceptions into Strata errors; let Strata errors through."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError,
            sa_exc.DisconnectionError) as exc:
        raise MetadataUnavailable(f"metadata database unavailable during {what}",
                                  cause=_short(exc)) from None
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise MetadataUnavailable(f"metadata database connection lost during {what}",
                                      cause=_short(exc)) from None
        raise MetadataError(f"metadata database error during {what}", cause=_short(exc)) from None
    except sa_exc.SQLAlchemyError as exc:
        raise MetadataError(f"metadata database error during {what}", cause=_short(exc)) from None


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


class _StaleConnection(Exception):
    """A pooled connection turned out dead before anything was committed: safe to run again."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


# A pooled connection found dead (the server restarted, a watchdog cut it) is tried once more
# on a fresh one; a second stale connection is MetadataUnavailable.
_STALE_RETRY = retry.Retry("metadata.stale_connection", retry_on=_StaleConnection, wait=retry.no_wait(),
                           attempts_max=2)


class Database:
    """One engine plus the transaction discipline above. Thread-safe (the pool is).

    `run_write(what, fn)` / `run_read(what, fn)` run `fn(conn)` in one transaction and return
    its result. A connection found dead before commit (a server restart since it was pooled)
    is discarded and `fn` runs once more on a fresh one; a failure at or after commit is never
    retried (the outcome would be unknown). On PostgreSQL each transaction is armed with the
    client-side watchdog (`metadata.sql_watchdog`) for `op_timeout_ms`."""

    def __init__(self, url: str, op_timeout_ms: int, *, pool_connections: int, pool_overflow_max: int) -> None:
        self.url = url
        self.op_timeout_ms = op_timeout_ms
        sa_url, self.dialect = _normalise_url(url)
        self._watchdog: Watchdog | None = None
        if self.dialect == "sqlite":
            self.engine = _sqlite_engine(sa_url, op_timeout_ms, pool_connections, pool_overflow_max)
        else:
            self.engine = _postgres_engine(sa_url, op_timeout_ms, pool_connections, pool_overflow_max)
            self._watchdog = Watchdog()

    def run_write(self, what: str, fn: Callable[[sa.Connection], T], *, serialized: bool = True) -> T:
        """`fn` in a transaction holding the single write lock; commits if it returns.
        serialized=False: without that lock, for a write that touches only rows no other
        writer's decision depends on except through row locks (a session renewing its own
        lease), so it never queues behind the cluster's other metadata writes."""
        return self._run(what, fn, write=True, serialized=serialized)

    def run_read(self, what: str, fn: Callable[[sa.Connection], T]) -> T:
        """`fn` in a read-only transaction (no lock taken)."""
        return self._run(what, fn, write=False)

    def _run(self, what: str, fn: Callable[[sa.Connection], T], *, write: bool, serialized: bool = True) -> T:
        with translate_errors(what):
            return _STALE_RETRY.call(
                lambda: self._attempt(fn, write, serialized), give_up=lambda stale: MetadataUnavailable(
                    f"metadata database connection lost during {what}", cause=_short(getattr(stale, "cause", stale))))

    def _attempt(self, fn: Callable[[sa.Connection], T], write: bool, serialized: bool = True) -> T:
        with self.engine.connect() as conn:
            token = None
            if self._watchdog is not None:
                try:
                    fd = conn.connection.dbapi_connection.pgconn.socket  # type: ignore[union-attr]
                except Exception as exc:  # psycopg: the pooled connection is already closed
                    conn.invalidate()
                    raise _StaleConnection(exc) from exc
                token = self._watchdog.arm(fd, self.op_timeout_ms / 1000)
            committing = fired = False
            try:
                conn.execution_options(strata_write=write)
                with conn.begin():
                    if write and serialized and self.dialect == "postgresql":
                        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
                    result = fn(conn)
                    committing = True
                return result
            except sa_exc.DBAPIError as exc:
                if token is not None:
                    fired = self._watchdog.disarm(token)  # type: ignore[union-attr]
                    token = None
                if exc.connection_invalidated and not committing and not fired:
                    raise _StaleConnection(exc) from exc
                raise
            finally:
                if token is not None and self._watchdog.disarm(token):  # type: ignore[union-attr]
                    conn.invalidate()  # cut just as it finished: never hand it out again

    def create_schema(self) -> None:
        """Create the tables if missing; safe when several processes start at once."""
        self.run_write("create schema", lambda conn: schema.create_all(conn, checkfirst=True))

    def dispose(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        self.engine.dispose()


def _normalise_url(url: str) -> tuple[sa.URL, str]:
    if not isinstance(url, str):
        raise InvalidArgument("a metadata URL must be a str", type=type(url).__name__)
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise InvalidArgument("SQLite metadata URL must be sqlite:///abs/path/meta.db", url=redact_url(url))
        path = url[len("sqlite:///"):]
        path = path if os.path.isabs(path) else os.path.abspath(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return sa.URL.create("sqlite", database=path), "sqlite"
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        rest = url.split("://", 1)[1]
        return sa.make_url("postgresql+psycopg://" + rest), "postgresql"
    raise InvalidArgument("metadata URL must be sqlite:///... or postgresql://...", url=redact_url(url))


def _sqlite_engine(url: sa.URL, op_timeout_ms: int, pool_connections: int, pool_overflow_max: int) -> sa.Engine:
    engine = sa.create_engine(
        url,
        connect_args={"timeout": op_timeout_ms / 1000, "check_same_thread": False},
        poolclass=sa.pool.QueuePool, pool_size=pool_connections, max_overflow=pool_overflow_max,
        pool_timeout=op_timeout_ms / 1000,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(op_timeout_ms)}")
        _enable_wal(cur, op_timeout_ms)
        cur.execute("PRAGMA synchronous = FULL")  # a committed CAS survives power loss
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get("strata_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _enable_wal(cur: sqlite3.Cursor, op_timeout_ms: int) -> None:
    """Switch a new database to WAL; bounded retries when several processes race to do it.

    Until the file is in WAL mode it is in rollback-journal mode, where two connections that
    both hold a SHARED lock and both want EXCLUSIVE (to change the journal mode) deadlock; SQLite
    breaks that by failing one of them with "database is locked" at once, without calling the
    busy handler. The mode is persistent, so once any process has switched, the read of the
    current mode below is enough and takes no write lock."""
    def switch() -> None:
        mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() != "wal":
            cur.execute("PRAGMA journal_mode = WAL")

    policy = retry.Retry("metadata.sqlite_enable_wal", retry_on=sqlite3.OperationalError,
                         when=lambda exc: "locked" in str(exc) or "busy" in str(exc),
                         wait=retry.jittered(0.005, 0.05), deadline_s=op_timeout_ms / 1000)
    policy.call(switch)


def _postgres_engine(url: sa.URL, op_timeout_ms: int, pool_connections: int, pool_overflow_max: int) -> sa.Engine:
    timeout_s = max(2, math.ceil(op_timeout_ms / 1000))  # libpq's smallest useful value is 2
    options = (f"-c statement_timeout={op_timeout_ms} -c lock_timeout={op_timeout_ms} "
               f"-c idle_in_transaction_session_timeout={max(op_timeout_ms * 4, 10_000)}")
    return sa.create_engine(
        url,
        connect_args={
            "connect_timeout": timeout_s,
            "options": options,
            "application_name": "strata-metadata",
            "keepalives": 1, "keepalives_idle": timeout_s, "keepalives_interval": 1,
            "keepalives_count": 3, "tcp_user_timeout": op_timeout_ms,
        },
        pool_size=pool_connections, max_overflow=pool_overflow_max,
        pool_timeout=op_timeout_ms / 1000,
    )
