"""`strata perf metadata` runs end to end with small counts and prints the promised JSON keys: exactly
those of the backends asked for, each a positive float, watch p50 <= p99 below a broad bound. No
figure is compared to a target (a smoke run on a loaded machine); only what must hold whatever the
machine's speed. Every watched event was seen, or the run fails (`measure_watch`)."""

from __future__ import annotations

import json
import math

from perf.metadata import main

BACKENDS = ("sqlite", "postgres")
WATCH_MS_MAX = 5_000    # a watch event takes a poll interval (ms), not seconds


def keys(*backends: str) -> set[str]:
    return {f"{key}_{b}" for b in backends for key in ("cas_ops_per_s", "watch_p50_ms", "watch_p99_ms")}


def assert_sane(result: dict, backends: tuple[str, ...]) -> None:
    assert set(result) == keys(*backends), sorted(set(result) ^ keys(*backends))
    for key, value in result.items():
        assert isinstance(value, float) and math.isfinite(value) and value > 0, (key, value)
    for backend in backends:
        assert result[f"watch_p50_ms_{backend}"] <= result[f"watch_p99_ms_{backend}"] < WATCH_MS_MAX, backend


def test_perf_metadata_json(pg_server, capsys):
    url = pg_server.fresh_database_url("perf")
    assert main(["--json", "--cas-ops", "30", "--watch-events", "10", "--postgres-url", url]) == 0
    assert_sane(json.loads(capsys.readouterr().out.strip().splitlines()[-1]), BACKENDS)


def test_perf_metadata_json_one_backend(capsys):
    assert main(["--json", "--backends", "sqlite", "--cas-ops", "30", "--watch-events", "10"]) == 0
    assert_sane(json.loads(capsys.readouterr().out.strip().splitlines()[-1]), ("sqlite",))
