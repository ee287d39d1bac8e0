"""The cluster admin routes (Pulsar's paths, JSON and status codes) and the owner redirect.

Registered by `broker.admin_http` (`register(app, service)`; `owner_redirect` is in its
middleware list, inside the error middleware).

Namespaces (`/admin/v2/namespaces/{t}/{ns}`):
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

Lookup (`/lookup/v2/topic/persistent/{t}/{ns}/{topic}`):
- `GET    ...` → LookupData `{"brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl"}`
  of the topic's owner, assigning the bundle if it has none. When the assignment names another
  broker, the answer is a 307 to the same path there with `authoritative=true` (that broker
  takes the bundle and answers), as Pulsar's TopicLookup does.
- `GET    .../bundle` → the topic's bundle, `"0x00000000_0x40000000"` (a JSON string).

Topics: `PUT /admin/v2/persistent/{t}/{ns}/{topic}/unload` → 204: the topic is closed on its
owner and its clients look it up again (a partitioned topic: every partition, on its owner; an
unowned topic: nothing to do).

Brokers and clusters: `GET /admin/v2/brokers[/{cluster}]` → `["host:webPort", ...]` (the live
registrations; 404 for another cluster); `GET /admin/v2/brokers/health` (and `.../ready`) → `"ok"`
(503 while this broker starts or shuts down, or its metadata lease has lapsed); `GET /admin/v2/brokers/leaderBroker` →
`{"serviceUrl", "brokerId"}` (404 with no leader); `GET /admin/v2/clusters` → `[cluster_name]`;
`GET /admin/v2/broker-stats/load-report` → this broker's last load report (LocalBrokerData).

Owner redirect (`owner_redirect`): a call on one topic (`/admin/v2/persistent/{t}/{ns}/{topic}...`)
is served by the topic's owner. Owned here → served. Owned elsewhere, or assigned elsewhere now
→ 307 with `Location` = the owner's httpUrl + the same path and query, `authoritative=true`
(the client re-sends method and body). No broker can own it → 412 `{"reason": "Can't find owner
for topic <t>"}`. Not redirected: partitioned topics, `.../partitions` and
`.../partitioned-stats` (they only touch metadata, or fan out over the partitions, each on its
owner: `partition_stats`, `partition_has_clients`, `delete_partition`), namespace and lookup
routes, and an unload of an unowned topic (nothing is assigned just to unload it).

What must hold: a call is never served by a broker that does not own the topic; a 307 names a
live owner; errors are `{"reason": ...}`. A topic that moves between the check and the handler is
followed with a 307 too (the handler's OwnedElsewhere), or answered 503 while it is in flight.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ParamSpec

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler

from broker import bundles as bundles_mod
from broker.bundles import BundleRange, NamespaceBundles, parse_bundle
from broker.ownership import LookupKind, ownership_path
from broker.topic_stats import topic_stats
from common.errors import (
    AlreadyExists,
    BadRequestBody,
    BundleNotOwned,
    InvalidArgument,
    InvalidBundle,
    LeaseLost,
    NoOwner,
    NotAllowed,
    NotFound,
    OwnedElsewhere,
    ServiceNotReady,
    ShuttingDown,
)
from common.topic_names import TopicName, parse_namespace, parse_topic

if TYPE_CHECKING:
    from broker.ownership import Ownership
    from broker.service import BrokerService

log = logging.getLogger(__name__)

P = ParamSpec("P")

TOPIC_ROUTE = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
# topic-level routes that fan out over partitions (served by any broker, never redirected whole)
FANOUT_SUFFIXES = frozenset({"/partitions", "/partitioned-stats"})
# served by the owner when there is one, but nothing is assigned just for them
NO_ASSIGN_SUFFIXES = frozenset({"/unload"})
BROKERS_ROOT = "/loadbalance/brokers"
LEADER_PATH = "/loadbalance/leader"
SPLIT_ALGORITHMS = ("range_equally_divide",)
DEFAULT_NAMESPACE = ("public", "default")   # exists from the start, as in Pulsar's standalone
PEER_REQUEST_TIMEOUT_S = 30.0     # one admin call forwarded to another broker
PEER_REDIRECTS_MAX = 5
UNLOAD_TOPIC_TIMEOUT_S = 30.0     # closing one topic for `topics unload`

_SERVICE: web.AppKey[BrokerService] = web.AppKey("cluster_service")


def register(app: web.Application, service: BrokerService) -> None:
    """Add the cluster routes to the admin application (and the service the redirect reads)."""
    app[_SERVICE] = service
    r = _ClusterRoutes(service)
    ns = "/admin/v2/namespaces/{tenant}/{ns}"
    app.router.add_put(ns, r.create_namespace)
    app.router.add_get(ns + "/bundles", r.get_bundles)
    app.router.add_put(ns + "/unload", r.unload_namespace)
    app.router.add_put(ns + "/{bundle}/unload", r.unload_bundle)
    app.router.add_put(ns + "/{bundle}/split", r.split_bundle)
    lookup = "/lookup/v2/topic/persistent/{tenant}/{ns}/{topic}"
    app.router.add_get(lookup, r.lookup)
    app.router.add_get(lookup + "/bundle", r.bundle_of_topic)
    app.router.add_put(TOPIC_ROUTE + "/unload", r.unload_topic)
    app.router.add_get("/admin/v2/brokers/health", r.health)
    app.router.add_get("/admin/v2/brokers/ready", r.health)
    app.router.add_get("/admin/v2/brokers/leaderBroker", r.leader_broker)
    app.router.add_get("/admin/v2/brokers", r.brokers)
    app.router.add_get("/admin/v2/brokers/{cluster}", r.brokers)
    app.router.add_get("/admin/v2/clusters", r.clusters)
    app.router.add_get("/admin/v2/broker-stats/load-report", r.load_report)


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def _answers_errors(handler: Callable[P, Awaitable[web.StreamResponse]]) -> Callable[P, Awaitable[web.StreamResponse]]:
    """This module's errors answered here (the shared middleware answers the rest)."""
    @functools.wraps(handler)
    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> web.StreamResponse:
        try:
            return await handler(*args, **kwargs)
        except InvalidBundle as exc:
            return _error(412, str(exc))
        except NoOwner as exc:
            return _error(412, str(exc))
        except LeaseLost as exc:
            return _error(503, str(exc))
    return wrapped


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    return request.query.get(name, "true" if default else "false").lower() == "true"


