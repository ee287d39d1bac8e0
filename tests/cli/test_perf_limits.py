"""`strata perf limits` end to end with tiny durations against the standalone it starts: every
section is reported with its figures, targets and verdicts, and the throttled producer was
throttled (the topic's publishRateLimitedTimes). A smoke run: no figure is held to a target
(a one-second window on a shared box says little; the full run is on docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120
COMPARISONS = ("produce_msgs_per_s", "produce_server_cpu", "unbatched_msgs_per_s", "unbatched_server_cpu")


def test_short_run_reports_every_target() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "limits", "--rate", "100", "--duration-s", "1",
                           "--warmup-s", "0.5", "--rounds", "2", "--idle-runs", "2", "--messages", "20000",
                           "--flood-s", "1", "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"rc={proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    report = json.loads(lines[-1])
    publish, other, idle = report["publish_limit"], report["other_namespace"], report["idle_limiter"]
    assert publish["rate"] == 100 and len(publish["held_by_round"]) == 2
    assert 0 < publish["held_msgs_per_s"] < 100 * 3, publish          # near R, loosely: a 1 s window
    assert all(times > 0 for times in publish["publish_rate_limited_times"]), publish
    assert isinstance(publish["met"], bool) and isinstance(other["met"], bool)
    assert other["alone_msgs_per_s"] > publish["held_msgs_per_s"] and other["beside_msgs_per_s"] > 0, other
    assert len(other["ratio_by_round"]) == 2
    for key in COMPARISONS:
        comparison = idle[key]
        assert comparison["ratio"] is None or comparison["ratio"] > 0, (key, comparison)
    assert idle["produce_msgs_per_s"]["ratio"] is not None and idle["unbatched_msgs_per_s"]["ratio"] is not None
    assert len(idle["produce_msgs_per_s"]["none_by_run"]) == 2
    assert 0 < idle["limiter_us_per_send"] < 1000


def test_bad_options_are_refused() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "limits", "--rate", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--rate" in proc.stderr
