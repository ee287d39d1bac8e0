"""The admin routes made for the web console: who the caller is, and the cluster on one page.

- `GET /admin/v2/console/whoami` (AUTHENTICATED: 401 without valid credentials when authentication
  is on, which is how the console knows to ask for them) → `{"role": str|null, "superuser": bool,
  "authenticationEnabled": bool, "authorizationEnabled": bool, "method":
  "token"|"basic"|"tls"|"anonymous"|"none", "tenants": [...], "cluster": name, "broker": id}`.
  `role` is null for the anonymous role "" ; `method` is "none" with authentication off and
  "anonymous" for a caller without credentials given `anonymous_user_role`; `superuser` is true
  for a `super_user_roles` role, and for everyone with authorization off (nothing is refused);
  `tenants` are the tenants the role administers (every tenant for a superuser or with
  authorization off), sorted; `broker` is this broker's id (host:webPort).
- `GET /admin/v2/console/cluster` (SUPERUSER) → `{"cluster", "brokers": [{"id", "serviceUrl",
  "adminUrl", "kafka": "NAME://host:port"|null, "reachable": bool, "load": {...}}], "bookies":
  [as `GET /admin/v2/bookies/all`], "bundles": {"total": n, "items": [{"namespace", "bundle",
  "owner"}] (the first BUNDLE_ITEMS_MAX, sorted)}, "tier": {"configured", "driver", "bucket",
  "endpoint", "region", "reachable": bool|null, "error": str|null}, "totals": {"msgRateIn",
  "msgRateOut", "msgThroughputIn", "msgThroughputOut"}}`.

Brokers: every live registration (`/loadbalance/brokers`); this broker's load is its registered
report, another's is fetched from it (`GET /admin/v2/broker-stats/load-report` by `peer_call`,
all at once, each bounded by PEER_TIMEOUT_S); one that does not answer is `reachable: false` and
shows the load of its last registered report. `load` holds LOAD_FIELDS of the report (those
present). `totals` sum the brokers' rates. Bundles: the owned ones (`/namespace/<t>/<ns>/<range>`
ownership keys), `owner` the owning broker's id (its service URL when it is not registered).

The cold tier: `configured` when `offload_driver` is set; `reachable` null when not configured,
false with `error` when the broker has no usable tier (its start-up check failed) or the check
failed, true when a listing of an empty prefix of the bucket (`<prefix>/_console_probe/`, as
cheap as a HEAD of the bucket, through the offload code's own S3 client) answered within
TIER_CHECK_TIMEOUT_S. The result is kept TIER_CACHE_S, so a console polling the page does not
send S3 a request per poll; one check runs at a time.

What must hold: the cluster page never waits longer than about PEER_TIMEOUT_S on other brokers
and bookies, and TIER_CHECK_TIMEOUT_S on S3; nothing here changes anything.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aiohttp import web

from auth.api import NO_METHOD, Identity
from broker.admin import access, bookies
from broker.admin.brokers import BROKERS_ROOT
from broker.cluster import peers
from broker.cluster.ownership import NAMESPACE_ROOT
from broker.cluster.registry import BrokerInfo
from broker.records import tenancy
from common.errors import StrataError

if TYPE_CHECKING:
    from broker.service import BrokerService

PEER_TIMEOUT_S = 2.0
TIER_CHECK_TIMEOUT_S = 2.0
TIER_CACHE_S = 10.0
BUNDLE_ITEMS_MAX = 1_000
LOAD_FIELDS = ("cpu", "memory", "msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "numBundles",
               "numTopics", "numProducers", "numConsumers", "connections", "lastUpdate")
RATE_FIELDS = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")


def register(app: web.Application, service: BrokerService) -> None:
    if not service.config.console_enabled:
        return
    r = _ConsoleRoutes(service)
    app.router.add_get("/admin/v2/console/whoami", r.whoami)
    app.router.add_get("/admin/v2/console/cluster", r.cluster)


class _Lister(Protocol):
    """What the tier check needs of the offload code's S3 client (`offload.s3.S3Bucket`)."""

    async def list_keys(self, prefix: str) -> list[str]: ...


@dataclass(frozen=True)
class TierCheck:
    reachable: bool | None      # None: no check possible (no tier configured)
    error: str | None
    checked_at_s: float         # monotonic time of the check


