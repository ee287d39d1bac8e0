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
    strata admin topics set-retention TOPIC --time 3h --size 10G      (-1: unlimited, 0: none)
    strata admin topics get-retention TOPIC [--applied]
    strata admin topics remove-retention TOPIC
    strata admin topics set-message-ttl TOPIC --ttl 3600               (seconds, 0 = off)
    strata admin topics get-message-ttl TOPIC [--applied]
    strata admin topics remove-message-ttl TOPIC
    strata admin topics list TENANT/NS
    strata admin topics list-partitioned-topics TENANT/NS
    strata admin namespaces set-deduplication TENANT/NS (--enable | --disable)
    strata admin namespaces get-deduplication TENANT/NS
    strata admin namespaces set-retention TENANT/NS --time 3h --size 10G
    strata admin namespaces get-retention TENANT/NS
    strata admin namespaces set-message-ttl TENANT/NS --ttl 3600
    strata admin namespaces get-message-ttl TENANT/NS

Offload commands (`topics offload`, `offload-status`, `stats-internal`, `namespaces
set-offload-threshold`, ...-deletion-lag): `cli.admin_offload_cmd`. Cluster commands (`namespaces
create|bundles|unload|split-bundle`, `topics lookup|bundle-range|unload`, `brokers`, `clusters`,
`broker-stats`) and the HTTP client, which follows a broker's 307 to the owner for every method:
`cli.admin_cluster_cmd`.

Times take pulsar-admin's units (`30s`, `10m`, `3h`, `2d`, `1w`; a bare number is minutes for
retention), sizes too (`500K`, `10M`, `2G`, `1T`; a bare number is MB); `-1` means unlimited.

Topic names may be short (`my-topic` → `persistent://public/default/my-topic`). Prints the JSON
the broker answers; exits 1 with the broker's `reason` on an HTTP error, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error

from cli import admin_cluster_cmd, admin_offload_cmd
from common.errors import StrataError
from common.topic_names import parse_namespace, parse_topic

TIMEOUT_S = 30.0


_TIME_UNITS_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_SIZE_UNITS_MB = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def retention_minutes(text: str) -> int:
    """`--time` of set-retention in minutes: -1, a bare number of minutes, or 30s/10m/3h/2d/1w."""
    text = text.strip().lower()
    if text.lstrip("-").isdigit():
        return int(text)
    if len(text) < 2 or text[-1] not in _TIME_UNITS_S or not text[:-1].isdigit():
        raise argparse.ArgumentTypeError(f"bad retention time {text!r}: use -1, minutes, or 30s/10m/3h/2d/1w")
    return int(text[:-1]) * _TIME_UNITS_S[text[-1]] // 60


def retention_mb(text: str) -> int:
    """`--size` of set-retention in MB: -1, a bare number of MB, or 500K/10M/2G/1T."""
    text = text.strip().lower()
    if text.lstrip("-").isdigit():
        return int(text)
    if len(text) < 2 or text[-1] not in _SIZE_UNITS_MB or not text[:-1].isdigit():
        raise argparse.ArgumentTypeError(f"bad retention size {text!r}: use -1, MB, or 500K/10M/2G/1T")
    return int(int(text[:-1]) * _SIZE_UNITS_MB[text[-1]])


