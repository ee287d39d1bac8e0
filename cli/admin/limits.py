"""`strata admin` commands of the multi-tenant policies (`broker.limits.registry`), with
pulsar-admin's names and flags:

    strata admin namespaces set-max-producers-per-topic TENANT/NS -p 10     (get- / remove- likewise)
    strata admin namespaces set-publish-rate TENANT/NS -m 1000 -b 1048576
    strata admin namespaces set-dispatch-rate TENANT/NS -md 500 -bd -1 -dt 1
    strata admin namespaces set-persistence TENANT/NS -e 3 -w 3 -a 2 -r 0
    strata admin namespaces set-inactive-topic-policies TENANT/NS -e -t 1h -m delete_when_no_subscriptions
    strata admin topics set-max-producers TOPIC -p 10          (get-max-producers [--applied/-ap])

Each policy has `set-<name>`, `get-<name>` and `remove-<name>` on its levels (a namespace policy
under `namespaces`, a topic policy under `topics`); the flags are pulsar-admin's (`-p`, `-m`,
`-md`, ...). A topic `get-*` takes `--applied/-ap` for the value in force (the topic's, else the
namespace's, else the broker's). Times (`-t` of inactive-topic-policies) take 30s/10m/3h/2d/1w.
"""

from __future__ import annotations

import argparse
from typing import Any

from broker.limits import registry
from broker.limits.spec import PolicySpec
from cli.admin.commands import Groups, command, namespace_path, routed, topic_path
from cli.admin.units import time_seconds


def add_parsers(groups: Groups) -> None:
    for spec in registry.ALL:
        if spec.route and spec.cli:
            _add_level(groups["namespaces"], spec, spec.cli, "namespace", namespace_path, spec.route)
        if spec.topic_route and spec.topic_cli:
            _add_level(groups["topics"], spec, spec.topic_cli, "topic", topic_path, spec.topic_route)


def _add_level(group: argparse._SubParsersAction, spec: PolicySpec, stem: str, target: str,
               path_of: Any, route: str) -> None:
    def set_route(args: argparse.Namespace) -> tuple[str, str, object]:
        return "POST", f"{path_of(getattr(args, target))}/{route}", _body(spec, args)

    setter = command(group, f"set-{stem}", routed(set_route), f"set the {target}'s {route} ({spec.doc})")
    setter.add_argument(target)
    for flag in spec.flags:
        if flag.switch:
            setter.add_argument(*flag.names, dest=flag.field, action="store_true", help=flag.help or None)
        else:
            parse = time_seconds if flag.field == "maxInactiveDurationSeconds" else flag.parse
            setter.add_argument(*flag.names, dest=flag.field, type=parse, default=flag.default,
                                required=flag.required, help=flag.help or None)

    def get_route(args: argparse.Namespace) -> tuple[str, str, object]:
        query = "?applied=true" if getattr(args, "applied", False) else ""
        return "GET", f"{path_of(getattr(args, target))}/{route}{query}", None

    getter = command(group, f"get-{stem}", routed(get_route), f"the {target}'s {route}")
    getter.add_argument(target)
    if target == "topic":
        getter.add_argument("--applied", "-ap", action="store_true", help="the value in force")

    def remove_route(args: argparse.Namespace) -> tuple[str, str, object]:
        return "DELETE", f"{path_of(getattr(args, target))}/{route}", None

    command(group, f"remove-{stem}", routed(remove_route),
            f"unset the {target}'s {route} (the next level applies)").add_argument(target)


def _body(spec: PolicySpec, args: argparse.Namespace) -> object:
    values = {flag.field: getattr(args, flag.field) for flag in spec.flags}
    if spec.scalar:
        return values["value"]
    if spec.cli_body is not None:
        return spec.cli_body(values)
    return {k: v for k, v in values.items() if v is not None}
