"""`strata perf startup` once, on a standalone whose broker has a cold tier configured (the session's
SeaweedFS): it exits 0, reports sane figures, and the idle broker has mapped none of the native
libraries that only an offload, a cold read, a schema or TLS need (tests/foundation/
test_lazy_imports.py checks the imports themselves). A smoke run: no figure is held to a target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.seaweed import TestSeaweed
from tests.support.standalone_proc import REPO_ROOT

RUN_TIMEOUT_S = 180
KEYS = {"runs", "embedded_s3", "idle_s", "children_rss_mb", "native_packages"} | {
    f"{name}_{stat}" for name in ("startup_s", "ready_s", "broker_rss_mb") for stat in ("median", "min", "max")}
NOT_WHEN_IDLE = {"pyarrow", "numpy", "cryptography", "fastavro", "bcrypt", "pyspark", "duckdb"}


def test_perf_startup_reports_start_time_and_a_small_idle_broker(s3_server: TestSeaweed) -> None:
    env = {**os.environ, **s3_server.standalone_env(s3_server.new_bucket())}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "startup", "--runs", "1", "--idle-s", "0",
                           "--no-s3", "--json"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == KEYS, sorted(set(result) ^ KEYS)
    assert result["runs"] == 1 and result["embedded_s3"] is False
    assert 0 < result["startup_s_median"] <= result["ready_s_median"] + 0.5   # accepting comes with the ready line
    assert 10 < result["broker_rss_mb_median"] and result["children_rss_mb"] > 0
    native = set(result["native_packages"].split(","))
    assert "grpc" in native                      # the read of the maps works: the broker talks gRPC to bookies
    assert not native & NOT_WHEN_IDLE, sorted(native & NOT_WHEN_IDLE)
