"""`strata admin namespaces|topics grant-permission / revoke-permission / permissions`.

    strata admin namespaces grant-permission T/NS --role app --actions produce,consume
    strata admin namespaces revoke-permission T/NS --role app
    strata admin namespaces permissions T/NS                      # {role: [actions]}
    strata admin namespaces grant-subscription-permission T/NS --subscription s --roles a,b
    strata admin namespaces revoke-subscription-permission T/NS --subscription s --role a
    strata admin topics grant-permission TOPIC --role app --actions consume
    strata admin topics revoke-permission TOPIC --role app
    strata admin topics permissions TOPIC                         # the namespace's merged with the topic's

Thin clients of `broker.admin.permissions` with pulsar-admin's flags. Actions: produce, consume,
functions, sources, sinks, packages (the broker refuses others: HTTP 400, exit status 1). Only
a superuser or an admin of the tenant may call these (403 otherwise).
"""

from __future__ import annotations

import argparse
import urllib.parse

from cli.admin.commands import Groups, command, namespace_path, routed, topic_path


def add_parsers(groups: Groups) -> None:
    for group, target, path in (("namespaces", "namespace", namespace_path), ("topics", "topic", topic_path)):
        _add_group(groups[group], target, path)
    _add_subscription_commands(groups["namespaces"])


def _csv(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError("a comma-separated list of at least one item")
    return items


def _quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _add_group(group: argparse._SubParsersAction, target: str, path) -> None:
    def at(args: argparse.Namespace) -> str:
        return f"{path(getattr(args, target))}/permissions"

    grant = command(group, "grant-permission", routed(
        lambda a: ("POST", f"{at(a)}/{_quoted(a.role)}", a.actions)),
        help=f"give a role actions on a {target} (replacing its earlier grant there)")
    grant.add_argument(target)
    grant.add_argument("--role", required=True, help="the client role")
    grant.add_argument("--actions", required=True, type=_csv,
                       help="comma list of produce, consume, functions, sources, sinks, packages")
    revoke = command(group, "revoke-permission", routed(lambda a: ("DELETE", f"{at(a)}/{_quoted(a.role)}", None)),
                     help=f"take a role's grant on a {target} away")
    revoke.add_argument(target)
    revoke.add_argument("--role", required=True, help="the client role")
    listed = command(group, "permissions", routed(lambda a: ("GET", at(a), None)),
                     help=f"the roles granted on a {target} and their actions")
    listed.add_argument(target)


def _add_subscription_commands(group: argparse._SubParsersAction) -> None:
    def at(args: argparse.Namespace) -> str:
        return f"{namespace_path(args.namespace)}/permissions"

    grant = command(group, "grant-subscription-permission", routed(
        lambda a: ("POST", f"{at(a)}/subscription/{_quoted(a.subscription)}", a.roles)),
        help="only these roles may consume on the subscription in this namespace")
    grant.add_argument("namespace")
    grant.add_argument("--subscription", required=True)
    grant.add_argument("--roles", required=True, type=_csv, help="comma list of client roles")
    revoke = command(group, "revoke-subscription-permission", routed(
        lambda a: ("DELETE", f"{at(a)}/{_quoted(a.subscription)}/{_quoted(a.role)}", None)),
        help="take a role off the subscription's list")
    revoke.add_argument("namespace")
    revoke.add_argument("--subscription", required=True)
    revoke.add_argument("--role", required=True)
