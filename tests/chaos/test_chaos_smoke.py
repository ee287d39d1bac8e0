"""`strata chaos`, end to end: a short run of the real command (a real cluster behind its proxies,
the official pulsar-client workload, faults on every role) must exit 0 with a valid verdict, a
report naming the seed, a timeline PNG, and faults of every role in its history. The long soak
(`--faults 100`) runs behind the `slow` marker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from chaos.history import records

ROOT = Path(__file__).resolve().parents[2]
SMOKE_FAULTS = 6          # one round: every role once (combined included)
SMOKE_TIMEOUT_S = 280
SOAK_FAULTS = 100
SOAK_TIMEOUT_S = 3 * 3600


def _run_chaos(out: Path, faults: int, seed: int, timeout_s: float) -> subprocess.CompletedProcess[str]:
    # the Pulsar workload alone: the Kafka workload has its own runs (test_chaos_kafka.py), and both
    # at once on every role's faults load a 2-core machine past what its leases allow
    cmd = [sys.executable, "-m", "cli.main", "chaos", "--faults", str(faults), "--seed", str(seed),
           "--out", str(out), "--warmup-s", "3", "--no-kafka"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _check_run(out: Path, result: subprocess.CompletedProcess[str], seed: int, faults: int) -> dict:
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, f"strata chaos failed (seed {seed}):\n{tail}"
    report = (out / "report.txt").read_text()
    assert f"seed {seed}" in report and "VALID" in report
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["valid"] is True and verdict["seed"] == seed
    history = list(records(out / "history.jsonl"))
    faults_seen = [r for r in history if r["op"] == "fault"]
    heals = {r["id"] for r in history if r["op"] == "heal"}
    assert len(faults_seen) >= faults and {r["id"] for r in faults_seen} <= heals, "every fault healed"
    ok_sends = Counter(r["topic"] for r in history if r["op"] == "send" and r["outcome"] == "ok")
    assert ok_sends and min(ok_sends.values()) > 0
    return verdict


@pytest.mark.timeout(SMOKE_TIMEOUT_S + 60)
def test_chaos_smoke(tmp_path):
    """One round of faults (every role), checked: 0 lost, 0 duplicated, 0 nonmonotonic, 0 orphans."""
    seed = 20261129
    out = tmp_path / "run"
    result = _run_chaos(out, SMOKE_FAULTS, seed, SMOKE_TIMEOUT_S)
    _check_run(out, result, seed, SMOKE_FAULTS)
    roles = {r["role"] for r in records(out / "history.jsonl") if r["op"] == "fault"}
    assert {"broker", "bookie", "metadata", "s3", "network"} <= roles


@pytest.mark.slow
@pytest.mark.timeout(SOAK_TIMEOUT_S + 60)
def test_chaos_soak(tmp_path):
    """The soak: 100 faults over every role; a valid history (0 lost, duplicated, nonmonotonic,
    orphans...). Liveness against its targets is printed, not asserted: on this 2-core machine
    recovery after PostgreSQL faults misses them (docs/chaos.md says by how much and why)."""
    seed = int(os.environ.get("STRATA_SEED", "27"))
    out = tmp_path / "soak"
    result = _run_chaos(out, SOAK_FAULTS, seed, SOAK_TIMEOUT_S)
    verdict = _check_run(out, result, seed, SOAK_FAULTS)
    roles = {r["role"] for r in records(out / "history.jsonl") if r["op"] == "fault"}
    assert {"broker", "bookie", "metadata", "s3", "network"} <= roles
    print(json.dumps(verdict["liveness"], indent=1))
