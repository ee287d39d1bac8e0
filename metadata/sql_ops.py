"""The statements of each store operation, run inside a transaction `metadata.sql_schema` opened.

Every function here takes a connection already holding the write lock (for writes) and does the
whole read-check-write; because writes are serialised (see sql_schema), a check made here still
holds at commit. Every change to `strata_keys` is logged to `strata_changes` by `log_change` in
the same transaction, so watchers see exactly the committed changes, in commit order; except
`put_many(watched=False)`, whose writes no watch sees (cursor positions: written often, watched
by no one, read as keys).

What must hold: a version goes 1, 2, 3... per key lifetime; a delete logs version 0 and no value.
"""

from __future__ import annotations

import sqlalchemy as sa

from common.errors import AlreadyExists, BadVersion, NotEmpty, NotFound, SessionExpired, StrataError
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


# Statements of put_many, built once: executemany with a compiled statement costs a fraction of
# one Core statement per key (cache-key generation and compile were ~70% of a per-key put).
_PUT_MANY_UPDATE = (sa.update(keys).where(keys.c.path == sa.bindparam("b_path"))
                    .values(value=sa.bindparam("b_value"), version=sa.bindparam("b_version"),
                            modified_ms=sa.bindparam("b_now")))
_PUT_MANY_INSERT = keys.insert()
_PUT_MANY_LOG = changes.insert()
_IN_CHUNK = 500  # keys per `IN (...)` lookup


def put_many(conn: sa.Connection, ops: list[tuple[str, bytes, int | None]],
             now_ms: int, watched: bool = True) -> list[int | StrataError]:
    """`put` for each op, set-based: one lookup of the current versions, then every check in
    Python (we hold the write lock, so they still hold at commit), then one executemany each for
    the inserts, the updates and the change log, in op order. A failed check writes nothing for
    its op and is returned in its slot; a later op on the same key sees the earlier op's result.
    `watched=False` leaves the change log out (no watch sees these writes)."""
    current: dict[str, int] = {}
    paths = sorted({path for path, _, _ in ops})
    for i in range(0, len(paths), _IN_CHUNK):
        chunk = paths[i:i + _IN_CHUNK]
        current.update(conn.execute(sa.select(keys.c.path, keys.c.version)
                                    .where(keys.c.path.in_(chunk))).all())
    results: list[int | StrataError] = []
    inserts: list[dict] = []
    updates: list[dict] = []
    logged: list[dict] = []
    for path, value, expected in ops:
        version = current.get(path)
        if expected == -1 and version is not None:
            results.append(BadVersion("key exists but expected_version=-1", path=path))
            continue
        if expected is not None and expected != -1:
            if version is None:
                results.append(NotFound("no such key", path=path))
                continue
            if version != expected:
                results.append(BadVersion("version mismatch", path=path, expected=expected, actual=version))
                continue
        if version is None:
            new_version = 1
            inserts.append({"path": path, "value": value, "version": 1, "ephemeral_owner": None,
                            "created_ms": now_ms, "modified_ms": now_ms})
            kind = EventKind.CREATED
        else:
            new_version = version + 1
            updates.append({"b_path": path, "b_value": value, "b_version": new_version, "b_now": now_ms})
            kind = EventKind.UPDATED
        current[path] = new_version
        logged.append({"path": path, "kind": kind.value, "version": new_version, "value": value,
                       "committed_ms": now_ms})
        results.append(new_version)
    if inserts:  # before the updates: a key created and then updated in one batch exists by then
        conn.execute(_PUT_MANY_INSERT, inserts)
    if updates:
        conn.execute(_PUT_MANY_UPDATE, updates)
    if logged and watched:
        conn.execute(_PUT_MANY_LOG, logged)
    return results


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
