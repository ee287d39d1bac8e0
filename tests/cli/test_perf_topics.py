"""`strata perf topics` at a small scale: it runs, exits 0 and reports sane broker-only figures.

A benchmark smoke run, not a timed test: no figure is compared to a target, only to what can
physically be true (RSS positive and above its baseline, CPU not negative, per-topic KiB bounded).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.standalone_proc import REPO_ROOT

RUN_TIMEOUT_S = 180
TOPICS = 50


def test_perf_topics_reports_broker_rss_and_idle_cpu() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "topics", "--topics", str(TOPICS),
                           "--idle-s", "1", "--settle-s", "0", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["topics"] == TOPICS
    assert 10 < result["broker_rss_mb_baseline"] <= result["broker_rss_mb_idle"]
    assert result["bookies_rss_mb"] > 0          # measured apart: not in the broker's figure
    for phase in ("idle", "sent"):
        assert 0 <= result[f"kib_per_topic_{phase}"] < 2048
        assert result[f"broker_idle_cpu_ms_per_s_{phase}"] >= 0
        assert result[f"idle_cpu_us_per_s_per_topic_{phase}"] >= 0
    assert result["open_s"] > 0 and result["send_s"] > 0
