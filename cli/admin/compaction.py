"""`strata admin` compaction commands, with pulsar-admin's names and output.

    strata admin topics compact TOPIC                     start a compaction (background)
    strata admin topics compaction-status [-w] TOPIC      -w: wait (progress bar) while it runs
    strata admin namespaces set-compaction-threshold -t 10M TENANT/NS
    strata admin namespaces get-compaction-threshold TENANT/NS
    strata admin namespaces remove-compaction-threshold TENANT/NS
    strata admin topics set-compaction-threshold -t 10M TOPIC    (get- / remove- likewise)

Printed as pulsar-admin prints it: "Topic compaction requested for <topic>."; the status lines
"Compaction has not been run for <topic> since broker startup", "Compaction is currently
running", "Compaction was a success", "Error in compaction" (exit 1, with lastError on stderr),
followed by what the run did (Strata's `message`: e.g. that there was nothing to compact because
no message has a key). `-w` polls every second drawing entries done/total on stderr until the
status is no longer RUNNING or `--timeout` seconds pass (exit 1). Thresholds take pulsar-admin's
sizes (`100` bytes, `10K`, `10M`, `1G`); 0 turns automatic compaction off.
"""

from __future__ import annotations

import argparse
import sys
import time

from cli.admin.commands import Groups, command, namespace_path, topic_path
from cli.admin.console import AdminConsole
from cli.admin.units import size_bytes
from common.topic_names import parse_topic

STATUS_POLL_INTERVAL_S = 1.0
STATUS_WAIT_S_DEFAULT = 3_600.0
_STATUS_LINES = {"SUCCESS": "Compaction was a success", "RUNNING": "Compaction is currently running",
                 "ERROR": "Error in compaction"}


def add_parsers(groups: Groups) -> None:
    topics, namespaces = groups["topics"], groups["namespaces"]
    command(topics, "compact", _run, "compact a topic: keep the latest message per key").add_argument("topic")
    status = command(topics, "compaction-status", _run, "the status of the last compaction")
    status.add_argument("topic")
    status.add_argument("-w", "--wait-complete", action="store_true", help="wait while it runs")
    status.add_argument("--timeout", type=float, default=STATUS_WAIT_S_DEFAULT,
                        help=f"give up waiting after this many seconds (default {STATUS_WAIT_S_DEFAULT:.0f})")
    for group, what in ((namespaces, "namespace"), (topics, "topic")):
        setter = command(group, "set-compaction-threshold", _run, "compact automatically past this backlog")
        setter.add_argument(what)
        setter.add_argument("-t", "--threshold", type=size_bytes, required=True,
                            help="bytes not yet compacted that start a compaction (10M; 0 off)")
        command(group, "get-compaction-threshold", _run).add_argument(what)
        command(group, "remove-compaction-threshold", _run).add_argument(what)


def _run(args: argparse.Namespace, client: AdminConsole) -> int:
    """Run one compaction command; HTTP errors propagate to the caller (which prints the reason)."""
    if args.group == "topics":
        path = topic_path(args.topic)
        if args.action == "compact":
            client.call("PUT", path + "/compaction")
            print(f"Topic compaction requested for {parse_topic(args.topic)}.")
            return 0
        if args.action == "compaction-status":
            return _status(client, str(parse_topic(args.topic)), path, args.wait_complete, args.timeout)
        return _threshold(client, args, path, "POST")
    return _threshold(client, args, namespace_path(args.namespace), "PUT")


def _threshold(client: AdminConsole, args: argparse.Namespace, path: str, set_method: str) -> int:
    if args.action == "set-compaction-threshold":
        client.call(set_method, path + "/compactionThreshold", args.threshold)
    elif args.action == "get-compaction-threshold":
        value = client.call("GET", path + "/compactionThreshold")
        print(value if value is not None else "null")
    else:
        client.call("DELETE", path + "/compactionThreshold")
    return 0


def _status(client: AdminConsole, topic: str, path: str, wait: bool, timeout_s: float) -> int:
    status = client.call("GET", path + "/compaction")
    if wait and status["status"] == "RUNNING":
        deadline = time.monotonic() + timeout_s
        with client.progress("compacting", None) as update:
            while status["status"] == "RUNNING":
                progress = status.get("progress") or {}
                update(progress.get("entriesDone", 0), progress.get("entriesTotal") or None)
                if time.monotonic() >= deadline:
                    print(f"strata admin: compaction of {topic} still running after {timeout_s:.0f} s",
                          file=sys.stderr)
                    return 1
                time.sleep(STATUS_POLL_INTERVAL_S)
                status = client.call("GET", path + "/compaction")
    state = status["status"]
    if state == "NOT_RUN":
        print(f"Compaction has not been run for {topic} since broker startup")
        return 0
    print(_STATUS_LINES.get(state, state))
    if status.get("message"):
        print(status["message"])
    if state == "ERROR":
        print(f"strata admin: Error in compaction: {status.get('lastError', '')}", file=sys.stderr)
        return 1
    return 0
