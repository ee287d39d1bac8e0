"""Topic routes of the admin API (Pulsar's paths, JSON field names and status codes).

Under `/admin/v2/persistent/{t}/{ns}` (`{topic}` = local name):
- `PUT    .../{topic}/partitions` body N → 204; 409 "Partitioned topic already exists", or "This
  topic already exists" when a non-partitioned topic has that name (its data would be hidden).
- `POST   .../{topic}/partitions` body N → 204: raise the count (409 if not larger, 404 if not
  partitioned).
- `GET    .../{topic}/partitions` → `{"partitions": N}`.
- `DELETE .../{topic}/partitions[?force=true]` → 204: delete a partitioned topic and every
  partition's data (each on the broker that serves it); 412 while clients are attached (unless force).
- `PUT    .../{topic}` → 204: create a non-partitioned topic (its managed ledger is opened); 409
  "This topic already exists" if it exists, or a partitioned topic has that name.
- `DELETE .../{topic}[?force=true]` → 204: delete a topic (its schemas too, as the partitioned
  topic's deletion does: `broker.schemas.registry.forget_topic`).
- `GET    .../{topic}/stats[?getPreciseBacklog=true]` → topic stats (Pulsar's names,
  `broker.stats.topic_stats`); precise: `msgBacklog` counts messages, not entries. 404 "Topic not found"
  for a topic never created.
- `GET    .../{topic}/lastMessageId` → MessageIdImpl `{"ledgerId", "entryId", "partitionIndex"}` of
  the last stored entry (`(first ledger, -1)` when empty); 412 on a partitioned topic.
- `GET    .../{topic}/partitioned-stats[?perPartition=false]` → the partitions' stats (each from
  the broker that serves it) summed, plus `metadata.partitions` and `partitions.{name}`.
- `GET    ...` → `["persistent://t/ns/x", ...]`; `GET .../partitioned` → partitioned topic names.
- `POST|GET|DELETE .../{topic}/deduplicationEnabled` body true/false: the topic's own dedup
  switch (GET: null if unset; `?applied=true`: the effective one; DELETE: the namespace's applies).
- `POST|GET|DELETE .../{topic}/retention` (body `{"retentionTimeInMinutes": m,
  "retentionSizeInMB": s}`) and `.../{topic}/messageTTL` (`?messageTTL=n` or the seconds as the
  body): topic-level policies, which override the namespace's (a partitioned topic's apply to
  every partition); GET: null if unset, `?applied=true` the effective value.

A dedup switch is applied to the topics loaded on this broker before the reply (other brokers
follow through their policy watch). Calls on one topic run on its owner (`broker.admin.lookup`
redirects them). Errors: `broker.admin.http`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import Refused, body_bool, body_json, flag, namespace_of, topic_of
from broker.admin.policy_bodies import body_retention, ttl_seconds
from broker.cluster import peers
from broker.limits import topic_count
from broker.records import policies
from broker.retention import backlog_quota as bq
from broker.schemas import registry as schema_registry
from broker.stats.topic_stats import partitioned_stats, topic_stats
from common.errors import AlreadyExists, BadRequestBody, NotAllowed, NotFound
from common.topic_names import TopicName
from cursor.stats import subscription_stats

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic


def register(app: web.Application, service: BrokerService) -> None:
    r = _TopicRoutes(service)
    base = "/admin/v2/persistent/{tenant}/{ns}"
    topic = base + "/{topic}"
    app.router.add_put(topic + "/partitions", r.create_partitions)
    app.router.add_post(topic + "/partitions", r.update_partitions)
    app.router.add_get(topic + "/partitions", r.get_partitions)
    app.router.add_delete(topic + "/partitions", r.delete_partitioned)
    app.router.add_get(topic + "/stats", r.stats)
    app.router.add_get(topic + "/lastMessageId", r.last_message_id)
    app.router.add_get(topic + "/partitioned-stats", r.stats_partitioned)
    app.router.add_post(topic + "/deduplicationEnabled", r.set_topic_dedup)
    app.router.add_get(topic + "/deduplicationEnabled", r.get_topic_dedup)
    app.router.add_delete(topic + "/deduplicationEnabled", r.remove_topic_dedup)
    app.router.add_post(topic + "/retention", r.set_topic_retention)
    app.router.add_get(topic + "/retention", r.get_topic_retention)
    app.router.add_delete(topic + "/retention", r.remove_topic_retention)
    app.router.add_post(topic + "/messageTTL", r.set_topic_ttl)
    app.router.add_get(topic + "/messageTTL", r.get_topic_ttl)
    app.router.add_delete(topic + "/messageTTL", r.remove_topic_ttl)
    app.router.add_get(base + "/partitioned", r.list_partitioned)
    app.router.add_get(base, r.list_topics)
    app.router.add_delete(topic, r.delete_topic)
    app.router.add_put(topic, r.create)


def precise_backlog(topic: PersistentTopic, stats: dict) -> None:
    """`?getPreciseBacklog=true`: each subscription's msgBacklog counts messages (batch members,
    less those acked one by one) instead of entries; the topic's is their sum (broker.stats.topic_stats)."""
    for name, sub in list(topic.subscriptions.items()):
        if name in stats["subscriptions"]:
            stats["subscriptions"][name]["msgBacklog"] = subscription_stats(sub.cursor, sub.ml).backlog_messages
    stats["msgBacklog"] = sum(s["msgBacklog"] for s in stats["subscriptions"].values())


