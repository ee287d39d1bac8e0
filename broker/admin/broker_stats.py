"""`GET /admin/v2/broker-stats/topics`: the stats of every topic loaded on THIS broker, in Pulsar's shape.

    {"tenant/ns": {"0xLLLLLLLL_0xHHHHHHHH": {"persistent": {"persistent://tenant/ns/x": <topic stats>}}}}

namespace → bundle range → domain ("persistent", "non-persistent") → full topic name → the topic's
stats exactly as `GET .../{topic}/stats` answers them (`broker.stats.topic_stats.topic_stats`; a live
non-persistent topic's: `broker.nonpersistent.topic.topic_json`). A partitioned topic appears as its
partitions, each under the bundle that holds it, as in Pulsar.
Only this broker's topics are listed; a view of the whole cluster asks every broker of
`/admin/v2/brokers` and merges the answers (`strata top` does).

What must hold: the route does no metadata I/O for a topic whose bundle this broker owns (the
bundle comes from `ownership.owned()`); only a topic loaded without such a bundle in the local view
(a moment during a handover) asks `ownership.bundle_of`, which reads the namespace's bundle layout
once and caches it. A topic that is closing is left out: it is leaving this broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.nonpersistent.topic import NonPersistentTopic, topic_json
from broker.records.bundles import BundleRange, topic_hash
from broker.stats.topic_stats import topic_stats

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topics.topic import PersistentTopic

ROUTE = "/admin/v2/broker-stats/topics"


def register(app: web.Application, service: BrokerService) -> None:
    async def topics(request: web.Request) -> web.Response:
        return web.json_response(await broker_topic_stats(service))

    app.router.add_get(ROUTE, topics)


async def broker_topic_stats(service: BrokerService) -> dict[str, dict[str, dict[str, dict[str, dict]]]]:
    """namespace → bundle key → domain → topic name → topic stats, for the topics loaded here."""
    owned: dict[tuple[str, str], list[BundleRange]] = {}
    for tenant, namespace, bundle in service.ownership.owned():
        owned.setdefault((tenant, namespace), []).append(bundle)
    out: dict[str, dict[str, dict[str, dict[str, dict]]]] = {}
    topics: list[PersistentTopic | NonPersistentTopic] = [*service.topics.values(),
                                                          *service.non_persistent.topics.values()]
    for topic in sorted(topics, key=lambda t: str(t.name)):
        if topic.closing:
            continue
        bundle_key = await _bundle_key(service, topic, owned)
        namespace = f"{topic.name.tenant}/{topic.name.namespace}"
        by_domain = out.setdefault(namespace, {}).setdefault(bundle_key, {})
        stats = topic_json(topic) if isinstance(topic, NonPersistentTopic) else topic_stats(topic)
        by_domain.setdefault(topic.name.domain, {})[str(topic.name)] = stats
    return out


async def _bundle_key(service: BrokerService, topic: PersistentTopic | NonPersistentTopic,
                      owned: dict[tuple[str, str], list[BundleRange]]) -> str:
    name = topic.name
    hash_value = topic_hash(str(name))
    for bundle in owned.get((name.tenant, name.namespace), ()):
        if bundle.holds(hash_value):
            return bundle.key
    return (await service.ownership.bundle_of(name)).key
