"""`strata perf limits`: issue 32's rate-limit targets, measured side by side in one run.

    strata perf limits [--rate 500] [--duration-s 10] [--warmup-s 1] [--rounds 3]
                       [--idle-runs 3] [--messages 1000000] [--driver native|pulsar-client]
                       [--flood-s 5] [--json] [--service-url ... --admin-url ...]

Without --service-url it starts a real `strata standalone` (temp dir, free ports) and removes it
afterwards. Three measurements, each against its own namespaces (created here, fresh topics):

1. Publish limit held (target: within 10% of R). A fast producer (official client, `send_async`
   with no batching, so every message is a SEND the broker must shape) publishes to a namespace
   whose `publishRate` is R msg/s for `--duration-s` after `--warmup-s` (the first full bucket
   lets about R messages through at once, as Pulsar's does). `held` = receipts in the window /
   window. The topic's `publishRateLimitedTimes` shows the limit was in force.
2. Other namespaces spared (target: beside / alone >= 0.9). The same kind of producer on a
   second namespace, measured alone and beside the throttled one, the order alternating each
   round (alone first in even rounds). The verdict takes the median of the rounds' ratios: the two
   runs of a round are adjacent in time, so a shared box's drifting load cancels in each ratio
   (the ratio of the two medians, `ratio_of_medians`, pairs runs minutes apart; it is reported too).
3. Idle limiter cost (target: within noise). `strata perf produce`'s load (`perf.produce.measure`,
   `--messages` of 1 KiB, `--driver`) on a namespace whose publishRate and dispatchRate are far
   above it (`IDLE_LIMIT_MSGS_PER_S`, `IDLE_LIMIT_BYTES_PER_S`) and on one with no limit,
   alternating (`--idle-runs` each, the order swapped every other pair). Its batches carry ~128
   messages per SEND, so a per-SEND cost hides; the unbatched producer of (1) is therefore also
   run alone on each (`--flood-s`, same alternation) with the server's CPU per message, the
   limiter's worst case. "Within noise": the median of the pairs' ratios is off 1 by no more than
   the larger run-to-run spread ((max - min) / median) of the two configurations (no verdict from
   one run). Beneath that noise, `limiter_us_per_send` is the limiter's own price, timed in this
   process: one idle `RateLimiter.consume` (both buckets, the system clock), the work an idle
   publish limit adds to each SEND.

Every wait is bounded (worker set-up, the load's `timeout`, flushes by the send timeout). `--json`
prints one object: `publish_limit`, `other_namespace`, `idle_limiter` (each with its figures,
`target` and `met`).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from admin_client import AdminClient, Credentials
from broker.limits.limiter import rate_limiter
from common.clock import SystemClock
from common.errors import StrataError, TimeoutExpired
from perf import produce
from perf.harness import Server, WorkerPool, add_server_args, install_sigterm_cleanup, server_from_args, worker_main

HELD_TOLERANCE = 0.10            # issue 32: within 10% of R
OTHER_RATIO_MIN = 0.9            # issue 32: other namespaces keep >= 0.9x their unthrottled rate
IDLE_LIMIT_MSGS_PER_S = 10_000_000
IDLE_LIMIT_BYTES_PER_S = 10_000_000_000
FLOOD_PAYLOAD_BYTES = 100
FLOOD_PENDING_MAX = 1000         # the unthrottled producer's in-flight window
SEND_TIMEOUT_S = 30.0            # bounds every flush
ADMIN_TIMEOUT_S = 15.0
POLICY_SETTLE_S = 1.0            # a namespace policy reaches the broker's cache (its /admin watch)
NO_LIMIT = -1
LIMITER_CALLS = 200_000          # idle RateLimiter.consume calls per timing
LIMITER_REPEATS = 5


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf limits", description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=500, help="the publish limit R, msg/s (default 500)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="measured window per run (default 10)")
    parser.add_argument("--warmup-s", type=float, default=1.0, help="sending before the window opens (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="alone/beside pairs, order alternating (default 3)")
    parser.add_argument("--idle-runs", type=int, default=3, help="produce runs per configuration (default 3)")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per produce run")
    parser.add_argument("--driver", choices=("native", "pulsar-client"), default="native",
                        help="the produce load's driver (as `strata perf produce --driver`)")
    parser.add_argument("--flood-s", type=float, default=5.0, help="unbatched idle-limiter runs' length")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="give up on one run after this long")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_server_args(parser)
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> str | None:
    if args.rate < 1 or args.rounds < 1 or args.idle_runs < 1 or args.messages < 1:
        return "--rate, --rounds, --idle-runs and --messages must be positive"
    if args.duration_s <= 0 or args.warmup_s < 0 or args.flood_s <= 0:
        return "--duration-s and --flood-s must be positive, --warmup-s not negative"
    return None


# ------------------------------------------------------------------------------------------------
# The flooding producer (a worker process: the official client is CPU-bound in its own process)


def run_flood(kw: dict, signal_ready: Callable[[], None], wait_start: Callable[[], None]) -> dict:
    """Send `FLOOD_PAYLOAD_BYTES` messages unbatched as fast as the window lets, for warmup + window;
    report the receipts within the window and what was sent, receipted and failed."""
    import pulsar
    client = pulsar.Client(kw["service_url"], operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        producer = client.create_producer(kw["topic"], batching_enabled=False, block_if_queue_full=True,
                                          max_pending_messages=kw["pending_max"],
                                          send_timeout_millis=int(SEND_TIMEOUT_S * 1000))
        receipts: list[float] = []          # receipt times (list.append is atomic under the GIL)
        failed = [0]

        def done(result, _msg_id) -> None:
            if result == pulsar.Result.Ok:
                receipts.append(time.monotonic())
            else:
                failed[0] += 1

        payload = b"x" * FLOOD_PAYLOAD_BYTES
        signal_ready()
        wait_start()
        start = time.monotonic()
        opens, closes = start + kw["warmup_s"], start + kw["warmup_s"] + kw["window_s"]
        sent = 0
        while time.monotonic() < closes:
            producer.send_async(payload, done)
            sent += 1
        producer.flush()                    # bounded by the send timeout
        producer.close()
    finally:
        client.close()
    in_window = sum(1 for t in receipts if opens <= t < closes)
    return {"sent": sent, "receipted": len(receipts), "failed": failed[0],
            "msgs_per_s": round(in_window / kw["window_s"], 1)}


def _flood_kw(server: Server, topic: str, warmup_s: float, window_s: float, pending_max: int) -> dict:
    return {"service_url": server.service_url, "topic": topic, "warmup_s": warmup_s, "window_s": window_s,
            "pending_max": pending_max}


def _floods(kws: list[dict], timeout_s: float) -> list[dict]:
    """Run one flooding producer per kw at the same time; their reports, checked: nothing lost."""
    pool = WorkerPool(functools.partial(worker_main, run_flood), kws, multiprocessing.get_context("spawn"))
    try:
        pool.launch()
        pool.go()
        results = pool.collect(timeout_s)
    finally:
        pool.terminate()
    for kw, r in zip(kws, results, strict=True):
        if r["failed"] or r["receipted"] != r["sent"]:
            raise StrataError("a producer lost messages", topic=kw["topic"], **r)
    return results


# ------------------------------------------------------------------------------------------------
# Namespaces and their policies


class Admin:
    def __init__(self, server: Server) -> None:
        self.client = AdminClient(server.admin_url, credentials=Credentials.build(token=server.token),
                                  timeout_s=ADMIN_TIMEOUT_S)
        self.run_id = uuid.uuid4().hex[:6]

    def namespace(self, name: str, msgs_per_s: int | None = None, bytes_per_s: int = NO_LIMIT) -> str:
        """A new namespace public/perf-limits-<run>-<name>; with publishRate (and a dispatchRate of
        the same figures when bytes_per_s is set) when msgs_per_s is given."""
        ns = f"public/perf-limits-{self.run_id}-{name}"
        self.client.call("PUT", f"/admin/v2/namespaces/{ns}")
        if msgs_per_s is not None:
            self.client.call("POST", f"/admin/v2/namespaces/{ns}/publishRate",
                             {"publishThrottlingRateInMsg": msgs_per_s, "publishThrottlingRateInByte": bytes_per_s})
        if msgs_per_s is not None and bytes_per_s != NO_LIMIT:
            self.client.call("POST", f"/admin/v2/namespaces/{ns}/dispatchRate",
                             {"dispatchThrottlingRateInMsg": msgs_per_s, "dispatchThrottlingRateInByte": bytes_per_s,
                              "ratePeriodInSecond": 1, "relativeToPublishRate": False})
        return ns

    def rate_limited_times(self, topic: str) -> int:
        stats = self.client.call("GET", f"/admin/v2/{topic.replace('://', '/')}/stats")
        return int(stats.get("publishRateLimitedTimes", 0))


def fresh_topic(ns: str, kind: str) -> str:
    return f"persistent://{ns}/{kind}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------
# 1 and 2: the publish limit held, the other namespace spared


def measure_publish_limit(args: argparse.Namespace, server: Server, admin: Admin) -> tuple[dict, dict]:
    limited_ns = admin.namespace("limited", args.rate)
    other_ns = admin.namespace("other")
    time.sleep(POLICY_SETTLE_S)
    # the throttled producer's window: a fifth of a second of its rate, so its final flush is short
    limited_pending = max(10, min(FLOOD_PENDING_MAX, args.rate // 5))
    alone: list[float] = []
    beside: list[float] = []
    held: list[float] = []
    limited_times: list[int] = []
    for i in range(args.rounds):
        for mode in (("alone", "beside") if i % 2 == 0 else ("beside", "alone")):
            kws = [_flood_kw(server, fresh_topic(other_ns, "other"), args.warmup_s, args.duration_s,
                             FLOOD_PENDING_MAX)]
            if mode == "beside":
                kws.append(_flood_kw(server, fresh_topic(limited_ns, "limited"), args.warmup_s, args.duration_s,
                                     limited_pending))
            results = _floods(kws, args.timeout_s)
            (alone if mode == "alone" else beside).append(results[0]["msgs_per_s"])
            if mode == "beside":
                held.append(results[1]["msgs_per_s"])
                limited_times.append(admin.rate_limited_times(kws[1]["topic"]))
    held_median = statistics.median(held)
    held_ratio = round(held_median / args.rate, 3)
    publish = {"rate": args.rate, "window_s": args.duration_s, "warmup_s": args.warmup_s, "rounds": args.rounds,
               "held_msgs_per_s": round(held_median, 1), "held_by_round": held, "held_ratio": held_ratio,
               "publish_rate_limited_times": limited_times,
               "target": f"within {HELD_TOLERANCE:.0%} of R", "met": abs(held_ratio - 1) <= HELD_TOLERANCE}
    by_round = [round(b / a, 3) for a, b in zip(alone, beside, strict=True)]
    ratio = round(statistics.median(by_round), 3)
    other = {"alone_msgs_per_s": round(statistics.median(alone), 1),
             "beside_msgs_per_s": round(statistics.median(beside), 1),
             "alone_by_round": alone, "beside_by_round": beside, "ratio": ratio, "ratio_by_round": by_round,
             "ratio_of_medians": round(statistics.median(beside) / statistics.median(alone), 3),
             "target": f">= {OTHER_RATIO_MIN}x alone", "met": ratio >= OTHER_RATIO_MIN}
    return publish, other


# ------------------------------------------------------------------------------------------------
# 3: the idle limiter's cost


def _produce_run(args: argparse.Namespace, server: Server, ns: str) -> dict:
    produce_args = produce.parse_args(["--driver", args.driver, "--messages", str(args.messages),
                                       "--topic", fresh_topic(ns, "produce"), "--timeout-s", str(args.timeout_s)])
    return produce.measure(produce_args, server)


def _flood_run(args: argparse.Namespace, server: Server, ns: str) -> dict:
    before = server.cpu.sample_s()
    result = _floods([_flood_kw(server, fresh_topic(ns, "flood"), 0.0, args.flood_s, FLOOD_PENDING_MAX)],
                     args.timeout_s)[0]
    after = server.cpu.sample_s()
    cpu_us = None if before is None or after is None else round((after - before) * 1e6 / result["sent"], 2)
    return {"msgs_per_s": result["msgs_per_s"], "server_cpu_us_per_msg": cpu_us}


def _alternate(runs: int, one: Callable[[str], dict], limited_ns: str, free_ns: str) -> tuple[list[dict], list[dict]]:
    """`runs` results per namespace, alternating: none, idle / idle, none / none, idle ...
    (the i-th of each list form a pair, adjacent in time)"""
    idle: list[dict] = []
    none: list[dict] = []
    for i in range(runs):
        for ns in ((free_ns, limited_ns) if i % 2 == 0 else (limited_ns, free_ns)):
            (idle if ns == limited_ns else none).append(one(ns))
    return idle, none


def _spread(values: list[float]) -> float:
    return round((max(values) - min(values)) / statistics.median(values), 3)


def compare_runs(idle: list[dict], none: list[dict], key: str) -> dict:
    """Medians of `key` with limits and without, the median of the pairs' ratios (limits / none),
    each side's spread and the verdict."""
    pairs = [(x[key], y[key]) for x, y in zip(idle, none, strict=True) if x.get(key) and y.get(key)]
    if not pairs:                                   # None or 0 (too short a run to see): no figure
        return {"key": key, "ratio": None, "met": None}
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    ratio = round(statistics.median(x / y for x, y in pairs), 3)
    noise = max(_spread(a), _spread(b))
    return {"key": key, "idle_limits": round(statistics.median(a), 2), "no_limits": round(statistics.median(b), 2),
            "idle_by_run": a, "none_by_run": b, "ratio": ratio,
            "ratio_of_medians": round(statistics.median(a) / statistics.median(b), 3),
            "spread_idle": _spread(a), "spread_none": _spread(b),
            "met": abs(ratio - 1) <= noise if len(pairs) > 1 else None}   # one run: no spread


