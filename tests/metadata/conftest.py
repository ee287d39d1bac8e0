"""Fixtures for the metadata store tests: a `store_url` parametrized over both backends (SQLite
files; databases on the suite's one PostgreSQL server, `pg_server` in tests/conftest.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from common.config import default_config
from metadata import open_store
from tests.support.postgres import TestPostgres

BACKENDS = ["sqlite", "postgres"]
_sqlite_names = itertools.count(1)


def make_url(backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if backend == "sqlite":
        directory = tmp_path_factory.mktemp("meta")
        return f"sqlite:///{directory}/sub/meta-{next(_sqlite_names)}.db"
    server: TestPostgres = request.getfixturevalue("pg_server")
    return server.fresh_database_url("meta")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A URL to an empty database on each backend."""
    return make_url(request.param, request, tmp_path_factory)


@pytest.fixture
def fast_config():
    """Short lease and poll so tests of ephemeral keys and watches do not wait long."""
    return default_config(metadata_session_lease_ms=1_500, metadata_watch_poll_ms=20,
                          metadata_op_timeout_ms=3_000)


@pytest.fixture
def store(store_url: str, fast_config) -> Iterator[object]:
    s = open_store(store_url, config=fast_config)
    yield s
    s.close()
