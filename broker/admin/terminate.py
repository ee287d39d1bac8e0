"""Terminating topics over the admin API (Pulsar's `topics terminate`).

- `POST /admin/v2/persistent/{t}/{ns}/{topic}/terminate` → 200 MessageIdImpl
  `{"ledgerId", "entryId", "partitionIndex"}` of the topic's last message (`(first ledger, -1)`
  when it is empty). From then on the topic takes no message (`PersistentTopic.terminate`: its
  producers are closed, new ones and any SEND get TopicTerminated) and its consumers reach the end
  of the topic. Again: the same id. 404 "Topic not found" for a topic never created; 405 on a
  partitioned topic's own name (Pulsar: "Termination of a partitioned topic is not allowed").
- `POST .../{topic}/terminate/partitions` → 200 `{"<i>": MessageIdImpl, ...}`: every partition
  terminated, each on the broker that serves it (`broker.admin.peers.peer_call`); 404 if the
  topic is not partitioned.

The owner redirect (`broker.admin.lookup.owner_redirect`) sends a non-partitioned topic's call to
its owner, so the handler terminates a topic served here. The terminated state is in the managed
ledger's record, so it holds after restarts and on any broker that serves the topic later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import error, topic_of
from broker.cluster import peers
from broker.records import policies
from common.errors import NotFound, ServiceNotReady
from common.topic_names import TopicName

if TYPE_CHECKING:
    from broker.service import BrokerService


def register(app: web.Application, service: BrokerService) -> None:
    routes = _TerminateRoutes(service)
    topic = lookup.TOPIC_ROUTE
    app.router.add_post(topic + "/terminate", routes.terminate)
    app.router.add_post(topic + "/terminate/partitions", routes.terminate_partitions)


def message_id(ledger_id: int, entry_id: int, partition_index: int) -> dict[str, int]:
    """Pulsar's MessageIdImpl JSON."""
    return {"ledgerId": ledger_id, "entryId": entry_id, "partitionIndex": partition_index}


class _TerminateRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def _existing(self, name: TopicName) -> bool:
        if str(name) in self.service.topics:
            return True
        known = {str(n) for n in await policies.topics_of_namespace(self.service.astore, name.tenant, name.namespace)}
        return str(name) in known or await lookup.is_partition_of_existing(self.service, name)

    async def _terminate_here(self, name: TopicName) -> dict[str, int]:
        if not await self._existing(name):
            raise NotFound("Topic not found", topic=str(name))
        topic = await self.service.get_topic(name)
        last = await topic.terminate()
        return message_id(last.ledger_id, last.entry_id, name.partition_index)

    async def terminate(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if name.partition_index < 0 and await self.service.partitions(name) > 0:
            return error(405, "Termination of a partitioned topic is not allowed")
        return web.json_response(await self._terminate_here(name))

    async def terminate_partitions(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        count = await self.service.partitions(name)
        if count == 0:
            raise NotFound("Partitioned topic does not exist", topic=str(name))
        out: dict[str, object] = {}
        for i in range(count):
            partition = name.partition(i)
            url = await peers.owner_elsewhere(self.service, partition, assign=True)
            if url is None:
                out[str(i)] = await self._terminate_here(partition)
                continue
            status, body = await peers.peer_call(url, "POST", f"/admin/v2/persistent/{partition.path}/terminate")
            if status == 0:
                raise ServiceNotReady(f"terminate {partition} on its owner: {body}")
            if status != 200:
                return error(status, str(body))
            out[str(i)] = body
        return web.json_response(out)