def limiter_us_per_send(calls: int = LIMITER_CALLS) -> float:
    """The best of `LIMITER_REPEATS` timings of `calls` idle RateLimiter.consume calls, per call."""
    limiter = rate_limiter(IDLE_LIMIT_MSGS_PER_S, IDLE_LIMIT_BYTES_PER_S, 1.0, SystemClock())
    if limiter is None:
        raise StrataError("the idle limits build no limiter")
    best = float("inf")
    for _ in range(LIMITER_REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            limiter.consume(1, FLOOD_PAYLOAD_BYTES)
        best = min(best, time.perf_counter() - start)
    return round(best * 1e6 / calls, 3)


def measure_idle_limiter(args: argparse.Namespace, server: Server, admin: Admin) -> dict:
    limited_ns = admin.namespace("idle", IDLE_LIMIT_MSGS_PER_S, IDLE_LIMIT_BYTES_PER_S)
    free_ns = admin.namespace("free")
    time.sleep(POLICY_SETTLE_S)
    idle, none = _alternate(args.idle_runs, functools.partial(_produce_run, args, server), limited_ns, free_ns)
    flood_idle, flood_none = _alternate(args.idle_runs, functools.partial(_flood_run, args, server),
                                        limited_ns, free_ns)
    return {"limits": {"msgs_per_s": IDLE_LIMIT_MSGS_PER_S, "bytes_per_s": IDLE_LIMIT_BYTES_PER_S},
            "limiter_us_per_send": limiter_us_per_send(),
            "runs": args.idle_runs, "messages": args.messages, "driver": args.driver,
            "target": "ratio within the run-to-run spread",
            "produce_msgs_per_s": compare_runs(idle, none, "msgs_per_s"),
            "produce_server_cpu": compare_runs(idle, none, "server_cpu_us_per_msg"),
            "unbatched_msgs_per_s": compare_runs(flood_idle, flood_none, "msgs_per_s"),
            "unbatched_server_cpu": compare_runs(flood_idle, flood_none, "server_cpu_us_per_msg")}


# ------------------------------------------------------------------------------------------------
# The command


def run(args: argparse.Namespace) -> dict:
    with server_from_args(args) as server:
        admin = Admin(server)
        publish, other = measure_publish_limit(args, server, admin)
        idle = measure_idle_limiter(args, server, admin)
    return {"publish_limit": publish, "other_namespace": other, "idle_limiter": idle}


def _verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "MISSED")


