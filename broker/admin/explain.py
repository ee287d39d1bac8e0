"""`GET /admin/v2/persistent/{tenant}/{ns}/{topic}/explain-storage`: why storage exceeds backlog.

Strata's own route (Pulsar has none). It answers `broker.explain.analysis.to_json` for the topic:
every kept ledger with what keeps it and when it goes, the subscriptions (each with what acting
on it alone would free, `freeableSize`, and the other subscriptions keeping the same ledgers,
`coKeepers`), `backlogSize` with the subscription it is (`backlogSubscription`), the
decomposition of `storageSize` (its parts sum exactly to it) and one line of advice per culprit,
the one whose acting frees the most bytes first.

- Unknown topic (never created, not a partition of an existing partitioned topic): 404
  `{"reason": "Topic not found"}`. A topic the lifecycle policies deleted (inactiveTopicPolicies,
  `broker.retention.deletions`) says so after it: "Topic not found: deleted at <time> by
  inactiveTopicPolicies (<why>)". A topic still there lists what they removed of it (expired
  subscriptions) in `lifecycleDeletions` (`[{"topic", "subscription", "reason", "atMs",
  "detail"}]`, absent when none).
- A partitioned topic (its base name): the answer of every partition, each from the broker that
  serves it, as `{"topic": base, "partitions": {"persistent://...-partition-0": {...}, ...}}`;
  a partition's own name answers that partition alone. A partition whose owner cannot be asked
  makes the whole call 503 (retry), never a partial answer.

How: the handler reads what the analysis needs from the metadata store first (effective
retention, TTL and offload policies; the managed ledger's record for each ledger's cold copy;
each ledger's metadata for its bookies), then runs the analysis in one synchronous step over the
loaded topic, so the ledgers, cursors and totals it reports are one consistent state. A ledger
created or trimmed between the two steps is shown without bookies or cold copy, never wrongly.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import topic_of
from broker.cluster import peers
from broker.explain.analysis import Settings, StorageFacts, explain_topic, iso, to_json
from broker.records import policies
from broker.retention import deletions
from broker.retention import offload as offload_policy
from common.errors import NotFound, ServiceNotReady
from common.topic_names import TopicName
from ledger.ledger_store import read_metadata
from ledger.ml_metadata import LedgerRecord, ManagedLedgerMetadata, ml_path
from metadata.api import AsyncStore

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic

ROUTE = "/admin/v2/persistent/{tenant}/{ns}/{topic}/explain-storage"
METADATA_READS_IN_FLIGHT_MAX = 32     # ledger metadata reads at once while gathering bookies


def register(app: web.Application, service: BrokerService) -> None:
    routes = _ExplainRoutes(service)
    app.router.add_get(ROUTE, routes.explain_storage)


class _ExplainRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def explain_storage(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        if name.partition_index < 0:
            count = await self.service.partitions(name)
            if count > 0:
                partitions = {}
                for i in range(count):
                    partition = name.partition(i)
                    partitions[str(partition)] = await self._partition(partition)
                return web.json_response({"topic": str(name), "partitions": partitions})
        return web.json_response(await self._here(name))

    async def _here(self, name: TopicName) -> dict:
        topic = await self._known_topic(name)
        facts = await gather_facts(self.service, topic)
        answer = to_json(explain_topic(topic, facts, self.service.clock.wall_ms()))
        removed = await deletions.of_topic(self.service.astore, name)
        if removed:
            answer["lifecycleDeletions"] = deletions.to_json(removed)
        return answer

    async def _partition(self, name: TopicName) -> dict:
        """One partition's explanation, from the broker that serves it."""
        url = await peers.owner_elsewhere(self.service, name, assign=True)
        if url is None:
            return await self._here(name)
        status, body = await peers.peer_call(url, "GET", f"/admin/v2/persistent/{name.path}/explain-storage")
        if status != 200 or not isinstance(body, dict):
            raise ServiceNotReady(f"explain-storage of {name} from its owner: {body}")
        return body

    async def _known_topic(self, name: TopicName) -> PersistentTopic:
        """The topic, loaded if needed; NotFound (404) if it was never created."""
        service = self.service
        if str(name) not in service.topics:
            known = {str(n) for n in await policies.topics_of_namespace(service.astore, name.tenant, name.namespace)}
            if str(name) not in known and not await lookup.is_partition_of_existing(service, name):
                raise NotFound(await _not_found_reason(service, name))   # Pulsar's reason, then why
        return await service.get_topic(name)


async def _not_found_reason(service: BrokerService, name: TopicName) -> str:
    """Pulsar's "Topic not found", and when a lifecycle policy deleted it, when and why."""
    gone = [d for d in await deletions.of_topic(service.astore, name) if d.subscription is None]
    if not gone:
        return "Topic not found"
    last = gone[-1]
    return f"Topic not found: deleted at {iso(last.atMs)} by {last.reason} ({last.detail})"


async def gather_facts(service: BrokerService, topic: PersistentTopic) -> StorageFacts:
    """Everything the analysis reads from the metadata store, read now."""
    name, astore, config = topic.name, service.astore, service.config
    ns_policies = await policies.namespace_policies(astore, name.tenant, name.namespace)
    own = await policies.topic_policies(astore, name)
    ledger_ids = [info.ledger_id for info in topic.ml.ledgers()]
    return StorageFacts(
        retention=policies.retention_of(ns_policies, config, own),
        ttl_seconds=policies.ttl_seconds_of(ns_policies, config, own),
        offload=offload_policy.effective(ns_policies, config, own),
        settings=Settings.of(config),
        records=await ledger_records(astore, name.managed_ledger_name),
        bookies=await ledger_bookies(astore, ledger_ids))


async def ledger_records(astore: AsyncStore, ml_name: str) -> dict[int, LedgerRecord]:
    """The managed ledger's record, per ledger (cold copy, bookie copy deleted, seal time)."""
    got = await astore.get(ml_path(ml_name))
    if got is None:
        return {}
    meta = ManagedLedgerMetadata.from_json(got.value, got.version)
    return {record.ledger_id: record for record in meta.ledgers}


async def ledger_bookies(astore: AsyncStore, ledger_ids: list[int]) -> dict[int, tuple[str, ...]]:
    """Ledger id -> every bookie of its ensembles (ledgers whose metadata is gone left out)."""
    gate = asyncio.Semaphore(METADATA_READS_IN_FLIGHT_MAX)

    async def one(ledger_id: int) -> tuple[int, tuple[str, ...] | None]:
        async with gate:
            meta = await read_metadata(astore, ledger_id)
        return ledger_id, tuple(sorted(meta.all_bookies())) if meta is not None else None

    found = await asyncio.gather(*(one(ledger_id) for ledger_id in ledger_ids))
    return {ledger_id: bookies for ledger_id, bookies in found if bookies is not None}
