"""`strata admin namespaces ...`: pulsar-admin's namespace commands over `broker.admin.namespaces`.

    strata admin namespaces list TENANT                         ["tenant/ns", ...]
    strata admin namespaces topics TENANT/NS [-m persistent|non_persistent|all] [-ist]
                                                                every topic, partitions included
    strata admin namespaces policies TENANT/NS                  Pulsar's Policies JSON
    strata admin namespaces create TENANT/NS [-b N] [-c CLUSTER] N bundles (0 or none: the broker's setting)
    strata admin namespaces delete TENANT/NS [-f] [-y]          -f: with its topics and their messages
    strata admin namespaces bundles TENANT/NS                   {"boundaries": [...], "numBundles": N}
    strata admin namespaces unload TENANT/NS [-b BUNDLE] [-d host:webPort]
    strata admin namespaces split-bundle TENANT/NS -b BUNDLE [-u] [-san range_equally_divide]
    strata admin namespaces set-deduplication TENANT/NS (-e | -d) / get-deduplication
    strata admin namespaces set-retention TENANT/NS -t 3h -s 10G / get-retention
    strata admin namespaces set-message-ttl TENANT/NS -ttl 1h / get-message-ttl
    strata admin namespaces remove-deduplication | remove-retention | remove-message-ttl |
                            remove-offload-threshold | remove-offload-policies TENANT/NS

Flags are pulsar-admin's (CmdNamespaces), long and short: `create --bundles/-b --clusters/-c`,
`delete --force/-f`, `unload --bundle/-b --destinationBroker/-d`, `split-bundle --bundle/-b
--unload/-u --split-algorithm-name/-san`, `set-deduplication --enable/-e --disable/-d`,
`set-retention --time/-t --size/-s`, `set-message-ttl --messageTTL/-ttl` (`-ttl` is declared as
one option: argparse would otherwise read it as `-t tl`), `topics --mode/-m
--include-system-topic/-ist`; Strata also takes `--ttl/-t` and `--destination-broker`.
A `get-*` prints the namespace's own value, `null` when it has none (as pulsar-admin; the topic
getters' `--applied` has no namespace form in Pulsar). `delete` asks first unless `--yes` (`-f`
deletes every topic of the namespace on the broker that serves it). A `remove-*` command unsets
the namespace's value, so the broker's default applies. A BUNDLE is written
`0xLLLLLLLL_0xHHHHHHHH` (as `namespaces bundles` and `topics bundle-range` show them); `-d` names
a broker as `brokers list` does. Units: `cli.admin.units`.
"""

from __future__ import annotations

import argparse
import urllib.parse
from functools import partial

from cli.admin.commands import Groups, command, destructive, namespace_path, routed
from cli.admin.console import AdminConsole
from cli.admin.tenants import check_tenant
from cli.admin.units import positive_time_seconds, retention_mb, retention_minutes
from common.errors import InvalidArgument

TOPIC_MODES = ("PERSISTENT", "NON_PERSISTENT", "ALL")     # pulsar-admin's Mode


def add_parsers(groups: Groups) -> None:
    namespaces = groups["namespaces"]
    command(namespaces, "list", routed(lambda a: ("GET", f"/admin/v2/namespaces/{check_tenant(a.tenant)}", None)),
            "the namespaces of a tenant").add_argument("tenant")
    topics = command(namespaces, "topics", routed(_topics_route), "every topic of a namespace (partitions included)")
    topics.add_argument("namespace")
    topics.add_argument("-m", "--mode", type=str.upper, choices=TOPIC_MODES, default=None,
                        help="persistent (default), non_persistent or all")
    topics.add_argument("-ist", "--include-system-topic", dest="include_system_topic", action="store_true",
                        help="also system topics (Strata has none)")
    command(namespaces, "policies", routed(lambda a: ("GET", namespace_path(a.namespace), None)),
            "a namespace's policies (Pulsar's JSON)").add_argument("namespace")
    create = command(namespaces, "create", routed(_create_route), "create a namespace")
    create.add_argument("namespace")
    create.add_argument("-b", "--bundles", type=_bundle_count, default=None,
                        help="number of bundles (1..128; 0: the broker's default)")
    create.add_argument("-c", "--clusters", type=lambda t: [c.strip() for c in t.split(",") if c.strip()],
                        action="extend", default=None,
                        help="replication clusters (comma-separated; this cluster only)")
    delete = destructive(command(namespaces, "delete", _delete, "delete a namespace"))
    delete.add_argument("namespace")
    delete.add_argument("-f", "--force", action="store_true", help="also delete all its topics")
    command(namespaces, "bundles", routed(lambda a: ("GET", namespace_path(a.namespace) + "/bundles", None)),
            ).add_argument("namespace")
    unload = command(namespaces, "unload", routed(_unload_route), "unload every bundle of a namespace, or one")
    unload.add_argument("namespace")
    unload.add_argument("-b", "--bundle", default=None, help="0xLLLLLLLL_0xHHHHHHHH")
    unload.add_argument("-d", "--destination-broker", "--destinationBroker", dest="destination_broker",
                        default=None, help="host:webPort of the broker to move the bundle to")
    split = command(namespaces, "split-bundle", routed(_split_route), "split a bundle in two (range_equally_divide)")
    split.add_argument("namespace")
    split.add_argument("-b", "--bundle", required=True, help="0xLLLLLLLL_0xHHHHHHHH")
    split.add_argument("-u", "--unload", action="store_true", help="unload the two halves after the split")
    split.add_argument("-san", "--split-algorithm-name", dest="split_algorithm", default=None,
                       help="range_equally_divide (the only one Strata has; the default)")
    namespace_policy_commands(namespaces)


