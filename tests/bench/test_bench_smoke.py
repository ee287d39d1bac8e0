"""Smoke run of the benchmark harness (`make bench`'s code), Strata alone, about 10-20 s.

Not a timed test: it checks the harness end to end on a real standalone (start, every workload,
stop, JSON + table written) and that the numbers are sane: each key of its type, nonzero rates,
RSS, CPU whose units fit the machine, ordered percentiles, rates that are the counts' and sizes'
arithmetic, and every message accounted for (acked = sent, received = produced). Needs none of
the peers (Redis, NATS, RabbitMQ) and none of the bench extra's packages.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from bench.disk import GROUP_BYTES
from bench.workloads import MESSAGE_BYTES

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = {"produce-1x1", "consume-backlog", "produce-1x16", "e2e-5k", "topics-1000"}


def run_smoke(out: Path) -> dict:
    cmd = [sys.executable, "-m", "bench.run", "--systems", "strata-1", "--scale", "0.005", "--no-install",
           "--no-chart", "--disk-seconds", "0.2", "--out", str(out)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"bench.run failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return json.loads((out / "latest.json").read_text())


ROW_KEYS = {"system": str, "workload": str, "messages": int, "seconds": float, "msgs_per_s": float,
            "mb_per_s": float, "latency_kind": str, "server_rss_mb": float, "extra": dict}
LATENCY_KINDS = {"publish ack", "end-to-end"}
CPU_SLACK_S = 2.0   # server CPU may be counted a little beyond the timed window (set-up, tail)


def check_row(row: dict) -> None:
    name = f"{row['system']} {row['workload']}"
    assert row["error"] is None, f"{name}: {row['error']}"
    for key, kind in ROW_KEYS.items():
        assert isinstance(row[key], kind) and not isinstance(row[key], bool), f"{name}: {key} = {row[key]!r}"
    assert row["messages"] > 0 and row["msgs_per_s"] > 0 and row["mb_per_s"] > 0, name
    # the figures are one another's arithmetic: msg/s = messages / seconds, MB/s = msg/s x 1 KiB
    assert math.isclose(row["msgs_per_s"], row["messages"] / row["seconds"], rel_tol=1e-6), name
    assert math.isclose(row["mb_per_s"], row["msgs_per_s"] * MESSAGE_BYTES / 1e6, rel_tol=1e-6), name
    # /proc counts CPU in 10 ms ticks: a smoke-sized workload can finish inside one tick, so one
    # row may read 0; the rows together must not (checked in the test).
    cpu_us = row["server_cpu_us_per_msg"]
    assert isinstance(cpu_us, float | int) and cpu_us >= 0, name
    # units: the CPU it stands for fits in the machine's cores over the run (a us/ms/ns slip does not)
    cpu_s = cpu_us * row["messages"] / 1e6
    assert cpu_s <= (os.cpu_count() or 1) * row["seconds"] + CPU_SLACK_S, f"{name}: {cpu_us} us/msg"
    assert row["server_rss_mb"] > 10, name  # a broker and a bookie process at least
    expected = row["extra"].get("sent", row["extra"].get("expected"))
    if row["workload"] == "e2e-5k":
        expected = row["messages"]  # checked below against the rate and the duration
    assert row["messages"] == expected, f"{name}: {row['messages']} accounted for, {expected} expected"
    latencies = [row["p50_ms"], row["p99_ms"], row["p999_ms"]]
    if row["latency_kind"]:
        assert row["latency_kind"] in LATENCY_KINDS, name
        assert all(isinstance(v, float) for v in latencies), f"{name}: {latencies}"
        assert 0 <= latencies[0] <= latencies[1] <= latencies[2], f"{name}: {latencies}"
    else:   # a workload that times no latency reports none
        assert latencies == [None, None, None], f"{name}: {latencies}"


def check_disk(disk: dict) -> None:
    """One row per group size; bandwidth = fsyncs/s x group bytes (one group per fsync); the
    summary is the best bandwidth and the smallest group's fsync rate."""
    results = disk["results"]
    assert [r["group_bytes"] for r in results] == list(GROUP_BYTES)
    for r in results:
        assert r["mb_per_s"] > 0 and r["fsyncs_per_s"] > 0, r
        assert math.isclose(r["mb_per_s"], r["fsyncs_per_s"] * r["group_bytes"] / 1e6, rel_tol=1e-6), r
    assert disk["mb_per_s"] == max(r["mb_per_s"] for r in results)
    assert disk["fsyncs_per_s"] == results[0]["fsyncs_per_s"]


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
    assert produce["latency_kind"] == "publish ack" and e2e["latency_kind"] == "end-to-end"
    assert consume["latency_kind"] == ""
    check_disk(result["disk"])
    assert result["scale"] == 0.005 and set(result["systems"]) == {"strata-1"}
    table = (tmp_path / "results" / "latest.md").read_text()
    assert "| strata 1/1/1 (native) | produce-1x1 |" in table
    assert "| system | at msg/s | publish p50 ms |" in table
