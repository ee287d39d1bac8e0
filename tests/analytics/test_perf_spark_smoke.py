"""Smoke run of `strata perf spark` at a tiny size (2,000 messages, one timed run, a 3 s stream):
not a timed test.

It runs the real tool end to end in a subprocess (its own SeaweedFS, standalone and SparkSession;
fill, offload, local copy, the source against pyarrow and DuckDB from S3 and Spark's Parquet
reader on the local copy, the streaming query, clean-up) and checks the JSON: the keys issues 13
and 31 name and the extra ones, each present and positive, the ratios the figures' arithmetic,
every message offloaded and nothing left behind. No SparkSession is created in the pytest process (the session fixture
`spark` is the only one there).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300  # about 60-90 s on an idle 2-core box; Spark start-up stretches a lot under load
MESSAGES = 2000
KEYS = ("source_rows_per_s", "native_parquet_rows_per_s", "ratio", "ratio_narrowed", "ratio_duckdb",
        "ratio_narrowed_duckdb", "duckdb_rows_per_s", "stream_visible_p50_ms", "local_parquet_ratio")
EXTRA_KEYS = ("pyarrow_rows_per_s", "stream_visible_p99_ms", "source_narrowed_groupby_rows_per_s",
              "source_count_rows_per_s", "source_groupby_rows_per_s",
              "native_parquet_count_rows_per_s", "native_parquet_groupby_rows_per_s", "source_count_ratio",
              "source_groupby_ratio", "source_tuned_rows_per_s", "local_parquet_ratio_narrowed", "objects", "s3_bytes")


def _temp_dirs(root: Path) -> set[str]:
    return {p.name for pattern in ("strata-perf-offload-*", "strata-perf-spark-*") for p in root.glob(pattern)}


def test_perf_spark_smoke(tmp_path: Path) -> None:
    # a TMPDIR of its own: another `strata perf` running on the machine cannot add entries here
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    made_ns = tmp.stat().st_mtime_ns
    cmd = [sys.executable, "-m", "cli.main", "perf", "spark", "--messages", str(MESSAGES), "--keys", "50",
           "--runs", "1", "--stream-seconds", "3", "--json"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env={**os.environ, "TMPDIR": str(tmp)})
    assert done.returncode == 0, \
        f"perf spark failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for key in KEYS + EXTRA_KEYS:
        assert key in result, key
        assert isinstance(result[key], float | int) and result[key] > 0, (key, result[key])
    assert result["messages"] == MESSAGES and result["keys"] == 50
    assert result["ledgers"] >= 2 and result["objects"] == result["ledgers"]  # the rollover split the topic
    assert math.isclose(result["ratio"], result["source_groupby_rows_per_s"] / result["pyarrow_rows_per_s"],
                        rel_tol=0.01, abs_tol=1e-3)
    assert math.isclose(result["ratio_narrowed_duckdb"],
                        result["source_narrowed_groupby_rows_per_s"] / result["duckdb_rows_per_s"], rel_tol=0.01,
                        abs_tol=1e-3)
    assert math.isclose(result["local_parquet_ratio"],
                        result["source_rows_per_s"] / result["native_parquet_rows_per_s"], rel_tol=0.01, abs_tol=1e-3)
    assert result["stream_visible_p99_ms"] >= result["stream_visible_p50_ms"]
    assert result["stream_messages"] == 60  # 3 s at one message per 50 ms, each seen exactly once
    assert tmp.stat().st_mtime_ns > made_ns, "the run made no temp dir in its TMPDIR: the check below is void"
    assert not _temp_dirs(tmp), "the run left its temp dir behind"