class _ConsoleRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self._tier: TierCheck | None = None      # the last check of the cold tier (None: never checked)
        self._tier_lock = asyncio.Lock()         # one check at a time

    # --- whoami ---------------------------------------------------------------------------------

    async def whoami(self, request: web.Request) -> web.Response:
        s = self.service
        identity: Identity | None = request.get(access.IDENTITY)
        role = (identity.role or None) if identity is not None else None
        authz = s.authorization
        superuser = not authz.enabled or authz.is_superuser(role)
        tenants = await tenancy.list_tenants(s.astore)
        if not superuser:
            admin_of = await asyncio.gather(*(authz.is_tenant_admin(role, t) for t in tenants))
            tenants = [t for t, ok in zip(tenants, admin_of) if ok]
        return web.json_response({
            "role": role, "superuser": superuser, "authenticationEnabled": s.config.authentication_enabled,
            "authorizationEnabled": authz.enabled, "method": auth_method(s.config.authentication_enabled, identity),
            "tenants": tenants, "cluster": s.config.cluster_name, "broker": s.registry.key})

    # --- cluster --------------------------------------------------------------------------------

    async def cluster(self, request: web.Request) -> web.Response:
        s = self.service
        brokers, bookie_list, bundles, tier = await asyncio.gather(
            self._brokers(), bookies.describe_bookies(s), self._bundles(), self._tier_json())
        totals = {f: sum(_number(b["load"].get(f)) for b in brokers) for f in RATE_FIELDS}
        return web.json_response({"cluster": s.config.cluster_name, "brokers": brokers, "bookies": bookie_list,
                                  "bundles": bundles, "tier": tier, "totals": totals})

    async def _brokers(self) -> list[dict]:
        live = sorted(self.service.registry.live().values(), key=lambda b: b.key)
        loads = await asyncio.gather(*(self._load_of(b) for b in live))
        return [broker_json(b, load) for b, load in zip(live, loads)]

    async def _load_of(self, broker: BrokerInfo) -> dict | None:
        """The broker's current load report; None when it did not answer (another broker)."""
        if broker.key == self.service.registry.key:
            found = await self.service.astore.get(f"{BROKERS_ROOT}/{broker.key}")
            return json.loads(found.value.decode()) if found is not None else dict(broker.report)
        try:
            status, body = await asyncio.wait_for(
                peers.peer_call(broker.web_url, "GET", "/admin/v2/broker-stats/load-report",
                                config=self.service.config), PEER_TIMEOUT_S)
        except TimeoutError:
            return None
        return body if status == 200 and isinstance(body, dict) else None

    async def _bundles(self) -> dict:
        """The owned bundles: their count and the first BUNDLE_ITEMS_MAX."""
        owner_ids = {b.service_url: b.key for b in self.service.registry.live().values()}
        depth = NAMESPACE_ROOT.count("/") + 3
        items = []
        for path, found in await self.service.astore.list_prefix(NAMESPACE_ROOT):
            if path.count("/") != depth:
                continue
            _, tenant, namespace, bundle = path.rsplit("/", 3)
            native = _owner_url(found.value)
            items.append({"namespace": f"{tenant}/{namespace}", "bundle": bundle,
                          "owner": owner_ids.get(native, native) if native else None})
        items.sort(key=lambda i: (str(i["namespace"]), str(i["bundle"])))
        return {"total": len(items), "items": items[:BUNDLE_ITEMS_MAX]}

    # --- the cold tier --------------------------------------------------------------------------

    async def _tier_json(self) -> dict:
        c = self.service.config
        check = await self._tier_check()
        return {"configured": bool(c.offload_driver), "driver": c.offload_driver or None,
                "bucket": c.offload_s3_bucket if c.offload_driver else None,
                "endpoint": (c.offload_s3_endpoint or None) if c.offload_driver else None,
                "region": c.offload_s3_region if c.offload_driver else None,
                "reachable": check.reachable, "error": check.error}

    async def _tier_check(self) -> TierCheck:
        """The cold tier's reachability, checked at most every TIER_CACHE_S."""
        async with self._tier_lock:
            clock = self.service.clock
            if self._tier is None or clock.monotonic_s() - self._tier.checked_at_s >= TIER_CACHE_S:
                reachable, error = await self._check_tier_now()
                self._tier = TierCheck(reachable, error, clock.monotonic_s())
            return self._tier

    async def _check_tier_now(self) -> tuple[bool | None, str | None]:
        s = self.service
        if not s.config.offload_driver:
            return None, None
        bucket = getattr(s.cold, "bucket", None)
        if s.cold is None or bucket is None or not hasattr(bucket, "list_keys"):
            return False, s.cold_error or "no usable cold tier on this broker"
        lister: _Lister = bucket
        probe = "/".join(p for p in (s.config.offload_s3_prefix.strip("/"), "_console_probe/") if p)
        try:
            await asyncio.wait_for(lister.list_keys(probe), TIER_CHECK_TIMEOUT_S)
        except TimeoutError:
            return False, f"S3 did not answer within {TIER_CHECK_TIMEOUT_S:g} s"
        except StrataError as exc:
            return False, str(exc)
        return True, None


def auth_method(authentication_enabled: bool, identity: Identity | None) -> str:
    """How the caller proved its role: "none" (authentication off), "anonymous" (no credentials,
    the anonymous role), else the provider's name (token, basic, tls)."""
    if not authentication_enabled:
        return "none"
    if identity is None or identity.method in (NO_METHOD, ""):
        return "anonymous"
    return identity.method


def broker_json(broker: BrokerInfo, fresh: dict | None) -> dict:
    """One broker of the cluster page: `fresh` its answered load report (None: it did not answer,
    the last registered report's load is shown)."""
    report = fresh if fresh is not None else broker.report
    kafka = report.get("kafkaListeners") or broker.report.get("kafkaListeners")
    listener = next(iter(sorted(kafka.items())), None) if isinstance(kafka, dict) else None
    return {"id": broker.key, "serviceUrl": broker.service_url, "adminUrl": broker.web_url,
            "kafka": f"{listener[0]}://{listener[1]}" if listener else None, "reachable": fresh is not None,
            "load": {f: report[f] for f in LOAD_FIELDS if f in report}}


def _owner_url(raw: bytes) -> str | None:
    """The owner's nativeUrl of an ownership record (None: unreadable)."""
    try:
        data = json.loads(raw.decode())
        return str(data["nativeUrl"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0
