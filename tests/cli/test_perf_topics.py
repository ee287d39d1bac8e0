"""`strata perf topics` at a small scale: it runs, exits 0 and reports sane broker-only figures.

A benchmark smoke run, not a timed test: no figure is compared to a target, only to what can
physically be true (RSS positive and above its baseline, CPU not negative and within the cores,
per-topic KiB bounded) and to the figures' own arithmetic (per-topic KiB = RSS growth / N, per-topic
CPU = broker CPU / N), with every promised key present.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.standalone_proc import REPO_ROOT

RUN_TIMEOUT_S = 180
TOPICS = 50
KEYS = {"topics", "broker_rss_mb_baseline", "bookies_rss_mb", "open_s", "send_s", "idle_s", "settle_s"} | {
    f"{key}_{phase}" for phase in ("idle", "sent")
    for key in ("broker_rss_mb", "kib_per_topic", "broker_idle_cpu_ms_per_s", "idle_cpu_us_per_s_per_topic")}


def test_perf_topics_reports_broker_rss_and_idle_cpu() -> None:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", "topics", "--topics", str(TOPICS),
                           "--idle-s", "1", "--settle-s", "0", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == KEYS, sorted(set(result) ^ KEYS)
    for key in KEYS - {"topics"}:
        assert isinstance(result[key], float | int) and not isinstance(result[key], bool), (key, result[key])
    assert result["topics"] == TOPICS and result["idle_s"] == 1 and result["settle_s"] == 0
    baseline_mb = result["broker_rss_mb_baseline"]
    assert 10 < baseline_mb <= result["broker_rss_mb_idle"]
    assert result["bookies_rss_mb"] > 0          # measured apart: not in the broker's figure
    for phase in ("idle", "sent"):
        kib = result[f"kib_per_topic_{phase}"]
        assert 0 <= kib < 2048
        # KiB per topic is the RSS growth over the baseline / N (each RSS rounded to 0.1 MB)
        growth_kib = (result[f"broker_rss_mb_{phase}"] - baseline_mb) * 1e6 / 1024 / TOPICS
        assert abs(kib - growth_kib) <= 0.1e6 / 1024 / TOPICS + 0.05, (phase, kib, growth_kib)
        cpu_ms_per_s = result[f"broker_idle_cpu_ms_per_s_{phase}"]
        assert 0 <= cpu_ms_per_s <= (os.cpu_count() or 1) * 1000   # no more CPU than the cores have
        per_topic_us = result[f"idle_cpu_us_per_s_per_topic_{phase}"]   # so within 0 .. the cores too:
        assert abs(per_topic_us * TOPICS / 1000 - cpu_ms_per_s) <= 0.005 + 0.0005 * TOPICS / 1000, phase
    assert result["open_s"] > 0 and result["send_s"] > 0
