"""Helpers to declare `strata admin` commands: each leaf parser carries `run(args, client) -> int`.

`command(group, name, run)` adds a leaf; `routed(route)` makes the `run` of a command that is one
REST call: `route(args) -> (method, path, body)`, the answer shown (table or `-o json`);
`destructive(parser)` marks a command that asks before it runs (every command takes `-y/--yes`
and `-o/--output`, after its group as well as before it). Names are checked by `topic_path` /
`namespace_path` (InvalidTopicName, exit status 2) before anything is sent.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from cli.admin.console import AdminConsole
from common.topic_names import parse_namespace, parse_topic

Groups = dict[str, argparse._SubParsersAction]
Run = Callable[[argparse.Namespace, AdminConsole], int]
Route = Callable[[argparse.Namespace], tuple[str, str, object]]


def command(group: argparse._SubParsersAction, name: str, run: Run, help: str | None = None,
            aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    parser = group.add_parser(name, help=help, aliases=list(aliases))
    parser.set_defaults(run=run)
    return parser


def routed(route: Route, *, columns: tuple[str, ...] | None = None) -> Run:
    """The `run` of a one-call command: send `route(args)`, show the answer (if any). A GET
    answered with nothing (a policy that is not set) prints `null`, as pulsar-admin does, so
    `-o json` output is always JSON."""
    def run(args: argparse.Namespace, client: AdminConsole) -> int:
        method, path, body = route(args)
        result = client.call(method, path, body)
        if result is not None or method == "GET":
            client.show(result, columns=columns)
        return 0
    return run


def destructive(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Mark a command that asks for confirmation (`client.confirm`) unless `-y/--yes`."""
    parser.set_defaults(destructive=True)
    return parser


def topic_path(topic: str) -> str:
    """`/admin/v2/persistent/t/ns/x` of a (short) topic name (`/admin/v2/non-persistent/...` of a
    `non-persistent://` one)."""
    name = parse_topic(topic)
    return f"/admin/v2/{name.domain}/{name.path}"


def namespace_path(namespace: str) -> str:
    tenant, ns = parse_namespace(namespace)
    return f"/admin/v2/namespaces/{tenant}/{ns}"
