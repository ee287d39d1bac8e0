"""Namespace routes of the admin API (Pulsar's paths, JSON and status codes).

A namespace exists from its creation until its deletion (`broker.records.tenancy`): nothing else creates
one, and every route below answers 404 "Namespace does not exist" for one that does not (the
topic routes too: `broker.service`, `broker.cluster.ownership`).

- `GET    /admin/v2/namespaces/{t}` → `["t/ns", ...]`; 404 "Tenant does not exist".
Under `/admin/v2/namespaces/{t}/{ns}`:
- `PUT    ...` body: none, or Pulsar's Policies (`broker.admin.namespace_policies`: bundles as
  `{"numBundles": N}` or `{"boundaries": [...]}`, retention, TTL, dedup, offload fields, this
  cluster in `replication_clusters`) → 204: the namespace is stored with its bundles
  (`broker_default_namespace_bundles` when none is asked). 404 "Tenant does not exist"; 409
  "Namespace already exists"; 412 a count outside 1..128, boundaries that do not run
  0x00000000..0xffffffff increasing, another cluster, an invalid policy value, or a Pulsar policy
  Strata does not apply set to anything but its default; 400 a body of the wrong shape.
- `GET    ...` → Pulsar's Policies JSON (every field; unset ones at Pulsar's defaults).
- `DELETE ...[?force=true]` → 204. 409 "Cannot delete non empty namespace" while it has topics
  (partitioned or not; live non-persistent ones too, `broker.admin.non_persistent`), unless
  forced: then every topic is deleted on the broker that serves it (clients told to go; a live
  non-persistent topic is closed), and then its policies, topic policies, partitioned-topic
  records (both domains), bundles (unloaded first) and ownership keys. The policies are marked
  `deleted` first, so clients' lookups are refused from then on (about a second later on other
  brokers).
- `GET    .../bundles` → BundlesData `{"boundaries": [...], "numBundles": N}`.
- `PUT    .../unload` → 204: every owned bundle is unloaded by its owner (this broker's here, the
  others' by a PUT of `.../{bundle}/unload` to their owner); unowned bundles are skipped.
- `PUT    .../{bundle}/unload[?destinationBroker=host:webPort]` → 204; 412 a bundle the namespace
  does not have (malformed, or not one of its ranges); 307 to the owner when another broker owns
  it; 204 and nothing done when nobody owns it; 412 a destination that is not a live broker.
- `PUT    .../{bundle}/split[?unload=false&splitAlgorithmName=range_equally_divide]` → 204; 307
  to the owner; 412 when nobody owns the bundle, for an unknown bundle, or another algorithm.
- `GET    .../topics[?mode=PERSISTENT|NON_PERSISTENT|ALL]` → every topic of the namespace as
  Pulsar lists them: `["persistent://t/ns/x", "persistent://t/ns/p-partition-0", ...]`, sorted;
  the topics ever created plus every partition of its partitioned topics (a partitioned topic's
  own name is not listed, as Pulsar lists managed ledgers). NON_PERSISTENT lists the live
  non-persistent topics this broker serves, ALL both; `includeSystemTopic` is accepted and changes
  nothing (Strata has no system topics); 400 another mode; 404 "Namespace does not exist".
- `POST|GET|DELETE .../deduplication` body true/false;
  `POST|GET|DELETE .../retention` body `{"retentionTimeInMinutes": m, "retentionSizeInMB": s}`
  (412 if invalid: below -1, or 0 paired with a positive value); `POST|GET|DELETE .../messageTTL`
  body seconds (int >= 0, 0 = off; 412 if negative). GET answers the namespace's own value, null
  when it has none (as Pulsar's Namespaces v2: no `applied` form; the topic getters have one);
  DELETE removes the namespace's value (the broker's default applies again). The retention task
  (`broker.retention.task`) applies retention and TTL on its next pass.
Offload policies: `broker.admin.offload`. Errors: `broker.admin.http`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import non_persistent as non_persistent_admin
from broker.admin.brokers import BROKERS_ROOT
from broker.admin.http import body_bool, body_json, error, flag, namespace_of
from broker.admin.lookup import forward_put, namespace_bundles, ownership_of, redirect_to
from broker.admin.namespace_policies import policies_from_body, policies_json
from broker.admin.policy_bodies import body_retention, ttl_seconds
from broker.cluster.ownership import NAMESPACE_ROOT, ownership_path
from broker.cluster.peers import delete_partition
from broker.records import bundles as bundles_mod
from broker.records import policies, tenancy
from broker.records.bundles import BundleRange, NamespaceBundles, parse_bundle
from broker.retention import backlog_quota as bq
from common.errors import (
    BadRequestBody,
    BundleNotOwned,
    NotEmpty,
    NotFound,
    OwnedElsewhere,
    ServiceNotReady,
)
from common.topic_names import PARTITIONED_ROOT, TOPICS_ROOT, TopicName

if TYPE_CHECKING:
    from broker.cluster.ownership import Ownership
    from broker.service import BrokerService
    from metadata.api import AsyncStore

SPLIT_ALGORITHMS = ("range_equally_divide",)
TOPIC_MODES = ("PERSISTENT", "NON_PERSISTENT", "ALL")     # Pulsar's Mode of `GET .../topics`
DELETES_AT_ONCE = 8       # topics deleted concurrently by a forced namespace delete


def register(app: web.Application, service: BrokerService) -> None:
    r = _NamespaceRoutes(service)
    ns = "/admin/v2/namespaces/{tenant}/{ns}"
    app.router.add_get("/admin/v2/namespaces/{tenant}", r.list_namespaces)
    app.router.add_put(ns, r.create_namespace)
    app.router.add_get(ns, r.get_policies)
    app.router.add_delete(ns, r.delete_namespace)
    app.router.add_get(ns + "/bundles", r.get_bundles)
    app.router.add_get(ns + "/topics", r.list_topics)
    app.router.add_put(ns + "/unload", r.unload_namespace)
    app.router.add_put(ns + "/{bundle}/unload", r.unload_bundle)
    app.router.add_put(ns + "/{bundle}/split", r.split_bundle)
    app.router.add_post(ns + "/deduplication", r.set_dedup)
    app.router.add_get(ns + "/deduplication", r.get_dedup)
    app.router.add_delete(ns + "/deduplication", r.remove_dedup)
    app.router.add_post(ns + "/retention", r.set_retention)
    app.router.add_get(ns + "/retention", r.get_retention)
    app.router.add_delete(ns + "/retention", r.remove_retention)
    app.router.add_post(ns + "/messageTTL", r.set_ttl)
    app.router.add_get(ns + "/messageTTL", r.get_ttl)
    app.router.add_delete(ns + "/messageTTL", r.remove_ttl)


async def _unload_anywhere(service: BrokerService, tenant: str, ns: str, bundle: BundleRange) -> str | None:
    """Unload one bundle on its owner (nothing if nobody owns it); None, or what went wrong."""
    owner = await service.ownership.owner_of(ownership_path(tenant, ns, bundle))
    if owner is None:
        return None
    if owner.mine:
        await service.ownership.unload(tenant, ns, bundle)
        return None
    return await forward_put(owner.http_url, f"/admin/v2/namespaces/{tenant}/{ns}/{bundle.key}/unload")


async def unload_everywhere(service: BrokerService, tenant: str, ns: str) -> list[str]:
    """Every bundle of the namespace unloaded by its owner, at once; what failed."""
    ranges = (await bundles_mod.load_bundles(service.astore, tenant, ns,
                                             service.config.broker_default_namespace_bundles)).ranges
    return [f for f in await asyncio.gather(*(_unload_anywhere(service, tenant, ns, b) for b in ranges))
            if f is not None]


async def namespace_topics(astore: AsyncStore, tenant: str, ns: str) -> tuple[dict[str, TopicName], list[TopicName]]:
    """({full name: name} of every topic of the namespace: those ever created and every partition
    of its partitioned topics, the namespace's partitioned topics); NamespaceNotFound (404)."""
    partitioned = [TopicName("persistent", tenant, ns, local)
                   for local in await policies.partitioned_topics(astore, tenant, ns)]
    names = {str(n): n for n in await policies.topics_of_namespace(astore, tenant, ns)}
    counts = await asyncio.gather(*(policies.partition_count(astore, name) for name in partitioned))
    for name, count in zip(partitioned, counts, strict=True):
        for i in range(count):
            names.setdefault(str(name.partition(i)), name.partition(i))
    return names, partitioned


async def _delete_topics(service: BrokerService, tenant: str, ns: str) -> None:
    """Every topic of the namespace (partitions of partitioned ones included), each deleted on
    the broker that serves it, DELETES_AT_ONCE at a time; then the partitioned-topic records."""
    names, partitioned = await namespace_topics(service.astore, tenant, ns)
    gate = asyncio.Semaphore(DELETES_AT_ONCE)

    async def delete_one(name: TopicName) -> None:
        async with gate:
            await delete_partition(service, name, force=True)

    await asyncio.gather(*(delete_one(n) for n in names.values()))
    for name in partitioned:
        await policies.delete_partitioned(service.astore, name)


async def delete_namespace(service: BrokerService, tenant: str, ns: str, *, force: bool) -> None:
    """The namespace and everything under it (see the module docstring); NotEmpty (409) if it
    has topics and not `force`, NamespaceNotFound (404) if it does not exist."""
    astore = service.astore
    await policies.existing_namespace_policies(astore, tenant, ns)
    has_topics = bool(await policies.topics_of_namespace(astore, tenant, ns)
                      or await policies.partitioned_topics(astore, tenant, ns))
    # (live non-persistent topics are asked of every broker only when it matters: without force)
    if not force and (has_topics or await non_persistent_admin.namespace_in_use(service, tenant, ns)):
        raise NotEmpty("Cannot delete non empty namespace")
    await policies.set_namespace_policy(astore, tenant, ns, tenancy.DELETED_KEY, True)
    service.namespaces.forget(tenant, ns)
    if has_topics:
        await _delete_topics(service, tenant, ns)
    await non_persistent_admin.close_namespace(service, tenant, ns)
    failures = await unload_everywhere(service, tenant, ns)
    if failures:
        raise ServiceNotReady("unloading the namespace's bundles failed: " + "; ".join(failures))
    try:
        await astore.delete(policies.namespace_path(tenant, ns))
    except NotFound:
        pass
    service.namespaces.forget(tenant, ns)
    for root in (policies.TOPIC_POLICIES_ROOT, PARTITIONED_ROOT, policies.NON_PERSISTENT_PARTITIONED_ROOT,
                 bundles_mod.LOCAL_POLICIES_ROOT, NAMESPACE_ROOT, TOPICS_ROOT):
        await astore.delete_recursive(f"{root}/{tenant}/{ns}")


class _NamespaceRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    @property
    def ownership(self) -> Ownership:
        return ownership_of(self.service)

    async def _bundles(self, tenant: str, namespace: str) -> NamespaceBundles:
        return await namespace_bundles(self.service, tenant, namespace)

    async def list_namespaces(self, request: web.Request) -> web.Response:
        tenant = tenancy.check_tenant_name(request.match_info["tenant"])
        await tenancy.get_tenant(self.service.astore, tenant)       # TenantNotFound (404)
        return web.json_response(await tenancy.list_namespaces(self.service.astore, tenant))

    async def create_namespace(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        config = self.service.config
        fields, count, boundaries = policies_from_body(await body_json(request), config.cluster_name, config)
        await tenancy.create_namespace(self.service.astore, tenant, ns, fields,
                                       count or config.broker_default_namespace_bundles, boundaries)
        return web.Response(status=204)

    async def get_policies(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        stored = await policies.existing_namespace_policies(self.service.astore, tenant, ns)
        answer = policies_json(stored, await self._bundles(tenant, ns), self.service.config.cluster_name)
        answer[tenancy.DELETED_KEY] = bool(stored.get(tenancy.DELETED_KEY, False))
        return web.json_response(answer)

    async def delete_namespace(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await delete_namespace(self.service, tenant, ns, force=flag(request, "force"))
        return web.Response(status=204)

    async def get_bundles(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        return web.json_response((await self._bundles(tenant, ns)).to_json())

    async def list_topics(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        mode = request.query.get("mode", "PERSISTENT").upper()
        if mode not in TOPIC_MODES:
            raise BadRequestBody(f"mode must be one of {', '.join(TOPIC_MODES)}", mode=request.query["mode"][:40])
        names, _ = await namespace_topics(self.service.astore, tenant, ns)
        live = self.service.non_persistent_topics(tenant, ns)   # this broker's (broker.nonpersistent.topic)
        return web.json_response({"PERSISTENT": sorted(names), "NON_PERSISTENT": live,
                                  "ALL": sorted([*names, *live])}[mode])

    async def unload_namespace(self, request: web.Request) -> web.Response:
        """Each owned bundle unloaded by its owner (at once); unowned ones skipped."""
        tenant, ns = namespace_of(request)
        if not self.service.identity.web_url:
            raise ServiceNotReady("the broker is starting: not registered in the cluster yet")
        failures = await unload_everywhere(self.service, tenant, ns)
        if failures:
            return error(500, "unloading failed: " + "; ".join(failures))
        return web.Response(status=204)

    async def _known_bundle(self, request: web.Request) -> tuple[str, str, BundleRange]:
        """(tenant, ns, bundle) of a bundle route; InvalidBundle (412) unless the namespace has it."""
        tenant, ns = namespace_of(request)
        bundle = parse_bundle(request.match_info["bundle"])
        (await self._bundles(tenant, ns)).get(bundle)
        return tenant, ns, bundle

    async def unload_bundle(self, request: web.Request) -> web.Response:
        tenant, ns, bundle = await self._known_bundle(request)
        destination = request.query.get("destinationBroker") or None
        if destination is not None and await self.service.astore.get(f"{BROKERS_ROOT}/{destination}") is None:
            return error(412, f"Destination broker {destination} is not active (brokers are host:webPort, "
                               "as `brokers list` shows them)")
        owner = await self.ownership.owner_of(ownership_path(tenant, ns, bundle))
        if owner is None:
            return web.Response(status=204)     # nobody serves it: nothing to unload
        if not owner.mine:
            return redirect_to(owner.http_url, request)
        await self.ownership.unload(tenant, ns, bundle, destination=destination)
        return web.Response(status=204)

    async def split_bundle(self, request: web.Request) -> web.Response:
        tenant, ns, bundle = await self._known_bundle(request)
        algorithm = request.query.get("splitAlgorithmName") or SPLIT_ALGORITHMS[0]
        if algorithm not in SPLIT_ALGORITHMS:
            return error(412, f"Unsupported namespace bundle split algorithm {algorithm!r}, "
                               f"supported algorithms are {list(SPLIT_ALGORITHMS)}")
        try:
            await self.ownership.split(tenant, ns, bundle, unload=flag(request, "unload"))
        except OwnedElsewhere as exc:
            return redirect_to(str(exc.details["http_url"]), request)
        except BundleNotOwned:
            return error(412, f"Bundle {tenant}/{ns}/{bundle.key} is not owned by any broker: "
                               "it is split by its owner (look a topic of it up first)")
        return web.Response(status=204)

    async def set_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await self._set_dedup(tenant, ns, await body_bool(request, "deduplication"))
        return web.Response(status=204)

    async def remove_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await self._set_dedup(tenant, ns, None)
        return web.Response(status=204)

    async def _set_dedup(self, tenant: str, ns: str, enabled: bool | None) -> None:
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.DEDUP_KEY, enabled)
        await self.service.apply_dedup_policy(lambda n: (n.tenant, n.namespace) == (tenant, ns))
        if not enabled:
            await self.service.drop_unloaded_dedup_snapshots(tenant, ns, lambda n: True)

    async def _own_policy(self, request: web.Request, key: str) -> web.Response:
        """The namespace's own value of one policy field (null when unset), as Pulsar answers it."""
        found = await policies.existing_namespace_policies(self.service.astore, *namespace_of(request))
        return web.json_response(found.get(key))

    async def get_dedup(self, request: web.Request) -> web.Response:
        return await self._own_policy(request, policies.DEDUP_KEY)

    async def set_retention(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        retention = await body_retention(request)
        await bq.refuse_retention_under_quotas(self.service.astore, tenant, ns, None, retention)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.RETENTION_KEY, retention)
        return web.Response(status=204)

    async def get_retention(self, request: web.Request) -> web.Response:
        return await self._own_policy(request, policies.RETENTION_KEY)

    async def remove_retention(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.RETENTION_KEY, None)
        return web.Response(status=204)

    async def set_ttl(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        seconds = ttl_seconds(await body_json(request))
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.TTL_KEY, seconds)
        return web.Response(status=204)

    async def get_ttl(self, request: web.Request) -> web.Response:
        return await self._own_policy(request, policies.TTL_KEY)

    async def remove_ttl(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.TTL_KEY, None)
        return web.Response(status=204)
