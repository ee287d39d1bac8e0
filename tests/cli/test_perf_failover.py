"""`strata perf failover` end to end: a real 2-broker, 3-bookie cluster on PostgreSQL.

Both runs check the report (every key, positive figures, no lost publish) and the issue's
targets: every moved topic publishes again within lease + 2 s of the owner's kill -9, and
production resumes within 2 s of a bookie's. The small run (6 topics, about 20 s) is the one
`make test` runs, so the targets are checked in CI; measured with the machine under load (load
average 7 on 2 cores): failover max 3.32 s with a 3 s lease, bookie 0.12 s. The slow run is the
issue's benchmark at full size (50 topics).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEYS = ("failover_p50_s", "failover_max_s", "lease_s", "bookie_failover_s", "two_broker_msgs_per_s",
        "one_broker_msgs_per_s")


def perf_failover(*args: str, timeout_s: float) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "failover", "--json", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"rc={proc.returncode}\nstdout:{proc.stdout[-2000:]}\nstderr:{proc.stderr[-3000:]}"
    report = json.loads(lines[-1])
    assert proc.returncode == 0, (report, proc.stderr[-3000:])
    return report


def assert_sane(report: dict, topics: int, lease_s: float) -> None:
    for key in KEYS:
        assert isinstance(report[key], (int, float)) and report[key] > 0, (key, report)
    assert report["lease_s"] == lease_s and report["topics"] == topics
    assert 1 <= report["moved_topics"] < topics          # both brokers served some topics
    assert report["failover_p50_s"] <= report["failover_max_s"]
    assert report["bookie_failover_p50_s"] <= report["bookie_failover_s"]
    assert report["publish_errors"] == 0


def assert_targets(report: dict) -> None:
    assert report["failover_max_s"] <= report["lease_s"] + 2.0, report
    assert report["bookie_failover_s"] <= 2.0, report


def test_small_run_reports_every_key_and_meets_the_targets() -> None:
    # the subprocess' bound stays under pytest's 300 s timeout, so a hung run is reported here
    # with its output, rather than by pytest-timeout without it
    report = perf_failover("--topics", "6", "--bundles", "4", "--duration-s", "1", "--lease-ms", "3000",
                           "--timeout-s", "60", timeout_s=240)
    assert_sane(report, 6, 3.0)
    assert_targets(report)


@pytest.mark.slow
@pytest.mark.timeout(960)   # above the run's own 900 s bound
def test_full_run_meets_the_targets() -> None:
    report = perf_failover(timeout_s=900)
    assert_sane(report, 50, report["lease_s"])
    assert_targets(report)