def _check_count(count: int, partitions_max: int) -> int:
    """A partition count Pulsar accepts; 406 (Pulsar's NOT_ACCEPTABLE) otherwise."""
    if count <= 0:
        raise Refused(406, "Number of partitions should be more than 0")
    if count > partitions_max:
        raise Refused(406, f"Number of partitions should be less than or equal to {partitions_max}")
    return count


async def _body_partitions(request: web.Request) -> int:
    count = await body_json(request)
    if isinstance(count, bool) or not isinstance(count, int):
        raise BadRequestBody("partition count must be an integer")
    return count


class _TopicRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def create_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = _check_count(await _body_partitions(request), self.service.config.broker_partitions_max)
        partitions_max = self.service.config.broker_partitions_max
        if name.partition_index < 0:
            if await self.service.partitions(name) > 0:
                raise AlreadyExists("Partitioned topic already exists", topic=str(name))
            if await self._existing(name):
                raise AlreadyExists("This topic already exists", topic=str(name))
        # maxTopicsPerNamespace counts every partition (412 "Exceed maximum number of topics ...")
        await topic_count.check_room(self.service.astore, self.service.limits, name, count, self.service.caps.refusals)
        await policies.create_partitioned(self.service.astore, name, count, partitions_max)
        await self._register_partitions(name, 0, count)
        return web.Response(status=204)

    async def _register_partitions(self, name: TopicName, first: int, end: int) -> None:
        await policies.register_partitions(self.service.astore, name, first, end, self.service.clock.wall_ms())

    async def update_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = _check_count(await _body_partitions(request), self.service.config.broker_partitions_max)
        try:
            old_count = await policies.update_partitioned(self.service.astore, name, count,
                                                          self.service.config.broker_partitions_max)
        except AlreadyExists as exc:
            raise Refused(422, "Number of new partitions must be greater than existing number of partitions "
                               f"({exc.details.get('current')} now, {count} asked)") from None
        await self._register_partitions(name, old_count, count)
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        return web.json_response({"partitions": await self.service.partitions(name)})

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = await self.service.partitions(name)
        if count == 0:
            raise NotFound("partitioned topic not found", topic=str(name))
        force = flag(request, "force")
        if not force:   # each partition asked on the broker that serves it
            for i in range(count):
                if await lookup.partition_has_clients(self.service, name.partition(i)):
                    raise NotAllowed("partitioned topic has connected producers or consumers",
                                     topic=str(name))
        await peers.delete_partitioned_topic(self.service, name, count, force=force)
        return web.Response(status=204)

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if await self.service.partitions(name) > 0:
            raise NotAllowed("a partitioned topic is deleted through .../partitions", topic=str(name))
        await self.service.delete_topic(name, force=flag(request, "force"))
        await schema_registry.forget_topic(self.service.astore, self.service.clock, name)
        return web.Response(status=204)

    async def _existing(self, name: TopicName) -> bool:
        """The (partition) topic was created: it is in the topic list, loaded, or a partition of
        an existing partitioned topic."""
        if str(name) in self.service.topics:
            return True
        known = {str(n) for n in await policies.topics_of_namespace(self.service.astore, name.tenant, name.namespace)}
        return str(name) in known or await lookup.is_partition_of_existing(self.service, name)

    async def _known_topic(self, name: TopicName) -> PersistentTopic:
        """The topic, loaded here if needed; NotFound (404) if it was never created."""
        if not await self._existing(name):
            raise NotFound("Topic not found", topic=str(name))
        return await self.service.get_topic(name)

    async def create(self, request: web.Request) -> web.Response:
        """A non-partitioned topic: created (its managed ledger opened) now."""
        name = topic_of(request)
        if name.partition_index < 0 and await self.service.partitions(name) > 0:
            raise AlreadyExists("This topic already exists: it is a partitioned topic", topic=str(name))
        if await self._existing(name):
            raise AlreadyExists("This topic already exists", topic=str(name))
        await self.service.get_topic(name)
        return web.Response(status=204)

    async def stats(self, request: web.Request) -> web.Response:
        topic = await self._known_topic(topic_of(request))
        stats = topic_stats(topic)
        if flag(request, "getPreciseBacklog"):
            precise_backlog(topic, stats)
        return web.json_response(stats)

    async def last_message_id(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if name.partition_index < 0 and await self.service.partitions(name) > 0:
            raise NotAllowed("GetLastMessageId on a partitioned topic is not allowed: name a partition",
                             topic=str(name))
        last = (await self._known_topic(name)).ml.last_confirmed
        return web.json_response({"ledgerId": last.ledger_id, "entryId": last.entry_id,
                                  "partitionIndex": name.partition_index})

    async def stats_partitioned(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = await self.service.partitions(name)
        if count == 0:
            raise NotFound("partitioned topic not found", topic=str(name))
        per_partition = {}
        for i in range(count):
            partition = name.partition(i)
            per_partition[str(partition)] = await lookup.partition_stats(self.service, partition)
        include = request.query.get("perPartition", "true").lower() != "false"
        return web.json_response(partitioned_stats(count, per_partition, include))

    async def list_topics(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        return web.json_response(await self.service.topics_of_namespace(tenant, ns))

    async def list_partitioned(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        names = await policies.partitioned_topics(self.service.astore, tenant, ns)
        return web.json_response([f"persistent://{tenant}/{ns}/{n}" for n in names])

    async def set_topic_dedup(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        enabled = await body_bool(request, "deduplicationEnabled")
        await self._set_topic_dedup(name, enabled)
        return web.Response(status=204)

    async def remove_topic_dedup(self, request: web.Request) -> web.Response:
        await self._set_topic_dedup(topic_of(request), None)
        return web.Response(status=204)

    async def _set_topic_dedup(self, name: TopicName, enabled: bool | None) -> None:
        await policies.set_topic_policy(self.service.astore, name, policies.DEDUP_KEY, enabled)
        base = name.base.path
        await self.service.apply_dedup_policy(lambda n: n.base.path == base)
        if not enabled:
            await self.service.drop_unloaded_dedup_snapshots(name.tenant, name.namespace,
                                                             lambda n: n.base.path == base)

    async def get_topic_dedup(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if flag(request, "applied"):
            return web.json_response(await policies.dedup_enabled(self.service.astore, name))
        return web.json_response((await policies.topic_policies(self.service.astore, name)).get(policies.DEDUP_KEY))

    async def set_topic_retention(self, request: web.Request) -> web.Response:
        name, retention = topic_of(request), await body_retention(request)
        await bq.refuse_retention_under_quotas(self.service.astore, name.tenant, name.namespace, name, retention)
        await policies.set_topic_policy(self.service.astore, name, policies.RETENTION_KEY, retention)
        return web.Response(status=204)

    async def get_topic_retention(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        own = await policies.topic_policies(self.service.astore, name)
        if not flag(request, "applied"):
            return web.json_response(own.get(policies.RETENTION_KEY))
        ns_policies = await policies.namespace_policies(self.service.astore, name.tenant, name.namespace)
        policy = policies.retention_of(ns_policies, self.service.config, own)
        return web.json_response({"retentionTimeInMinutes": policy.time_minutes,
                                  "retentionSizeInMB": policy.size_mb})

    async def remove_topic_retention(self, request: web.Request) -> web.Response:
        await policies.set_topic_policy(self.service.astore, topic_of(request), policies.RETENTION_KEY, None)
        return web.Response(status=204)

    async def set_topic_ttl(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if "messageTTL" in request.query:          # what pulsar-admin sends
            try:
                seconds: object = int(request.query["messageTTL"])
            except ValueError:
                raise BadRequestBody("messageTTL must be an integer number of seconds") from None
        else:
            seconds = await body_json(request)
        await policies.set_topic_policy(self.service.astore, name, policies.TTL_KEY, ttl_seconds(seconds))
        return web.Response(status=204)

    async def get_topic_ttl(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        own = await policies.topic_policies(self.service.astore, name)
        if not flag(request, "applied"):
            return web.json_response(own.get(policies.TTL_KEY))
        ns_policies = await policies.namespace_policies(self.service.astore, name.tenant, name.namespace)
        return web.json_response(policies.ttl_seconds_of(ns_policies, self.service.config, own))

    async def remove_topic_ttl(self, request: web.Request) -> web.Response:
        await policies.set_topic_policy(self.service.astore, topic_of(request), policies.TTL_KEY, None)
        return web.Response(status=204)
