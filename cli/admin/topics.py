"""`strata admin topics ...`: pulsar-admin's topic commands over the REST API (`broker.admin.topics`).

    strata admin topics create TOPIC                                   a non-partitioned topic
    strata admin topics create-partitioned-topic TOPIC -p N
    strata admin topics get-partitioned-topic-metadata TOPIC
    strata admin topics update-partitioned-topic TOPIC -p N
    strata admin topics delete-partitioned-topic TOPIC [-f] [-y]
    strata admin topics delete TOPIC [-f] [-y]
    strata admin topics list TENANT/NS
    strata admin topics list-partitioned-topics TENANT/NS
    strata admin topics stats TOPIC [--get-precise-backlog]
    strata admin topics partitioned-stats TOPIC [--per-partition]
    strata admin topics last-message-id TOPIC
    strata admin topics set-deduplication TOPIC (--enable | --disable)
    strata admin topics get-deduplication TOPIC [--applied] / remove-deduplication TOPIC
    strata admin topics set-retention TOPIC --time 3h --size 10G      (-1: unlimited)
    strata admin topics get-retention TOPIC [--applied] / remove-retention TOPIC
    strata admin topics set-message-ttl TOPIC --ttl 1h                (bare number: seconds; 0 = off)
    strata admin topics get-message-ttl TOPIC [--applied] / remove-message-ttl TOPIC

Units are pulsar-admin 3.x's (`cli.admin.units`): a bare `--time 120` is seconds and a bare
`--size 4096` bytes. Topic names may be short (`my-topic` → `persistent://public/default/my-topic`).
"""

from __future__ import annotations

import argparse
from functools import partial

from cli.admin.commands import Groups, command, destructive, routed, topic_path
from cli.admin.console import AdminConsole
from cli.admin.units import positive_time_seconds, retention_mb, retention_minutes
from common.topic_names import parse_namespace


def add_parsers(groups: Groups) -> None:
    topics = groups["topics"]
    command(topics, "create", routed(lambda a: ("PUT", topic_path(a.topic), None)),
            "create a non-partitioned topic").add_argument("topic")
    for action, method in (("create-partitioned-topic", "PUT"), ("update-partitioned-topic", "POST")):
        create = command(topics, action, routed(partial(_partitions_route, method=method)))
        create.add_argument("topic")
        create.add_argument("-p", "--partitions", type=int, required=True)
    command(topics, "get-partitioned-topic-metadata",
            routed(lambda a: ("GET", topic_path(a.topic) + "/partitions", None))).add_argument("topic")
    for action, suffix in (("delete-partitioned-topic", "/partitions"), ("delete", "")):
        delete = destructive(command(topics, action, _delete(suffix)))
        delete.add_argument("topic")
        delete.add_argument("-f", "--force", action="store_true", help="even with clients attached")
    for action, suffix in (("list", ""), ("list-partitioned-topics", "/partitioned")):
        command(topics, action, routed(partial(_list_route, suffix=suffix))).add_argument("namespace")
    stats = command(topics, "stats", routed(lambda a: (
        "GET", topic_path(a.topic) + "/stats" + ("?getPreciseBacklog=true" if a.precise else ""), None)))
    stats.add_argument("topic")
    stats.add_argument("-gpb", "--get-precise-backlog", dest="precise", action="store_true")
    partitioned = command(topics, "partitioned-stats", routed(lambda a: (
        "GET", topic_path(a.topic) + "/partitioned-stats?perPartition=" + ("true" if a.per_partition else "false"),
        None)))
    partitioned.add_argument("topic")
    partitioned.add_argument("--per-partition", action="store_true")
    command(topics, "last-message-id", routed(lambda a: ("GET", topic_path(a.topic) + "/lastMessageId", None)),
            ).add_argument("topic")
    _policy_commands(topics)


def _partitions_route(args: argparse.Namespace, method: str) -> tuple[str, str, object]:
    return method, topic_path(args.topic) + "/partitions", args.partitions


def _list_route(args: argparse.Namespace, suffix: str) -> tuple[str, str, object]:
    return "GET", _persistent_ns(args.namespace) + suffix, None


def _get_policy_route(args: argparse.Namespace, suffix: str) -> tuple[str, str, object]:
    return "GET", topic_path(args.topic) + suffix + ("?applied=true" if args.applied else ""), None


def _remove_policy_route(args: argparse.Namespace, suffix: str) -> tuple[str, str, object]:
    return "DELETE", topic_path(args.topic) + suffix, None


def _persistent_ns(namespace: str) -> str:
    tenant, ns = parse_namespace(namespace)
    return f"/admin/v2/persistent/{tenant}/{ns}"


def _delete(suffix: str):
    def run(args: argparse.Namespace, client: AdminConsole) -> int:
        path = topic_path(args.topic) + suffix
        client.confirm(f"Delete {args.topic} and all its messages?")
        client.call("DELETE", path + ("?force=true" if args.force else ""))
        return 0
    return run


def _policy_commands(topics: argparse._SubParsersAction) -> None:
    dedup = command(topics, "set-deduplication", routed(
        lambda a: ("POST", topic_path(a.topic) + "/deduplicationEnabled", bool(a.enable))))
    dedup.add_argument("topic")
    switch = dedup.add_mutually_exclusive_group(required=True)
    switch.add_argument("--enable", "-e", action="store_true")
    switch.add_argument("--disable", "-d", action="store_true")
    retention = command(topics, "set-retention", routed(lambda a: (
        "POST", topic_path(a.topic) + "/retention",
        {"retentionTimeInMinutes": a.time, "retentionSizeInMB": a.size})))
    retention.add_argument("topic")
    retention.add_argument("-t", "--time", type=retention_minutes, required=True,
                           help="seconds, or 10m/3h/2d/1w; -1 unlimited")
    retention.add_argument("-s", "--size", type=retention_mb, required=True,
                           help="bytes, or 10M/2G/1T; -1 unlimited")
    ttl = command(topics, "set-message-ttl", routed(
        lambda a: ("POST", topic_path(a.topic) + "/messageTTL", a.ttl)))
    ttl.add_argument("topic")
    ttl.add_argument("-t", "--ttl", "--messageTTL", dest="ttl", type=positive_time_seconds, required=True,
                     help="seconds, or 30m/1h/2d; 0 = off")
    for name, suffix in (("deduplication", "/deduplicationEnabled"), ("retention", "/retention"),
                         ("message-ttl", "/messageTTL")):
        getter = command(topics, f"get-{name}", routed(partial(_get_policy_route, suffix=suffix)))
        getter.add_argument("topic")
        getter.add_argument("--applied", "-a", action="store_true", help="the effective value")
        command(topics, f"remove-{name}", routed(partial(_remove_policy_route, suffix=suffix))).add_argument("topic")
