"""bench/report.py renders a result without running anything: the e2e-5k latency table shows
publish and end-to-end percentiles side by side, and a row from an older JSON (no publish
figures in `extra`) or a driver that cannot measure them shows "–"."""

from __future__ import annotations

from bench import report


def _row(system: str, extra: dict) -> dict:
    return {"system": system, "workload": "e2e-5k", "messages": 10_000, "seconds": 2.0, "msgs_per_s": 5000.0,
            "mb_per_s": 5.1, "p50_ms": 4.0, "p99_ms": 9.0, "p999_ms": 12.0, "latency_kind": "end-to-end",
            "server_rss_mb": 200.0, "server_cpu_us_per_msg": 50.0, "extra": extra, "error": None}


def test_latency_table_publish_next_to_e2e() -> None:
    result = {"started": "now", "commit": "abc", "scale": 0.1,
              "machine": {"cpus": 2, "cpu_model": "x", "note": "n"},
              "disk": {"mb_per_s": 400.0, "fsyncs_per_s": 4000.0}, "systems": {},
              "rows": [_row("strata 1/1/1 (native)", {"publish_p50_ms": 3.0, "publish_p99_ms": 8.5,
                                                      "publish_p999_ms": 11.0}),
                       _row("old peer", {})]}
    text = report.table(result)
    assert "| strata 1/1/1 (native) | 5,000 | 3.00 | 8.50 | 11.00 | 4.00 | 9.00 | 12.00 |" in text
    assert "| old peer | 5,000 | – | – | – | 4.00 | 9.00 | 12.00 |" in text
