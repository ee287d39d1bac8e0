"""`strata perf produce`: publish throughput, publish latency and the server's CPU per message.

    strata perf produce [--driver native|pulsar-client] [--messages N] [--size 1024]
                        [--rate R] [--producers N] [--topic T] [--partitions P]
                        [--compression none|lz4|zstd|zlib] [--max-pending M] [--json]
                        [--service-url pulsar://... --admin-url http://...]
    strata perf produce --tls --auth token [--messages N] [--json]    # plain vs TLS+token


Without --service-url it starts a real `strata standalone` on free ports in a temp dir and
removes it afterwards. `--producers N` runs N producer processes (the messages and the rate are
split between them) and sums them: msg/s and MB/s over first start to last receipt.

At max rate (no --rate) it measures throughput and publish latency (send -> receipt of the
message's batch). With --rate R it also runs one consumer process (same driver) subscribed
before the first send and reports end-to-end latency (publish_time -> receive, same machine
clock); the server CPU figure then includes dispatching to that consumer.

Server CPU per message = (utime+stime of the broker and every bookie process after the run -
before) / messages (perf_common.ServerCpu).

`--tls` and/or `--auth token` compare two standalones of the same kind in one run, with the same
load: a plain one (pulsar://, no authentication) and a secured one (perf.secure: a TLS port
measured through pulsar+ssl:// with hostname verification, token authentication and
authorization on, the producer a superuser). Both run side by side; `--rounds R` alternates
plain, secured, plain, ... (a fresh topic each), so a change in the machine's load hits both
alike, and the medians are reported (`plain`, `secured`) with their ratios: `server_cpu_ratio`
(secured / plain server CPU per message, broker and bookies; the target is <= 1.3 at 1 KiB
batched), `broker_cpu_ratio` (the broker process alone: where TLS is paid) and
`msgs_per_s_ratio`. Only with started standalones (not with --service-url).

`--json` prints one object: msgs_per_s, mb_per_s, p50_ms, p99_ms, p999_ms, e2e_p50_ms,
e2e_p99_ms, e2e_p999_ms, server_cpu_us_per_msg, driver, messages, seconds, ...
"""

from __future__ import annotations

import argparse
import functools
import importlib
import multiprocessing
import statistics
import sys

from common.errors import StrataError
from perf.harness import (
    MB,
    Server,
    WorkerPool,
    add_load_args,
    check_load_args,
    cpu_per_message_us,
    install_sigterm_cleanup,
    merge_histograms,
    prepare_topic,
    print_report,
    process_cpu_s,
    producer_kwargs,
    server_from_args,
    throughput,
    worker_main,
)

E2E_SUBSCRIPTION = "perf-e2e"
MEDIAN_KEYS = ("msgs_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "server_cpu_us_per_msg",
               "broker_cpu_us_per_msg", "server_cpu_s", "seconds")
CPU_RATIO_TARGET_MAX = 1.3       # issue 17: TLS+token server CPU per message <= 1.3x the plain path's


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf produce", description=__doc__.split("\n")[0])
    add_load_args(parser, messages_default=200_000)
    parser.add_argument("--rate", type=float, default=None,
                        help="messages/s in total (fixed-rate mode; adds end-to-end latency)")
    parser.add_argument("--producers", type=int, default=1, help="producer processes")
    parser.add_argument("--tls", action="store_true",
                        help="compare the plain path with pulsar+ssl:// (own standalones, same run)")
    parser.add_argument("--auth", choices=("token",), default=None,
                        help="compare the plain path with token authentication + authorization")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --tls/--auth: alternating runs per path (medians reported)")
    return parser.parse_args(argv)


def driver_module(driver: str):
    return importlib.import_module("perf.native" if driver == "native" else "perf.official_client")


def _e2e_pool(args: argparse.Namespace, server: Server, topic: str, ctx) -> WorkerPool:
    """One consumer process that counts every message and records end-to-end latency."""
    kw = {"service_url": server.service_url, "token": server.token, "tls_trust_file": server.tls_trust_file,
          "topic": topic, "subscription": E2E_SUBSCRIPTION,
          "expected": args.messages, "shared_count": ctx.Value("q", 0), "size": args.size,
          "receiver_queue": 1000, "ack": "individual", "verify": False, "idle_timeout_s": 30.0}
    run = driver_module(args.driver).run_consumer
    return WorkerPool(functools.partial(worker_main, run), [kw], ctx)


def run(args: argparse.Namespace) -> dict:
    if not (args.tls or args.auth):
        with server_from_args(args) as server:
            return measure(args, server)
    with server_from_args(args) as plain, server_from_args(args, tls=args.tls, auth=args.auth or "") as secured:
        rounds = []
        for _ in range(args.rounds):              # alternating, so a change of load hits both alike
            rounds.append((measure(args, plain), measure(args, secured)))
    return compare(args, rounds)


