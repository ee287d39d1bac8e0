"""`strata chaos`: one run, from an empty directory to a verdict.

    strata chaos [--faults N | --duration 10m] [--seed S] [--out DIR] [--brokers 2] [--bookies 3]
                 [--lease-ms 3000] [--only ROLE|KIND,...] [--warmup-s 5] [--kafka | --no-kafka]

Phases, each a `phase` record in the history:
1. setup: a cluster (chaos/cluster.py: PostgreSQL, SeaweedFS, bookies at E/Qw/Qa 3/2/2 shrunk
   to the bookie count, brokers serving Kafka too; each behind its proxies), the namespace and
   topics of the seeded workload plan, and the workload's processes (with `--kafka`, the default
   when confluent-kafka is installed, the Kafka workload's too: chaos/workload/kafka.py);
2. run: after `--warmup-s` (and, with Kafka, once the group consumes: bounded), the nemesis
   injects faults until `--faults` were injected or `--duration` passed;
3. heal: everything mended, then the lease plus 2 s for the cluster to settle;
4. drain: producers stop and settle their pending sends; consumers run until quiet;
5. check: the final read-back of every topic (and of the Kafka topic from offset 0), the orphans
   check (S3 objects against ledger records), then the checker over the merged history, and the
   report under `--out`.

Exit codes: 0 when the history is valid, 1 when it is not (or the run could not finish),
2 for bad usage. The report (report.txt, verdict.json, timeline.png) names the seed, and the
same seed repeats the fault schedule.

What must hold: every node and process started is stopped at the end, whatever happens; every
wait is bounded; a run that breaks down part-way still writes the history and says why.
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from admin_client.client import AdminClient
from chaos import checker, node_logs, orphans, report
from chaos.cluster import ChaosCluster
from chaos.history import HISTORY_DIR, HistoryWriter, merge, read_file, records
from chaos.nemesis import CATALOGUE, ROLES, Nemesis
from chaos.workers import Workers
from chaos.workload import kafka as kafka_workload
from chaos.workload import plan as workload_plan
from chaos.workload import setup as workload_setup

log = logging.getLogger(__name__)

SETTLE_EXTRA_S = 2.0
PRODUCERS_DRAIN_S = 60.0
CONSUMERS_QUIET_S = 5.0
CONSUMERS_DRAIN_S = 120.0
FINAL_TIMEOUT_S = 300.0
LAPSE_SLACK_S = 5.0        # a lapse this long after a fault's heal (plus the lease) is the fault's


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")


def parse_duration_s(text: str) -> float:
    """`90`, `90s`, `10m`, `1.5h` as seconds (ValueError otherwise)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"bad duration {text!r}: a number with s, m or h (e.g. 90s, 10m)")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2) or "s"]


@dataclass(frozen=True)
class Options:
    out: Path
    seed: int
    faults: int | None
    duration_s: float | None
    brokers: int
    bookies: int
    lease_ms: int
    only: frozenset[str] | None
    warmup_s: float
    kafka: bool = False          # the Kafka workload runs beside the Pulsar one


