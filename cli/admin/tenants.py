"""`strata admin tenants ...`: pulsar-admin's tenant commands over `broker.admin.tenants`.

    strata admin tenants list
    strata admin tenants get TENANT                    {"adminRoles": [...], "allowedClusters": [...]}
    strata admin tenants create TENANT [-r role1,role2] [-c cluster1,...]
    strata admin tenants update TENANT [-r ...] [-c ...]
    strata admin tenants delete TENANT [-f] [-y]

Flags are pulsar-admin's (`-r/--admin-roles`, `-c/--allowed-clusters`, comma-separated, and may
be repeated; `-f/--force`). As pulsar-admin: `create` without `-c` (or with an empty one) allows
every cluster the broker knows (`GET /admin/v2/clusters`); `update` keeps what `-r`/`-c` do not
give. `delete -f` also deletes every namespace of the tenant and every topic in them (with their
messages), so it asks first unless `--yes`. A bad tenant name is refused before anything is sent
(exit status 2, "Tenant name is not valid: ...", the broker's words: `broker.records.tenancy`).
"""

from __future__ import annotations

import argparse

from cli.admin.commands import Groups, command, destructive, routed
from cli.admin.console import AdminConsole
from common.errors import InvalidTopicName
from common.topic_names import parse_namespace


def check_tenant(tenant: str) -> str:
    """`tenant` if it is a valid tenant name; InvalidTopicName (exit status 2) saying so otherwise
    (the rule and words of `broker.records.tenancy.check_tenant_name`, not imported: the broker package
    would pull the metadata store's libraries into every CLI start)."""
    try:
        parse_namespace(f"{tenant}/x")
    except InvalidTopicName:
        raise InvalidTopicName(f"Tenant name is not valid: {tenant[:80]!r} (a tenant name is one part "
                               "made of letters, digits and _.:=%-, without '/')") from None
    return tenant


def tenant_path(tenant: str) -> str:
    """`/admin/v2/tenants/t`; InvalidTopicName (exit status 2) for a name that is not valid."""
    return f"/admin/v2/tenants/{check_tenant(tenant)}"


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_parsers(groups: Groups) -> None:
    tenants = groups["tenants"]
    command(tenants, "list", routed(lambda a: ("GET", "/admin/v2/tenants", None)), "the tenants")
    command(tenants, "get", routed(lambda a: ("GET", tenant_path(a.tenant), None)),
            "a tenant's admin roles and allowed clusters").add_argument("tenant")
    for action, run, what in (("create", _create, "create a tenant"), ("update", _update, "change a tenant")):
        parser = command(tenants, action, run, what)
        parser.add_argument("tenant")
        parser.add_argument("-r", "--admin-roles", dest="admin_roles", type=_names, default=None,
                            action="extend", help="comma-separated admin roles")
        parser.add_argument("-c", "--allowed-clusters", dest="allowed_clusters", type=_names, default=None,
                            action="extend", help="comma-separated clusters (default: every cluster)")
    delete = destructive(command(tenants, "delete", _delete, "delete a tenant"))
    delete.add_argument("tenant")
    delete.add_argument("-f", "--force", action="store_true",
                        help="also delete its namespaces and all their topics")


def _create(args: argparse.Namespace, client: AdminConsole) -> int:
    path = tenant_path(args.tenant)
    clusters = args.allowed_clusters or client.call("GET", "/admin/v2/clusters")
    client.call("PUT", path, {"adminRoles": args.admin_roles or [], "allowedClusters": clusters})
    return 0


def _update(args: argparse.Namespace, client: AdminConsole) -> int:
    path = tenant_path(args.tenant)
    current = client.call("GET", path)
    roles = args.admin_roles if args.admin_roles is not None else current.get("adminRoles", [])
    clusters = args.allowed_clusters if args.allowed_clusters is not None else current.get("allowedClusters", [])
    client.call("POST", path, {"adminRoles": roles, "allowedClusters": clusters})
    return 0


def _delete(args: argparse.Namespace, client: AdminConsole) -> int:
    path = tenant_path(args.tenant)
    if args.force:
        client.confirm(f"Delete tenant {args.tenant}, all its namespaces and all their topics and messages?")
    else:
        client.confirm(f"Delete tenant {args.tenant}?")
    client.call("DELETE", path + ("?force=true" if args.force else ""))
    return 0
