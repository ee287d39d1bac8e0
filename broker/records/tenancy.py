"""Tenants and namespaces as entities: what exists, stored where Pulsar stores it.

Layout (JSON values):
- `/admin/policies/<tenant>` = TenantInfo `{"adminRoles": [...], "allowedClusters": [...]}`: the
  tenant exists while this key does.
- `/admin/policies/<tenant>/<ns>` = the namespace's policy fields (`broker.records.policies`): the
  namespace exists while this key does.
- `/admin/local-policies/<tenant>/<ns>` = its bundles (`broker.records.bundles`), written right after
  the policies key at creation (a namespace found without them gets the default count).

`public` and `public/default` exist from the start: `ensure_defaults` creates them at every broker
start with create-if-absent writes, so brokers starting at once never fail or overwrite each other.
Namespaces used before they were entities (stored bundles or topics, no policies key) are adopted
there too, so an upgraded cluster keeps serving its topics.

`NamespaceCache` answers "does this namespace exist?" for lookups and topic loads without a store
read each time: a namespace seen to exist is remembered until the store's watch on
`/admin/policies` reports a change of its key or of its tenant's (within about a second on other
brokers; `forget` at once on the broker that deletes it). A namespace not found is never
remembered, so one created a moment ago is seen at once. The produce and dispatch paths never
ask: only PARTITIONED_METADATA, LOOKUP, admin topic routes and topic loads do.

Deleting a namespace first marks its policies `deleted` (as Pulsar does): clients' lookups are
refused from then on (`require_live`), while the admin calls that delete its topics, on whichever
broker serves them, still find it (`require`); the keys go last.

What must hold: nothing here or in `broker.records.policies`/`broker.records.bundles` creates a namespace or a
tenant as a side effect of using it; a tenant is deleted only without namespaces.
"""

from __future__ import annotations

import json
import logging

from broker.records import bundles as bundles_mod
from broker.records.policies import POLICIES_ROOT, namespace_path
from common.errors import (
    AlreadyExists,
    BadRequestBody,
    InvalidTopicName,
    NamespaceNotFound,
    NotAllowed,
    NotEmpty,
    NotFound,
    TenantNotFound,
)
from common.topic_names import TOPICS_ROOT, parse_namespace
from metadata.api import AsyncStore, Watch, WatchEvent

log = logging.getLogger(__name__)

DEFAULT_TENANT = "public"
DELETED_KEY = "deleted"     # Pulsar's Policies.deleted: set first when a namespace is deleted
DEFAULT_NAMESPACE = ("public", "default")


def tenant_path(tenant: str) -> str:
    return f"{POLICIES_ROOT}/{tenant}"


def check_tenant_name(tenant: str) -> str:
    """`tenant` if it is a valid tenant name: one name part, non-empty, of `[A-Za-z0-9_.:=%-]`
    and not `.` or `..` (the rule of every part of a topic name, `common.topic_names`).
    InvalidTopicName (400; the CLI's exit status 2) otherwise, saying it is the tenant name
    that is wrong (Pulsar's "Tenant name is not valid")."""
    try:
        parse_namespace(f"{tenant}/x")
    except InvalidTopicName:
        raise InvalidTopicName(f"Tenant name is not valid: {str(tenant)[:80]!r} (a tenant name is one part "
                               "made of letters, digits and _.:=%-, without '/')") from None
    return tenant