def _namespace(request: web.Request) -> tuple[str, str]:
    return parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")


def _topic(request: web.Request) -> TopicName:
    m = request.match_info
    return parse_topic(f"persistent://{m['tenant']}/{m['ns']}/{m['topic']}")


def redirect_to(http_url: str, request: web.Request) -> web.Response:
    """307 to the same path and query on `http_url`, with `authoritative=true`."""
    location = http_url.rstrip("/") + str(request.rel_url.update_query(authoritative="true"))
    return web.Response(status=307, headers={"Location": location})


def lookup_data(native_url: str, http_url: str) -> dict:
    """Pulsar's LookupData (no TLS listeners)."""
    return {"brokerUrl": native_url, "brokerUrlTls": "", "httpUrl": http_url, "httpUrlTls": "",
            "nativeUrl": native_url}


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


def _my_key(service: BrokerService) -> str:
    """This broker's registry key, host:webPort."""
    return service.registry.key


async def peer_call(http_url: str, method: str, path: str, query: dict[str, str] | None = None,
                    ) -> tuple[int, object]:
    """An admin call on another broker (`authoritative=true`), its redirects followed (bounded):
    (status, decoded JSON body or None; for an error status, the reason). Status 0 when it could
    not be reached or did not answer within PEER_REQUEST_TIMEOUT_S."""
    timeout = aiohttp.ClientTimeout(total=PEER_REQUEST_TIMEOUT_S)
    url = http_url.rstrip("/") + path
    params = {**(query or {}), "authoritative": "true"}
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.request(method, url, params=params, max_redirects=PEER_REDIRECTS_MAX) as resp:
            status, text = resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return 0, f"{url}: {exc or type(exc).__name__}"
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = text
    if status >= 300:
        reason = body.get("reason", text) if isinstance(body, dict) else text
        return status, f"{url}: HTTP {status}: {reason}"
    return status, body


async def forward_put(http_url: str, path: str) -> str | None:
    """PUT `path` on another broker (`peer_call`): None when it answered 2xx, else what went wrong."""
    status, body = await peer_call(http_url, "PUT", path)
    return None if 200 <= status < 300 else str(body)


# --- one partition, on its owner (the partitioned routes of broker.admin_http fan out with these) ---

