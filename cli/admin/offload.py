"""`strata admin` offload commands, with pulsar-admin's names, units and output.

    strata admin topics offload -s 10M TOPIC          offload the ledgers beyond the newest 10 MiB
    strata admin topics offload-status [-w] TOPIC      -w: wait (progress bar) until not RUNNING
    strata admin topics stats-internal TOPIC           internalStats JSON
    strata admin namespaces set-offload-threshold -s 10M [-t 1h] TENANT/NS
    strata admin namespaces get-offload-threshold TENANT/NS
    strata admin namespaces set-offload-deletion-lag -l 10m TENANT/NS
    strata admin namespaces get-offload-deletion-lag TENANT/NS
    strata admin namespaces clear-offload-deletion-lag TENANT/NS

Units (pulsar-admin's): sizes `100` (bytes), `10K`, `10M`, `1G`, `1T` (powers of 1024); times
`30` (seconds), `30s`, `10m`, `1h`, `1d`, `2w`, `1y`. `-1` where pulsar-admin takes it.

`topics offload` works as pulsar-admin's, on the client: it reads internalStats, takes the open
ledger's size from `currentLedgerSize`, walks the ledgers newest to oldest summing their sizes,
and the first time the sum exceeds the threshold asks the broker to offload every ledger before
the one it passed last (`first_ledger_within_threshold`). Printed: "Nothing to offload" or
"Offload triggered for <topic> for messages before <L:0:-1>".

`offload-status -w` polls every second, drawing entries done/total on stderr, until the status is
no longer RUNNING or `--timeout` seconds pass (exit 1). Exit status 1 on ERROR, as pulsar-admin.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from cli.admin.commands import Groups, command, namespace_path, topic_path
from cli.admin.console import AdminConsole
from cli.admin.units import size_bytes, time_seconds
from common.topic_names import parse_topic

# (method, path, body) -> the decoded JSON answer (None for an empty one); raises on HTTP errors
Request = Callable[[str, str, object], object]

STATUS_POLL_INTERVAL_S = 1.0
STATUS_WAIT_S_DEFAULT = 3_600.0

def first_ledger_within_threshold(ledgers: list[tuple[int, int]], threshold_bytes: int) -> int | None:
    """pulsar-admin's findFirstLedgerWithinThreshold over (ledger id, size) pairs, oldest first:
    the ledger to offload before, or None if the ledgers do not exceed the threshold."""
    summed = 0
    previous = ledgers[-1][0] if ledgers else None
    for ledger_id, size in reversed(ledgers):
        summed += size
        if summed > threshold_bytes:
            return previous
        previous = ledger_id
    return None


def add_parsers(groups: Groups) -> None:
    topics, namespaces = groups["topics"], groups["namespaces"]
    offload = command(topics, "offload", _run, "offload the ledgers beyond a size threshold")
    offload.add_argument("topic")
    offload.add_argument("-s", "--size-threshold", type=size_bytes, required=True,
                         help="keep this much on the bookies (bytes, or 10M)")
    status = command(topics, "offload-status", _run)
    status.add_argument("topic")
    status.add_argument("-w", "--wait-complete", action="store_true", help="wait while it runs")
    status.add_argument("--timeout", type=float, default=STATUS_WAIT_S_DEFAULT,
                        help=f"give up waiting after this many seconds (default {STATUS_WAIT_S_DEFAULT:.0f})")
    command(topics, "stats-internal", _run, "the managed ledger's internal stats").add_argument("topic")
    threshold = command(namespaces, "set-offload-threshold", _run)
    threshold.add_argument("namespace")
    threshold.add_argument("-s", "--size", type=size_bytes, required=True,
                           help="bytes kept before offloading (-1 broker default, negative off, 0 ASAP)")
    threshold.add_argument("-t", "--time", type=time_seconds, default=-1,
                           help="offload ledgers older than this (seconds, or 1h; -1 broker default)")
    lag = command(namespaces, "set-offload-deletion-lag", _run)
    lag.add_argument("namespace")
    lag.add_argument("-l", "--lag", type=time_seconds, required=True,
                     help="delete the bookie copy this long after offload (seconds, or 10m; negative: never)")
    for action in ("get-offload-threshold", "get-offload-deletion-lag", "clear-offload-deletion-lag"):
        command(namespaces, action, _run).add_argument("namespace")


def _run(args: argparse.Namespace, client: AdminConsole) -> int:
    """Run one offload command; HTTP errors propagate to the caller (which prints the reason)."""
    def request(method: str, path: str, body: object) -> object:
        return client.call(method, path, body)

    if args.group == "topics":
        name = parse_topic(args.topic)
        path = topic_path(args.topic)
        if args.action == "offload":
            return _offload(str(name), path, args.size_threshold, request)
        if args.action == "offload-status":
            return _offload_status(str(name), path, request, args.wait_complete, args.timeout)
        client.show(request("GET", path + "/internalStats", None))
        return 0
    path = namespace_path(args.namespace)
    if args.action == "set-offload-threshold":
        request("PUT", path + "/offloadThreshold", args.size)
        request("PUT", path + "/offloadThresholdInSeconds", args.time)
    elif args.action == "get-offload-threshold":
        print(f"offloadThresholdInBytes: {request('GET', path + '/offloadThreshold', None)}")
        print(f"offloadThresholdInSeconds: {request('GET', path + '/offloadThresholdInSeconds', None)}")
    elif args.action == "set-offload-deletion-lag":
        request("PUT", path + "/offloadDeletionLagMs", args.lag * 1000)
    elif args.action == "get-offload-deletion-lag":
        lag_ms = request("GET", path + "/offloadDeletionLagMs", None)
        if lag_ms is None:
            print("Unset for namespace. Defaulting to broker setting.")
        elif isinstance(lag_ms, int):
            print(f"{int(lag_ms / 60_000)} minute(s)")   # Java's TimeUnit conversion truncates toward zero
        else:
            raise ValueError(f"not a deletion lag: {lag_ms!r}")
    else:
        request("DELETE", path + "/offloadDeletionLagMs", None)
    return 0


def _offload(topic: str, path: str, threshold_bytes: int, request: Request) -> int:
    stats = request("GET", path + "/internalStats", None)
    if not isinstance(stats, dict) or not stats.get("ledgers"):
        print("strata admin: Topic doesn't have any data", file=sys.stderr)
        return 1
    ledgers = [(int(ledger["ledgerId"]), int(ledger["size"])) for ledger in stats["ledgers"]]
    ledgers[-1] = (ledgers[-1][0], int(stats["currentLedgerSize"]))   # the open ledger's real size
    before = first_ledger_within_threshold(ledgers, threshold_bytes)
    if before is None:
        print("Nothing to offload")
        return 0
    request("PUT", path + "/offload", {"ledgerId": before, "entryId": 0, "partitionIndex": -1})
    print(f"Offload triggered for {topic} for messages before {before}:0:-1")
    return 0


_STATUS_LINES = {"SUCCESS": "Offload was a success", "RUNNING": "Offload is currently running",
                 "ERROR": "Error in offload"}


def _offload_status(topic: str, path: str, request: Request, wait: bool, timeout_s: float) -> int:
    status = _status(request, path)
    if wait and status["status"] == "RUNNING":
        final = _wait(request, path, status, timeout_s)
        if final is None:
            print(f"strata admin: offload of {topic} still running after {timeout_s:.0f} s", file=sys.stderr)
            return 1
        status = final
    state = status["status"]
    if state == "NOT_RUN":
        print(f"Offload has not been run for {topic} since broker startup")
        return 0
    print(_STATUS_LINES.get(state, state))
    if state == "ERROR":
        print(f"strata admin: Error offloading: {status.get('lastError', '')}", file=sys.stderr)
        return 1
    return 0


def _status(request: Request, path: str) -> dict:
    status = request("GET", path + "/offload", None)
    if not isinstance(status, dict) or "status" not in status:
        raise ValueError(f"not an offload status: {status!r}")
    return status


def _wait(request: Request, path: str, status: dict, timeout_s: float) -> dict | None:
    """Poll until not RUNNING (the last status) or the timeout (None), drawing progress."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    deadline = time.monotonic() + timeout_s
    columns = (TextColumn("offloading"), BarColumn(), MofNCompleteColumn(), TextColumn("entries"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("offload", total=None)
        while status["status"] == "RUNNING":
            progress = status.get("progress") or {}
            total = progress.get("entriesTotal") or None
            bar.update(task, completed=progress.get("entriesDone", 0), total=total)
            if time.monotonic() >= deadline:
                return None
            time.sleep(STATUS_POLL_INTERVAL_S)
            status = _status(request, path)
    return status
