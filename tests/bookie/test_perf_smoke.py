"""`strata perf bookie` runs end to end (briefly) and prints the JSON keys its issue names, with
figures consistent with one another: MB/s = adds/s x payload size, p50 <= p99, the 64 KiB
throughput's ratio to the raw disk = the two figures' quotient. No figure is compared to a target
(a smoke run on a loaded machine); only what must hold whatever the machine's speed."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from launch.process import REPO_ROOT

PAYLOAD_BYTES = {"1k": 1024, "64k": 64 * 1024}
FIGURES = {f"{key}_{size}" for size in PAYLOAD_BYTES for key in ("adds_per_s", "mb_per_s", "p50_ms", "p99_ms")}
KEYS = FIGURES | {"disk_mb_per_s_64k", "ratio_64k_vs_disk", "address"}
ROUNDING = 0.0005 + 1e-9    # the JSON rounds every figure to 3 decimals


def close(a: float, b: float, relative: float = 0.001) -> bool:
    return math.isclose(a, b, rel_tol=relative, abs_tol=2 * ROUNDING)


def test_perf_bookie_json_smoke():
    out = subprocess.run([sys.executable, "-m", "cli.main", "perf", "bookie", "--json",
                          "--seconds", "0.5", "--window", "200"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(result) == KEYS, sorted(set(result) ^ KEYS)
    for key in FIGURES | {"disk_mb_per_s_64k", "ratio_64k_vs_disk"}:
        assert isinstance(result[key], float) and result[key] > 0, (key, result[key])
    host, _, port = result["address"].rpartition(":")
    assert host and 0 < int(port) < 65536, result["address"]
    for size, payload in PAYLOAD_BYTES.items():
        adds, mb = result[f"adds_per_s_{size}"], result[f"mb_per_s_{size}"]
        assert close(mb, adds * payload / 1e6), (size, adds, mb)
        assert result[f"p50_ms_{size}"] <= result[f"p99_ms_{size}"], size
    assert close(result["ratio_64k_vs_disk"], result["mb_per_s_64k"] / result["disk_mb_per_s_64k"], 0.01)