def _bundle_count(text: str) -> int:
    """`create -b`: a count >= 0 (0 = the broker's default, as pulsar-admin)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad number of bundles {text!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"bad number of bundles {text!r}: 0 (the default) or more")
    return count


def _topics_route(args: argparse.Namespace) -> tuple[str, str, object]:
    query = [f"mode={args.mode}"] if args.mode else []
    if args.include_system_topic:
        query.append("includeSystemTopic=true")
    return "GET", namespace_path(args.namespace) + "/topics" + ("?" + "&".join(query) if query else ""), None


def _split_route(args: argparse.Namespace) -> tuple[str, str, object]:
    query = f"unload={'true' if args.unload else 'false'}"
    if args.split_algorithm:
        query += f"&splitAlgorithmName={urllib.parse.quote(args.split_algorithm, safe='')}"
    return "PUT", f"{namespace_path(args.namespace)}/{args.bundle}/split?{query}", None


def _create_route(args: argparse.Namespace) -> tuple[str, str, object]:
    body: dict[str, object] = {}
    if args.bundles:
        body["bundles"] = {"numBundles": args.bundles}
    if args.clusters is not None:
        body["replication_clusters"] = args.clusters
    return "PUT", namespace_path(args.namespace), body or None


def _delete(args: argparse.Namespace, client: AdminConsole) -> int:
    path = namespace_path(args.namespace)
    if args.force:
        client.confirm(f"Delete namespace {args.namespace}, all its topics and all their messages?")
    else:
        client.confirm(f"Delete namespace {args.namespace}?")
    client.call("DELETE", path + ("?force=true" if args.force else ""))
    return 0


def _unload_route(args: argparse.Namespace) -> tuple[str, str, object]:
    path = namespace_path(args.namespace)
    if args.bundle is None:
        if args.destination_broker:
            raise InvalidArgument("--destination-broker moves one bundle: give it with -b")
        return "PUT", path + "/unload", None
    query = f"?destinationBroker={args.destination_broker}" if args.destination_broker else ""
    return "PUT", f"{path}/{args.bundle}/unload{query}", None


def namespace_policy_commands(namespaces: argparse._SubParsersAction) -> None:
    """The same policies on a namespace (`namespaces set-retention ...`)."""
    dedup = command(namespaces, "set-deduplication", routed(
        lambda a: ("POST", namespace_path(a.namespace) + "/deduplication", bool(a.enable))))
    dedup.add_argument("namespace")
    switch = dedup.add_mutually_exclusive_group(required=True)
    switch.add_argument("--enable", "-e", action="store_true")
    switch.add_argument("--disable", "-d", action="store_true")
    retention = command(namespaces, "set-retention", routed(lambda a: (
        "POST", namespace_path(a.namespace) + "/retention",
        {"retentionTimeInMinutes": a.time, "retentionSizeInMB": a.size})))
    retention.add_argument("namespace")
    retention.add_argument("-t", "--time", type=retention_minutes, required=True)
    retention.add_argument("-s", "--size", type=retention_mb, required=True)
    ttl = command(namespaces, "set-message-ttl", routed(
        lambda a: ("POST", namespace_path(a.namespace) + "/messageTTL", a.ttl)))
    ttl.add_argument("namespace")
    ttl.add_argument("-ttl", "--messageTTL", "-t", "--ttl", dest="ttl", type=positive_time_seconds, required=True,
                     help="seconds, or 30s/10m/3h/2d/1w/1y; 0 turns TTL off")
    for name, suffix in (("deduplication", "/deduplication"), ("retention", "/retention"),
                         ("message-ttl", "/messageTTL")):
        command(namespaces, f"get-{name}", routed(partial(_get_route, suffix=suffix))).add_argument("namespace")
    for name, suffixes in (("deduplication", ("/deduplication",)), ("retention", ("/retention",)),
                           ("message-ttl", ("/messageTTL",)),
                           ("offload-threshold", ("/offloadThreshold", "/offloadThresholdInSeconds")),
                           ("offload-policies", ("/offloadPolicies",))):
        command(namespaces, f"remove-{name}", partial(_remove, suffixes=suffixes),
                f"unset the namespace's {name} (the broker's default applies)").add_argument("namespace")


def _remove(args: argparse.Namespace, client: AdminConsole, suffixes: tuple[str, ...]) -> int:
    path = namespace_path(args.namespace)
    for suffix in suffixes:
        client.call("DELETE", path + suffix)
    return 0


def _get_route(args: argparse.Namespace, suffix: str) -> tuple[str, str, object]:
    return "GET", namespace_path(args.namespace) + suffix, None
