"""`strata admin namespaces ...`: pulsar-admin's namespace commands over `broker.admin.namespaces`.

    strata admin namespaces list TENANT                         ["tenant/ns", ...]
    strata admin namespaces policies TENANT/NS                  Pulsar's Policies JSON
    strata admin namespaces create TENANT/NS [-b N] [-c CLUSTER] N bundles (default: the broker's setting)
    strata admin namespaces delete TENANT/NS [-f] [-y]          -f: with its topics and their messages
    strata admin namespaces bundles TENANT/NS                   {"boundaries": [...], "numBundles": N}
    strata admin namespaces unload TENANT/NS [-b BUNDLE] [-d host:webPort]
    strata admin namespaces split-bundle TENANT/NS -b BUNDLE [--unload]
    strata admin namespaces set-deduplication TENANT/NS (--enable | --disable) / get-deduplication
    strata admin namespaces set-retention TENANT/NS --time 3h --size 10G / get-retention
    strata admin namespaces set-message-ttl TENANT/NS --ttl 1h / get-message-ttl
    strata admin namespaces remove-deduplication | remove-retention | remove-message-ttl |
                            remove-offload-threshold | remove-offload-policies TENANT/NS

`delete` asks first unless `--yes` (`-f` deletes every topic of the namespace on the broker that
serves it). A `remove-*` command unsets the namespace's value, so the broker's default applies.
A BUNDLE is written `0xLLLLLLLL_0xHHHHHHHH` (as `namespaces bundles` and `topics bundle-range`
show them); `-d/--destination-broker` names a broker as `brokers list` does. Units: `cli.admin.units`.
"""

from __future__ import annotations

import argparse
from functools import partial

from cli.admin.client import AdminClient
from cli.admin.commands import Groups, command, destructive, namespace_path, routed
from cli.admin.units import positive_time_seconds, retention_mb, retention_minutes
from common.errors import InvalidArgument
from common.topic_names import parse_namespace


def add_parsers(groups: Groups) -> None:
    namespaces = groups["namespaces"]
    command(namespaces, "list", routed(lambda a: ("GET", f"/admin/v2/namespaces/{tenant_path(a.tenant)}", None)),
            "the namespaces of a tenant").add_argument("tenant")
    command(namespaces, "policies", routed(lambda a: ("GET", namespace_path(a.namespace), None)),
            "a namespace's policies (Pulsar's JSON)").add_argument("namespace")
    create = command(namespaces, "create", routed(_create_route), "create a namespace")
    create.add_argument("namespace")
    create.add_argument("-b", "--bundles", type=int, default=None, help="number of bundles (1..128)")
    create.add_argument("-c", "--clusters", type=lambda t: [c.strip() for c in t.split(",") if c.strip()],
                        default=None, help="replication clusters (comma-separated; this cluster only)")
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
    split = command(namespaces, "split-bundle", routed(lambda a: (
        "PUT", f"{namespace_path(a.namespace)}/{a.bundle}/split?unload={'true' if a.unload else 'false'}", None)),
        "split a bundle in two (range_equally_divide)")
    split.add_argument("namespace")
    split.add_argument("-b", "--bundle", required=True, help="0xLLLLLLLL_0xHHHHHHHH")
    split.add_argument("-u", "--unload", action="store_true", help="unload the two halves after the split")
    namespace_policy_commands(namespaces)


def tenant_path(tenant: str) -> str:
    """The tenant, checked (InvalidTopicName: exit status 2 before anything is sent)."""
    parse_namespace(f"{tenant}/x")
    return tenant


def _create_route(args: argparse.Namespace) -> tuple[str, str, object]:
    body: dict[str, object] = {}
    if args.bundles is not None:
        body["bundles"] = {"numBundles": args.bundles}
    if args.clusters is not None:
        body["replication_clusters"] = args.clusters
    return "PUT", namespace_path(args.namespace), body or None


def _delete(args: argparse.Namespace, client: AdminClient) -> int:
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
    ttl.add_argument("-t", "--ttl", "--messageTTL", dest="ttl", type=positive_time_seconds, required=True)
    for name, suffix in (("deduplication", "/deduplication"), ("retention", "/retention"),
                         ("message-ttl", "/messageTTL")):
        command(namespaces, f"get-{name}", routed(partial(_get_route, suffix=suffix))).add_argument("namespace")
    for name, suffixes in (("deduplication", ("/deduplication",)), ("retention", ("/retention",)),
                           ("message-ttl", ("/messageTTL",)),
                           ("offload-threshold", ("/offloadThreshold", "/offloadThresholdInSeconds")),
                           ("offload-policies", ("/offloadPolicies",))):
        command(namespaces, f"remove-{name}", partial(_remove, suffixes=suffixes),
                f"unset the namespace's {name} (the broker's default applies)").add_argument("namespace")


def _remove(args: argparse.Namespace, client: AdminClient, suffixes: tuple[str, ...]) -> int:
    path = namespace_path(args.namespace)
    for suffix in suffixes:
        client.call("DELETE", path + suffix)
    return 0


def _get_route(args: argparse.Namespace, suffix: str) -> tuple[str, str, object]:
    return "GET", namespace_path(args.namespace) + suffix, None
