"""Lookup over HTTP, topic unload, and the 307 that sends a topic's admin call to its owner.

Registered by `broker.admin.server` (`register(app, service)`; `owner_redirect` is in its
middleware list, inside the error middleware). The helpers that run one partition's call on the
broker that serves it (`partition_stats`, `partition_has_clients`; and below the admin API, shared
with the Kafka front end: `broker.cluster.peers.delete_partition`, `peer_call`) are used by the
other resource modules.

Lookup (`/lookup/v2/topic/{persistent|non-persistent}/{t}/{ns}/{topic}`), what a client given
the HTTP service URL calls (the C++ client's HTTPLookupService; then it connects to `brokerUrl`):
- `GET    ...` → LookupData `{"brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl"}`
  of the topic's owner, assigning the bundle if it has none. When the assignment names another
  broker, the answer is a 307 to the same path there with `authoritative=true` (that broker
  takes the bundle and answers), as Pulsar's TopicLookup does; clients follow it (curl does).
  `?listenerName=` (or header `X-Pulsar-ListenerName`; the query wins) picks the owner's
  advertised listener for `brokerUrl`/`brokerUrlTls` (`broker.cluster.listeners`); one the owner does not
  have is a 404 "the broker do not have <name> listener ...". Unknown namespace: 404.
- `GET    .../bundle` → the topic's bundle, `"0x00000000_0x40000000"` (a JSON string).
The same client reads partition counts from `GET /admin/v2/{domain}/.../partitions?checkAllowAutoCreation=true`
(`broker.admin.topics`) and a pattern's topics from `GET /admin/v2/namespaces/{t}/{ns}/topics?mode=`.

Topics: `PUT /admin/v2/persistent/{t}/{ns}/{topic}/unload` → 204: the topic is closed on its
owner and its clients look it up again (a partitioned topic: every partition, on its owner; an
unowned topic: nothing to do).

Owner redirect (`owner_redirect`): a call on one topic (`/admin/v2/persistent/{t}/{ns}/{topic}...`)
is served by the topic's owner. Owned here → served. Owned elsewhere, or assigned elsewhere now
→ 307 with `Location` = the owner's httpUrl + the same path and query, `authoritative=true`
(the client re-sends method and body). No broker can own it → 412 `{"reason": "Can't find owner
for topic <t>"}`. Not redirected: partitioned topics, `.../partitions` and
`.../partitioned-stats` (they only touch metadata, or fan out over the partitions, each on its
owner: `partition_stats`, `partition_has_clients`, `peers.delete_partition`), namespace and lookup
routes, and an unload of an unowned topic (nothing is assigned just to unload it).

What must hold: a call is never served by a broker that does not own the topic; a 307 names a
live owner; errors are `{"reason": ...}`. A topic that moves between the check and the handler is
followed with a 307 too (the handler's OwnedElsewhere), or answered 503 while it is in flight.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler

from broker.admin.http import Refused, error, flag, topic_of
from broker.cluster import listeners
from broker.cluster.ownership import LookupKind, broker_urls, ownership_path
from broker.cluster.peers import owner_elsewhere, peer_call
from broker.records import bundles as bundles_mod
from broker.records.bundles import NamespaceBundles
from broker.stats.topic_stats import topic_stats
from common.errors import (
    BundleNotOwned,
    OwnedElsewhere,
    ServiceNotReady,
    ShuttingDown,
    UnknownListener,
)
from common.topic_names import TopicName, parse_topic

if TYPE_CHECKING:
    from broker.cluster.ownership import Ownership
    from broker.service import BrokerService

log = logging.getLogger(__name__)

TOPIC_ROUTE = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
LOOKUP_DOMAINS = ("persistent", "non-persistent")
# topic-level routes that fan out over partitions, or only touch the namespace's policies (permissions, as
# Pulsar's, need no owner): served by any broker, never redirected whole
FANOUT_SUFFIXES = frozenset({"/partitions", "/partitioned-stats", "/permissions", "/permissions/{role}"})
# served by the owner when there is one, but nothing is assigned just for them
NO_ASSIGN_SUFFIXES = frozenset({"/unload"})
UNLOAD_TOPIC_TIMEOUT_S = 30.0     # closing one topic for `topics unload`

_SERVICE: web.AppKey[BrokerService] = web.AppKey("cluster_service")


def register(app: web.Application, service: BrokerService) -> None:
    """Add the lookup and topic-unload routes (and the service the redirect reads)."""
    app[_SERVICE] = service
    r = _LookupRoutes(service)
    for domain in LOOKUP_DOMAINS:
        lookup = f"/lookup/v2/topic/{domain}/{{tenant}}/{{ns}}/{{topic}}"
        app.router.add_get(lookup, r.lookup)
        app.router.add_get(lookup + "/bundle", r.bundle_of_topic)
    app.router.add_put(TOPIC_ROUTE + "/unload", r.unload_topic)


def redirect_to(http_url: str, request: web.Request) -> web.Response:
    """307 to the same path and query on `http_url` (the broker's https:// URL instead when the
    request came over TLS and it serves one: credentials never go on in clear), `authoritative=true`."""
    service = request.app.get(_SERVICE)
    if request.secure and service is not None:
        http_url = tls_web_url(service, http_url) or http_url
    location = http_url.rstrip("/") + str(request.rel_url.update_query(authoritative="true"))
    return web.Response(status=307, headers={"Location": location})


def tls_web_url(service: BrokerService, http_url: str) -> str:
    """The admin https:// URL of the broker whose admin URL is `http_url`, from its registry entry
    ('' : it serves none, or it is not registered)."""
    if http_url == service.identity.web_url:
        return service.identity.web_url_tls
    found = next((b for b in service.registry.live().values() if b.web_url == http_url), None)
    return found.web_url_tls if found is not None else ""


def lookup_data(native_url: str, http_url: str, native_url_tls: str = "", http_url_tls: str = "") -> dict:
    """Pulsar's LookupData."""
    return {"brokerUrl": native_url, "brokerUrlTls": native_url_tls, "httpUrl": http_url, "httpUrlTls": http_url_tls,
            "nativeUrl": native_url}