async def owner_elsewhere(service: BrokerService, name: TopicName, *, assign: bool,
                          authoritative: bool = False) -> str | None:
    """The HTTP URL of the broker that serves `name`, or None when it is this one. With `assign`,
    an unowned bundle is assigned first (`Ownership.resolve`; NotAllowed "Can't find owner for
    topic <t>" if nobody can take it); without, an unowned topic counts as this broker's (there is
    nothing loaded anywhere). ServiceNotReady while starting or with the lease lapsed."""
    if not service.web_url:
        raise ServiceNotReady("the broker is starting: not registered in the cluster yet")
    if assign:
        try:
            answer = await service.ownership.resolve(name, authoritative=authoritative)
        except NoOwner:
            raise NotAllowed(f"Can't find owner for topic {name}") from None     # 412
        except LeaseLost as exc:
            raise ServiceNotReady(str(exc)) from None                           # 503
        mine = answer.kind is LookupKind.CONNECT and answer.native_url == service.advertised_url
        return None if mine else answer.http_url
    bundle = await service.ownership.bundle_of(name)
    owner = await service.ownership.owner_of(ownership_path(name.tenant, name.namespace, bundle))
    return None if owner is None or owner.mine else owner.http_url


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


async def delete_partition(service: BrokerService, name: TopicName, *, force: bool) -> None:
    """Delete one partition and its data on the broker that serves it; a partition nothing ever
    stored is not an error."""
    url = await owner_elsewhere(service, name, assign=False)
    if url is None:
        try:
            await service.delete_topic(name, force=force)
        except NotFound:
            pass
        return
    status, body = await peer_call(url, "DELETE", f"/admin/v2/persistent/{name.path}",
                                   {"force": "true" if force else "false"})
    if status == 412:
        raise NotAllowed(f"deleting {name} on its owner: {body}")
    if status not in (200, 204, 404):
        raise ServiceNotReady(f"deleting {name} on its owner: {body}")


