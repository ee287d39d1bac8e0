"""The periodic lifecycle task: inactive topics deleted, idle subscriptions expired.

Every `broker_delete_inactive_topics_frequency_seconds` (Pulsar's
brokerDeleteInactiveTopicsFrequencySeconds; from the end of one pass to the start of the next)
each persistent topic loaded on this broker, so owned by it, is checked once, in turn:

1. Subscription expiration (`subscriptionExpirationTimeMinutes`: the topic's, else the
   namespace's, else `broker_subscription_expiration_time_minutes`; 0: never). A durable
   subscription idle longer than that is removed, cursor and all, as Pulsar's
   checkInactiveSubscriptions does. Idle: no consumer attached and its mark-delete unmoved.
   The task sees a subscription at each pass and notes it active when it has consumers or its
   mark-delete moved since the last pass; its idle time counts from the last such pass (or from
   the first pass that saw it: a restart or a move to another broker starts the count again, as
   Pulsar's in-memory lastActive does). Never removed: the compaction subscription (its
   compacted view), and the subscription of a Kafka consumer group with live members; an empty
   group's subscription expires like any other (its committed offsets go with it, as Kafka's
   offsets.retention.minutes drops an empty group's offsets). Readers' subscriptions are not
   durable and go with their last consumer anyway. Pulsar checks every
   subscriptionExpiryCheckIntervalInMinutes (5); Strata at every pass of this task.
2. Inactive topic (`inactiveTopicPolicies`: the topic's, else the namespace's, else the broker's
   `broker_delete_inactive_topics_*`). Active (Pulsar's PersistentTopic.isActive): a producer or
   consumer attached, or under delete_when_no_subscriptions any subscription, under
   delete_when_subscriptions_caught_up any subscription with an unacked entry. Strata also counts
   traffic since the last pass as activity (messages in or out: a Kafka client produces and
   fetches without attaching a Pulsar producer or consumer). A topic inactive
   for maxInactiveDurationSeconds (counted from the last pass that saw it active, or the first
   pass that saw it at all) is deleted, unless its retention time keeps it (Pulsar's
   shouldTopicBeRetained: retention minutes since it was last active; -1 forever). Under
   delete_when_subscriptions_caught_up its caught-up subscriptions are deleted with it, as in
   Pulsar. The check is made again, with no wait in between, right before the topic is taken
   out of service (`delete`): a producer that attached meanwhile keeps it.
   A deleted partition with `broker_delete_inactive_partitioned_topic_metadata_enabled` (Pulsar's
   brokerDeleteInactivePartitionedTopicMetadataEnabled, default off as there) also deletes the
   partitioned topic's metadata once none of its partitions is left.

Each action is logged (INFO), counted (`LifecycleCounters`, shown in `/metrics`) and recorded
for explain-storage (`broker.retention.deletions`). A failing topic is logged and counted in
`errors`; the pass goes on. Bounds: one pass at a time, the loop yielded between topics, the
per-topic state pruned to the loaded topics each pass.

What must hold: a topic or subscription is never deleted while a client is attached to it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.compaction.topic_compaction import COMPACTION_SUBSCRIPTION
from broker.limits import lifecycle as rules
from broker.limits.lifecycle import INACTIVE_TOPIC_POLICIES, SUBSCRIPTION_EXPIRATION, LifecycleCounters
from broker.records import groups, policies
from broker.retention import deletions
from broker.retention.periodic import PeriodicPass
from broker.schemas import registry as schema_registry
from broker.topics.group_offsets import group_of
from common.errors import NotFound, StrataError, SubscriptionNotFound
from common.topic_names import TOPICS_ROOT, TopicName
from ledger.position import Position

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.limits.view import PolicyView
    from broker.topics.loaded import LoadedTopics
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

# Takes the topic out of service and deletes it if `still_idle()` holds at that moment; False if not.
DeleteIdle = Callable[["PersistentTopic", Callable[[], bool]], Awaitable[bool]]


@dataclass
class _Seen:
    """What the last pass saw of a topic or a subscription."""
    obj: object                  # the topic or subscription (a reloaded one starts afresh)
    active_ms: int               # wall time it was last seen active (or first seen)
    mark_delete: Position | None = None   # a subscription's mark-delete then
    traffic: tuple[int, int] = (0, 0)     # a topic's (messages in, messages out) counters then


class LifecycleTask(PeriodicPass):
    def __init__(self, ctx: BrokerContext, loaded: LoadedTopics, limits: PolicyView,
                 delete_idle: DeleteIdle) -> None:
        super().__init__(ctx, loaded, ctx.config.broker_delete_inactive_topics_frequency_seconds)
        self.limits = limits
        self.delete_idle = delete_idle
        self.counters = LifecycleCounters()
        self._topics: dict[str, _Seen] = {}
        self._subs: dict[tuple[str, str], _Seen] = {}

    async def check_all(self) -> None:
        """One pass over the loaded topics; never raises but for cancellation."""
        loaded = self.loaded.topics
        self._topics = {k: v for k, v in self._topics.items() if k in loaded}
        self._subs = {k: v for k, v in self._subs.items() if k[0] in loaded}

        async def check(topic: PersistentTopic) -> None:
            await self.expire_subscriptions(topic)
            await self.check_inactive(topic)

        await self.each_topic(check, "lifecycle check")

    def failed(self, topic: PersistentTopic, what: str, exc: Exception) -> None:
        super().failed(topic, what, exc)
        self.counters.errors += 1

    # --- subscriptions ------------------------------------------------------------------------------

    async def expire_subscriptions(self, topic: PersistentTopic) -> None:
        minutes = int(await self.limits.value(topic.name, SUBSCRIPTION_EXPIRATION))
        now_ms = self.ctx.clock.wall_ms()
        for sub in list(topic.subscriptions.values()):
            if not sub.durable or sub.closed or sub.name == COMPACTION_SUBSCRIPTION:
                continue
            seen = self._note_subscription(topic, sub, now_ms)
            if not rules.subscription_expired(minutes, seen.active_ms, now_ms):
                continue
            group = group_of(sub)
            if group is not None and await groups.is_live(self.ctx.astore, group):
                continue
            if sub.consumers or topic.subscriptions.get(sub.name) is not sub:
                continue                    # a consumer came (or it went) while we looked
            try:
                await topic.unsubscribe(sub, None)
            except (SubscriptionNotFound, StrataError) as exc:
                log.info("expiring subscription %s of %s: %s", sub.name, topic.name, exc)
                continue
            self.counters.subscriptions_expired += 1
            idle_s = (now_ms - seen.active_ms) // 1000
            log.info("%s: subscription %s deleted: no consumer for %d s (subscriptionExpirationTimeMinutes %d)",
                     topic.name, sub.name, idle_s, minutes)
            await deletions.record(self.ctx.astore, topic.name, deletions.Deletion(
                str(topic.name), deletions.EXPIRED, now_ms,
                f"no consumer and no acknowledgement for {idle_s} s; subscriptionExpirationTimeMinutes is {minutes}",
                subscription=sub.name))

    def _note_subscription(self, topic: PersistentTopic, sub: Subscription, now_ms: int) -> _Seen:
        key = (str(topic.name), sub.name)
        md = sub.cursor.mark_delete_position
        seen = self._subs.get(key)
        if seen is None or seen.obj is not sub or sub.consumers or md != seen.mark_delete:
            seen = _Seen(sub, now_ms, md)
            self._subs[key] = seen
        return seen

    # --- topics ---------------------------------------------------------------------------------------

    async def check_inactive(self, topic: PersistentTopic) -> None:
        policy = await self.limits.value(topic.name, INACTIVE_TOPIC_POLICIES)
        mode = policy["inactiveTopicDeleteMode"]
        now_ms = self.ctx.clock.wall_ms()
        key = str(topic.name)
        seen = self._topics.get(key)
        traffic = (topic.msg_in_counter, topic.msg_out_counter)
        if seen is None or seen.obj is not topic or is_active(topic, mode) or traffic != seen.traffic:
            self._topics[key] = _Seen(topic, now_ms, traffic=traffic)
            return
        if not rules.inactive_due(policy, seen.active_ms, now_ms):
            return
        ns = await policies.namespace_policies(self.ctx.astore, topic.name.tenant, topic.name.namespace)
        own = await policies.topic_policies(self.ctx.astore, topic.name)
        retention = policies.retention_of(ns, self.ctx.config, own)
        if rules.retained_by_retention(retention.time_minutes, seen.active_ms, now_ms):
            return
        if not await self.delete_idle(topic, lambda: not is_active(topic, mode)):
            return
        self._topics.pop(key, None)
        self.counters.inactive_topics_deleted += 1
        idle_s = (now_ms - seen.active_ms) // 1000
        log.info("%s: deleted, inactive for %d s (inactiveTopicPolicies: %s after %d s)",
                 topic.name, idle_s, mode, policy["maxInactiveDurationSeconds"])
        await deletions.record(self.ctx.astore, topic.name, deletions.Deletion(
            key, deletions.INACTIVE, now_ms,
            f"inactive for {idle_s} s ({_mode_words(mode)}); inactiveTopicPolicies deletes after "
            f"{policy['maxInactiveDurationSeconds']} s"))
        await self._after_delete(topic.name)

    async def _after_delete(self, name: TopicName) -> None:
        """The schema of a topic wholly gone is forgotten; a partitioned topic's metadata goes
        with its last partition when the broker setting says so."""
        astore = self.ctx.astore
        if name.partition_index < 0:
            await schema_registry.forget_topic(astore, self.ctx.clock, name)
            return
        if not self.ctx.config.broker_delete_inactive_partitioned_topic_metadata_enabled:
            return
        base = name.base
        count = await policies.partition_count(astore, base)
        for i in range(count):
            if await astore.get(f"{TOPICS_ROOT}/{base.partition(i).path}") is not None:
                return
        try:
            await policies.delete_partitioned(astore, base)
        except NotFound:
            return
        await schema_registry.forget_topic(astore, self.ctx.clock, base)
        self.counters.partitioned_metadata_deleted += 1
        await deletions.record(astore, base, deletions.Deletion(
            str(base), deletions.INACTIVE, self.ctx.clock.wall_ms(),
            f"all its {count} partitions were deleted as inactive"))
        log.info("%s: partitioned topic deleted: all its %d partitions were deleted as inactive", base, count)


def is_active(topic: PersistentTopic, mode: str) -> bool:
    subs = [s for s in topic.subscriptions.values() if not s.closed]
    return rules.topic_active(
        mode, clients=topic.has_clients(), subscriptions=bool(subs),
        backlog=any(s.cursor.nth_unacked(1) is not None for s in subs))


def _mode_words(mode: str) -> str:
    if mode == "delete_when_no_subscriptions":
        return "no producers, consumers or subscriptions"
    return "no producers or consumers, every subscription caught up"
