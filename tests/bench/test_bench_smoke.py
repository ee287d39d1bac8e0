"""Smoke run of the benchmark harness (`make bench`'s code), Strata alone, about 10-20 s.

Not a timed test: it checks the harness end to end on a real standalone (start, every workload,
stop, JSON + table written) and that the numbers are sane: nonzero rates, CPU and RSS, ordered
percentiles, and every message accounted for (acked = sent, received = produced). Needs none of
the peers (Redis, NATS, RabbitMQ) and none of the bench extra's packages.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = {"produce-1x1", "consume-backlog", "produce-1x16", "e2e-5k", "topics-1000"}


def run_smoke(out: Path) -> dict:
    cmd = [sys.executable, "-m", "bench.run", "--systems", "strata-1", "--scale", "0.005", "--no-install",
           "--no-chart", "--disk-seconds", "0.2", "--out", str(out)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"bench.run failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return json.loads((out / "latest.json").read_text())


def check_row(row: dict) -> None:
    name = f"{row['system']} {row['workload']}"
    assert row["error"] is None, f"{name}: {row['error']}"
    assert row["messages"] > 0 and row["msgs_per_s"] > 0 and row["mb_per_s"] > 0, name
    # /proc counts CPU in 10 ms ticks: a smoke-sized workload can finish inside one tick, so one
    # row may read 0; the rows together must not (checked in the test).
    assert row["server_cpu_us_per_msg"] is not None and row["server_cpu_us_per_msg"] >= 0, name
    assert row["server_rss_mb"] > 10, name  # a broker and a bookie process at least
    expected = row["extra"].get("sent", row["extra"].get("expected"))
    if row["workload"] == "e2e-5k":
        expected = row["messages"]  # checked below against the rate and the duration
    assert row["messages"] == expected, f"{name}: {row['messages']} accounted for, {expected} expected"
    if row["p50_ms"] is not None:
        assert 0 <= row["p50_ms"] <= row["p99_ms"] <= row["p999_ms"], name


def test_bench_smoke_strata_alone(tmp_path: Path) -> None:
    result = run_smoke(tmp_path / "results")
    rows = result["rows"]
    assert {r["workload"] for r in rows} == WORKLOADS
    for row in rows:
        assert row["system"] == "strata 1/1/1 (native)"
        check_row(row)
    assert sum(r["server_cpu_us_per_msg"] for r in rows) > 0
    e2e = next(r for r in rows if r["workload"] == "e2e-5k")
    assert e2e["messages"] == int(5000 * 2.0) and e2e["p99_ms"] is not None
    publish = [e2e["extra"][f"publish_{q}_ms"] for q in ("p50", "p99", "p999")]
    assert 0 <= publish[0] <= publish[1] <= publish[2], publish
    produce = next(r for r in rows if r["workload"] == "produce-1x1")
    consume = next(r for r in rows if r["workload"] == "consume-backlog")
    assert consume["messages"] == produce["messages"]
    assert result["disk"]["mb_per_s"] > 0
    table = (tmp_path / "results" / "latest.md").read_text()
    assert "| strata 1/1/1 (native) | produce-1x1 |" in table
    assert "| system | at msg/s | publish p50 ms |" in table
