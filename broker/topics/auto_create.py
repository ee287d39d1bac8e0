"""autoTopicCreation and autoSubscriptionCreation: may naming a topic or subscription create it.

Pulsar creates a topic the first time a producer, consumer or lookup names it, if its
namespace's `autoTopicCreation` (else the broker's `broker_allow_auto_topic_creation*`) allows,
and as the type it says:
- PRODUCER and SUBSCRIBE (`admit`) on a persistent topic not loaded here: a topic that exists
  (listed in the topic list, or a partition of a partitioned topic with that many partitions)
  is served; one that does not is created if allowed, else refused with TopicNotFound
  "Topic <name> does not exist" (Pulsar's ServerCnx). A SUBSCRIBE with `force_topic_creation`
  false (pattern consumers) never creates.
- LOOKUP (`check_lookup`): refused the same way, so a client is told at once.
- PARTITIONED_METADATA (`partitions_on_metadata`): a name that does not exist, allowed with
  topicType partitioned, becomes a partitioned topic of defaultNumPartitions (its partitions
  listed, as an admin create does), and the answer is that count; the client then uses the
  partitions. Non-partitioned (or not allowed): 0, and PRODUCER/SUBSCRIBE decide.
- autoSubscriptionCreation (`check_subscription`): a durable SUBSCRIBE naming a subscription the
  topic does not have, or a producer's initial subscription, is refused when not allowed:
  SubscriptionNotFound "Subscription does not exist" (SUBSCRIBE) and NotAllowed "Could not
  create the initial subscription due to the auto subscription creation is not allowed."
  (PRODUCER), Pulsar's texts. Readers (non-durable) are never refused.

Cost: a topic already loaded is never checked; loading one reads its topic-list key once (the
load reads it anyway); the policy value is cached (`broker.limits.view`).

What must hold: a refused naming changes nothing stored.
"""

from __future__ import annotations

import logging

from broker.limits import topic_count
from broker.limits.lifecycle import (
    AUTO_SUBSCRIPTION_CREATION,
    AUTO_TOPIC_CREATION,
    LifecycleCounters,
    auto_partitions,
    creatable,
)
from broker.limits.view import PolicyView
from broker.records import policies
from common.clock import Clock
from common.config import Config
from common.errors import AlreadyExists, NotAllowed, SubscriptionNotFound, TopicNotFound
from common.topic_names import TOPICS_ROOT, TopicName
from metadata.api import AsyncStore

log = logging.getLogger(__name__)

INITIAL_SUBSCRIPTION_REFUSED = ("Could not create the initial subscription due to the auto subscription "
                                "creation is not allowed.")


async def exists(astore: AsyncStore, name: TopicName) -> bool:
    """The (partition) topic was created: listed, or a partition within its partitioned topic's
    count; a partitioned topic's base name exists too."""
    if await astore.get(f"{TOPICS_ROOT}/{name.path}") is not None:
        return True
    if name.partition_index >= 0:
        return name.partition_index < await policies.partition_count(astore, name.base)
    return await policies.partition_count(astore, name) > 0


class AutoCreation:
    def __init__(self, astore: AsyncStore, limits: PolicyView, config: Config, clock: Clock,
                 counters: LifecycleCounters) -> None:
        self.astore = astore
        self.clock = clock
        self.limits = limits
        self.config = config
        self.counters = counters          # shared with the lifecycle task: one set in /metrics

    async def admit(self, name: TopicName, *, create: bool = True) -> None:
        """Before loading `name` for a PRODUCER or SUBSCRIBE: TopicNotFound unless it exists or
        may be created now (`create` false: it must exist)."""
        if await exists(self.astore, name):
            return
        policy = await self.limits.value(name, AUTO_TOPIC_CREATION)
        if not (create and creatable(policy)):
            self._refuse(name)
        self.counters.topics_auto_created += 1
        log.info("%s: created by naming it (autoTopicCreation)", name)

    async def check_lookup(self, name: TopicName) -> None:
        """A LOOKUP of a topic that does not exist and may not be created: TopicNotFound."""
        if creatable(await self.limits.value(name, AUTO_TOPIC_CREATION)):
            return
        if not await exists(self.astore, name):
            self._refuse(name)

    async def partitions_on_metadata(self, name: TopicName, partitions: int) -> int:
        """PARTITIONED_METADATA's answer: `partitions` (the stored count), or the count of the
        partitioned topic auto-created now."""
        if partitions > 0 or name.partition_index >= 0 or not name.persistent:
            return partitions
        policy = await self.limits.value(name, AUTO_TOPIC_CREATION)
        wanted = auto_partitions(policy)
        if not creatable(policy) or wanted == 0 or await exists(self.astore, name):
            return partitions
        await topic_count.check_room(self.astore, self.limits, name, wanted)   # maxTopicsPerNamespace
        try:
            await policies.create_partitioned(self.astore, name, wanted, self.config.broker_partitions_max)
        except AlreadyExists:          # another client or broker made it first
            return await policies.partition_count(self.astore, name)
        await policies.register_partitions(self.astore, name, 0, wanted, self.clock.wall_ms())
        self.counters.topics_auto_created += 1
        log.info("%s: created as a partitioned topic of %d partitions by naming it (autoTopicCreation)",
                 name, wanted)
        return wanted

    async def check_subscription(self, name: TopicName, *, initial: bool = False) -> None:
        """A subscription the topic does not have is about to be created by naming it."""
        policy = await self.limits.value(name, AUTO_SUBSCRIPTION_CREATION)
        if policy.get("allowAutoSubscriptionCreation"):
            return
        self.counters.subscription_creations_refused += 1
        if initial:
            raise NotAllowed(INITIAL_SUBSCRIPTION_REFUSED, topic=str(name))
        raise SubscriptionNotFound("Subscription does not exist", topic=str(name))

    def _refuse(self, name: TopicName) -> None:
        self.counters.topic_creations_refused += 1
        raise TopicNotFound(f"Topic {name} does not exist")