class _ClusterRoutes:
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

    # --- namespaces --------------------------------------------------------------------------------

    @_answers_errors
    async def create_namespace(self, request: web.Request) -> web.Response:
        tenant, ns = _namespace(request)
        count, boundaries = await _body_bundles(request, self.service.config.broker_admin_body_bytes_max)
        try:
            await bundles_mod.create_bundles(self.service.astore, tenant, ns,
                                             count or self.service.config.broker_default_namespace_bundles,
                                             boundaries)
        except AlreadyExists:
            raise AlreadyExists("Namespace already exists", namespace=f"{tenant}/{ns}") from None
        return web.Response(status=204)

    @_answers_errors
    async def get_bundles(self, request: web.Request) -> web.Response:
        tenant, ns = _namespace(request)
        if (tenant, ns) == DEFAULT_NAMESPACE:
            return web.json_response((await self._bundles(tenant, ns)).to_json())
        found = await self.service.astore.get(bundles_mod.bundles_path(tenant, ns))
        if found is None:
            raise NotFound("Namespace does not exist", namespace=f"{tenant}/{ns}")
        return web.json_response((await self._bundles(tenant, ns)).to_json())

    @_answers_errors
    async def unload_namespace(self, request: web.Request) -> web.Response:
        """Each owned bundle unloaded by its owner (at once); unowned ones skipped."""
        tenant, ns = _namespace(request)
        ranges = (await self._bundles(tenant, ns)).ranges
        failures = [f for f in await asyncio.gather(*(self._unload_anywhere(tenant, ns, b) for b in ranges))
                    if f is not None]
        if failures:
            return _error(500, "unloading failed: " + "; ".join(failures))
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
        tenant, ns = _namespace(request)
        bundle = parse_bundle(request.match_info["bundle"])
        (await self._bundles(tenant, ns)).get(bundle)
        return tenant, ns, bundle

    @_answers_errors
    async def unload_bundle(self, request: web.Request) -> web.Response:
        tenant, ns, bundle = await self._known_bundle(request)
        destination = request.query.get("destinationBroker") or None
        if destination is not None and await self.service.astore.get(f"{BROKERS_ROOT}/{destination}") is None:
            return _error(412, f"Destination broker {destination} is not active (brokers are host:webPort, "
                               "as `brokers list` shows them)")
        owner = await self.ownership.owner_of(ownership_path(tenant, ns, bundle))
        if owner is None:
            return web.Response(status=204)     # nobody serves it: nothing to unload
        if not owner.mine:
            return redirect_to(owner.http_url, request)
        await self.ownership.unload(tenant, ns, bundle, destination=destination)
        return web.Response(status=204)

    @_answers_errors
    async def split_bundle(self, request: web.Request) -> web.Response:
        tenant, ns, bundle = await self._known_bundle(request)
        algorithm = request.query.get("splitAlgorithmName") or SPLIT_ALGORITHMS[0]
        if algorithm not in SPLIT_ALGORITHMS:
            return _error(412, f"Unsupported namespace bundle split algorithm {algorithm!r}, "
                               f"supported algorithms are {list(SPLIT_ALGORITHMS)}")
        try:
            await self.ownership.split(tenant, ns, bundle, unload=_flag(request, "unload"))
        except OwnedElsewhere as exc:
            return redirect_to(str(exc.details["http_url"]), request)
        except BundleNotOwned:
            return _error(412, f"Bundle {tenant}/{ns}/{bundle.key} is not owned by any broker: "
                               "it is split by its owner (look a topic of it up first)")
        return web.Response(status=204)

    # --- lookup ------------------------------------------------------------------------------------

    @_answers_errors
    async def lookup(self, request: web.Request) -> web.Response:
        name = _topic(request)
        if self.service.closing:
            raise ShuttingDown("broker is shutting down")
        answer = await self.ownership.resolve(name, authoritative=_flag(request, "authoritative"))
        if answer.kind is LookupKind.REDIRECT:
            return redirect_to(answer.http_url, request)
        return web.json_response(lookup_data(answer.native_url, answer.http_url))

    @_answers_errors
    async def bundle_of_topic(self, request: web.Request) -> web.Response:
        name = _topic(request)
        return web.json_response((await self._bundles(name.tenant, name.namespace)).find(str(name)).key)

    # --- topics ------------------------------------------------------------------------------------

    @_answers_errors
    async def unload_topic(self, request: web.Request) -> web.Response:
        """A (partition) topic: closed here (the redirect sent the call to its owner). A partitioned
        topic: each partition on its owner."""
        name = _topic(request)
        count = await self.service.partitions(name) if name.partition_index < 0 else 0
        if count == 0:
            await self._unload_topic_here(name)
            return web.Response(status=204)
        failures = [f for f in await asyncio.gather(*(self._unload_partition(name.partition(i))
                                                      for i in range(count))) if f is not None]
        if failures:
            return _error(500, "unloading failed: " + "; ".join(failures))
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

    # --- brokers and clusters ----------------------------------------------------------------------

    def _check_cluster(self, request: web.Request) -> web.Response | None:
        cluster = request.match_info.get("cluster")
        if cluster is not None and cluster != self.service.config.cluster_name:
            return _error(404, f"Cluster {cluster} does not exist")
        return None

    async def brokers(self, request: web.Request) -> web.Response:
        missing = self._check_cluster(request)
        if missing is not None:
            return missing
        found = await self.service.astore.list_prefix(BROKERS_ROOT)
        return web.json_response(sorted(path.rsplit("/", 1)[-1] for path, _ in found))

    async def health(self, request: web.Request) -> web.Response:
        if self.service.closing:
            return _error(503, "broker is shutting down")
        if not self.service.web_url:
            return _error(503, "the broker is starting: not registered in the cluster yet")
        if not self.service.astore.lease_valid():
            return _error(503, "this broker's metadata lease has lapsed")
        if await self.service.astore.get(f"{BROKERS_ROOT}/{_my_key(self.service)}") is None:
            return _error(503, "this broker is not registered")
        return web.json_response("ok")

    async def leader_broker(self, request: web.Request) -> web.Response:
        found = await self.service.astore.get(LEADER_PATH)
        try:
            data = json.loads(found.value.decode()) if found is not None else None
            leader = {"serviceUrl": str(data["webServiceUrl"]), "brokerId": str(data["brokerId"])} if data else None
        except (ValueError, KeyError, TypeError):
            leader = None
        if leader is None:
            return _error(404, "Couldn't find leader broker")
        return web.json_response(leader)

    async def clusters(self, request: web.Request) -> web.Response:
        return web.json_response([self.service.config.cluster_name])

    async def load_report(self, request: web.Request) -> web.Response:
        if not self.service.web_url:
            return _error(503, "the broker is starting: not registered in the cluster yet")
        found = await self.service.astore.get(f"{BROKERS_ROOT}/{_my_key(self.service)}")
        if found is None:
            return _error(503, "this broker is not registered")
        return web.json_response(json.loads(found.value.decode()))


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
    name = _topic(request)
    # a partitioned topic's routes fan out over the partitions or only touch metadata
    fans_out = suffix in FANOUT_SUFFIXES or (name.partition_index < 0 and await service.partitions(name) > 0)
    if not fans_out:
        # NotAllowed (412: no owner) and ServiceNotReady (503) are answered by the error middleware
        url = await owner_elsewhere(service, name, assign=suffix not in NO_ASSIGN_SUFFIXES,
                                    authoritative=_flag(request, "authoritative"))
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
