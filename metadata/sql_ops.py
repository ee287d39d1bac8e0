"""The statements of each store operation, run inside a transaction `metadata.sql_schema` opened.

Every function here takes a connection already holding the write lock (for writes) and does the
whole read-check-write; because writes are serialised (see sql_schema), a check made here still
holds at commit. Every change to `strata_keys` is logged to `strata_changes` by `log_change` in
the same transaction, so watchers see exactly the committed changes, in commit order.

What must hold: a version goes 1, 2, 3... per key lifetime; a delete logs version 0 and no value.
"""

from __future__ import annotations

import sqlalchemy as sa

from common.errors import AlreadyExists, BadVersion, NotEmpty, NotFound, SessionExpired
from metadata.api import EventKind, Versioned
from metadata.paths import child_name, descendant_bounds
from metadata.sql_schema import changes, counters, keys, sessions


def log_change(conn: sa.Connection, path: str, kind: EventKind, version: int,
               value: bytes | None, now_ms: int) -> None:
    conn.execute(changes.insert().values(path=path, kind=kind.value, version=version,
                                         value=value, committed_ms=now_ms))


def get(conn: sa.Connection, path: str) -> Versioned | None:
    row = conn.execute(
        sa.select(keys.c.value, keys.c.version, keys.c.ephemeral_owner).where(keys.c.path == path)
    ).first()
    if row is None:
        return None
    return Versioned(value=bytes(row.value), version=int(row.version), ephemeral_owner=row.ephemeral_owner)


def _version_of(conn: sa.Connection, path: str) -> int | None:
    return conn.execute(sa.select(keys.c.version).where(keys.c.path == path)).scalar()


def check_session_alive(conn: sa.Connection, session_id: str, now_ms: int) -> None:
    expiry = conn.execute(
        sa.select(sessions.c.lease_expiry_ms).where(sessions.c.id == session_id)
    ).scalar()
    if expiry is None or expiry < now_ms:
        raise SessionExpired("this store's session has expired", session=session_id)


def create(conn: sa.Connection, path: str, value: bytes, owner: str | None, now_ms: int) -> int:
    if _version_of(conn, path) is not None:
        raise AlreadyExists("key already exists", path=path)
    conn.execute(keys.insert().values(path=path, value=value, version=1, ephemeral_owner=owner,
                                      created_ms=now_ms, modified_ms=now_ms))
    log_change(conn, path, EventKind.CREATED, 1, value, now_ms)
    return 1


def put(conn: sa.Connection, path: str, value: bytes, expected_version: int | None, now_ms: int) -> int:
    """Create or overwrite; with expected_version, compare-and-set (-1: must not exist)."""
    if expected_version == -1:
        if _version_of(conn, path) is not None:
            raise BadVersion("key exists but expected_version=-1", path=path)
        return create(conn, path, value, None, now_ms)
    stmt = sa.update(keys).where(keys.c.path == path)
    if expected_version is not None:
        stmt = stmt.where(keys.c.version == expected_version)
    stmt = stmt.values(value=value, version=keys.c.version + 1, modified_ms=now_ms).returning(keys.c.version)
    new_version = conn.execute(stmt).scalar()
    if new_version is None:
        current = _version_of(conn, path)
        if expected_version is None:  # absent: create (we hold the write lock, nobody races us)
            return create(conn, path, value, None, now_ms)
        if current is None:
            raise NotFound("no such key", path=path)
        raise BadVersion("version mismatch", path=path, expected=expected_version, actual=current)
    log_change(conn, path, EventKind.UPDATED, int(new_version), value, now_ms)
    return int(new_version)


def has_descendants(conn: sa.Connection, path: str) -> bool:
    low, high = descendant_bounds(path)
    row = conn.execute(
        sa.select(keys.c.path).where(keys.c.path > low, keys.c.path < high).limit(1)
    ).first()
    return row is not None


def delete(conn: sa.Connection, path: str, expected_version: int | None, now_ms: int) -> None:
    current = _version_of(conn, path)
    if current is None:
        raise NotFound("no such key", path=path)
    if expected_version is not None and expected_version != current:
        raise BadVersion("version mismatch", path=path, expected=expected_version, actual=current)
    if has_descendants(conn, path):
        raise NotEmpty("key has children; delete them first or use delete_recursive", path=path)
    conn.execute(sa.delete(keys).where(keys.c.path == path))
    log_change(conn, path, EventKind.DELETED, 0, None, now_ms)


def delete_where(conn: sa.Connection, where: sa.ColumnElement[bool], now_ms: int) -> int:
    """Delete every key matching `where`, deepest first, logging each; returns how many."""
    paths = conn.execute(sa.select(keys.c.path).where(where)).scalars().all()
    for path in sorted(paths, reverse=True):  # children sort after parents: delete them first
        conn.execute(sa.delete(keys).where(keys.c.path == path))
        log_change(conn, path, EventKind.DELETED, 0, None, now_ms)
    return len(paths)


def subtree(path: str) -> sa.ColumnElement[bool]:
    low, high = descendant_bounds(path)
    if path == "/":
        return keys.c.path > low
    return sa.or_(keys.c.path == path, sa.and_(keys.c.path > low, keys.c.path < high))


def children(conn: sa.Connection, path: str) -> list[str]:
    low, high = descendant_bounds(path)
    rows = conn.execute(sa.select(keys.c.path).where(keys.c.path > low, keys.c.path < high))
    return sorted({child_name(path, row.path) for row in rows})


def list_prefix(conn: sa.Connection, path: str, limit: int) -> list[tuple[str, Versioned]]:
    rows = conn.execute(
        sa.select(keys.c.path, keys.c.value, keys.c.version, keys.c.ephemeral_owner)
        .where(subtree(path)).order_by(keys.c.path).limit(limit)
    )
    return [(r.path, Versioned(bytes(r.value), int(r.version), r.ephemeral_owner)) for r in rows]


def next_id(conn: sa.Connection, name: str) -> int:
    stmt = (sa.update(counters).where(counters.c.name == name)
            .values(last_id=counters.c.last_id + 1).returning(counters.c.last_id))
    value = conn.execute(stmt).scalar()
    if value is None:  # first draw; we hold the write lock so nobody inserts concurrently
        conn.execute(counters.insert().values(name=name, last_id=1))
        return 1
    return int(value)
