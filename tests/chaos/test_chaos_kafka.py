"""`strata chaos` with its Kafka workload, end to end: idempotent confluent-kafka producers and a
consumer group of three members on the brokers' Kafka ports, beside the Pulsar workload, through
one round of broker and network faults (those move partitions and the group's coordinator from
broker to broker). The Kafka checks must come out clean: no acknowledged record lost (the group
consumed every one by the end of the drain, and the final read from offset 0 holds every one), none
stored twice, every offset holding what clients were told; redeliveries to the group are counted,
not failed. The Pulsar side of the same run is the smoke test's subject (test_chaos_smoke.py).

Also: `--kafka/--no-kafka` and its default (on when confluent-kafka is installed). The soak (more
faults of the same roles) runs behind the `slow` marker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.checks.kafka import SPECS
from chaos.history import records
from chaos.runner import parse_args
from chaos.workload import kafka as kafka_workload

ROOT = Path(__file__).resolve().parents[2]
ONLY = "broker,network"       # one round: a broker fault, a network fault, both at once
SHORT_FAULTS = 3
SHORT_TIMEOUT_S = 280
SOAK_FAULTS = 30
SOAK_TIMEOUT_S = 3600
KAFKA_VIOLATIONS = [name for name, violation, _doc in SPECS if violation]


def _run_chaos(out: Path, faults: int, seed: int, timeout_s: float) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cli.main", "chaos", "--faults", str(faults), "--seed", str(seed),
           "--out", str(out), "--warmup-s", "3", "--only", ONLY, "--kafka"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _check_kafka(out: Path, result: subprocess.CompletedProcess[str], seed: int, faults: int) -> dict:
    tail = (result.stdout + result.stderr)[-6000:]
    assert (out / "verdict.json").exists(), f"strata chaos wrote no verdict (seed {seed}):\n{tail}"
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["cluster"]["failure"] is None, f"the run broke down (seed {seed}):\n{tail}"
    cats = verdict["categories"]
    found = {name: cats[name] for name in KAFKA_VIOLATIONS if cats[name]["count"] or not cats[name]["checked"]}
    assert not found, f"Kafka violations (seed {seed}): {json.dumps(found, indent=1)}"
    for name in ("kafka_lost", "kafka_lost_in_storage", "kafka_duplicated_in_storage"):
        assert cats[name]["count"] == 0 and cats[name]["checked"], name
    stats = verdict["kafka"]["stats"]
    assert stats["sends_ok"] > 0 and stats["commits_ok"] > 0, stats
    assert stats["consumed_distinct"] >= stats["sends_ok"] and stats["read_back"] >= stats["sends_ok"], stats
    history = list(records(out / "history.jsonl"))
    injected = [r for r in history if r["op"] == "fault" and r.get("proc") == "nemesis"]
    assert len(injected) >= faults and {r["role"] for r in injected} <= {"broker", "network"}
    finals = [r for r in history if r["op"] == "kafka-final"]
    assert len(finals) == stats["partitions"] and all(r["complete"] for r in finals), finals
    assert len(verdict["kafka"]["recovery"]) >= len(injected)
    print(f"seed {seed}: {json.dumps(stats)}")
    print(json.dumps(verdict["kafka"]["recovery_by_kind"], indent=1))
    return verdict


def test_kafka_option_and_its_default(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--seed", "1"]).kafka is kafka_workload.available()
    assert parse_args(["--seed", "1", "--no-kafka"]).kafka is False
    assert parse_args(["--seed", "1", "--kafka"]).kafka is True
    monkeypatch.setattr(kafka_workload, "available", lambda: False)
    assert parse_args(["--seed", "1"]).kafka is False
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--seed", "1", "--kafka"])
    assert exit_.value.code == 2 and "--kafka needs confluent-kafka" in capsys.readouterr().err


def test_kafka_commands_rebuild_the_plan(tmp_path: Path) -> None:
    plan = kafka_workload.KafkaPlan.build(7, "chaos/ns")
    commands = dict(plan.commands("127.0.2.1:9092", tmp_path))
    assert set(commands) == {"producer-kafka", "consumer-kafka"}     # the runner's drain: producer-*, consumer-*
    args = kafka_workload.parse(commands["consumer-kafka"][3:])
    assert kafka_workload.KafkaPlan.build(args.seed, args.namespace, args.rate_per_s) == plan
    name, argv = plan.final_command("127.0.2.1:9092", tmp_path)
    assert name == "final-kafka" and kafka_workload.parse(argv[3:]).role == "final"
    assert plan.broker_env() == {"STRATA_KAFKA_DEFAULT_NAMESPACE": "chaos/ns"}
    assert plan.pulsar_topic == f"persistent://chaos/ns/{plan.topic}" and plan.partitions == 3


@pytest.mark.skipif(not kafka_workload.available(), reason="confluent-kafka is not installed")
@pytest.mark.timeout(SHORT_TIMEOUT_S + 60)
def test_chaos_with_kafka(tmp_path: Path) -> None:
    """One round of broker and network faults: nothing acknowledged lost, nothing stored twice."""
    seed = 20261130
    out = tmp_path / "run"
    result = _run_chaos(out, SHORT_FAULTS, seed, SHORT_TIMEOUT_S)
    _check_kafka(out, result, seed, SHORT_FAULTS)


@pytest.mark.slow
@pytest.mark.skipif(not kafka_workload.available(), reason="confluent-kafka is not installed")
@pytest.mark.timeout(SOAK_TIMEOUT_S + 60)
def test_chaos_with_kafka_soak(tmp_path: Path) -> None:
    """The soak: SOAK_FAULTS broker and network faults; the Kafka checks clean, recovery printed."""
    seed = int(os.environ.get("STRATA_SEED", "31"))
    out = tmp_path / "soak"
    result = _run_chaos(out, SOAK_FAULTS, seed, SOAK_TIMEOUT_S)
    _check_kafka(out, result, seed, SOAK_FAULTS)
