"""Smoke runs of `strata perf produce` / `strata perf consume` with both drivers: they run, exit 0,
print sane JSON and account for every message: each key present with its type, percentiles
ordered, rates consistent with counts, seconds and sizes, server CPU per message within a broad
range and consistent with the CPU seconds.

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


NUMBER = (int, float)
COMMON_KEYS = {"driver": str, "msgs_per_s": NUMBER, "mb_per_s": NUMBER, "p50_ms": NUMBER, "p99_ms": NUMBER,
               "p999_ms": NUMBER, "server_cpu_us_per_msg": NUMBER, "server_cpu_s": NUMBER, "size": int,
               "seconds": NUMBER, "partitions": int, "compression": str, "topic": str}
PRODUCE_KEYS = {**COMMON_KEYS, "messages": int, "producers": int, "max_pending": int}
CONSUME_KEYS = {**COMMON_KEYS, "produced": int, "received": int, "all_accounted": bool, "redelivered": int,
                "consumers": int, "receiver_queue": int, "ack": str}
SERVER_CPU_US_PER_MSG_MAX = 10_000   # 10 ms of server CPU per 1 KiB message: something is badly wrong


def assert_keys(result: dict, keys: dict) -> None:
    """Every key present, of its type (an int is not a bool here, and a bool is no count)."""
    for key, kind in keys.items():
        assert key in result, f"missing {key}: {sorted(result)}"
        value = result[key]
        assert isinstance(value, kind) and (kind is bool or not isinstance(value, bool)), \
            f"{key} = {value!r}, expected {kind}"


def assert_ordered(*percentiles_ms) -> None:
    assert 0 < percentiles_ms[0], percentiles_ms
    assert list(percentiles_ms) == sorted(percentiles_ms), f"percentiles out of order: {percentiles_ms}"


def assert_sane(result: dict, messages: int) -> None:
    """Every message accounted for, percentiles ordered, and the figures consistent with one another:
    msg/s x seconds = messages, MB/s = msg/s x size, CPU us/msg x messages = CPU s (the JSON rounds
    seconds to 1 ms, rates to 0.1, MB/s to 0.01, CPU to 1 ms: the tolerances cover that, no more)."""
    produce = "messages" in result
    assert_keys(result, PRODUCE_KEYS if produce else CONSUME_KEYS)
    counted = result["messages"] if produce else result["received"]
    assert counted == messages
    assert result["topic"].startswith("persistent://public/default/")
    rate, seconds = result["msgs_per_s"], result["seconds"]
    assert rate > 0 and seconds > 0
    assert abs(rate * seconds - messages) <= 0.01 * messages + rate * 0.0006, (rate, seconds, messages)
    expected_mb_per_s = rate * result["size"] / 1e6
    assert abs(result["mb_per_s"] - expected_mb_per_s) <= 0.01 * expected_mb_per_s + 0.01, result
    assert_ordered(result["p50_ms"], result["p99_ms"], result["p999_ms"])
    if produce:   # every publish latency falls inside the run (first send to last receipt)
        assert result["p999_ms"] <= seconds * 1000 * 1.02 + 1.0, (result["p999_ms"], seconds)
    cpu_us, cpu_s = result["server_cpu_us_per_msg"], result["server_cpu_s"]
    assert 0 <= cpu_us < SERVER_CPU_US_PER_MSG_MAX and cpu_s >= 0, (cpu_us, cpu_s)
    assert abs(cpu_us * messages / 1e6 - cpu_s) <= 0.001 + 0.01 * cpu_s, (cpu_us, cpu_s, messages)


def test_produce_native_starts_its_own_standalone() -> None:
    result = strata_perf("produce", "--messages", "2000")
    assert_sane(result, 2000)
    assert result["driver"] == "native" and result["size"] == 1024 and result["producers"] == 1
    assert result["compression"] == "none" and result["rate"] is None
    assert 100 < result["messages_per_batch"] <= 2000  # 1 KiB messages: 128 per batch, as the client batches
    assert "all_accounted" not in result and result["e2e_p50_ms"] is None   # no e2e consumers without --rate


def test_produce_pulsar_client(standalone: StandaloneProcess) -> None:
    result = strata_perf("produce", "--driver", "pulsar-client", "--messages", "2000",
                         "--service-url", standalone.service_url, "--admin-url", standalone.admin_url)
    assert_sane(result, 2000)
    assert result["driver"] == "pulsar-client"
    assert result["server_cpu_s"] is not None  # found the broker by its listening port


def test_produce_at_fixed_rate_two_processes_two_partitions(standalone: StandaloneProcess) -> None:
    result = strata_perf("produce", "--messages", "2000", "--rate", "2000", "--producers", "2",
                         "--partitions", "2", "--compression", "lz4",
                         "--service-url", standalone.service_url, "--admin-url", standalone.admin_url)
    assert_sane(result, 2000)
    assert result["producers"] == 2 and result["partitions"] == 2 and result["compression"] == "lz4"
    assert result["all_accounted"] is True and result["e2e_received"] == 2000
    assert_ordered(result["e2e_p50_ms"], result["e2e_p99_ms"], result["e2e_p999_ms"])
    # 2000 msg/s in total offered: the last of 2000 messages is due after (2000 - 1) / 2000 s, so the
    # run cannot be faster than that (it may be slower on a loaded machine: no upper bound)
    assert result["seconds"] >= 0.95 and result["msgs_per_s"] <= 2000 * 1.05, result


@pytest.mark.parametrize("driver", ["native", "pulsar-client"])
def test_consume_accounts_for_every_message(standalone: StandaloneProcess, driver: str) -> None:
    result = strata_perf("consume", "--driver", driver, "--messages", "2000", "--verify",
                         "--service-url", standalone.service_url, "--admin-url", standalone.admin_url)
    assert_sane(result, 2000)
    assert result["driver"] == driver
    assert result["all_accounted"] is True and result["produced"] == result["received"] == 2000
    assert result["verify_errors"] == []
    assert result["redelivered"] == 0     # every message acked, no fault: nothing comes twice
    assert result["e2e_p50_ms"] == result["p50_ms"] and result["e2e_p99_ms"] == result["p99_ms"]
    assert result["fill_msgs_per_s"] > 0 and result["fill_seconds"] > 0
    if driver == "native":   # entries are counted: batches of the fill's producer, at most all of them
        assert 1 <= result["messages_per_entry"] <= 2000
