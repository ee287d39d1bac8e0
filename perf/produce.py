"""`strata perf produce`: publish throughput, publish latency and the server's CPU per message.

    strata perf produce [--driver native|pulsar-client] [--messages N] [--size 1024]
                        [--rate R] [--producers N] [--topic T] [--partitions P]
                        [--compression none|lz4|zstd|zlib] [--max-pending M] [--json]
                        [--service-url pulsar://... --admin-url http://...]

Without --service-url it starts a real `strata standalone` on free ports in a temp dir and
removes it afterwards. `--producers N` runs N producer processes (the messages and the rate are
split between them) and sums them: msg/s and MB/s over first start to last receipt.

At max rate (no --rate) it measures throughput and publish latency (send -> receipt of the
message's batch). With --rate R it also runs one consumer process (same driver) subscribed
before the first send and reports end-to-end latency (publish_time -> receive, same machine
clock); the server CPU figure then includes dispatching to that consumer.

Server CPU per message = (utime+stime of the broker and every bookie process after the run -
before) / messages (perf_common.ServerCpu).

`--json` prints one object: msgs_per_s, mb_per_s, p50_ms, p99_ms, p999_ms, e2e_p50_ms,
e2e_p99_ms, e2e_p999_ms, server_cpu_us_per_msg, driver, messages, seconds, ...
"""

from __future__ import annotations

import argparse
import functools
import importlib
import multiprocessing
import sys

from common.errors import StrataError
from perf.harness import (
    MB,
    WorkerPool,
    add_load_args,
    check_load_args,
    cpu_per_message_us,
    install_sigterm_cleanup,
    merge_histograms,
    prepare_topic,
    print_report,
    producer_kwargs,
    server_from_args,
    throughput,
    worker_main,
)

E2E_SUBSCRIPTION = "perf-e2e"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf produce", description=__doc__.split("\n")[0])
    add_load_args(parser, messages_default=200_000)
    parser.add_argument("--rate", type=float, default=None,
                        help="messages/s in total (fixed-rate mode; adds end-to-end latency)")
    parser.add_argument("--producers", type=int, default=1, help="producer processes")
    return parser.parse_args(argv)


def driver_module(driver: str):
    return importlib.import_module("perf.native" if driver == "native" else "perf.official_client")


def _e2e_pool(args: argparse.Namespace, service_url: str, topic: str, ctx) -> WorkerPool:
    """One consumer process that counts every message and records end-to-end latency."""
    kw = {"service_url": service_url, "topic": topic, "subscription": E2E_SUBSCRIPTION,
          "expected": args.messages, "shared_count": ctx.Value("q", 0), "size": args.size,
          "receiver_queue": 1000, "ack": "individual", "verify": False, "idle_timeout_s": 30.0}
    run = driver_module(args.driver).run_consumer
    return WorkerPool(functools.partial(worker_main, run), [kw], ctx)


def run(args: argparse.Namespace) -> dict:
    ctx = multiprocessing.get_context("spawn")
    with server_from_args(args) as server:
        topic = prepare_topic(server, args, "produce")
        consumers = _e2e_pool(args, server.service_url, topic, ctx) if args.rate else None
        producers = WorkerPool(functools.partial(worker_main, driver_module(args.driver).run_producer),
                               producer_kwargs(args, server, topic, args.producers, args.rate), ctx)
        try:
            if consumers is not None:
                consumers.launch()
            producers.launch()
            cpu_before_s = server.cpu.sample_s()
            if consumers is not None:
                consumers.go()
            producers.go()
            results = producers.collect(args.timeout_s)
            cpu_after_s = server.cpu.sample_s()
            e2e_results = consumers.collect(args.timeout_s) if consumers is not None else []
        finally:
            producers.terminate()
            if consumers is not None:
                consumers.terminate()
    return report(args, topic, results, e2e_results, cpu_before_s, cpu_after_s)


def report(args: argparse.Namespace, topic: str, results: list[dict], e2e_results: list[dict],
           cpu_before_s: float | None, cpu_after_s: float | None) -> dict:
    messages, total_bytes, seconds = throughput(results, "messages")
    latency = merge_histograms([r["latency"] for r in results])
    e2e = merge_histograms([r["e2e"] for r in e2e_results])
    batches = [r["batches"] for r in results if r["batches"] is not None]
    out = {
        "driver": args.driver, "msgs_per_s": round(messages / seconds, 1),
        "mb_per_s": round(total_bytes / seconds / MB, 2),
        "p50_ms": latency.percentile_ms(50), "p99_ms": latency.percentile_ms(99),
        "p999_ms": latency.percentile_ms(99.9),
        "e2e_p50_ms": e2e.percentile_ms(50), "e2e_p99_ms": e2e.percentile_ms(99),
        "e2e_p999_ms": e2e.percentile_ms(99.9),
        "server_cpu_us_per_msg": cpu_per_message_us(cpu_before_s, cpu_after_s, messages),
        "server_cpu_s": None if cpu_before_s is None or cpu_after_s is None else round(cpu_after_s - cpu_before_s, 3),
        "messages": messages, "size": args.size, "seconds": round(seconds, 3),
        "producers": args.producers, "partitions": args.partitions, "compression": args.compression,
        "rate": args.rate, "max_pending": args.max_pending, "topic": topic,
        "messages_per_batch": round(messages / sum(batches), 1) if batches else None,
    }
    if e2e_results:
        received = sum(r["received"] for r in e2e_results)
        out["e2e_received"] = received
        out["all_accounted"] = received == messages
    return out


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    install_sigterm_cleanup()
    problem = check_load_args(args) or (None if args.producers >= 1 else "--producers must be >= 1")
    if problem:
        print(f"strata perf produce: {problem}", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"strata perf produce: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context managers stopped everything
        print("strata perf produce: interrupted", file=sys.stderr)
        return 130
    print_report("strata perf produce", result, args.json)
    return 0 if result.get("all_accounted", True) else 1
