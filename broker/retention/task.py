"""The periodic task that frees storage: message TTL, then retention, for every loaded topic.

Every `broker_retention_check_interval_ms` (measured from the end of one pass to the start of the
next, so passes never overlap) each topic loaded on this broker is checked once, in turn:

1. TTL (`policies.TTL_KEY` of the topic, else of the namespace, else config `ttl_seconds`;
   0 = off): every durable
   subscription's cursor acks what was published more than TTL ago (`ManagedCursor.expire`). Its
   dispatcher forgets those entries. TTL deletes nothing. The entries it acks are counted in
   the subscription's stats (`totalMsgExpired`, `msgRateExpired`, `lastExpireTimestamp`:
   `broker.topics.rates.expire_counted`).
2. Retention (`policies.RETENTION_KEY` of the topic, else of the namespace, else config
   `retention_time_minutes`/`retention_size_mb`):
   `cursor.retention.apply_retention` with the DURABLE subscriptions' cursors only (a reader's
   cursor does not pin storage), which trims whole ledgers every such cursor has passed.
3. Offload (`broker.retention.offload.retention_pass`, only with a usable cold tier): the effective
   offloadThreshold / offloadThresholdInSeconds start an automatic offload if due, and bookie
   copies of ledgers offloaded more than offloadDeletionLagMs ago are deleted.
4. Compaction (`broker.compaction.threshold`): a compactionThreshold in force starts a run once
   the `__compaction` subscription's backlog exceeds it. TTL never expires that subscription.

Trimming is re-checked under the managed ledger's metadata lock (`ManagedLedger.trim(recheck=)`):
the trim point is recomputed from the durable cursors as they are then, and the earlier of the two
is used, so a seek/reset or a new subscription that moved a cursor back while the trim waited for
the lock keeps its ledgers.

Bounds: one pass at a time; each namespace's policies, and all its topic-level policies, are read
once per pass (one get and one prefix listing); the event loop is
yielded between topics. A failing topic (metadata down, ledger fenced, a bad stored policy) is
logged and counted in `errors` and the pass goes on; nothing but cancellation ends the task.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Any

from broker.compaction import threshold as compaction_threshold
from broker.compaction.topic_compaction import COMPACTION_SUBSCRIPTION
from broker.records import policies
from broker.retention import offload as offload_policy
from broker.retention.periodic import PeriodicPass
from broker.topics.rates import expire_counted
from cursor.retention import RetentionPolicy, apply_retention, trim_position
from ledger.position import Position

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.topics.loaded import LoadedTopics
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)


def durable_cursors(topic: PersistentTopic) -> list[Any]:
    """The cursors that hold data: durable subscriptions still open (readers excluded)."""
    return [sub.cursor for sub in list(topic.subscriptions.values()) if sub.durable and not sub.closed]


class _RecheckedTrim:
    """`cursor.retention.Trimmable` over a topic's managed ledger that re-checks the trim point
    from the topic's durable cursors once the ledger's metadata lock is held."""

    def __init__(self, topic: PersistentTopic, policy: RetentionPolicy, now_ms: int) -> None:
        self.topic = topic
        self.policy = policy
        self.now_ms = now_ms
        self.trimmed: list[int] = []   # what the managed ledger actually trimmed (after re-check)

    def _recheck(self) -> Position | None:
        return trim_position(self.topic.ml, durable_cursors(self.topic), self.policy, self.now_ms)

    async def trim(self, before: Position) -> list[int]:
        # shielded: stopping the task mid-trim must not cut the metadata write from the view update
        self.trimmed = await asyncio.shield(self.topic.ml.trim(before, recheck=self._recheck))
        return self.trimmed


class RetentionTask(PeriodicPass):
    first_at_once = True

    def __init__(self, ctx: BrokerContext, loaded: LoadedTopics) -> None:
        super().__init__(ctx, loaded, ctx.config.broker_retention_check_interval_ms / 1000)
        self.expired_cursors = 0     # times TTL moved a subscription's mark-delete
        self.trimmed_ledgers = 0     # ledgers retention deleted
        self.bookie_copies_deleted = 0   # offloaded ledgers whose bookie copy the deletion lag removed

    async def check_all(self) -> None:
        """One pass over the loaded topics; never raises but for cancellation."""
        ns_policies: dict[tuple[str, str], dict] = {}
        topic_level: dict[tuple[str, str], dict[str, dict]] = {}

        async def check(topic: PersistentTopic) -> None:
            key = (topic.name.tenant, topic.name.namespace)
            if key not in ns_policies:
                ns_policies[key] = await policies.namespace_policies(self.ctx.astore, *key)
                topic_level[key] = await policies.namespace_topic_policies(self.ctx.astore, *key)
            await self.check_topic(topic, ns_policies[key], topic_level[key].get(topic.name.base.local))

        await self.each_topic(check, "retention/TTL check")

    async def check_topic(self, topic: PersistentTopic, ns_policies: dict,
                          topic_policies: dict | None = None) -> list[int]:
        """Apply TTL, retention, then offload, to one topic; returns the ids of the ledgers trimmed."""
        config = self.ctx.config
        now_ms = self.ctx.clock.wall_ms()
        ttl_seconds = policies.ttl_seconds_of(ns_policies, config, topic_policies)
        if ttl_seconds > 0:
            for sub in [s for s in list(topic.subscriptions.values())
                        if s.durable and not s.closed and s.name != COMPACTION_SUBSCRIPTION]:   # as Pulsar
                if expire_counted(sub, functools.partial(sub.cursor.expire, ttl_seconds, now_ms), now_ms):
                    self.expired_cursors += 1
                    if sub.dispatcher is not None:
                        sub.dispatcher.on_acked_upto(sub.cursor.mark_delete_position)
        if topic.closing:
            return []
        policy = policies.retention_of(ns_policies, config, topic_policies)
        ledger = _RecheckedTrim(topic, policy, now_ms)
        await apply_retention(ledger, topic.ml, durable_cursors(topic), policy, now_ms)
        self.trimmed_ledgers += len(ledger.trimmed)
        deleted = await offload_policy.retention_pass(self.ctx, topic, ns_policies, topic_policies)
        self.bookie_copies_deleted += len(deleted)
        await compaction_threshold.retention_pass(config, topic.compaction, ns_policies, topic_policies)
        return ledger.trimmed
