"""`strata perf consume`: catch-up read throughput of a backlog and the server's CPU per message.

    strata perf consume [--driver native|pulsar-client] [--messages N] [--size 1024]
                        [--consumers N] [--topic T] [--partitions P] [--compression ...]
                        [--receiver-queue Q] [--ack individual|cumulative] [--verify] [--json]
                        [--service-url pulsar://... --admin-url http://...]

1. Creates the subscription (so the backlog is kept for it), then fills a backlog of N messages
   with the native producer (fast whatever --driver says; its throughput is reported as
   fill_msgs_per_s).
2. Starts the consumer processes (one: Exclusive; several: Shared on one subscription), each
   subscribed with no permits yet; then the start signal; each grants --receiver-queue permits
   and reads until all consumers together received N messages (or nothing arrived for
   --idle-timeout-s). Acks: individual (grouped, whole entries) or cumulative.
3. Reports msg/s and MB/s (first start to last message received), the server's CPU per message
   consumed (broker + bookies, psutil), and whether every message was accounted for
   (`all_accounted`: received == produced; exit status 1 if not). p50_ms/p99_ms are the
   end-to-end latencies of the catch-up (mostly the backlog's age), e2e keys alike.

`--verify` (native driver) decodes every batch and checks member counts, payload sizes and
per-producer sequence ids (no gap, no repeat).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
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
from perf.native_client import EARLIEST, SUB_EXCLUSIVE, SUB_SHARED, NativeClient
from perf.produce import driver_module

SUBSCRIPTION = "perf-consume"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf consume", description=__doc__.split("\n")[0])
    add_load_args(parser, messages_default=200_000)
    parser.add_argument("--consumers", type=int, default=1,
                        help="consumer processes (more than one: a Shared subscription)")
    parser.add_argument("--receiver-queue", type=int, default=1000,
                        help="permits per consumer, in messages (the client's receiver_queue_size)")
    parser.add_argument("--ack", choices=("individual", "cumulative"), default="individual")
    parser.add_argument("--verify", action="store_true", help="decode and check every message")
    parser.add_argument("--idle-timeout-s", type=float, default=15.0,
                        help="stop when nothing arrived for this long")
    parser.add_argument("--subscription", default=SUBSCRIPTION)
    return parser.parse_args(argv)


async def _create_subscription(service_url: str, topic: str, subscription: str, shared: bool) -> None:
    """Subscribe once and leave, so the subscription exists (at the start) before the fill."""
    client = NativeClient(service_url)
    try:
        consumers = await client.subscribe(topic, subscription, sub_type=SUB_SHARED if shared else SUB_EXCLUSIVE,
                                           initial_position=EARLIEST, send_flow=False)
        for consumer in consumers:
            await consumer.close()
    finally:
        await client.close()


def _fill(args: argparse.Namespace, server, topic: str, ctx) -> dict:
    import perf.native as native
    pool = WorkerPool(functools.partial(worker_main, native.run_producer),
                      producer_kwargs(args, server, topic, 1, None), ctx)
    try:
        pool.launch()
        pool.go()
        results = pool.collect(args.timeout_s)
    finally:
        pool.terminate()
    messages, _, seconds = throughput(results, "messages")
    return {"fill_msgs_per_s": round(messages / seconds, 1), "fill_seconds": round(seconds, 3)}


def _consumer_kwargs(args: argparse.Namespace, server, topic: str, ctx) -> list[dict]:
    shared = args.consumers > 1
    count = ctx.Value("q", 0)
    return [{"service_url": server.service_url, "topic": topic, "subscription": args.subscription,
             "sub_type": SUB_SHARED if shared else SUB_EXCLUSIVE, "shared": shared,
             "expected": args.messages, "shared_count": count, "size": args.size,
             "receiver_queue": args.receiver_queue, "ack": args.ack, "verify": args.verify,
             "idle_timeout_s": args.idle_timeout_s} for _ in range(args.consumers)]


def run(args: argparse.Namespace) -> dict:
    ctx = multiprocessing.get_context("spawn")
    with server_from_args(args) as server:
        topic = prepare_topic(server, args, "consume")
        asyncio.run(_create_subscription(server.service_url, topic, args.subscription, args.consumers > 1))
        fill = _fill(args, server, topic, ctx)
        pool = WorkerPool(functools.partial(worker_main, driver_module(args.driver).run_consumer),
                          _consumer_kwargs(args, server, topic, ctx), ctx)
        try:
            pool.launch()
            cpu_before_s = server.cpu.sample_s()
            pool.go()
            results = pool.collect(args.timeout_s)
            cpu_after_s = server.cpu.sample_s()
        finally:
            pool.terminate()
    return report(args, topic, fill, results, cpu_before_s, cpu_after_s)


def report(args: argparse.Namespace, topic: str, fill: dict, results: list[dict],
           cpu_before_s: float | None, cpu_after_s: float | None) -> dict:
    received, total_bytes, seconds = throughput(results, "received")
    e2e = merge_histograms([r["e2e"] for r in results])
    entries = [r["entries"] for r in results if r["entries"] is not None]
    verify_errors = [e for r in results for e in r["verify_errors"]][:20]
    return {
        "driver": args.driver, "msgs_per_s": round(received / seconds, 1),
        "mb_per_s": round(total_bytes / seconds / MB, 2),
        "p50_ms": e2e.percentile_ms(50), "p99_ms": e2e.percentile_ms(99), "p999_ms": e2e.percentile_ms(99.9),
        "e2e_p50_ms": e2e.percentile_ms(50), "e2e_p99_ms": e2e.percentile_ms(99),
        "server_cpu_us_per_msg": cpu_per_message_us(cpu_before_s, cpu_after_s, received),
        "server_cpu_s": None if cpu_before_s is None or cpu_after_s is None else round(cpu_after_s - cpu_before_s, 3),
        "produced": args.messages, "received": received, "all_accounted": received == args.messages,
        "redelivered": sum(r["redelivered"] for r in results),
        "messages_per_entry": round(received / sum(entries), 1) if entries and sum(entries) else None,
        "verify_errors": verify_errors if args.verify else None,
        "seconds": round(seconds, 3), "consumers": args.consumers, "partitions": args.partitions,
        "receiver_queue": args.receiver_queue, "ack": args.ack, "size": args.size,
        "compression": args.compression, "topic": topic, **fill,
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    install_sigterm_cleanup()
    problem = check_load_args(args) or (None if args.consumers >= 1 and args.receiver_queue >= 1
                                        else "--consumers and --receiver-queue must be >= 1")
    if problem:
        print(f"strata perf consume: {problem}", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"strata perf consume: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the context managers stopped everything
        print("strata perf consume: interrupted", file=sys.stderr)
        return 130
    print_report("strata perf consume", result, args.json)
    ok = result["all_accounted"] and not result["verify_errors"]
    return 0 if ok else 1