def compare(args: argparse.Namespace, rounds: list[tuple[dict, dict]]) -> dict:
    """Each path's median figures over the rounds, and secured/plain ratios of the medians."""
    plain = _medians([p for p, _ in rounds])
    secured = _medians([s for _, s in rounds])

    def ratio(key: str) -> float | None:
        a, b = plain.get(key), secured.get(key)
        return round(b / a, 3) if a and b is not None else None

    cpu_ratio = ratio("server_cpu_us_per_msg")
    return {"secured_path": ("tls" if args.tls else "plain") + ("+token" if args.auth else ""),
            "messages": args.messages, "size": args.size, "rounds": args.rounds,
            "server_cpu_ratio": cpu_ratio, "broker_cpu_ratio": ratio("broker_cpu_us_per_msg"),
            "msgs_per_s_ratio": ratio("msgs_per_s"), "cpu_ratio_target_max": CPU_RATIO_TARGET_MAX,
            "within_target": None if cpu_ratio is None else cpu_ratio <= CPU_RATIO_TARGET_MAX,
            "plain": plain, "secured": secured,
            "server_cpu_ratio_by_round": [_ratio(s, p, "server_cpu_us_per_msg") for p, s in rounds],
            "all_accounted": all(r.get("all_accounted", True) for pair in rounds for r in pair)}


def _ratio(secured: dict, plain: dict, key: str) -> float | None:
    a, b = plain.get(key), secured.get(key)
    return round(b / a, 3) if a and b is not None else None


def _medians(runs: list[dict]) -> dict:
    """The first run's report (its topic too) with its figures replaced by the median over `runs`."""
    out = dict(runs[0])
    for key in MEDIAN_KEYS:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = round(statistics.median(values), 3) if values else None
    return out


def print_comparison(result: dict) -> None:
    print(f"strata perf produce: plain vs {result['secured_path']} "
          f"({result['messages']} messages of {result['size']} B, median of {result['rounds']} round(s))")
    print(f"  {'':8s} {'msg/s':>10s} {'p50 ms':>8s} {'p99 ms':>8s} {'server CPU us/msg':>18s} {'broker':>8s}")
    for name in ("plain", "secured"):
        r = result[name]
        print(f"  {name:8s} {r['msgs_per_s']:>10,.0f} {r['p50_ms'] or 0:>8.2f} {r['p99_ms'] or 0:>8.2f} "
              f"{_cell(r['server_cpu_us_per_msg']):>18s} {_cell(r['broker_cpu_us_per_msg']):>8s}")
    print(f"  server CPU ratio {result['server_cpu_ratio']} (target <= {result['cpu_ratio_target_max']}; "
          f"by round {result['server_cpu_ratio_by_round']}), broker CPU ratio {result['broker_cpu_ratio']}, "
          f"msg/s ratio {result['msgs_per_s_ratio']}")


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _broker_cpu_s(server: Server) -> float | None:
    """CPU seconds of the server's root process alone (a standalone's broker, without its bookies)."""
    return process_cpu_s(server.cpu.root_pids[0]) if server.cpu.root_pids else None


def measure(args: argparse.Namespace, server: Server) -> dict:
    """One run of the load against `server` (a fresh topic unless --topic), reported."""
    ctx = multiprocessing.get_context("spawn")
    topic = prepare_topic(server, args, "produce")
    consumers = _e2e_pool(args, server, topic, ctx) if args.rate else None
    producers = WorkerPool(functools.partial(worker_main, driver_module(args.driver).run_producer),
                           producer_kwargs(args, server, topic, args.producers, args.rate), ctx)
    try:
        if consumers is not None:
            consumers.launch()
        producers.launch()
        cpu_before_s, broker_before_s = server.cpu.sample_s(), _broker_cpu_s(server)
        if consumers is not None:
            consumers.go()
        producers.go()
        results = producers.collect(args.timeout_s)
        cpu_after_s, broker_after_s = server.cpu.sample_s(), _broker_cpu_s(server)
        e2e_results = consumers.collect(args.timeout_s) if consumers is not None else []
    finally:
        producers.terminate()
        if consumers is not None:
            consumers.terminate()
    out = report(args, topic, results, e2e_results, cpu_before_s, cpu_after_s)
    out["broker_cpu_us_per_msg"] = cpu_per_message_us(broker_before_s, broker_after_s, out["messages"])
    out["scheme"] = server.service_url.partition("://")[0]      # pulsar or pulsar+ssl
    out["token"] = bool(server.token)
    return out


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
    if args.rounds < 1:
        problem = "--rounds must be >= 1"
    if (args.tls or args.auth) and args.service_url:
        problem = "--tls/--auth compare two standalones this run starts; they do not take --service-url"
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
    if "secured" in result and not args.json:
        print_comparison(result)
    else:
        print_report("strata perf produce", result, args.json)
    return 0 if result.get("all_accounted", True) else 1
