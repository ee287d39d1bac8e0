"""`strata admin schemas ...` and the namespaces' schema policies (pulsar-admin's commands).

    strata admin schemas get TOPIC [--version N | --all-version]
    strata admin schemas upload TOPIC -f schema.json      # PostSchemaPayload {"type", "schema", "properties"}
    strata admin schemas compatibility TOPIC -f schema.json
    strata admin schemas delete TOPIC [--force] [-y]
    strata admin namespaces set-schema-compatibility-strategy NS -c BACKWARD / get-schema-compatibility-strategy NS
    strata admin namespaces set-is-allow-auto-update-schema NS --enable|--disable / get-is-allow-auto-update-schema NS
    strata admin namespaces set-schema-validation-enforce NS [--disable] / get-schema-validation-enforce NS

Thin clients of `broker.admin.schemas`. A schema file that cannot be read or is not a JSON object
is refused before anything is sent (exit 2).
"""

from __future__ import annotations

import argparse
import json

from cli.admin.commands import Groups, Route, command, destructive, namespace_path, routed
from cli.admin.console import AdminConsole
from common.errors import InvalidArgument
from common.topic_names import parse_topic

_STRATEGIES = ("ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
               "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE", "UNDEFINED")
_COLUMNS = ("version", "type", "timestamp", "data", "properties")


def schema_path(topic: str) -> str:
    """`/admin/v2/schemas/t/ns/x` of a (short) topic name."""
    return "/admin/v2/schemas/" + parse_topic(topic).path


def add_parsers(groups: Groups) -> None:
    schemas = groups["schemas"]
    get = command(schemas, "get", run_get, help="the topic's latest schema, one version, or all of them")
    get.add_argument("topic")
    which = get.add_mutually_exclusive_group()
    which.add_argument("--version", type=int, help="this version")
    which.add_argument("-a", "--all-version", action="store_true", help="every live version")
    for name, run, text in (("upload", run_upload, "register a schema (a PostSchemaPayload JSON file)"),
                            ("compatibility", run_compatibility, "would this schema be accepted?")):
        leaf = command(schemas, name, run, help=text)
        leaf.add_argument("topic")
        leaf.add_argument("-f", "--filename", required=True, help='JSON: {"type": "AVRO", "schema": "...", '
                                                                  '"properties": {}}')
    delete = destructive(command(schemas, "delete", run_delete, help="delete the topic's schema"))
    delete.add_argument("topic")
    delete.add_argument("--force", action="store_true", help="remove every version (numbering starts again)")
    _namespace_parsers(groups["namespaces"])


def _namespace_parsers(namespaces: argparse._SubParsersAction) -> None:
    suffix = "/schemaCompatibilityStrategy"
    command(namespaces, "get-schema-compatibility-strategy",
            routed(lambda a: ("GET", namespace_path(a.namespace) + suffix, None))).add_argument("namespace")
    leaf = command(namespaces, "set-schema-compatibility-strategy",
                   routed(lambda a: ("PUT", namespace_path(a.namespace) + suffix, a.compatibility)))
    leaf.add_argument("namespace")
    leaf.add_argument("-c", "--compatibility", required=True, type=str.upper, choices=_STRATEGIES)
    for name, flag_suffix in (("is-allow-auto-update-schema", "/isAllowAutoUpdateSchema"),
                              ("schema-validation-enforce", "/schemaValidationEnforced")):
        command(namespaces, "get-" + name, routed(_flag_route(flag_suffix, "GET"))).add_argument("namespace")
        leaf = command(namespaces, "set-" + name, routed(_flag_route(flag_suffix, "POST")))
        leaf.add_argument("namespace")
        switch = leaf.add_mutually_exclusive_group()
        switch.add_argument("--enable", action="store_true", help="on (the default)")
        switch.add_argument("--disable", action="store_true", help="off")


def _flag_route(suffix: str, method: str) -> Route:
    def route(args: argparse.Namespace) -> tuple[str, str, object]:
        return method, namespace_path(args.namespace) + suffix, (None if method == "GET" else not args.disable)
    return route


def _payload(filename: str) -> dict:
    try:
        with open(filename, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot read the schema file {filename}: {exc}") from None
    if not isinstance(doc, dict) or "type" not in doc:
        raise InvalidArgument(f'{filename} must hold {{"type": ..., "schema": ..., "properties": ...}}')
    return doc


def run_get(args: argparse.Namespace, client: AdminConsole) -> int:
    path = schema_path(args.topic)
    if args.all_version:
        answer = client.call("GET", path + "/schemas")
        rows = answer.get("getSchemaResponses", []) if isinstance(answer, dict) else answer
        client.show(answer if client.output == "json" else rows, columns=_COLUMNS)
        return 0
    client.show(client.call("GET", path + ("/schema" if args.version is None else f"/schema/{args.version}")))
    return 0


def run_upload(args: argparse.Namespace, client: AdminConsole) -> int:
    client.show(client.call("POST", schema_path(args.topic) + "/schema", _payload(args.filename)))
    return 0


def run_compatibility(args: argparse.Namespace, client: AdminConsole) -> int:
    client.show(client.call("POST", schema_path(args.topic) + "/compatibility", _payload(args.filename)))
    return 0


def run_delete(args: argparse.Namespace, client: AdminConsole) -> int:
    path = schema_path(args.topic)
    client.confirm(f"Delete the schema of {args.topic}?")
    client.show(client.call("DELETE", path + "/schema", query={"force": "true"} if args.force else None))
    return 0
