"""`strata perf startup`: how fast `strata standalone` serves, and how big its broker is when idle.

    strata perf startup [--runs 3] [--idle-s 5] [--bookies 1] [--no-s3] [--json]

Each run starts a fresh `strata standalone` (temp dir, free ports; with its embedded SeaweedFS
unless `--no-s3`, as the plain command does) and measures:

- `startup_s`: from spawning the command to the first TCP connection its Pulsar port accepts
  (polled every `POLL_INTERVAL_S`); `ready_s`: to its "admin URL" line (everything serves);
- after `--idle-s` of idling with no client, the broker's RSS (the standalone process runs the
  broker; bookies and SeaweedFS are its children and are reported apart) and the native
  libraries it has mapped from site-packages (`native_packages`: pyarrow, numpy, cryptography
  or fastavro there mean something loaded them before it was needed).

Keys: `{startup_s,ready_s,broker_rss_mb}_{median,min,max}`, `children_rss_mb` (the last run),
`native_packages` (the last run), `runs`, `idle_s`, `embedded_s3`. The runs are sequential; each
is stopped (SIGTERM, bounded) before the next starts.
"""

from __future__ import annotations

import argparse
import re
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common.errors import StrataError, TimeoutExpired
from launch.standalone import StandaloneProcess
from perf.harness import descendants, install_sigterm_cleanup, print_report, rss_bytes

POLL_INTERVAL_S = 0.005      # between connection attempts: the resolution of startup_s
CONNECT_TIMEOUT_S = 0.2
START_TIMEOUT_S = 90.0       # a standalone (SeaweedFS included) that does not serve by then fails the run
_SITE_PACKAGE = re.compile(r"/site-packages/([A-Za-z0-9_]+)[./]")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="strata perf startup", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="standalones started one after another (default 3)")
    parser.add_argument("--idle-s", type=float, default=5.0, help="idle time before the RSS is read (default 5)")
    parser.add_argument("--bookies", type=int, default=1, help="bookies of the standalone (default 1)")
    parser.add_argument("--no-s3", action="store_true", help="no embedded S3 server (no cold tier)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def native_packages(pid: int) -> list[str]:
    """The site-packages packages whose shared libraries `pid` has mapped (sorted)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return []
    return sorted(set(_SITE_PACKAGE.findall(maps)))


def _wait_accepting(sa: StandaloneProcess, port: int, start: float) -> float:
    """Seconds from `start` to the first accepted connection on `port` (StrataError if the process exits)."""
    while time.monotonic() - start < START_TIMEOUT_S:
        if _accepts(port):
            return time.monotonic() - start
        if not sa.alive():
            raise StrataError("the standalone exited during start-up", log=sa.log_tail())
        time.sleep(POLL_INTERVAL_S)
    raise TimeoutExpired("the standalone's Pulsar port accepted no connection", timeout_s=START_TIMEOUT_S)


def _one_run(args: argparse.Namespace) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="strata-perf-startup-")) / "data"
    sa = StandaloneProcess(data_dir, True, bookies=args.bookies, embedded_s3=not args.no_s3)
    try:
        start = time.monotonic()
        sa.spawn()
        startup_s = _wait_accepting(sa, sa.port, start)
        sa.wait_ready(START_TIMEOUT_S)
        ready_s = time.monotonic() - start
        time.sleep(args.idle_s)
        children = [p for p in descendants(sa.pid) if p != sa.pid]
        return {"startup_s": startup_s, "ready_s": ready_s, "broker_rss": rss_bytes(sa.pid),
                "children_rss": sum(rss_bytes(p) for p in children), "native": native_packages(sa.pid)}
    except StrataError:
        print(f"--- end of the standalone's log ---\n{sa.log_tail()}", file=sys.stderr)
        raise
    finally:
        sa.close()


def _spread(name: str, values: list[float], digits: int) -> dict:
    return {f"{name}_median": round(statistics.median(values), digits),
            f"{name}_min": round(min(values), digits), f"{name}_max": round(max(values), digits)}


def run(args: argparse.Namespace) -> dict:
    results = [_one_run(args) for _ in range(args.runs)]
    last = results[-1]
    return {"runs": args.runs, "embedded_s3": not args.no_s3, "idle_s": args.idle_s,
            **_spread("startup_s", [r["startup_s"] for r in results], 2),
            **_spread("ready_s", [r["ready_s"] for r in results], 2),
            **_spread("broker_rss_mb", [r["broker_rss"] / 1e6 for r in results], 1),
            "children_rss_mb": round(last["children_rss"] / 1e6, 1),
            "native_packages": ",".join(last["native"])}


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    install_sigterm_cleanup()
    if args.runs < 1 or args.idle_s < 0 or args.bookies < 1:
        print("strata perf startup: --runs and --bookies must be positive, --idle-s not negative", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except StrataError as exc:
        print(f"strata perf startup: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("strata perf startup: interrupted", file=sys.stderr)
        return 130
    print_report("strata perf startup", result, args.json)
    return 0