def lookup_topic_of(request: web.Request) -> TopicName:
    """The topic of a lookup route, in the route's domain (InvalidTopicName, 400)."""
    m = request.match_info
    domain = request.path.removeprefix("/lookup/v2/topic/").split("/", 1)[0]
    return parse_topic(f"{domain}://{m['tenant']}/{m['ns']}/{m['topic']}")


def listener_name_of(request: web.Request) -> str:
    """The advertised listener a lookup asks for ('' : none): `?listenerName=`, else the header."""
    return request.query.get(listeners.LISTENER_NAME_QUERY) or request.headers.get(listeners.LISTENER_NAME_HEADER) or ""






async def forward_put(http_url: str, path: str) -> str | None:
    """PUT `path` on another broker (`peer_call`): None when it answered 2xx, else what went wrong."""
    status, body = await peer_call(http_url, "PUT", path)
    return None if 200 <= status < 300 else str(body)


# --- one partition, on its owner (the partitioned routes of broker.admin.topics fan out with these) ---

async def is_partition_of_existing(service: BrokerService, name: TopicName) -> bool:
    """`name` is partition i of a partitioned topic with more than i partitions (Pulsar serves
    such a partition even before anything used it)."""
    index = name.partition_index
    return index >= 0 and index < await service.partitions(name.base)


async def partition_stats(service: BrokerService, name: TopicName) -> dict:
    """One partition's stats from the broker that serves it (loaded there if it was not)."""
    url = await owner_elsewhere(service, name, assign=True)
    if url is None:
        return topic_stats(await service.get_topic(name))
    status, body = await peer_call(url, "GET", f"/admin/v2/persistent/{name.path}/stats")
    if status != 200 or not isinstance(body, dict):
        raise ServiceNotReady(f"stats of {name} from its owner: {body}")
    return body


async def partition_has_clients(service: BrokerService, name: TopicName) -> bool:
    """Producers or consumers attached to the partition, wherever it is served."""
    url = await owner_elsewhere(service, name, assign=False)
    if url is None:
        loaded = service.topics.get(str(name))
        return loaded is not None and loaded.has_clients()
    status, body = await peer_call(url, "GET", f"/admin/v2/persistent/{name.path}/stats")
    if status == 404:
        return False
    if status != 200 or not isinstance(body, dict):
        raise ServiceNotReady(f"stats of {name} from its owner: {body}")
    subscriptions = body.get("subscriptions") or {}
    return bool(body.get("publishers")) or any(s.get("consumers") for s in subscriptions.values())


def ownership_of(service: BrokerService) -> Ownership:
    """The broker's ownership once it is registered; ServiceNotReady (503) while it starts."""
    if not service.identity.web_url:
        raise ServiceNotReady("the broker is starting: not registered in the cluster yet")
    return service.ownership


async def namespace_bundles(service: BrokerService, tenant: str, namespace: str) -> NamespaceBundles:
    """The namespace's bundles as stored (NamespaceNotFound, 404, for a namespace never created)."""
    return await bundles_mod.load_bundles(service.astore, tenant, namespace,
                                          service.config.broker_default_namespace_bundles)


