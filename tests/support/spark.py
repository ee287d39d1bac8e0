"""One real SparkSession (`local[2,4]`: two threads, a task may fail 3 times and be retried) for
a whole test run, with the `strata` source registered (analytics.session).

    def test_x(spark):            # the session fixture in tests/conftest.py
        spark.read.format("strata")...

Start-up takes about 7 s, so it is started once, lazily, and stopped at the end of the run. A
session that cannot start FAILS the test that needs it, never skips it. Tests must not stop it
or change its global conf (set per-query options instead).
"""

from __future__ import annotations

from typing import Any

import pytest

from analytics.session import strata_session

MASTER = "local[2,4]"


def started_or_fail() -> Any:
    try:
        return strata_session(MASTER, app_name="strata-tests")
    except Exception as exc:  # the JVM's and py4j's errors are not StrataErrors
        pytest.fail(f"SparkSession could not start: {exc!r}")
