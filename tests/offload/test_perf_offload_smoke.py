"""Smoke run of `strata perf offload` at a tiny size (8 MiB, one round, about 1 min): not a timed test.

It runs the real tool end to end (a SeaweedFS and a standalone of its own, fill, offload, raw
upload, reads from the bookies and from S3, deletion lag 0, a read from S3 again, clean-up) and
checks the JSON: the five keys issue 12 names, the extra ratio keys, and sane values: positive
rates, ratios that are the figures' arithmetic, S3/bookie byte ratios within a factor that any
working format meets, several ledgers offloaded, every message received from both tiers,
nothing left behind.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300
KEYS = ("offload_mb_per_s", "raw_upload_mb_per_s", "consume_s3_msgs_per_s", "consume_bookie_msgs_per_s",
        "s3_bytes_ratio")
EXTRA_KEYS = ("s3_bytes_ratio_lz4", "s3_bytes_ratio_zstd", "offload_vs_raw_upload", "consume_s3_vs_bookie",
              "targets", "targets_met")


def _temp_dirs(root: Path) -> set[str]:
    return {p.name for p in root.glob("strata-perf-offload-*")}


def test_perf_offload_smoke(tmp_path: Path) -> None:
    # a TMPDIR of its own: another `strata perf` running on the machine cannot add entries here
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    made_ns = tmp.stat().st_mtime_ns
    cmd = [sys.executable, "-m", "cli.main", "perf", "offload", "--size", "8M", "--rounds", "1", "--json"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env={**os.environ, "TMPDIR": str(tmp)})
    assert done.returncode == 0, \
        f"perf offload failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for key in KEYS + EXTRA_KEYS:
        assert key in result, key
    for key in KEYS[:4]:
        assert isinstance(result[key], float | int) and result[key] > 0, (key, result[key])
    assert result["messages"] == 8 * 1024 and result["all_accounted"] is True
    # one round: a read from the bookies, one from S3, one from S3 once the bookie copies are gone
    assert len(result["consume_bookie_runs_msgs_per_s"]) == 1 and len(result["consume_s3_runs_msgs_per_s"]) == 2
    assert result["ledgers_offloaded"] >= 2, result["ledgers_offloaded"]  # the rollover split the topic
    assert result["offloaded_entries_fraction"] == 1.0  # after the restart every data ledger is closed
    for key in ("s3_bytes_ratio", "s3_bytes_ratio_lz4", "s3_bytes_ratio_zstd"):
        assert 0.1 < result[key] < 5.0, (key, result[key])
    assert math.isclose(result["s3_bytes_ratio"], result["s3_bytes"] / result["offloaded_bookie_bytes"], abs_tol=1e-3)
    assert math.isclose(result["offload_vs_raw_upload"],
                        result["offload_mb_per_s"] / result["raw_upload_mb_per_s"], rel_tol=0.01)
    assert math.isclose(result["consume_s3_vs_bookie"],
                        result["consume_s3_msgs_per_s"] / result["consume_bookie_msgs_per_s"], rel_tol=0.01)
    # MB/s is the offloaded ledgers' bookie bytes over the offload's duration (decimal MB)
    assert math.isclose(result["offload_mb_per_s"],
                        result["offloaded_bookie_bytes"] / 1e6 / result["offload_seconds"], rel_tol=0.01)
    assert tmp.stat().st_mtime_ns > made_ns, "the run made no temp dir in its TMPDIR: the check below is void"
    assert not _temp_dirs(tmp), "the run left its temp dir behind"
