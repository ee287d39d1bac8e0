"""The `strata` command: one entry point, one module per subcommand.

Each subcommand lives in its own module exposing `main(argv: list[str]) -> int`, imported only
when used, so `strata bookie` never pays for importing the broker or Spark.
"""

from __future__ import annotations

import importlib
import os
import sys

# Before anything imports grpc: its fork support (on by default) crashes the child of a
# subprocess.Popen before exec in grpcio >= 1.81 (grpc/grpc#43055), and our servers start their
# bookies, SeaweedFS and brokers that way; nothing forks to use gRPC in the child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# subcommand -> module with main(argv)
COMMANDS: dict[str, str] = {
    "standalone": "cli.standalone",
    "broker": "cli.broker_cmd",
    "bookie": "cli.bookie_cmd",
    "admin": "cli.admin",
    "analytics": "cli.analytics_cmd",
    "cluster": "cli.cluster_cmd",
    "chaos": "chaos.runner",
    "top": "cli.top",
    "tokens": "cli.tokens_cmd",
}

# `strata perf <name>` -> module with main(argv)
PERF_COMMANDS: dict[str, str] = {
    "metadata": "perf.metadata",
    "bookie": "perf.bookie",
    "ledger": "perf.ledger",
    "cursor": "perf.cursor",
    "produce": "perf.produce",
    "consume": "perf.consume",
    "topics": "perf.topics",
    "startup": "perf.startup",
    "offload": "perf.offload",
    "spark": "perf.spark",
    "failover": "perf.failover",
    "compaction": "perf.compaction",
    "schemas": "perf.schemas",
    "fuzz": "perf.fuzz.command",
    "kafka": "perf.kafka",
    "limits": "perf.limits",
}


def _usage() -> str:
    lines = ["usage: strata <command> [options]", "", "commands:"]
    lines += [f"  {name}" for name in COMMANDS]
    lines += ["  perf " + "|".join(PERF_COMMANDS)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name == "perf":
        if not rest or rest[0] not in PERF_COMMANDS:
            print(_usage(), file=sys.stderr)
            return 2
        module = importlib.import_module(PERF_COMMANDS[rest[0]])
        return int(module.main(rest[1:]) or 0)
    if name not in COMMANDS:
        print(f"strata: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
