"""Smoke run of `strata perf produce --tls --auth token` (issue 17 item 8) at a tiny size: it starts
a plain and a secured standalone, runs the same load against each, and prints both reports and
their ratios. Not a timed test: no figure is compared to the 1.3x target (docs/benchmarks.md has the measured
table); the run must account for every message on each path, really use pulsar+ssl:// with a
token on the secured one, and compute the ratios from the figures it prints."""

from __future__ import annotations

import math

from tests.cli.test_perf_smoke import assert_sane, strata_perf

MESSAGES = 10_000     # ~50 ms of server CPU per path: above psutil's 10 ms clock tick


def test_perf_produce_plain_against_tls_and_token() -> None:
    result = strata_perf("produce", "--tls", "--auth", "token", "--messages", str(MESSAGES))
    assert result["secured_path"] == "tls+token" and result["rounds"] == 1
    plain, secured = result["plain"], result["secured"]
    for run in (plain, secured):
        assert_sane(run, MESSAGES)
        assert run["broker_cpu_us_per_msg"] is not None and 0 <= run["broker_cpu_us_per_msg"] <= \
            run["server_cpu_us_per_msg"] + 0.01
    assert result["all_accounted"] is True
    assert (plain["scheme"], plain["token"]) == ("pulsar", False)
    assert (secured["scheme"], secured["token"]) == ("pulsar+ssl", True)
    assert math.isclose(result["msgs_per_s_ratio"], secured["msgs_per_s"] / plain["msgs_per_s"], rel_tol=0.01)
    # MESSAGES is sized so each path takes several ticks of the CPU clock: a ratio is always computed
    # (a path measured at 0 CPU would print none, and its checks would not run)
    assert plain["server_cpu_us_per_msg"] > 0 and secured["server_cpu_us_per_msg"] > 0, (plain, secured)
    assert math.isclose(result["server_cpu_ratio"],
                        secured["server_cpu_us_per_msg"] / plain["server_cpu_us_per_msg"], rel_tol=0.01)
    assert result["within_target"] is (result["server_cpu_ratio"] <= result["cpu_ratio_target_max"])
