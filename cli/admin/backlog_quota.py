"""`strata admin namespaces|topics set-backlog-quota / get-backlog-quotas / remove-backlog-quota`.

    strata admin namespaces set-backlog-quota T/NS --limitSize 10M --limitTime 1h \\
        --policy producer_exception --type destination_storage
    strata admin namespaces get-backlog-quotas T/NS          # {type: quota}, the namespace's own
    strata admin namespaces remove-backlog-quota T/NS [-t message_age]
    strata admin topics set-backlog-quota TOPIC -l 1M -p producer_request_hold [-t ...]
    strata admin topics get-backlog-quotas TOPIC [--applied] / remove-backlog-quota TOPIC [-t ...]

Thin clients of `broker.admin.backlog_quota`. Flags are pulsar-admin's (`-l/--limit`, Strata
also `--limitSize`; `-lt/--limitTime`; `-p/--policy` producer_request_hold | producer_exception |
consumer_backlog_eviction; `-t/--type` destination_storage (default) | message_age). As in
pulsar-admin 3.x, a destination_storage quota needs `-l` and a message_age quota `-lt`, and only
that limit is set (the other stays -1, whatever else was given). Units: `cli.admin.units` (a
bare size is bytes, a bare time seconds; -1: no limit). A quota at or over the retention is
refused by the broker (HTTP 412, exit status 1).
"""

from __future__ import annotations

import argparse

from cli.admin.commands import Groups, command, namespace_path, topic_path
from cli.admin.console import AdminConsole
from cli.admin.units import size_bytes, time_seconds
from common.errors import InvalidArgument

TYPES = ("destination_storage", "message_age")
POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
_COLUMNS = ("type", "limitSize", "limitTime", "policy")


def add_parsers(groups: Groups) -> None:
    for group, target, path in (("namespaces", "namespace", namespace_path), ("topics", "topic", topic_path)):
        _add_group(groups[group], target, path)


def _add_group(group: argparse._SubParsersAction, target: str, path) -> None:
    def at(args: argparse.Namespace) -> str:
        return path(getattr(args, target))

    set_quota = command(group, "set-backlog-quota", lambda a, c: _set(a, c, at(a)),
                        help=f"set a backlog quota of a {target}")
    set_quota.add_argument(target)
    set_quota.add_argument("-l", "--limit", "--limitSize", dest="limit", type=_limit_size, default=None,
                           help="backlog size limit: bytes or 500K/10M/2G (-1: none)")
    set_quota.add_argument("-lt", "--limitTime", dest="limit_time", type=_limit_time, default=None,
                           help="oldest unacked message age limit: seconds or 30s/10m/3h (-1: none)")
    set_quota.add_argument("-p", "--policy", choices=POLICIES, required=True)
    set_quota.add_argument("-t", "--type", dest="kind", choices=TYPES, default=TYPES[0])
    get_quotas = command(group, "get-backlog-quotas", lambda a, c: _get(a, c, at(a)),
                         help=f"the backlog quotas of a {target}")
    get_quotas.add_argument(target)
    if target == "topic":
        get_quotas.add_argument("-ap", "--applied", action="store_true",
                                help="the quotas in force (the namespace's or the broker's where the topic has none)")
    remove = command(group, "remove-backlog-quota", lambda a, c: _remove(a, c, at(a)),
                     help=f"remove a backlog quota of a {target} (the default applies again)")
    remove.add_argument(target)
    remove.add_argument("-t", "--type", dest="kind", choices=TYPES, default=TYPES[0])


def _limit_size(text: str) -> int:
    value = size_bytes(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"bad size limit {text!r}: -1 (none) or >= 0")
    return value


def _limit_time(text: str) -> int:
    value = time_seconds(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"bad time limit {text!r}: -1 (none) or >= 0")
    return value


def _set(args: argparse.Namespace, client: AdminConsole, path: str) -> int:
    if args.kind == "destination_storage":
        if args.limit is None:
            raise InvalidArgument("Quota type of 'destination_storage' needs a size limit (-l/--limit)")
        body = {"limitSize": args.limit, "limitTime": -1, "policy": args.policy}
    else:
        if args.limit_time is None:
            raise InvalidArgument("Quota type of 'message_age' needs a time limit (-lt/--limitTime)")
        body = {"limitSize": -1, "limitTime": args.limit_time, "policy": args.policy}
    client.call("POST", f"{path}/backlogQuota?backlogQuotaType={args.kind}", body)
    return 0


def _get(args: argparse.Namespace, client: AdminConsole, path: str) -> int:
    applied = "?applied=true" if getattr(args, "applied", False) else ""
    quotas = client.call("GET", f"{path}/backlogQuotaMap{applied}")
    if client.output == "json" or not isinstance(quotas, dict):
        client.show(quotas)
        return 0
    rows = [{"type": kind, **{k: q.get(k) for k in _COLUMNS[1:]}} for kind, q in sorted(quotas.items())]
    client.show(rows, columns=_COLUMNS)
    return 0


def _remove(args: argparse.Namespace, client: AdminConsole, path: str) -> int:
    client.call("DELETE", f"{path}/backlogQuota?backlogQuotaType={args.kind}")
    return 0
