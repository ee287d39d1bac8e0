"""The compaction admin routes (Pulsar's paths, JSON and status codes).

Topic (`/admin/v2/persistent/{t}/{ns}/{topic}`):
- `PUT .../compaction` → 204: a compaction starts in the background (`broker.compaction`).
  409 "Compaction already in progress"; 404 a topic never created; 503 while it closes. On a
  partitioned topic's own name every partition is compacted, each by the broker serving it
  (Pulsar's fan-out); 409 if any partition is already compacting.
- `GET .../compaction` → LongRunningProcessStatus `{"status": NOT_RUN|RUNNING|SUCCESS|ERROR,
  "lastError": ""}` plus Strata's `"message"` (what the last run did, e.g. "nothing to compact:
  none of the 12 message(s) up to 5:11 has a key") and `"progress"` `{"entriesDone",
  "entriesTotal"}` for the CLI's bar. NOT_RUN when no run since the topic was loaded here. On a
  partitioned topic: the partitions' statuses combined (RUNNING if one runs, else ERROR if one
  failed, else SUCCESS if all succeeded, else NOT_RUN), `"message"` each partition's labelled
  ("partition 0: compacted up to ...; partition 1: ...") and `"partitions"` with each one's.
- `GET|POST|DELETE .../compactionThreshold` (bytes, topic policy; GET null when unset).
- `/admin/v2/non-persistent/.../compaction` answers 405 (`broker.admin.non_persistent`).

Namespace (`/admin/v2/namespaces/{t}/{ns}`): `GET|PUT|DELETE .../compactionThreshold` (bytes;
GET null when unset; 404 "Namespace does not exist" for a namespace never created).

Bad values: 400 when the body is not a JSON integer, 412 a negative one; nothing is stored then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import Refused, body_json, error, namespace_of, topic_of
from broker.cluster import peers
from broker.compaction import threshold
from broker.records import policies
from common.errors import CompactionInProgress, NotFound, ServiceNotReady
from common.topic_names import TopicName

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic


def register(app: web.Application, service: BrokerService) -> None:
    r = _CompactionRoutes(service)
    topic = lookup.TOPIC_ROUTE
    ns = "/admin/v2/namespaces/{tenant}/{ns}"
    app.router.add_put(topic + "/compaction", r.trigger)
    app.router.add_get(topic + "/compaction", r.status)
    app.router.add_get(topic + "/compactionThreshold", r.get_topic_threshold)
    app.router.add_post(topic + "/compactionThreshold", r.set_topic_threshold)
    app.router.add_delete(topic + "/compactionThreshold", r.remove_topic_threshold)
    app.router.add_get(ns + "/compactionThreshold", r.get_ns_threshold)
    app.router.add_put(ns + "/compactionThreshold", r.set_ns_threshold)
    app.router.add_delete(ns + "/compactionThreshold", r.remove_ns_threshold)


def combined_status(statuses: list[dict]) -> dict:
    """One status for a partitioned topic from its partitions' statuses."""
    kinds = [s.get("status") for s in statuses]
    if "RUNNING" in kinds:
        state = "RUNNING"
    elif "ERROR" in kinds:
        state = "ERROR"
    elif kinds and all(k == "SUCCESS" for k in kinds):
        state = "SUCCESS"
    else:
        state = "NOT_RUN"
    errors = "; ".join(f"partition {i}: {s['lastError']}" for i, s in enumerate(statuses) if s.get("lastError"))
    done = sum(s.get("progress", {}).get("entriesDone", 0) for s in statuses)
    total = sum(s.get("progress", {}).get("entriesTotal", 0) for s in statuses)
    messages = [f"partition {i}: {s['message']}" for i, s in enumerate(statuses) if s.get("message")]
    return {"status": state, "lastError": errors, "message": "; ".join(messages),
            "progress": {"entriesDone": done, "entriesTotal": total},
            "partitions": {str(i): s for i, s in enumerate(statuses)}}


