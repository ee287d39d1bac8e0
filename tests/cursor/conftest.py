"""Fixtures for the cursor tests: a real metadata store on each backend (SQLite, PostgreSQL).

The PostgreSQL server is started once per session, only when a test asks for it; a server that
cannot start fails the test (tests/support/postgres.py), it is never skipped."""

from __future__ import annotations

from typing import Iterator

import pytest

import metadata
from tests.support.postgres import PostgresServerError, TestPostgres


@pytest.fixture(scope="session")
def cursor_pg_server() -> Iterator[TestPostgres]:
    server = TestPostgres()
    try:
        server.start()
    except PostgresServerError as exc:
        server.cleanup()
        pytest.fail(f"could not start PostgreSQL for the cursor tests: {exc}")
    yield server
    server.cleanup()


@pytest.fixture(params=["sqlite", "postgres"])
def backend_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[object]:
    """An empty metadata store on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/meta.db"
    else:
        url = request.getfixturevalue("cursor_pg_server").fresh_database_url("cursor")
    store = metadata.open_store(url)
    yield store
    store.close()
