"""`strata perf ledger` runs end to end with tiny counts and prints the keys its issue names, with
figures consistent with one another: MB/s = entries/s x entry size, p50 <= p99 for each quorum and
size, and each cost ratio = the 1/1/1 rate over the 3/2/2 rate. No figure is compared to a target
(a smoke run on a loaded machine); only what must hold whatever the machine's speed."""

from __future__ import annotations

import json
import math

from perf.ledger import main

ENTRY_BYTES = {"1k": 1024, "64k": 64 * 1024}
QUORUMS = ("111", "322")
FIGURES = {f"{key}_{q}_{size}" for q in QUORUMS for size in ENTRY_BYTES
           for key in ("entries_per_s", "mb_per_s", "p50_ms", "p99_ms")}
KEYS = FIGURES | {f"cost_ratio_322_vs_111_{size}" for size in ENTRY_BYTES}
ROUNDING = 0.0005 + 1e-9    # the JSON rounds every figure to 3 decimals


def close(a: float, b: float, relative: float = 0.001) -> bool:
    return math.isclose(a, b, rel_tol=relative, abs_tol=2 * ROUNDING)


def test_perf_ledger_json(capsys):
    assert main(["--entries-1k", "200", "--entries-64k", "20", "--window", "50", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) == KEYS, sorted(set(result) ^ KEYS)
    for key in KEYS:
        assert isinstance(result[key], float) and math.isfinite(result[key]) and result[key] > 0, \
            (key, result[key])
    for size, entry_bytes in ENTRY_BYTES.items():
        for q in QUORUMS:
            rate, mb = result[f"entries_per_s_{q}_{size}"], result[f"mb_per_s_{q}_{size}"]
            assert close(mb, rate * entry_bytes / 1e6), (q, size, rate, mb)
            assert result[f"p50_ms_{q}_{size}"] <= result[f"p99_ms_{q}_{size}"], (q, size)
        ratio = result[f"entries_per_s_111_{size}"] / result[f"entries_per_s_322_{size}"]
        assert close(result[f"cost_ratio_322_vs_111_{size}"], ratio), (size, ratio)