def parse_args(argv: list[str]) -> Options:
    p = argparse.ArgumentParser(prog="strata chaos", description="a fault soak of a real local cluster, checked")
    p.add_argument("--faults", type=int, default=None, help="inject this many faults (default: 20 unless --duration)")
    p.add_argument("--duration", default=None, help="inject faults for this long (e.g. 90s, 10m)")
    p.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: random, printed)")
    p.add_argument("--out", default=None, help="report, history and logs (default ./chaos-<seed>)")
    p.add_argument("--brokers", type=int, default=2, help="broker processes (default 2)")
    p.add_argument("--bookies", type=int, default=3, help="bookie processes (default 3: E/Qw/Qa 3/2/2)")
    p.add_argument("--lease-ms", type=int, default=3000, help="metadata session lease (default 3000)")
    p.add_argument("--only", default=None, help="fault roles or kinds to use, comma-separated "
                   f"(roles: {', '.join(ROLES)})")
    p.add_argument("--warmup-s", type=float, default=5.0, help="workload before the first fault (default 5)")
    p.add_argument("--kafka", action=argparse.BooleanOptionalAction, default=None,
                   help="the Kafka workload too: idempotent producers and a consumer group on the brokers' "
                        "Kafka ports (default: on when confluent-kafka is installed)")
    a = p.parse_args(argv)
    if a.faults is not None and a.faults < 0:
        p.error("--faults must be >= 0")
    if a.brokers < 1 or a.bookies < 1:
        p.error("--brokers and --bookies must be >= 1")
    if a.kafka and not kafka_workload.available():
        p.error("--kafka needs confluent-kafka (pip install confluent-kafka)")
    only = frozenset(x.strip() for x in a.only.split(",")) if a.only else None
    known = set(ROLES) | {f.name for f in CATALOGUE}
    if only and not only <= known:
        p.error(f"unknown fault role or kind: {', '.join(sorted(only - known))}")
    try:
        duration = parse_duration_s(a.duration) if a.duration else None
    except ValueError as exc:
        p.error(str(exc))
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    faults = a.faults if a.faults is not None or duration is not None else 20
    kafka = kafka_workload.available() if a.kafka is None else a.kafka
    return Options(Path(a.out or f"chaos-{seed}"), seed, faults, duration, a.brokers, a.bookies,
                   a.lease_ms, only, a.warmup_s, kafka)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    opts = parse_args(list(sys.argv[1:] if argv is None else argv))
    print(f"strata chaos: seed {opts.seed}, out {opts.out}", flush=True)
    return run(opts)


def run(opts: Options) -> int:
    """One whole run; 0 when the history is valid."""
    opts.out.mkdir(parents=True, exist_ok=True)
    history = HistoryWriter(opts.out, "runner")
    e = min(opts.bookies, 3)
    qw = min(e, 2)
    plan = workload_plan.WorkloadPlan.build(opts.seed)
    kafka_plan = kafka_workload.KafkaPlan.build(opts.seed, plan.namespace) if opts.kafka else None
    history.write("phase", phase="setup", seed=opts.seed, brokers=opts.brokers, bookies=opts.bookies,
                  quorums=[e, qw, qw], lease_ms=opts.lease_ms, kafka=opts.kafka)
    started = time.monotonic()
    failure: str | None = None
    orphan_result = None
    env = {**workload_setup.BROKER_ENV, **(kafka_plan.broker_env() if kafka_plan else {})}
    cluster = ChaosCluster.start(opts.out / "cluster", brokers=opts.brokers, bookies=opts.bookies, e=e, qw=qw,
                                 qa=qw, lease_ms=opts.lease_ms, env=env)
    workers = Workers(opts.out)
    try:
        failure = _drive(opts, cluster, plan, workers, history, kafka_plan)
        orphan_result = _orphans(cluster)
    finally:
        workers.stop()
        cluster.stop()
    history.write("phase", phase="done", seconds=time.monotonic() - started, failure=failure)
    history.close()
    _record_lapses(opts, cluster)
    merged, torn = merge(opts.out)
    verdict = checker.check(records(merged), lease_s=opts.lease_ms / 1000, orphans=orphan_result)
    shape = {"brokers": opts.brokers, "bookies": opts.bookies, "quorums": f"{e}/{qw}/{qw}",
             "lease_ms": opts.lease_ms, "faults": opts.faults, "duration_s": opts.duration_s, "kafka": opts.kafka,
             "torn_history_lines": torn, "failure": failure}
    paths = report.write_report(opts.out, verdict, records(merged), seed=opts.seed, cluster=shape)
    print(paths["report"].read_text(), flush=True)
    if failure:
        print(f"strata chaos: the run broke down: {failure}", flush=True)
    return 0 if verdict.valid and failure is None else 1