def print_table(result: dict) -> None:
    p, o, i = result["publish_limit"], result["other_namespace"], result["idle_limiter"]
    print(f"strata perf limits: publishRate R={p['rate']} msg/s, {p['window_s']:g} s windows, "
          f"median of {p['rounds']} round(s)")
    print(f"  {'measure':34s} {'figure':>12s} {'ratio':>7s}  {'target':24s} verdict")
    print(f"  {'throttled producer, msg/s':34s} {p['held_msgs_per_s']:>12,.1f} {p['held_ratio']:>7.3f}  "
          f"{p['target']:24s} {_verdict(p['met'])}")
    print(f"  {'other namespace alone, msg/s':34s} {o['alone_msgs_per_s']:>12,.1f}")
    print(f"  {'other namespace beside, msg/s':34s} {o['beside_msgs_per_s']:>12,.1f} {o['ratio']:>7.3f}  "
          f"{o['target']:24s} {_verdict(o['met'])}")
    print(f"  (ratio: median of the rounds' beside/alone {o['ratio_by_round']}; "
          f"of the medians {o['ratio_of_medians']})")
    print(f"idle limiter (publishRate+dispatchRate {i['limits']['msgs_per_s']:,} msg/s), "
          f"{i['runs']} run(s) each, alternating; ratio = median of the pairs' limits / none")
    print(f"  {'measure':34s} {'no limits':>12s} {'limits':>12s} {'ratio':>7s} {'spread':>13s}  verdict")
    for key, label in (("produce_msgs_per_s", f"perf produce ({i['driver']}) msg/s"),
                       ("produce_server_cpu", "  server CPU us/msg"),
                       ("unbatched_msgs_per_s", "unbatched producer msg/s"),
                       ("unbatched_server_cpu", "  server CPU us/msg")):
        c = i[key]
        if c["ratio"] is None:
            print(f"  {label:34s} {'-':>12s}")
            continue
        spread = f"{c['spread_none']:.3f}/{c['spread_idle']:.3f}"
        print(f"  {label:34s} {c['no_limits']:>12,.2f} {c['idle_limits']:>12,.2f} {c['ratio']:>7.3f} "
              f"{spread:>13s}  {_verdict(c['met'])}")
    print(f"  idle limiter's own price: {i['limiter_us_per_send']} us per SEND (RateLimiter.consume, timed here)")


def main(argv: list[str]) -> int:
    import json
    args = parse_args(argv)
    install_sigterm_cleanup()
    problem = check_args(args)
    if problem:
        print(f"strata perf limits: {problem}", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except (StrataError, TimeoutExpired) as exc:
        print(f"strata perf limits: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("strata perf limits: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0
