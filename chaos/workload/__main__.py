"""`python -m chaos.workload producer|consumer|reader|final --name PROC --seed S --size N ...`:
one process of a chaos run's workload (chaos.workload.plan builds these command lines).

The process rebuilds the plan from --seed/--size/--namespace/--rate-per-s and runs the part of it named
--name, appending to `<out>/history/<name>.jsonl`; it exits through os._exit once its history
is written (chaos.workload.runtime).
"""

from __future__ import annotations

import argparse

from chaos.workload import consumer, producer, reader
from chaos.workload.plan import DEFAULT_NAMESPACE, DEFAULT_RATE_PER_S, DRAIN_S, FINAL_TIMEOUT_S, WorkloadPlan

ROLES = ("producer", "consumer", "reader", "final")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos.workload")
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--name", required=True, help="the process name (its history file)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--size", type=int, default=1)
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--rate-per-s", type=float, default=DEFAULT_RATE_PER_S, help="total, every producer")
    parser.add_argument("--service-url", required=True)
    parser.add_argument("--out", required=True, help="the run's directory (history/, stop files)")
    parser.add_argument("--drain-s", type=float, default=DRAIN_S, help="producers: wait for pending sends")
    parser.add_argument("--timeout-s", type=float, default=FINAL_TIMEOUT_S, help="final: the whole read-back")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    plan = WorkloadPlan.build(args.seed, args.size, args.namespace, args.rate_per_s)
    if args.role == "producer":
        producer.main(plan, args.name, args.service_url, args.out, args.drain_s)
    elif args.role == "consumer":
        consumer.main(plan, args.name, args.service_url, args.out)
    elif args.role == "reader":
        reader.reader_main(plan, args.name, args.service_url, args.out)
    else:
        reader.final_main(plan, args.name, args.service_url, args.out, args.timeout_s)


if __name__ == "__main__":
    main()
