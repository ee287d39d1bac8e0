"""Admin routes of non-persistent topics (`/admin/v2/non-persistent/{t}/{ns}`; Pulsar's
NonPersistentTopics resource: its paths, JSON field names and status codes).

Namespace:
- `GET    ...` → the namespace's live non-persistent topics (`["non-persistent://t/ns/x", ...]`),
  this broker's and every other live broker's (`?local=true`: this broker's only; that is what
  one broker asks another). A non-persistent topic lives only while clients use it
  (`broker.nonpersistent.topic`), so the list is what is live now.
- `GET    .../partitioned` → the namespace's partitioned non-persistent topics.
- Deleting the namespace (`broker.admin.namespaces`) counts both (`namespace_in_use`: 409 without
  force) and with force closes the live topics (`close_namespace`) and deletes the records.
Topic (`{topic}` = local name; served by the topic's owner, others answer 307 there):
- `GET    .../{topic}/stats` → Pulsar's NonPersistentTopicStats (`msgDropRate` per subscription
  and topic, publishers' `msgDropRate`; Strata adds the cumulative `msgDropCount`); 404 "Topic
  not found" when it is not live.
- `GET    .../{topic}/internalStats` → `entriesAddedCounter` and one empty cursor per subscription.
- `GET    .../{topic}/subscriptions` → subscription names; `DELETE .../subscription/{sub}
  [?force=true]` → 204 (412 while consumers are attached, unless force).
- `PUT    .../{topic}` → 204 (the topic is made live now; it goes again once idle); `DELETE
  .../{topic}[?force=true]` → 204 (412 while clients are attached, unless force: they are asked
  to reconnect); `PUT .../{topic}/unload` → 204 (clients reconnect, to a fresh topic).
- `PUT|POST|GET|DELETE .../{topic}/partitions` → as for persistent topics: the partition count
  is kept in the metadata store; `GET .../{topic}/partitioned-stats` sums the live partitions'.
- What needs stored messages answers 405 "<operation> on a non-persistent topic is not allowed",
  as Pulsar: terminate, offload, compaction, lastMessageId, skip, clear-backlog, expiry,
  reset-cursor, peek, examine, get-message-by-id, explain-storage, create-subscription.

Errors: `broker.admin.http` (typed errors → `{"reason": ...}`).
What must hold: a topic call is answered by the topic's owner (or a 307 to it); nothing here
creates stored state other than a partitioned topic's partition count.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import Refused, body_json, flag, namespace_of
from broker.admin.lookup import redirect_to
from broker.cluster.peers import owner_elsewhere, peer_call
from broker.nonpersistent.topic import NonPersistentTopic, internal_json, topic_json
from broker.records import policies
from broker.stats.topic_stats import partitioned_stats
from common.errors import AlreadyExists, BadRequestBody, NotAllowed, NotFound, ServiceNotReady
from common.topic_names import NON_PERSISTENT, TopicName, parse_topic

if TYPE_CHECKING:
    from broker.service import BrokerService

BASE = "/admin/v2/non-persistent/{tenant}/{ns}"
TOPIC = BASE + "/{topic}"

# (method, route suffix, Pulsar's name of the operation) answered 405
_NOT_ALLOWED = (
    ("POST", "/terminate", "Termination"),
    ("PUT", "/offload", "Offload"),
    ("GET", "/offload", "Offload status"),
    ("PUT", "/compaction", "Compaction"),
    ("GET", "/compaction", "Compaction status"),
    ("GET", "/lastMessageId", "GetLastMessageId"),
    ("GET", "/explain-storage", "Explain storage"),
    ("GET", "/examinemessage", "Examine messages"),
    ("GET", "/ledger/{ledger}/entry/{entry}", "Get message by id"),
    ("POST", "/subscription/{sub}/skip/{count}", "Skip messages"),
    ("POST", "/subscription/{sub}/skip_all", "Clear backlog"),
    ("POST", "/subscription/{sub}/expireMessages/{seconds}", "Expiry messages"),
    ("POST", "/all_subscription/expireMessages/{seconds}", "Expiry messages"),
    ("POST", "/subscription/{sub}/resetcursor/{timestamp}", "Reset cursor"),
    ("POST", "/subscription/{sub}/resetcursor", "Reset cursor"),
    ("GET", "/subscription/{sub}/position/{n}", "Peek messages"),
    ("PUT", "/subscription/{sub}", "Create subscription"),
)


def topic_of(request: web.Request) -> TopicName:
    """The topic of a `/admin/v2/non-persistent/{t}/{ns}/{topic}` route; InvalidTopicName (400)."""
    m = request.match_info
    return parse_topic(f"{NON_PERSISTENT}://{m['tenant']}/{m['ns']}/{m['topic']}")


def register(app: web.Application, service: BrokerService) -> None:
    r = _Routes(service)
    for method, suffix, operation in _NOT_ALLOWED:
        app.router.add_route(method, TOPIC + suffix, _not_allowed(operation))
    on_owner = r.on_owner
    app.router.add_get(TOPIC + "/stats", on_owner(r.stats))
    app.router.add_get(TOPIC + "/internalStats", on_owner(r.internal_stats))
    app.router.add_get(TOPIC + "/subscriptions", on_owner(r.subscriptions))
    app.router.add_delete(TOPIC + "/subscription/{sub}", on_owner(r.delete_subscription))
    app.router.add_put(TOPIC + "/unload", on_owner(r.unload, assign=False))
    app.router.add_put(TOPIC + "/partitions", r.create_partitions)
    app.router.add_post(TOPIC + "/partitions", r.update_partitions)
    app.router.add_get(TOPIC + "/partitions", r.get_partitions)
    app.router.add_delete(TOPIC + "/partitions", r.delete_partitions)
    app.router.add_get(TOPIC + "/partitioned-stats", r.partitioned_stats)
    app.router.add_get(BASE + "/partitioned", r.list_partitioned)
    app.router.add_get(BASE, r.list_topics)
    app.router.add_put(TOPIC, on_owner(r.create))
    app.router.add_delete(TOPIC, on_owner(r.delete))


def _not_allowed(operation: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        topic_of(request)    # a malformed name is still a 400
        raise Refused(405, f"{operation} on a non-persistent topic is not allowed")
    return handler


Handler = Callable[[web.Request, TopicName], Awaitable[web.Response]]


async def _count_of(request: web.Request, partitions_max: int) -> int:
    count = await body_json(request)
    if isinstance(count, bool) or not isinstance(count, int):
        raise BadRequestBody("partition count must be an integer")
    if count <= 0:
        raise Refused(406, "Number of partitions should be more than 0")
    if count > partitions_max:
        raise Refused(406, f"Number of partitions should be less than or equal to {partitions_max}")
    return count


class _Routes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    def on_owner(self, handler: Handler, *, assign: bool = True) -> Callable[[web.Request], Awaitable[web.Response]]:
        """Run `handler` on the topic's owner: here, or a 307 there (`broker.admin.lookup`)."""
        async def run(request: web.Request) -> web.Response:
            name = topic_of(request)
            url = await owner_elsewhere(self.service, name, assign=assign,
                                        authoritative=flag(request, "authoritative"))
            if url is not None:
                return redirect_to(url, request)
            return await handler(request, name)
        return run

    def _live(self, name: TopicName) -> NonPersistentTopic:
        topic = self.service.non_persistent.find(name)
        if topic is None or topic.closing:
            raise NotFound("Topic not found", topic=str(name))
        return topic

    async def stats(self, request: web.Request, name: TopicName) -> web.Response:
        return web.json_response(topic_json(self._live(name)))

    async def internal_stats(self, request: web.Request, name: TopicName) -> web.Response:
        return web.json_response(internal_json(self._live(name)))

    async def subscriptions(self, request: web.Request, name: TopicName) -> web.Response:
        return web.json_response(sorted(self._live(name).subscriptions))

    async def delete_subscription(self, request: web.Request, name: TopicName) -> web.Response:
        topic = self._live(name)
        sub = topic.subscriptions.get(request.match_info["sub"])
        if sub is None:
            raise NotFound("Subscription not found", subscription=request.match_info["sub"])
        if sub.consumers and not flag(request, "force"):
            raise NotAllowed("Subscription has active connected consumers", subscription=sub.name)
        sub.disconnect_all()
        topic.drop_subscription(sub)
        topic.check_idle()
        return web.Response(status=204)

    async def create(self, request: web.Request, name: TopicName) -> web.Response:
        if name.partition_index < 0 and await self.service.partitions(name) > 0:
            raise AlreadyExists("This topic already exists: it is a partitioned topic", topic=str(name))
        await self.service.non_persistent.get(name)
        return web.Response(status=204)

    async def delete(self, request: web.Request, name: TopicName) -> web.Response:
        topic = self._live(name)
        if topic.has_clients() and not flag(request, "force"):
            raise NotAllowed("Topic has active producers/subscriptions", topic=str(name))
        await self.service.non_persistent.close_topic(topic)
        return web.Response(status=204)

    async def unload(self, request: web.Request, name: TopicName) -> web.Response:
        topic = self.service.non_persistent.find(name)
        if topic is not None:
            await self.service.non_persistent.close_topic(topic)
        return web.Response(status=204)

    # --- partitioned topics (metadata only: any broker answers) --------------------------------

    async def create_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        partitions_max = self.service.config.broker_partitions_max
        count = await _count_of(request, partitions_max)
        if await self.service.partitions(name) > 0:
            raise AlreadyExists("Partitioned topic already exists", topic=str(name))
        await policies.create_partitioned(self.service.astore, name, count, partitions_max)
        return web.Response(status=204)

    async def update_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        partitions_max = self.service.config.broker_partitions_max
        count = await _count_of(request, partitions_max)
        try:
            await policies.update_partitioned(self.service.astore, name, count, partitions_max)
        except AlreadyExists as exc:
            raise Refused(422, "Number of new partitions must be greater than existing number of partitions "
                               f"({exc.details.get('current')} now, {count} asked)") from None
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        return web.json_response({"partitions": await self.service.partitions(topic_of(request))})

    async def delete_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if await self.service.partitions(name) == 0:
            raise NotFound("partitioned topic not found", topic=str(name))
        await policies.delete_partitioned(self.service.astore, name)
        return web.Response(status=204)

    async def partitioned_stats(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = await self.service.partitions(name)
        if count == 0:
            raise NotFound("partitioned topic not found", topic=str(name))
        per_partition = {}
        for i in range(count):
            stats = await self._partition_stats(name.partition(i))
            if stats is not None:
                per_partition[str(name.partition(i))] = stats
        include = request.query.get("perPartition", "true").lower() != "false"
        merged = partitioned_stats(count, per_partition, include)
        merged["msgDropRate"] = sum(s["msgDropRate"] for s in per_partition.values())
        merged["msgDropCount"] = sum(s["msgDropCount"] for s in per_partition.values())
        return web.json_response(merged)

    async def _partition_stats(self, name: TopicName) -> dict | None:
        """A live partition's stats from the broker serving it; None when it is not live."""
        url = await owner_elsewhere(self.service, name, assign=False)
        if url is None:
            topic = self.service.non_persistent.find(name)
            return topic_json(topic) if topic is not None and not topic.closing else None
        status, body = await peer_call(url, "GET", f"/admin/v2/non-persistent/{name.path}/stats")
        if status == 404:
            return None
        if status != 200 or not isinstance(body, dict):
            raise ServiceNotReady(f"stats of {name} from its owner: {body}")
        return body

    async def list_partitioned(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await self.service.namespaces.require(tenant, ns)
        names = await self.service.astore.children(f"{policies.NON_PERSISTENT_PARTITIONED_ROOT}/{tenant}/{ns}")
        return web.json_response([f"{NON_PERSISTENT}://{tenant}/{ns}/{n}" for n in sorted(names)])

    async def list_topics(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await self.service.namespaces.require(tenant, ns)
        return web.json_response(await live_topics(self.service, tenant, ns, local=flag(request, "local")))


async def live_topics(service: BrokerService, tenant: str, ns: str, *, local: bool = False) -> list[str]:
    """The namespace's live non-persistent topics: this broker's, and unless `local` every other
    live broker's (ServiceNotReady if one does not answer)."""
    names = set(service.non_persistent_topics(tenant, ns))
    if not local:
        for broker in service.registry.live().values():
            if broker.web_url and broker.web_url != service.identity.web_url:
                names.update(await _peer_list(broker.web_url, tenant, ns))
    return sorted(names)


async def _peer_list(web_url: str, tenant: str, ns: str) -> list[str]:
    status, body = await peer_call(web_url, "GET", f"/admin/v2/non-persistent/{tenant}/{ns}",
                                   query={"local": "true"})
    if status != 200 or not isinstance(body, list):
        raise ServiceNotReady(f"non-persistent topics of {tenant}/{ns} from {web_url}: {json.dumps(body)}")
    return [str(n) for n in body]


async def namespace_in_use(service: BrokerService, tenant: str, ns: str) -> bool:
    """Does the namespace have live non-persistent topics (on any broker) or partitioned ones?
    (A namespace delete without force is then refused, as Pulsar counts both domains.)"""
    partitioned = await service.astore.children(f"{policies.NON_PERSISTENT_PARTITIONED_ROOT}/{tenant}/{ns}")
    return bool(partitioned) or bool(await live_topics(service, tenant, ns))


async def close_namespace(service: BrokerService, tenant: str, ns: str) -> None:
    """A forced namespace delete: this broker's live non-persistent topics of the namespace are
    closed (their clients told to go; they find the namespace gone). Another broker's close when
    that broker unloads the namespace's bundles, the next step of the delete."""
    await service.non_persistent.close_where(lambda n: (n.tenant, n.namespace) == (tenant, ns))
