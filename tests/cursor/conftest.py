"""Fixtures for the cursor tests: a real metadata store on each backend (SQLite, and a database on
the suite's one PostgreSQL server, `pg_server` in tests/conftest.py, which fails rather than
skips when it cannot start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import metadata


@pytest.fixture(params=["sqlite", "postgres"])
def backend_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[object]:
    """An empty metadata store on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/meta.db"
    else:
        url = request.getfixturevalue("pg_server").fresh_database_url("cursor")
    store = metadata.open_store(url)
    yield store
    store.close()
