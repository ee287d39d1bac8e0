"""`strata perf kafka` end to end: a short run against the standalone it starts; every workload's
row has positive figures (the consumer group's and assign()'s side by side too), every ratio and
both long-poll probes are there, and the py-spy report reader (top_frames) reads py-spy's raw
format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from perf.kafka import GROUP_WORKLOADS, WORKLOADS, top_frames

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120


def test_short_run_reports_every_row() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "kafka", "--messages", "200",
                           "--long-poll-records", "20", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"rc={proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    report = json.loads(lines[-1])
    assert set(report["rows"]) == set(WORKLOADS)
    for load, row in report["rows"].items():
        assert row["messages"] == 200, (load, row)
        for key in ("msgs_per_s", "server_cpu_us_per_msg", "broker_cpu_us_per_msg"):
            assert row[key] is not None and row[key] > 0, (load, key, row)
    assert report["rows"]["kafka-produce"]["messages_per_batch"] > 1
    assert len(report["ratios"]) == 14 and all(v is not None and v > 0 for v in report["ratios"].values()), report
    for protocol in ("kafka", "pulsar"):
        probe = report["long_poll"][protocol]
        assert probe["records"] == 20 and 0 < probe["p50_ms"] <= probe["p99_ms"], probe
    assert set(report["within_target"]) >= {"idempotent_cpu", "long_poll_p50", "kafka_consume_cpu_vs_native",
                                             "group_commit_cpu"}
    group = report["group"]                  # 3 group members (auto-commit) against the same 3 with assign()
    assert set(group["rows"]) == set(GROUP_WORKLOADS) and group["members"] == 3
    for load, row in group["rows"].items():
        assert row["messages"] >= 200, (load, row)
        for key in ("msgs_per_s", "server_cpu_us_per_msg", "broker_cpu_us_per_msg"):
            assert row[key] is not None and row[key] > 0, (load, key, row)
    assert group["rows"]["kafka-group-consume"]["commits_failed"] == 0, group
    assert group["ratio"] is not None and group["ratio"] > 0, group


def test_top_frames_reads_py_spy_raw(tmp_path: Path) -> None:
    raw = tmp_path / "p.txt"
    raw.write_text("main (a.py:1);handle (broker/kafka/produce.py:10);read_varint (wire/kafka/records.py:128) 6\n"
                   "main (a.py:1);handle (broker/kafka/produce.py:12);read_varint (wire/kafka/records.py:131) 2\n"
                   "main (a.py:2);other (b.py:3) 2\n")
    profile = top_frames(raw)
    assert profile["samples"] == 10
    assert profile["own_pct"][0] == ["read_varint (wire/kafka/records.py)", 80.0]
    assert ["handle (broker/kafka/produce.py)", 80.0] in profile["kafka_total_pct"]
    assert all("kafka/" in f for f, _ in profile["kafka_total_pct"])
