"""`strata perf bookie` runs end to end (briefly) and prints the JSON keys its issue names."""

from __future__ import annotations

import json
import subprocess
import sys

from perf.bookie_proc import REPO_ROOT


def test_perf_bookie_json_smoke():
    out = subprocess.run([sys.executable, "-m", "cli.main", "perf", "bookie", "--json",
                          "--seconds", "0.5", "--window", "200"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("adds_per_s_1k", "p99_ms_1k", "mb_per_s_64k", "disk_mb_per_s_64k"):
        assert result[key] > 0, key