def _drive(opts: Options, cluster: ChaosCluster, plan: workload_plan.WorkloadPlan, workers: Workers,
           history: HistoryWriter, kafka_plan: kafka_workload.KafkaPlan | None = None) -> str | None:
    """Phases 1–5 up to the final read-back; what broke the run, or None."""
    workload_setup.prepare(AdminClient(cluster.admin_url), plan)
    for record in plan.topic_records():
        history.write("topic", **record)
    commands = plan.commands(cluster.service_url, opts.out)
    if kafka_plan is not None:
        kafka_workload.prepare(AdminClient(cluster.admin_url), kafka_plan)
        history.write("kafka-topic", **kafka_plan.topic_record())
        commands += kafka_plan.commands(cluster.kafka_bootstrap, opts.out)
    workers.start(commands)
    time.sleep(opts.warmup_s)
    if kafka_plan is not None and not kafka_workload.wait_group_consuming(opts.out):
        log.warning("the Kafka group consumed nothing before the first fault")   # judged by the checker
    history.write("phase", phase="run")
    nemesis = Nemesis(cluster, HistoryWriter(opts.out, "nemesis"), random.Random(opts.seed),
                      lease_s=opts.lease_ms / 1000, kinds=set(opts.only) if opts.only else None)
    failure = None
    try:
        nemesis.run(faults=opts.faults, duration_s=opts.duration_s, should_stop=lambda: bool(workers.dead()))
    except Exception as exc:   # a fault the nemesis could not mend is a finding: say it, go on to check
        log.exception("the nemesis failed")
        failure = f"nemesis: {exc!r}"
    if workers.dead():
        failure = failure or f"workload processes exited early: {workers.dead()}"
    history.write("phase", phase="heal", faults=nemesis.count)
    nemesis.heal_everything()
    time.sleep(opts.lease_ms / 1000 + SETTLE_EXTRA_S)
    history.write("phase", phase="drain")
    workers.drain(producers_s=PRODUCERS_DRAIN_S, quiet_s=CONSUMERS_QUIET_S, consumers_s=CONSUMERS_DRAIN_S)
    history.write("phase", phase="check")
    finals = [plan.final_command(cluster.service_url, opts.out)]
    if kafka_plan is not None:
        finals.append(kafka_plan.final_command(cluster.kafka_bootstrap, opts.out))
    for name, argv in finals:
        code = workers.run_once(name, argv, FINAL_TIMEOUT_S)
        if code != 0:
            failure = failure or f"the final read-back {name} exited with {code}"
    return failure


def _record_lapses(opts: Options, cluster: ChaosCluster) -> None:
    """Lease lapses the nemesis did not cause, and bundle moves, from the nodes' logs, into the history."""
    nemesis_file = opts.out / HISTORY_DIR / "nemesis.jsonl"
    got, _ = read_file(nemesis_file) if nemesis_file.exists() else ([], 0)
    began = {r["id"]: r["t"] for r in got if r["op"] == "fault"}
    windows = [(began[r["id"]], r["t"]) for r in got if r["op"] == "heal" and r["id"] in began]
    windows += [(began[i], time.time()) for i in began if i not in {r["id"] for r in got if r["op"] == "heal"}]
    nodes = [(n.name, n.kind, n.log_path) for n in cluster.nodes()]
    slack_s = opts.lease_ms / 1000 + LAPSE_SLACK_S
    found = node_logs.spontaneous_lapses(nodes, windows, slack_s, time.time())
    found += node_logs.bundle_moves(nodes, windows, slack_s)
    with HistoryWriter(opts.out, "node-logs") as writer:
        for record in found:
            fields = {k: v for k, v in record.items() if k not in ("t", "op")}
            writer.write_at(record["t"], record["op"], **fields)


def _orphans(cluster: ChaosCluster) -> orphans.OrphanReport:
    s3 = cluster.s3
    assert s3 is not None
    target = orphans.S3Target(s3.endpoint, s3.bucket, access_key=s3.credentials.access_key,
                              secret_key=s3.credentials.secret_key, region=s3.region)
    return orphans.find_orphans(cluster.metadata_url, target)
