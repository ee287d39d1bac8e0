"""chaos.workload: the plan is a pure function of its seed, and every role works against a real
cluster (1 broker, 1 bookie, PostgreSQL, SeaweedFS) with the chaos settings (BROKER_ENV).

The cluster test runs the plan's processes until the history shows each part working (bounded),
stops them through the stop files, runs the final read-back, and checks the history: ok sends on
every partition, deliveries on every subscription type, acks of both modes, reads, a complete
final read-back holding every ok send, no corrupt payload anywhere, and ledgers rolled over and
offloaded to S3 during the run (prepare's policies and BROKER_ENV at work).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from admin_client import AdminClient
from chaos.history import HISTORY_DIR, merge, payload_ok, records
from chaos.workload import BROKER_ENV, STOP_CONSUMERS, STOP_PRODUCERS, WorkloadPlan, prepare
from chaos.workload.plan import CUMULATIVE, CUMULATIVE_SUBTYPES, INDIVIDUAL, SUBTYPES
from tests.support.cluster_proc import LocalCluster

SEED = 27
RUN_S_MIN = 15.0           # the processes run at least this long (ledgers roll over: BROKER_ENV)
RUN_S_MAX = 40.0           # ... and until every part shows in the history, at most this long
EXIT_S = 45.0              # producers drain and every process exits within this after its stop file
FINAL_TIMEOUT_S = 60.0
TERMINATE_EXIT_S = 10.0    # a producer exits within this of SIGTERM, even with its broker frozen


def test_plan_is_a_function_of_its_seed() -> None:
    assert WorkloadPlan.build(SEED) == WorkloadPlan.build(SEED)
    assert WorkloadPlan.build(SEED, size=2) == WorkloadPlan.build(SEED, size=2)
    plans = [WorkloadPlan.build(seed) for seed in range(20)]
    assert len({(p.subscriptions, p.topics, p.producers) for p in plans}) > 1, "the seed changes the plan"


@pytest.mark.parametrize("seed", range(10))
def test_plan_covers_every_subscription_type_and_ack_mode(seed: int) -> None:
    plan = WorkloadPlan.build(seed, size=1 + seed % 2)
    assert {s.subtype for s in plan.subscriptions} == set(SUBTYPES)
    assert {s.ack_mode for s in plan.subscriptions} == {INDIVIDUAL, CUMULATIVE}
    assert all(s.subtype in CUMULATIVE_SUBTYPES for s in plan.subscriptions if s.ack_mode == CUMULATIVE)
    assert any(t.partitions for t in plan.topics) and any(not t.partitions for t in plan.topics)
    assert any(p.batching for p in plan.producers) and any(t.keyed for t in plan.topics)
    assert sum(p.rate_per_s for p in plan.producers) == pytest.approx(plan.rate_per_s)


def test_commands_rebuild_the_same_plan(tmp_path: Path) -> None:
    plan = WorkloadPlan.build(SEED, rate_per_s=100.0)
    commands = plan.commands("pulsar://127.0.0.1:1", tmp_path)
    assert sorted(name for name, _ in commands) == sorted(plan.procs())
    from chaos.workload.__main__ import parse
    for name, argv in [*commands, plan.final_command("pulsar://127.0.0.1:1", tmp_path)]:
        assert argv[:3] == [sys.executable, "-m", "chaos.workload"]
        args = parse(argv[3:])
        assert args.name == name
        assert WorkloadPlan.build(args.seed, args.size, args.namespace, args.rate_per_s) == plan
    assert len(plan.topic_records()) == len(plan.topics)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster.start(tmp_path_factory.mktemp("chaos") / "cluster", brokers=1, bookies=1, e=1, qw=1, qa=1,
                           s3=True, env=dict(BROKER_ENV))
    try:
        yield c
    finally:
        c.stop()


def _history(out: Path) -> list[dict[str, Any]]:
    directory = out / HISTORY_DIR
    found = []
    for path in directory.glob("*.jsonl") if directory.exists() else ():
        found.extend(records(path))
    return found


def _missing(plan: WorkloadPlan, history: list[dict[str, Any]]) -> list[str]:
    """What the history does not show yet: an ok send per partition, a delivery per subscription
    type, an ack of each mode, a read per partition."""
    partitions = {p for t in plan.topics for p in t.partition_topics()}
    missing = [f"ok send on {p}" for p in partitions - {r["topic"] for r in history
                                                       if r["op"] == "send" and r["outcome"] == "ok"}]
    missing += [f"delivery on {s}" for s in set(SUBTYPES) - {r["subtype"] for r in history if r["op"] == "deliver"}]
    missing += [f"{m} ack" for m in {INDIVIDUAL, CUMULATIVE} - {r["mode"] for r in history if r["op"] == "ack"}]
    missing += [f"read on {p}" for p in partitions - {r["topic"] for r in history if r["op"] == "read"}]
    return missing


def _wait_exit(procs: dict[str, subprocess.Popen[bytes]], names: list[str], bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    for name in names:
        try:
            code = procs[name].wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} did not exit within {bound_s} s of its stop file")
        assert code == 0, f"{name} exited {code}"


def _launch(out: Path, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    with open(out / f"{name}.log", "wb") as log:      # the child has its own copy of the descriptor
        return subprocess.Popen(argv, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT)


def _launch_all(plan: WorkloadPlan, cluster: LocalCluster, out: Path) -> dict[str, subprocess.Popen[bytes]]:
    return {name: _launch(out, name, argv) for name, argv in plan.commands(cluster.service_url, out, drain_s=20.0)}


def _wait_for(out: Path, done: Callable[[list[dict[str, Any]]], bool], bound_s: float, what: str) -> None:
    deadline = time.monotonic() + bound_s
    while not done(_history(out)):
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {bound_s} s")
        time.sleep(0.5)


def _stop_and_read_back(plan: WorkloadPlan, cluster: LocalCluster, out: Path,
                        procs: dict[str, subprocess.Popen[bytes]]) -> list[dict[str, Any]]:
    """Stop the processes by the stop files, run `final`; the merged history."""
    try:
        (out / STOP_PRODUCERS).touch()
        _wait_exit(procs, [n for n, role in plan.procs().items() if role == "producer"], EXIT_S)
        (out / STOP_CONSUMERS).touch()
        _wait_exit(procs, [n for n, role in plan.procs().items() if role != "producer"], EXIT_S)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    name, argv = plan.final_command(cluster.service_url, out, timeout_s=FINAL_TIMEOUT_S)
    final = _launch(out, name, argv)
    assert final.wait(FINAL_TIMEOUT_S + 30) == 0
    merged, torn = merge(out)
    assert torn == 0
    return list(records(merged))


def _check(plan: WorkloadPlan, history: list[dict[str, Any]]) -> None:
    """Every payload intact, no send refused, a complete final read-back holding every ok send once."""
    values = [r["value"] for r in history if "value" in r]
    assert values and all(payload_ok(v) for v in values), [v for v in values if not payload_ok(v)][:5]
    sends = [r for r in history if r["op"] == "send"]
    assert {r["outcome"] for r in sends} <= {"ok", "unknown"}, [r for r in sends if r["outcome"] == "failed"][:3]
    finals = {r["topic"]: r for r in history if r["op"] == "final"}
    assert set(finals) == {p for t in plan.topics for p in t.partition_topics()}
    assert all(f["complete"] and f["error"] is None for f in finals.values()), finals
    read_back: dict[str, list[str]] = defaultdict(list)
    for r in history:
        if r["op"] == "read" and r["reader"] == "final":
            read_back[r["topic"]].append(r["value"])
    for topic, final in finals.items():
        assert final["count"] == len(read_back[topic])
        assert len(set(read_back[topic])) == len(read_back[topic]), f"a value stored twice on {topic}"
    stored = {topic: set(got) for topic, got in read_back.items()}
    lost = [r for r in sends if r["outcome"] == "ok" and r["value"] not in stored.get(r["topic"], set())]
    assert not lost, lost[:5]


def test_every_role_against_a_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    plan = WorkloadPlan.build(SEED)
    prepare(AdminClient(cluster.admin_urls[0]), plan)
    procs = _launch_all(plan, cluster, tmp_path)
    started = time.monotonic()
    _wait_for(tmp_path, lambda h: not _missing(plan, h) and time.monotonic() - started >= RUN_S_MIN, RUN_S_MAX,
              "ok send, delivery, ack and read everywhere")
    assert all(p.poll() is None for p in procs.values()), {n: p.poll() for n, p in procs.items()}
    history = _stop_and_read_back(plan, cluster, tmp_path, procs)
    assert not _missing(plan, history), _missing(plan, history)
    _check(plan, history)
    ledgers = [ledger for t in plan.topics for p in t.partition_topics() for ledger in AdminClient(
        cluster.admin_urls[0]).call("GET", "/admin/v2/" + p.replace("://", "/") + "/internalStats")["ledgers"]]
    assert len(ledgers) > len(plan.topics) and any(ledger["offloaded"] for ledger in ledgers), ledgers


def test_processes_survive_a_broker_crash_and_end_on_sigterm(cluster: LocalCluster, tmp_path: Path) -> None:
    """kill -9 of the only broker and its restart: sends resume on every partition; a producer
    ended by SIGTERM while its broker is frozen records its pending sends unknown and exits within
    the bound."""
    plan = WorkloadPlan.build(SEED + 1, namespace="chaos/crash", rate_per_s=120.0)
    partitions = {p for t in plan.topics for p in t.partition_topics()}
    prepare(AdminClient(cluster.admin_urls[0]), plan)
    procs = _launch_all(plan, cluster, tmp_path)

    def oks_since(t: float) -> Callable[[list[dict[str, Any]]], bool]:
        return lambda h: partitions <= {r["topic"] for r in h if r["op"] == "send" and r["outcome"] == "ok"
                                         and r["t0"] >= t}
    _wait_for(tmp_path, oks_since(0.0), RUN_S_MAX, "ok send on every partition")
    cluster.brokers[0].restart(crash=True)
    _wait_for(tmp_path, oks_since(time.time()), RUN_S_MAX, "ok send on every partition after the restart")
    victim = next(n for n, role in plan.procs().items() if role == "producer")
    cluster.brokers[0].freeze()
    try:
        time.sleep(1.0)                           # sends pile up, unanswered
        procs[victim].send_signal(signal.SIGTERM)
        _wait_exit(procs, [victim], TERMINATE_EXIT_S)
    finally:
        cluster.brokers[0].thaw()
    mine = [r for r in _history(tmp_path) if r["proc"] == victim]
    assert mine[-1]["op"] == "producer" and mine[-1]["event"] == "closed"
    assert any(r["op"] == "send" and r["outcome"] == "unknown" and r["t1"] is None for r in mine)
    history = _stop_and_read_back(plan, cluster, tmp_path, procs)
    assert all(p.poll() == 0 for p in procs.values())
    _check(plan, history)
