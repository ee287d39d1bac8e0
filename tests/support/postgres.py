"""A real PostgreSQL server for tests, reusable by every component's tests.

    from tests.support.postgres import TestPostgres
    server = TestPostgres().start()          # raises PostgresServerError if it cannot start
    url = server.fresh_database_url()        # an empty database of its own, for one test
    ...
    server.cleanup()                         # stop and remove the temp dir

It is `launch.postgres.PostgresServer` (initdb + pg_ctl in a temp dir, on a free loopback
port, as an unprivileged user) tuned for tests: no fsync, since a test server's data need not
survive a power cut and the machine's disk is shared. A server that cannot start must FAIL the
test that needs it, never skip it: `pytest.fail(...)` in the fixture, not `pytest.skip`.
"""

from __future__ import annotations

import itertools
import os

from launch.postgres import PostgresServer, PostgresServerError

__all__ = ["PostgresServerError", "TestPostgres", "started_or_fail"]

TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class TestPostgres(PostgresServer):
    __test__ = False  # not a pytest test class

    def __init__(self, **kwargs: object) -> None:
        settings = dict(TEST_SETTINGS)
        settings.update(kwargs.pop("settings", None) or {})  # type: ignore[arg-type]
        super().__init__(settings=settings, **kwargs)  # type: ignore[arg-type]
        self._names = itertools.count(1)

    def fresh_database_url(self, prefix: str = "t") -> str:
        """Create a new, empty database and return its postgresql:// URL."""
        return self.create_database(f"{prefix}_{os.getpid()}_{next(self._names)}")


def started_or_fail(**kwargs: object) -> TestPostgres:
    """A started server; a server that cannot start fails the calling test (never a skip)."""
    import pytest

    server = TestPostgres(**kwargs)
    try:
        server.start()
    except PostgresServerError as exc:
        server.cleanup()
        pytest.fail(f"could not start PostgreSQL: {exc}")
    return server