def tenant_info(body: object, cluster: str) -> dict:
    """A TenantInfo body, checked, as stored: 400 for the wrong shape, 412 "Clusters can not be
    empty" / "Clusters do not exist" (this cluster is the only one)."""
    if not isinstance(body, dict):
        raise BadRequestBody('a tenant is {"adminRoles": [...], "allowedClusters": [...]}')
    roles, clusters = body.get("adminRoles") or [], body.get("allowedClusters") or []
    for what, value in (("adminRoles", roles), ("allowedClusters", clusters)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BadRequestBody(f"{what} must be a list of strings")
    if not clusters or any(not c.strip() for c in clusters):
        raise NotAllowed("Clusters can not be empty")
    if any(c != cluster for c in clusters):
        raise NotAllowed("Clusters do not exist")
    return {"adminRoles": sorted(set(roles)), "allowedClusters": sorted(set(clusters))}


async def get_tenant(astore: AsyncStore, tenant: str) -> dict:
    found = await astore.get(tenant_path(tenant))
    if found is None:
        raise TenantNotFound(tenant)
    return json.loads(found.value)


async def list_tenants(astore: AsyncStore) -> list[str]:
    """Tenants with a TenantInfo key, sorted (one read of the policies tree)."""
    depth = POLICIES_ROOT.count("/") + 1
    return sorted(path.rsplit("/", 1)[1] for path, _ in await astore.list_prefix(POLICIES_ROOT)
                  if path.count("/") == depth)


async def create_tenant(astore: AsyncStore, tenant: str, info: dict) -> None:
    try:
        await astore.create(tenant_path(tenant), json.dumps(info).encode())
    except AlreadyExists:
        raise AlreadyExists("Tenant already exists") from None


async def update_tenant(astore: AsyncStore, tenant: str, info: dict) -> None:
    found = await astore.get(tenant_path(tenant))
    if found is None:
        raise TenantNotFound(tenant)
    try:
        await astore.put(tenant_path(tenant), json.dumps(info).encode(), expected_version=found.version)
    except NotFound:
        raise TenantNotFound(tenant) from None


async def delete_tenant(astore: AsyncStore, tenant: str) -> None:
    """Delete the tenant's key; NotEmpty (409) while it has namespaces, TenantNotFound if absent."""
    if await list_namespaces(astore, tenant):
        raise NotEmpty("The tenant still has active namespaces")
    try:
        await astore.delete(tenant_path(tenant))
    except NotFound:
        raise TenantNotFound(tenant) from None
    except NotEmpty:   # a namespace was created meanwhile
        raise NotEmpty("The tenant still has active namespaces") from None


async def list_namespaces(astore: AsyncStore, tenant: str) -> list[str]:
    """`tenant/ns` of every namespace of the tenant, sorted."""
    return [f"{tenant}/{ns}" for ns in await astore.children(tenant_path(tenant))]


async def namespace_exists(astore: AsyncStore, tenant: str, namespace: str) -> bool:
    return await astore.get(namespace_path(tenant, namespace)) is not None


async def create_namespace(astore: AsyncStore, tenant: str, namespace: str, fields: dict,
                           bundle_count: int, boundaries: list[int] | None = None) -> None:
    """Store the namespace's policy fields, then its bundles. TenantNotFound (404) without the
    tenant; AlreadyExists "Namespace already exists" (409). Bundles left by a namespace of the same
    name used before it was created are replaced."""
    bundles = bundles_mod.NamespaceBundles(tenant, namespace, tuple(boundaries or
                                                                    bundles_mod.equal_boundaries(bundle_count)))
    if await astore.get(tenant_path(tenant)) is None:
        raise TenantNotFound(tenant)
    try:
        await astore.create(namespace_path(tenant, namespace), json.dumps(fields).encode())
    except AlreadyExists:
        raise AlreadyExists("Namespace already exists") from None
    await astore.put(bundles_mod.bundles_path(tenant, namespace), json.dumps({"bundles": bundles.to_json()}).encode())


async def _create_if_absent(astore: AsyncStore, path: str, value: dict) -> bool:
    """Create `path` unless it exists (read first: a write takes the cluster's metadata write
    lock, and every broker runs this at start); True if this call created it."""
    if await astore.get(path) is not None:
        return False
    try:
        await astore.create(path, json.dumps(value).encode())
        return True
    except AlreadyExists:
        return False


async def ensure_defaults(astore: AsyncStore, cluster: str, default_bundles: int) -> None:
    """`public` and `public/default` (with bundles), and namespaces used before they were
    entities; safe when several brokers run it at once (create-if-absent only)."""
    used = {DEFAULT_NAMESPACE}
    for root in (bundles_mod.LOCAL_POLICIES_ROOT, TOPICS_ROOT):
        for t in await astore.children(root):
            used.update((t, n) for n in await astore.children(f"{root}/{t}"))
    for t, n in sorted(used):
        await _create_if_absent(astore, tenant_path(t), {"adminRoles": [], "allowedClusters": [cluster]})
        if await _create_if_absent(astore, namespace_path(t, n), {}) and (t, n) != DEFAULT_NAMESPACE:
            log.info("namespace %s/%s was in use without being created: adopted", t, n)
        if await astore.get(bundles_mod.bundles_path(t, n)) is None:
            try:
                await bundles_mod.create_bundles(astore, t, n, default_bundles)
            except AlreadyExists:
                pass


class NamespaceCache:
    """Which namespaces exist, remembered while they do (see the module docstring)."""

    def __init__(self, astore: AsyncStore) -> None:
        self._astore = astore
        self._known: dict[tuple[str, str], bool] = {}   # (tenant, ns) -> marked deleted
        self._watch: Watch | None = None
        self._changes = 0      # watch events seen: a read that raced one is not remembered

    async def start(self) -> None:
        """Follow `/admin/policies`; until then nothing is remembered."""
        if self._watch is None:
            self._watch = await self._astore.watch(POLICIES_ROOT, self._changed)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._known.clear()

    def _changed(self, event: WatchEvent) -> None:
        self._changes += 1
        parts = event.path[len(POLICIES_ROOT) + 1:].split("/")
        if len(parts) == 2:
            self._known.pop((parts[0], parts[1]), None)
        elif len(parts) == 1:
            self._known = {k: v for k, v in self._known.items() if k[0] != parts[0]}

    def forget(self, tenant: str, namespace: str) -> None:
        self._changes += 1
        self._known.pop((tenant, namespace), None)

    async def _deleted(self, tenant: str, namespace: str) -> bool:
        """Whether the namespace is marked deleted; NamespaceNotFound if it does not exist."""
        key = (tenant, namespace)
        known = self._known.get(key)
        if known is not None:
            return known
        changes = self._changes
        found = await self._astore.get(namespace_path(tenant, namespace))
        if found is None:
            raise NamespaceNotFound(tenant, namespace)
        deleted = bool(json.loads(found.value).get(DELETED_KEY, False))
        if self._watch is not None and changes == self._changes:
            self._known[key] = deleted
        return deleted

    async def require(self, tenant: str, namespace: str) -> None:
        """Return if the namespace exists (even while it is being deleted: its topics are deleted
        through the usual paths); NamespaceNotFound otherwise."""
        await self._deleted(tenant, namespace)

    async def require_live(self, tenant: str, namespace: str) -> None:
        """Return if the namespace exists and is not being deleted (what clients may use);
        NamespaceNotFound otherwise."""
        if await self._deleted(tenant, namespace):
            raise NamespaceNotFound(tenant, namespace)
