"""Kafka topic names and partitions over Strata's topics.

A Kafka topic `orders` is `persistent://<kafka_default_namespace>/orders`; a name with two slashes,
`tenant/ns/orders`, names that namespace (as KoP accepted). Kafka partition i is Pulsar partition
i (`orders-partition-i`) of a partitioned topic; a non-partitioned topic is one partition, 0,
which is the topic itself. Topics a Kafka client creates (CreateTopics, or a Metadata request that
allows auto-creation) are always partitioned topics, even with one partition, so a later
CreatePartitions can grow them.

`Catalog` answers "how many partitions has this Kafka topic" from the metadata store with a short
cache (every Produce and Fetch asks; a miss costs a metadata read), dropped on our own changes.

What must hold: a Kafka name maps to exactly one TopicName and back (`kafka_name`); names Kafka
refuses (empty, over 249 characters, characters outside [A-Za-z0-9._-], "." or "..") raise
InvalidTopicName, which the front end answers with INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from broker.records import policies
from common.clock import Clock
from common.errors import InvalidTopicName, NotFound
from common.topic_names import PARTITION_SUFFIX, PERSISTENT, TopicName

if TYPE_CHECKING:
    from broker.service import BrokerService

NAME_CHARS_MAX = 249                              # Kafka's own limit on a topic name
_KAFKA_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_CACHE_S = 2.0                                    # how long a partition count is trusted


def pulsar_name(kafka_topic: str, default_namespace: str) -> TopicName:
    """The Pulsar topic of a Kafka topic name (its partitioned topic, or the topic itself)."""
    parts = kafka_topic.split("/")
    if len(parts) == 3:
        tenant, namespace, local = parts
    elif len(parts) == 1:
        tenant, namespace = default_namespace.split("/", 1)
        local = kafka_topic
    else:
        raise InvalidTopicName("a Kafka topic is `name` or `tenant/namespace/name`", topic=kafka_topic)
    if (not local or len(local) > NAME_CHARS_MAX or local in (".", "..") or not _KAFKA_NAME.match(local)
            or not tenant or not namespace):
        raise InvalidTopicName("not a valid Kafka topic name (1-249 of [A-Za-z0-9._-])", topic=kafka_topic)
    if PARTITION_SUFFIX in local:
        raise InvalidTopicName("a Kafka topic name may not name a Pulsar partition", topic=kafka_topic)
    return TopicName(PERSISTENT, tenant, namespace, local)


def kafka_name(name: TopicName, default_namespace: str) -> str:
    base = name.base
    if f"{base.tenant}/{base.namespace}" == default_namespace:
        return base.local
    return f"{base.tenant}/{base.namespace}/{base.local}"


def partition_topic(base: TopicName, partitioned: bool, index: int) -> TopicName:
    """The Pulsar topic that stores Kafka partition `index` of `base`."""
    return base.partition(index) if partitioned else base


class Catalog:
    """Partition counts of Kafka topics: None = no such topic; (count, partitioned)."""

    def __init__(self, service: BrokerService, clock: Clock) -> None:
        self._service = service
        self._clock = clock
        self._cache: dict[TopicName, tuple[float, tuple[int, bool] | None]] = {}
        self._policies: dict[TopicName, tuple[float, dict]] = {}

    def forget(self, name: TopicName) -> None:
        self._cache.pop(name, None)
        self._policies.pop(name, None)

    async def topic_policies(self, name: TopicName) -> dict:
        """The topic's own policy fields (max.message.bytes is checked on every Produce), cached
        like the partition counts."""
        now = self._clock.monotonic_s()
        hit = self._policies.get(name)
        if hit is not None and now - hit[0] < _CACHE_S:
            return hit[1]
        found = await policies.topic_policies(self._service.astore, name)
        if len(self._policies) > 100_000:
            self._policies.clear()
        self._policies[name] = (now, found)
        return found

    async def layout(self, name: TopicName) -> tuple[int, bool] | None:
        """(partitions, partitioned) of the Kafka topic `name`, None if it does not exist."""
        now = self._clock.monotonic_s()
        hit = self._cache.get(name)
        if hit is not None and now - hit[0] < _CACHE_S:
            return hit[1]
        found = await self._lookup(name)
        if len(self._cache) > 100_000:    # bounded: a client naming endless topics cannot grow it
            self._cache.clear()
        self._cache[name] = (now, found)
        return found

    async def _lookup(self, name: TopicName) -> tuple[int, bool] | None:
        service = self._service
        try:
            count = await service.partitions(name)
        except NotFound:             # its namespace does not exist
            return None
        if count > 0:
            return count, True
        if str(name) in service.topics:
            return 1, False
        known = await policies.topics_of_namespace(service.astore, name.tenant, name.namespace)
        return (1, False) if name in set(known) else None

    async def kafka_topics(self, tenant: str, namespace: str) -> dict[TopicName, tuple[int, bool]]:
        """Every topic of the namespace as Kafka sees it: partitioned topics with their counts,
        and non-partitioned ones (not partitions of a partitioned one) as one partition."""
        service = self._service
        out: dict[TopicName, tuple[int, bool]] = {}
        for local in await policies.partitioned_topics(service.astore, tenant, namespace):
            base = TopicName(PERSISTENT, tenant, namespace, local)
            count = await policies.partition_count(service.astore, base)
            if count > 0:
                out[base] = (count, True)
        for name in await policies.topics_of_namespace(service.astore, tenant, namespace):
            if name.partition_index < 0:      # partitions belong to their partitioned topic
                out.setdefault(name, (1, False))
        return out

