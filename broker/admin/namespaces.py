"""Namespace routes of the admin API (Pulsar's paths, JSON and status codes).

Under `/admin/v2/namespaces/{t}/{ns}`:
- `PUT    ...` body: none, or Pulsar's Policies `{"bundles": {"numBundles": N}}` or
  `{"bundles": {"boundaries": ["0x00000000", ..., "0xffffffff"]}}` (other Policies fields are
  ignored) → 204: the namespace's bundles are stored (`broker_default_namespace_bundles` when none
  is asked). 409 if the namespace already has bundles (it was created, or a topic of it was looked
  up or used); 412 a count outside 1..128 (0 included) or boundaries that do not run
  0x00000000..0xffffffff increasing; 400 a body of the wrong shape.
- `GET    .../bundles` → BundlesData `{"boundaries": [...], "numBundles": N}`; 404 for a namespace
  that has none yet: neither created nor used (public/default always has them, as in Pulsar).
- `PUT    .../unload` → 204: every owned bundle is unloaded by its owner (this broker's here, the
  others' by a PUT of `.../{bundle}/unload` to their owner); unowned bundles are skipped.
- `PUT    .../{bundle}/unload[?destinationBroker=host:webPort]` → 204; 412 a bundle the namespace
  does not have (malformed, or not one of its ranges); 307 to the owner when another broker owns
  it; 204 and nothing done when nobody owns it; 412 a destination that is not a live broker.
- `PUT    .../{bundle}/split[?unload=false&splitAlgorithmName=range_equally_divide]` → 204; 307
  to the owner; 412 when nobody owns the bundle, for an unknown bundle, or another algorithm.
- `POST|GET .../deduplication` body true/false; `POST|GET .../retention` body
  `{"retentionTimeInMinutes": m, "retentionSizeInMB": s}` (412 if invalid: below -1, or 0 paired
  with a positive value; GET: the config's default when unset); `POST|GET .../messageTTL` body
  seconds (int >= 0, 0 = off; 412 if negative). The retention task (`broker.retention_task`)
  applies retention and TTL on its next pass.
Offload policies: `broker.admin.offload`. Errors: `broker.admin.http`.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from aiohttp import web

from broker import bundles as bundles_mod
from broker import policies
from broker.admin.brokers import BROKERS_ROOT
from broker.admin.http import body_bool, body_json, error, flag, namespace_of
from broker.admin.lookup import forward_put, redirect_to
from broker.admin.policy_bodies import body_retention, ttl_seconds
from broker.bundles import BundleRange, NamespaceBundles, parse_bundle
from broker.ownership import ownership_path
from common.errors import (
    AlreadyExists,
    BadRequestBody,
    BundleNotOwned,
    InvalidArgument,
    InvalidBundle,
    NotFound,
    OwnedElsewhere,
    ServiceNotReady,
)

if TYPE_CHECKING:
    from broker.ownership import Ownership
    from broker.service import BrokerService

SPLIT_ALGORITHMS = ("range_equally_divide",)
DEFAULT_NAMESPACE = ("public", "default")   # exists from the start, as in Pulsar's standalone


def register(app: web.Application, service: BrokerService) -> None:
    r = _NamespaceRoutes(service)
    ns = "/admin/v2/namespaces/{tenant}/{ns}"
    app.router.add_put(ns, r.create_namespace)
    app.router.add_get(ns + "/bundles", r.get_bundles)
    app.router.add_put(ns + "/unload", r.unload_namespace)
    app.router.add_put(ns + "/{bundle}/unload", r.unload_bundle)
    app.router.add_put(ns + "/{bundle}/split", r.split_bundle)
    app.router.add_post(ns + "/deduplication", r.set_dedup)
    app.router.add_get(ns + "/deduplication", r.get_dedup)
    app.router.add_post(ns + "/retention", r.set_retention)
    app.router.add_get(ns + "/retention", r.get_retention)
    app.router.add_post(ns + "/messageTTL", r.set_ttl)
    app.router.add_get(ns + "/messageTTL", r.get_ttl)


async def _body_bundles(request: web.Request, body_bytes_max: int) -> tuple[int | None, list[int] | None]:
    """(count, boundaries) asked by a namespace-create body; (None, None): the default."""
    raw = await request.content.read(body_bytes_max + 1)
    if len(raw) > body_bytes_max:
        raise InvalidArgument("request body too large")
    try:
        policies = json.loads(raw.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadRequestBody("request body is not JSON") from None
    if policies is None:
        return None, None
    if not isinstance(policies, dict):
        raise BadRequestBody("a namespace's policies are a JSON object")
    found = policies.get("bundles")
    if found is None:
        return None, None
    if not isinstance(found, dict):
        raise BadRequestBody('bundles must be {"numBundles": N} or {"boundaries": [...]}')
    count, boundaries = found.get("numBundles"), found.get("boundaries")
    if boundaries is None:
        return (None, None) if count is None else (bundles_mod.check_count(count), None)
    if not isinstance(boundaries, list) or not all(isinstance(b, str) for b in boundaries):
        raise BadRequestBody("bundles.boundaries must be a list of hex strings")
    try:
        values = [int(b, 16) for b in boundaries]
    except ValueError:
        raise InvalidBundle("bundle boundaries are hex numbers, 0x00000000..0xffffffff") from None
    if count is not None and count != len(values) - 1:
        raise InvalidBundle("numBundles must be one less than the number of boundaries", numBundles=count)
    NamespaceBundles("-", "-", tuple(values))      # InvalidBundle unless well formed
    return len(values) - 1, values


class _NamespaceRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    @property
    def ownership(self) -> Ownership:
        if not self.service.web_url:
            raise ServiceNotReady("the broker is starting: not registered in the cluster yet")
        return self.service.ownership

    async def _bundles(self, tenant: str, namespace: str) -> NamespaceBundles:
        """The namespace's bundles as stored now (created with the default count on first use)."""
        return await bundles_mod.load_bundles(self.service.astore, tenant, namespace,
                                              self.service.config.broker_default_namespace_bundles)

    async def create_namespace(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        count, boundaries = await _body_bundles(request, self.service.config.broker_admin_body_bytes_max)
        try:
            await bundles_mod.create_bundles(self.service.astore, tenant, ns,
                                             count or self.service.config.broker_default_namespace_bundles,
                                             boundaries)
        except AlreadyExists:
            raise AlreadyExists("Namespace already exists", namespace=f"{tenant}/{ns}") from None
        return web.Response(status=204)

    async def get_bundles(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        if (tenant, ns) == DEFAULT_NAMESPACE:
            return web.json_response((await self._bundles(tenant, ns)).to_json())
        found = await self.service.astore.get(bundles_mod.bundles_path(tenant, ns))
        if found is None:
            raise NotFound("Namespace does not exist", namespace=f"{tenant}/{ns}")
        return web.json_response((await self._bundles(tenant, ns)).to_json())

    async def unload_namespace(self, request: web.Request) -> web.Response:
        """Each owned bundle unloaded by its owner (at once); unowned ones skipped."""
        tenant, ns = namespace_of(request)
        ranges = (await self._bundles(tenant, ns)).ranges
        failures = [f for f in await asyncio.gather(*(self._unload_anywhere(tenant, ns, b) for b in ranges))
                    if f is not None]
        if failures:
            return error(500, "unloading failed: " + "; ".join(failures))
        return web.Response(status=204)

    async def _unload_anywhere(self, tenant: str, ns: str, bundle: BundleRange) -> str | None:
        owner = await self.ownership.owner_of(ownership_path(tenant, ns, bundle))
        if owner is None:
            return None
        if owner.mine:
            await self.ownership.unload(tenant, ns, bundle)
            return None
        return await forward_put(owner.http_url, f"/admin/v2/namespaces/{tenant}/{ns}/{bundle.key}/unload")

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
        enabled = await body_bool(request, "deduplication")
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.DEDUP_KEY, enabled)
        await self.service.apply_dedup_policy(lambda n: (n.tenant, n.namespace) == (tenant, ns))
        if not enabled:
            await self.service.drop_unloaded_dedup_snapshots(tenant, ns, lambda n: True)
        return web.Response(status=204)

    async def get_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        return web.json_response(bool(found.get(policies.DEDUP_KEY, False)))

    async def set_retention(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.RETENTION_KEY,
                                            await body_retention(request))
        return web.Response(status=204)

    async def get_retention(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        policy = policies.retention_of(found, self.service.config)
        return web.json_response({"retentionTimeInMinutes": policy.time_minutes,
                                  "retentionSizeInMB": policy.size_mb})

    async def set_ttl(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        seconds = ttl_seconds(await body_json(request))
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.TTL_KEY, seconds)
        return web.Response(status=204)

    async def get_ttl(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        return web.json_response(policies.ttl_seconds_of(found, self.service.config))
