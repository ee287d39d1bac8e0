"""`strata perf metadata` runs end to end with small counts and prints the promised JSON keys."""

from __future__ import annotations

import json

from perf.metadata import main

KEYS = {"cas_ops_per_s_sqlite", "cas_ops_per_s_postgres", "watch_p50_ms_sqlite", "watch_p99_ms_sqlite",
        "watch_p50_ms_postgres", "watch_p99_ms_postgres"}


def test_perf_metadata_json(pg_server, capsys):
    url = pg_server.fresh_database_url("perf")
    assert main(["--json", "--cas-ops", "30", "--watch-events", "10", "--postgres-url", url]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) == KEYS
    assert result["cas_ops_per_s_sqlite"] > 0 and result["cas_ops_per_s_postgres"] > 0
    for backend in ("sqlite", "postgres"):
        assert 0 <= result[f"watch_p50_ms_{backend}"] <= result[f"watch_p99_ms_{backend}"] < 5_000