class _LookupRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    @property
    def ownership(self) -> Ownership:
        return ownership_of(self.service)

    async def _bundles(self, tenant: str, namespace: str) -> NamespaceBundles:
        return await namespace_bundles(self.service, tenant, namespace)

    # --- lookup ------------------------------------------------------------------------------------

    async def lookup(self, request: web.Request) -> web.Response:
        name = lookup_topic_of(request)
        listener_name = listener_name_of(request)
        if self.service.closing:
            raise ShuttingDown("broker is shutting down")
        answer = await self.ownership.resolve(name, authoritative=flag(request, "authoritative"))
        try:
            url, url_tls = broker_urls(answer, listener_name)
        except UnknownListener as exc:
            raise Refused(404, str(exc)) from None
        if answer.kind is LookupKind.REDIRECT:
            return redirect_to(answer.http_url, request)
        return web.json_response(lookup_data(url, answer.http_url, url_tls, tls_web_url(self.service, answer.http_url)))

    async def bundle_of_topic(self, request: web.Request) -> web.Response:
        name = lookup_topic_of(request)
        return web.json_response((await self._bundles(name.tenant, name.namespace)).find(str(name)).key)

    # --- topics ------------------------------------------------------------------------------------

    async def unload_topic(self, request: web.Request) -> web.Response:
        """A (partition) topic: closed here (the redirect sent the call to its owner). A partitioned
        topic: each partition on its owner."""
        name = topic_of(request)
        count = await self.service.partitions(name) if name.partition_index < 0 else 0
        if count == 0:
            await self._unload_topic_here(name)
            return web.Response(status=204)
        failures = [f for f in await asyncio.gather(*(self._unload_partition(name.partition(i))
                                                      for i in range(count))) if f is not None]
        if failures:
            return error(500, "unloading failed: " + "; ".join(failures))
        return web.Response(status=204)

    async def _unload_partition(self, name: TopicName) -> str | None:
        bundle = await self.ownership.bundle_of(name)
        owner = await self.ownership.owner_of(ownership_path(name.tenant, name.namespace, bundle))
        if owner is None:
            return None
        if owner.mine:
            await self._unload_topic_here(name)
            return None
        return await forward_put(owner.http_url, f"/admin/v2/persistent/{name.path}/unload")

    async def _unload_topic_here(self, name: TopicName) -> None:
        """Close the loaded topic (its clients look it up again and come back); not loaded: nothing."""
        topic = self.service.topics.get(str(name))
        if topic is None:
            return
        try:
            await asyncio.wait_for(self.service.release(topic), UNLOAD_TOPIC_TIMEOUT_S)
        except TimeoutError:
            raise ServiceNotReady(f"closing {name} took over {UNLOAD_TOPIC_TIMEOUT_S:.0f} s") from None








# --- the owner redirect --------------------------------------------------------------------------

def _topic_route_suffix(request: web.Request) -> str | None:
    """The part after `.../{topic}` of a topic route's pattern; None for any other route."""
    resource = request.match_info.route.resource
    canonical = resource.canonical if resource is not None else ""
    if not canonical.startswith(TOPIC_ROUTE):
        return None
    return canonical[len(TOPIC_ROUTE):]


@web.middleware
async def owner_redirect(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serve a topic's admin call on its owner (see the module docstring)."""
    service = request.app.get(_SERVICE)
    suffix = _topic_route_suffix(request)
    if service is None or suffix is None:
        return await handler(request)
    name = topic_of(request)
    # a partitioned topic's routes fan out over the partitions or only touch metadata
    fans_out = suffix in FANOUT_SUFFIXES or (name.partition_index < 0 and await service.partitions(name) > 0)
    if not fans_out:
        # NotAllowed (412: no owner) and ServiceNotReady (503) are answered by the error middleware
        url = await owner_elsewhere(service, name, assign=suffix not in NO_ASSIGN_SUFFIXES,
                                    authoritative=flag(request, "authoritative"))
        if url is not None:
            return redirect_to(url, request)
    try:
        return await handler(request)
    except OwnedElsewhere as exc:   # the topic moved since the check: send the call after it
        owner_url = exc.details.get("http_url")
        if exc.details.get("topic") == str(name) and isinstance(owner_url, str) and owner_url:
            return redirect_to(owner_url, request)
        raise ServiceNotReady(str(exc)) from None
    except BundleNotOwned as exc:   # being unloaded, or the lease lapsed: retry shortly
        raise ServiceNotReady(str(exc)) from None
