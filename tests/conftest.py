"""Suite-wide pytest hooks.

- A run that collects no test fails (exit 1 with a message), so CI can never pass on nothing.
- Seeded randomized tests take their seed from the `seed` fixture, which prints it on failure.
- `pg_server`: one real PostgreSQL server for the whole run, started only when a test asks for
  it; a server that cannot start fails the test (never a skip). Each test takes a fresh database
  on it (`fresh_database_url`).
- `s3_server`: one real S3 server (SeaweedFS, tests/support/seaweed.py) for the whole run, started
  only when a test asks for it; a server that cannot start fails the test. Each test takes a
  bucket of its own (`new_bucket`).
- `spark`: one real SparkSession (tests/support/spark.py) for the whole run, started only when a
  test asks for it, with the `strata` data source registered.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

# grpcio >= 1.81 with fork support on restarts its poller in the child of a subprocess.Popen, where
# close_fds has closed the poller's epoll fd: the child aborts before exec (grpc/grpc#43055; a
# broker of a test cluster died so, "epoll_wait error: Bad file descriptor"). Nothing here forks
# to use gRPC in the child (perf workers are spawned), so fork support is off. Set before any
# import of grpc; inherited by every server the tests start.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tests.support.postgres import TestPostgres, started_or_fail

if TYPE_CHECKING:
    from tests.support.seaweed import TestSeaweed


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.items and not session.config.getoption("collectonly"):
        raise pytest.UsageError("no tests collected: refusing to report success on an empty run")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TestPostgres]:
    server = started_or_fail()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[TestSeaweed]:
    from tests.support import seaweed  # imported here: the S3 launcher is not loaded for every run

    server = seaweed.started_or_fail()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from tests.support import spark as spark_support  # imported here: pyspark is not loaded for every run

    session = spark_support.started_or_fail()
    yield session
    session.stop()


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A seed for a randomized test: STRATA_SEED if set, else fresh. Printed when the test fails."""
    value = int(os.environ.get("STRATA_SEED", random.randrange(1 << 30)))
    request.node.user_properties.append(("seed", value))
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name, value in item.user_properties:
            if name == "seed":
                report.sections.append(("seed", f"rerun with STRATA_SEED={value}"))
                print(f"\n*** {item.nodeid} failed with STRATA_SEED={value}")