class _CompactionRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def _known_topic(self, name: TopicName) -> PersistentTopic:
        if str(name) not in self.service.topics:
            known = {str(n) for n in await policies.topics_of_namespace(self.service.astore, name.tenant,
                                                                         name.namespace)}
            if str(name) not in known and not await lookup.is_partition_of_existing(self.service, name):
                raise NotFound("Topic not found", topic=str(name))
        return await self.service.get_topic(name)

    async def _partitions(self, name: TopicName) -> int:
        return await self.service.partitions(name) if name.partition_index < 0 else 0

    async def _on_owner(self, partition: TopicName, method: str) -> tuple[int, object]:
        """The compaction route for one partition, here or on its owner: (status, body)."""
        url = await peers.owner_elsewhere(self.service, partition, assign=True)
        if url is None:
            topic = await self._known_topic(partition)
            if method == "PUT":
                topic.compaction.trigger()
                return 204, None
            return 200, topic.compaction.status_json()
        status, body = await peers.peer_call(url, method, f"/admin/v2/persistent/{partition.path}/compaction")
        if status == 0:
            raise ServiceNotReady(f"compaction of {partition} on its owner: {body}")
        return status, body

    async def trigger(self, request: web.Request) -> web.StreamResponse:
        name = topic_of(request)
        count = await self._partitions(name)
        if count == 0:
            try:
                (await self._known_topic(name)).compaction.trigger()
            except CompactionInProgress:
                raise Refused(409, "Compaction already in progress") from None
            return web.Response(status=204)
        for i in range(count):
            try:
                status, body = await self._on_owner(name.partition(i), "PUT")
            except CompactionInProgress:
                raise Refused(409, "Compaction already in progress") from None
            if status >= 300:
                return error(status, str(body))
        return web.Response(status=204)

    async def status(self, request: web.Request) -> web.StreamResponse:
        name = topic_of(request)
        count = await self._partitions(name)
        if count == 0:
            return web.json_response((await self._known_topic(name)).compaction.status_json())
        statuses = []
        for i in range(count):
            status, body = await self._on_owner(name.partition(i), "GET")
            if status != 200 or not isinstance(body, dict):
                return error(status if status >= 400 else 500, str(body))
            statuses.append(body)
        return web.json_response(combined_status(statuses))

    # --- compactionThreshold ----------------------------------------------------------------

    async def get_topic_threshold(self, request: web.Request) -> web.StreamResponse:
        own = await policies.topic_policies(self.service.astore, topic_of(request))
        return web.json_response(own.get(threshold.TOPIC_KEY))

    async def set_topic_threshold(self, request: web.Request) -> web.StreamResponse:
        name = topic_of(request)
        value = threshold.check_threshold(await body_json(request))
        await policies.set_topic_policy(self.service.astore, name, threshold.TOPIC_KEY, value)
        return web.Response(status=204)

    async def remove_topic_threshold(self, request: web.Request) -> web.StreamResponse:
        await policies.set_topic_policy(self.service.astore, topic_of(request), threshold.TOPIC_KEY, None)
        return web.Response(status=204)

    async def get_ns_threshold(self, request: web.Request) -> web.StreamResponse:
        found = await policies.existing_namespace_policies(self.service.astore, *namespace_of(request))
        return web.json_response(found.get(threshold.NS_KEY))

    async def set_ns_threshold(self, request: web.Request) -> web.StreamResponse:
        tenant, ns = namespace_of(request)
        value = threshold.check_threshold(await body_json(request))
        await policies.set_namespace_policy(self.service.astore, tenant, ns, threshold.NS_KEY, value)
        return web.Response(status=204)

    async def remove_ns_threshold(self, request: web.Request) -> web.StreamResponse:
        tenant, ns = namespace_of(request)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, threshold.NS_KEY, None)
        return web.Response(status=204)