def _policy_commands(group: argparse._SubParsersAction, target: str, topic_level: bool) -> None:
    retention = group.add_parser("set-retention")
    retention.add_argument(target)
    retention.add_argument("-t", "--time", type=retention_minutes, required=True)
    retention.add_argument("-s", "--size", type=retention_mb, required=True)
    ttl = group.add_parser("set-message-ttl")
    ttl.add_argument(target)
    ttl.add_argument("-t", "--ttl", "--messageTTL", dest="ttl", type=int, required=True)
    for action in ("get-retention", "get-message-ttl"):
        getter = group.add_parser(action)
        getter.add_argument(target)
        if topic_level:
            getter.add_argument("--applied", action="store_true", help="the effective value")
    if topic_level:
        for action in ("remove-retention", "remove-message-ttl"):
            group.add_parser(action).add_argument(target)


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
    _policy_commands(topics, "topic", topic_level=True)
    namespaces = groups.add_parser("namespaces").add_subparsers(dest="action", required=True)
    dedup = namespaces.add_parser("set-deduplication")
    dedup.add_argument("namespace")
    switch = dedup.add_mutually_exclusive_group(required=True)
    switch.add_argument("--enable", action="store_true")
    switch.add_argument("--disable", action="store_true")
    namespaces.add_parser("get-deduplication").add_argument("namespace")
    _policy_commands(namespaces, "namespace", topic_level=False)
    admin_offload_cmd.add_parsers(topics, namespaces)
    admin_cluster_cmd.add_parsers(groups, topics, namespaces)
    return p


def _request(url: str, method: str = "GET", body: object = None) -> object:
    return admin_cluster_cmd.request_json(url, method, body, TIMEOUT_S)   # follows 307 to the owner


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
            "remove-retention": lambda: ("DELETE", path + "/retention", None),
            "remove-message-ttl": lambda: ("DELETE", path + "/messageTTL", None),
        }
        applied = "?applied=true" if getattr(args, "applied", False) else ""
        routes.update(_policy_routes(args, path, applied))
        return routes.get(args.action, lambda: ("GET", path + "/stats", None))()
    tenant, ns = parse_namespace(args.namespace)
    path = f"/admin/v2/namespaces/{tenant}/{ns}"
    routes = {"set-deduplication": lambda: ("POST", path + "/deduplication", bool(args.enable)),
              "get-deduplication": lambda: ("GET", path + "/deduplication", None)}
    routes.update(_policy_routes(args, path, ""))
    return routes[args.action]()


def _policy_routes(args: argparse.Namespace, path: str, applied: str) -> dict:
    return {
        "set-retention": lambda: ("POST", path + "/retention",
                                  {"retentionTimeInMinutes": args.time, "retentionSizeInMB": args.size}),
        "get-retention": lambda: ("GET", path + "/retention" + applied, None),
        "set-message-ttl": lambda: ("POST", path + "/messageTTL", args.ttl),
        "get-message-ttl": lambda: ("GET", path + "/messageTTL" + applied, None),
    }


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    base_url = args.admin_url.rstrip("/")
    try:
        if args.action in admin_offload_cmd.ACTIONS:
            return admin_offload_cmd.run(args, lambda method, path, body: _request(base_url + path, method, body))
        if admin_cluster_cmd.handles(args):
            return admin_cluster_cmd.run(args, lambda method, path, body: _request(base_url + path, method, body))
        method, path, body = _route(args)
    except StrataError as exc:
        print(f"strata admin: {exc}", file=sys.stderr)
        return 2
    except urllib.error.HTTPError as exc:
        return _http_error(exc)
    except (urllib.error.URLError, OSError) as exc:
        print(f"strata admin: cannot reach {args.admin_url}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"strata admin: unexpected answer from {args.admin_url}: {exc}", file=sys.stderr)
        return 1
    try:
        result = _request(base_url + path, method, body)
    except urllib.error.HTTPError as exc:
        return _http_error(exc)
    except (urllib.error.URLError, OSError) as exc:
        print(f"strata admin: cannot reach {args.admin_url}: {exc}", file=sys.stderr)
        return 1
    if result is not None:
        print(json.dumps(result, indent=2, sort_keys=True))
    return 0


def _http_error(exc: urllib.error.HTTPError) -> int:
    """Print the broker's `reason` for an HTTP error; exit status 1."""
    try:
        reason = json.loads(exc.read() or b"{}").get("reason", exc.reason)
    except (ValueError, AttributeError):
        reason = exc.reason
    print(f"strata admin: HTTP {exc.code}: {reason}", file=sys.stderr)
    return 1
