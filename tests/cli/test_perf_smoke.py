"""Smoke runs of `strata perf produce` / `strata perf consume` with both drivers: they run, exit 0,
print sane JSON (nonzero rates and latencies, server CPU measured) and account for every message.

Benchmarks, not timed tests: the message counts are tiny and no figure is compared to a target.
One run starts its own standalone (no arguments, the default); the others share one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess

RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("perf") / "data") as sa:
        yield sa


def strata_perf(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cli.main", "perf", *args, "--json"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_sane(result: dict, messages: int) -> None:
    assert result["msgs_per_s"] > 0 and result["mb_per_s"] > 0
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["p999_ms"]
    assert result["server_cpu_us_per_msg"] is not None and result["server_cpu_us_per_msg"] >= 0
    assert result.get("messages", result.get("received")) == messages


def test_produce_native_starts_its_own_standalone() -> None:
    result = strata_perf("produce", "--messages", "2000")
    assert_sane(result, 2000)
    assert result["driver"] == "native"
    assert result["messages_per_batch"] > 100  # 1 KiB messages: 128 per batch, as the client batches


def test_produce_pulsar_client(standalone: StandaloneProcess) -> None:
    result = strata_perf("produce", "--driver", "pulsar-client", "--messages", "2000",
                         "--service-url", standalone.service_url, "--admin-url", standalone.admin_url)
    assert_sane(result, 2000)
    assert result["server_cpu_s"] is not None  # found the broker by its listening port


def test_produce_at_fixed_rate_two_processes_two_partitions(standalone: StandaloneProcess) -> None:
    result = strata_perf("produce", "--messages", "2000", "--rate", "2000", "--producers", "2",
                         "--partitions", "2", "--compression", "lz4",
                         "--service-url", standalone.service_url, "--admin-url", standalone.admin_url)
    assert_sane(result, 2000)
    assert result["all_accounted"] and result["e2e_received"] == 2000
    assert 0 < result["e2e_p50_ms"] <= result["e2e_p99_ms"]


@pytest.mark.parametrize("driver", ["native", "pulsar-client"])
def test_consume_accounts_for_every_message(standalone: StandaloneProcess, driver: str) -> None:
    result = strata_perf("consume", "--driver", driver, "--messages", "2000", "--verify",
                         "--service-url", standalone.service_url, "--admin-url", standalone.admin_url)
    assert_sane(result, 2000)
    assert result["all_accounted"] and result["produced"] == result["received"] == 2000
    assert result["verify_errors"] == []
