"""`strata admin`: a small pulsar-admin over the broker's admin HTTP API.

    strata admin [--admin-url http://127.0.0.1:8080] topics create-partitioned-topic TOPIC -p N
    strata admin topics get-partitioned-topic-metadata TOPIC
    strata admin topics update-partitioned-topic TOPIC -p N
    strata admin topics delete-partitioned-topic TOPIC [--force]
    strata admin topics delete TOPIC [--force]
    strata admin topics stats TOPIC
    strata admin topics partitioned-stats TOPIC
    strata admin topics set-deduplication TOPIC (--enable | --disable)
    strata admin topics get-deduplication TOPIC
    strata admin topics remove-deduplication TOPIC
    strata admin topics list TENANT/NS
    strata admin topics list-partitioned-topics TENANT/NS
    strata admin namespaces set-deduplication TENANT/NS (--enable | --disable)
    strata admin namespaces get-deduplication TENANT/NS

Topic names may be short (`my-topic` → `persistent://public/default/my-topic`). Prints the JSON
the broker answers; exits 1 with the broker's `reason` on an HTTP error, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request

from broker.names import parse_namespace, parse_topic
from common.errors import StrataError

TIMEOUT_S = 30.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strata admin", description="administer a Strata cluster")
    p.add_argument("--admin-url", default="http://127.0.0.1:8080", help="broker admin HTTP URL")
    groups = p.add_subparsers(dest="group", required=True)
    topics = groups.add_parser("topics").add_subparsers(dest="action", required=True)
    for action in ("create-partitioned-topic", "update-partitioned-topic"):
        create = topics.add_parser(action)
        create.add_argument("topic")
        create.add_argument("-p", "--partitions", type=int, required=True)
    for action in ("delete-partitioned-topic", "delete"):
        delete = topics.add_parser(action)
        delete.add_argument("topic")
        delete.add_argument("--force", action="store_true")
    for action in ("get-partitioned-topic-metadata", "stats", "partitioned-stats",
                   "get-deduplication", "remove-deduplication"):
        topics.add_parser(action).add_argument("topic")
    topic_dedup = topics.add_parser("set-deduplication")
    topic_dedup.add_argument("topic")
    topic_switch = topic_dedup.add_mutually_exclusive_group(required=True)
    topic_switch.add_argument("--enable", action="store_true")
    topic_switch.add_argument("--disable", action="store_true")
    for action in ("list", "list-partitioned-topics"):
        topics.add_parser(action).add_argument("namespace")
    namespaces = groups.add_parser("namespaces").add_subparsers(dest="action", required=True)
    dedup = namespaces.add_parser("set-deduplication")
    dedup.add_argument("namespace")
    switch = dedup.add_mutually_exclusive_group(required=True)
    switch.add_argument("--enable", action="store_true")
    switch.add_argument("--disable", action="store_true")
    namespaces.add_parser("get-deduplication").add_argument("namespace")
    return p


def _request(url: str, method: str = "GET", body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def _route(args: argparse.Namespace) -> tuple[str, str, object]:
    """(method, path, body) for the chosen action."""
    if args.group == "topics" and args.action in ("list", "list-partitioned-topics"):
        tenant, ns = parse_namespace(args.namespace)
        suffix = "/partitioned" if args.action == "list-partitioned-topics" else ""
        return "GET", f"/admin/v2/persistent/{tenant}/{ns}{suffix}", None
    if args.group == "topics":
        path = f"/admin/v2/persistent/{parse_topic(args.topic).path}"
        force = "?force=true" if getattr(args, "force", False) else ""
        routes = {
            "create-partitioned-topic": lambda: ("PUT", path + "/partitions", args.partitions),
            "update-partitioned-topic": lambda: ("POST", path + "/partitions", args.partitions),
            "delete-partitioned-topic": lambda: ("DELETE", path + "/partitions" + force, None),
            "delete": lambda: ("DELETE", path + force, None),
            "get-partitioned-topic-metadata": lambda: ("GET", path + "/partitions", None),
            "partitioned-stats": lambda: ("GET", path + "/partitioned-stats", None),
            "set-deduplication": lambda: ("POST", path + "/deduplicationEnabled", bool(args.enable)),
            "get-deduplication": lambda: ("GET", path + "/deduplicationEnabled", None),
            "remove-deduplication": lambda: ("DELETE", path + "/deduplicationEnabled", None),
        }
        return routes.get(args.action, lambda: ("GET", path + "/stats", None))()
    tenant, ns = parse_namespace(args.namespace)
    path = f"/admin/v2/namespaces/{tenant}/{ns}/deduplication"
    if args.action == "set-deduplication":
        return "POST", path, bool(args.enable)
    return "GET", path, None


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        method, path, body = _route(args)
    except StrataError as exc:
        print(f"strata admin: {exc}", file=sys.stderr)
        return 2
    try:
        result = _request(args.admin_url.rstrip("/") + path, method, body)
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read() or b"{}").get("reason", exc.reason)
        except (ValueError, AttributeError):
            reason = exc.reason
        print(f"strata admin: HTTP {exc.code}: {reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"strata admin: cannot reach {args.admin_url}: {exc}", file=sys.stderr)
        return 1
    if result is not None:
        print(json.dumps(result, indent=2, sort_keys=True))
    return 0
