"""Backlog quotas (Pulsar's BacklogQuota): how much unconsumed data a topic may hold, and what happens past it.

Two quota types, each with a limit and a policy:
- `destination_storage`: `limitSize` bytes. The topic's backlog is its largest durable
  subscription backlog in stored bytes (the `backlogSize` of its stats, Pulsar's estimated
  backlog size). Exceeded while that is > 0 and >= limitSize (limitSize -1: no limit).
- `message_age`: `limitTime` seconds. The age of the topic's oldest unacknowledged message: the
  publish time of the first entry after the mark-delete position of each durable subscription
  (the oldest in its backlog: it is never acked, else the mark-delete would have moved past it),
  the oldest of those. Exceeded while that age is > limitTime (limitTime <= 0: no limit).
Both are measured from the subscriptions' backlogs as they are at the moment of the check, never
from ledger timestamps, so an empty backlog is never "exceeded": the state clears as soon as the
backlog drains (Pulsar's apache/pulsar#15609 kept refusing producers of a drained topic because
its time check read the timestamp of the ledger holding the slowest mark-delete).

Quotas are stored under `QUOTA_KEY` (Pulsar's `backlog_quota_map`, `{type: {"limit", "limitSize",
"limitTime", "policy"}}`) in the namespace's policies and in the topic's; per type the topic's
entry wins, then the namespace's, then the broker's defaults (`backlog_quota_default_*`). Every
topic has its own quota and its own backlog: one topic over its quota (a slow Shared consumer)
changes nothing for the other topics of its namespace.

Policies, as Pulsar applies them:
- `producer_request_hold` and `producer_exception`: a PRODUCER on a topic over either quota is
  refused (`refuse_producer`) with ProducerBlockedQuotaExceededError (hold) or
  ProducerBlockedQuotaExceededException (exception). The periodic check disconnects the producers
  of a topic over quota (their SENDs in flight get their receipts first, as on an unload, then
  CLOSE_PRODUCER). The official client reconnects with backoff; while refused, with "hold" it
  keeps its sends pending (they go out once the backlog drains, or fail at send timeout); with
  "exception" it fails them with ProducerBlockedQuotaExceededException.
- `consumer_backlog_eviction`: the periodic check moves cursors forward instead; producers are
  never refused. Size: the largest subscription backlog skips its oldest unacked entries until
  every backlog is at most 90% of limitSize (then the next largest, and so on).
  Age: every durable subscription acks what was published more than 90% of limitTime ago.
  Each eviction is counted (`evictions`, metric
  `pulsar_storage_backlog_quota_exceeded_evictions_total{quota_type="size"|"time"}`).

The check (`BacklogQuotaChecker`) runs every `backlog_quota_check_interval_ms` over the loaded
topics (Pulsar's backlogQuotaCheckIntervalInSeconds) and also on each producer creation; with
`backlog_quota_check_enabled` false neither runs (quotas are stored and shown, not enforced).
Each topic's effective quotas are cached
(`quotas_of`: stats, metrics and the producer check do not wait on the metadata store): read
when the topic is loaded, at every periodic check, and again when its namespace's or its own
policies change (the broker's policy watch, `reload_matching`).

Stats (`stats_fields`, Pulsar's TopicStats names): `backlogQuotaLimitSize`,
`backlogQuotaLimitTime`, `oldestBacklogMessageAgeSeconds`, `oldestBacklogMessageSubscriptionName`;
per subscription (Strata's) `backlogQuotaRemainingSize` (limitSize minus its backlog bytes;
negative: over) and `backlogQuotaRemainingTimeSeconds` (limitTime minus the age of its oldest
unacked message), null without a limit; `backlogQuotaEvictions` ({"size": n, "time": n}, since
the topic was loaded) feeds the evictions metric.

What must hold: the exceeded state is a function of the backlog at the moment of the check and
the stored quotas, nothing remembered; a check never moves a cursor under any policy but
consumer_backlog_eviction, and never past the last confirmed entry; one topic's failure does not
stop a pass over the others.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.records import policies
from broker.retention.periodic import PeriodicPass
from common.config import Config
from common.errors import (
    BadRequestBody,
    InvalidPosition,
    NotAllowed,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
)
from common.topic_names import TopicName
from cursor.stats import backlog

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.topics.loaded import LoadedTopics
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic
    from metadata.api import AsyncStore

log = logging.getLogger(__name__)

QUOTA_KEY = "backlog_quota_map"           # in namespace and topic policies: {type: quota JSON}
SIZE = "destination_storage"
AGE = "message_age"
TYPES = (SIZE, AGE)
HOLD = "producer_request_hold"
EXCEPTION = "producer_exception"
EVICTION = "consumer_backlog_eviction"
POLICIES = (HOLD, EXCEPTION, EVICTION)
EVICTION_TARGET_RATIO = 0.9               # eviction brings the backlog down to 90% of the limit (Pulsar's)
EVICTION_ROUNDS_MAX = 100                 # skip rounds one size eviction makes, at most
DISCONNECT_SETTLE_S = 5.0                 # disconnecting: how long appends in flight may take
REFUSAL = "Cannot create producer on topic with backlog quota exceeded"   # Pulsar's words


@dataclass(frozen=True)
class BacklogQuota:
    limit_size_bytes: int = -1     # destination_storage limit; -1: none
    limit_time_s: int = -1         # message_age limit; <= 0: none
    policy: str = HOLD

    def to_json(self) -> dict:
        """Pulsar's BacklogQuota JSON (`limit` is the old name of `limitSize`)."""
        return {"limit": self.limit_size_bytes, "limitSize": self.limit_size_bytes,
                "limitTime": self.limit_time_s, "policy": self.policy}

    @classmethod
    def from_json(cls, doc: dict) -> BacklogQuota:
        size = doc.get("limitSize", doc.get("limit", -1))
        return cls(int(size if size is not None else -1), int(doc.get("limitTime", -1)),
                   str(doc.get("policy") or HOLD))


def quota_from_body(body: object) -> BacklogQuota:
    """An admin body `{"limitSize", "limitTime", "policy"}` (alias "limit"), checked: 400 if
    malformed."""
    if not isinstance(body, dict):
        raise BadRequestBody('a backlog quota is {"limitSize": bytes, "limitTime": seconds, "policy": ...}')
    values = {}
    for key in ("limitSize", "limit", "limitTime"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise BadRequestBody(f"backlog quota {key} must be an integer >= -1 (-1: no limit)", value=value)
        values[key] = value
    policy = body.get("policy", body.get("retentionPolicy"))
    if policy not in POLICIES:
        raise BadRequestBody(f"backlog quota policy must be one of {', '.join(POLICIES)}", policy=policy)
    size = values.get("limitSize", values.get("limit", -1))
    return BacklogQuota(size, values.get("limitTime", -1), policy)


def quota_type(raw: str | None) -> str:
    """`?backlogQuotaType=` (default destination_storage); 400 if unknown."""
    if raw is None or raw == "":
        return SIZE
    if raw not in TYPES:
        raise BadRequestBody(f"backlogQuotaType must be {SIZE} or {AGE}", backlogQuotaType=raw)
    return raw


def default_quota(config: Config) -> BacklogQuota:
    return BacklogQuota(config.backlog_quota_default_limit_bytes, config.backlog_quota_default_limit_seconds,
                        config.backlog_quota_default_policy)


def effective(ns_policies: dict, topic_policies: dict | None, config: Config) -> dict[str, BacklogQuota]:
    """Per type: the topic's quota, else the namespace's, else the broker default."""
    out = {}
    for kind in TYPES:
        found = (topic_policies or {}).get(QUOTA_KEY, {}).get(kind) or ns_policies.get(QUOTA_KEY, {}).get(kind)
        out[kind] = BacklogQuota.from_json(found) if found else default_quota(config)
    return out


def conflicts_with_retention(quota: BacklogQuota, retention: dict | None) -> bool:
    """Pulsar's check: a quota at or over the retention (size in bytes, time in seconds) is
    refused, since retention would delete the backlog first."""
    if retention is None:
        return False
    size_mb, time_min = int(retention["retentionSizeInMB"]), int(retention["retentionTimeInMinutes"])
    if size_mb > 0 and quota.limit_size_bytes >= size_mb * 1024 * 1024:
        return True
    return time_min > 0 and quota.limit_time_s >= time_min * 60



async def refuse_retention_under_quotas(astore: AsyncStore, tenant: str, ns: str, name: TopicName | None,
                                        retention: dict) -> None:
    """The other side of the check, as Pulsar's retention routes: a retention that a quota in
    force (the topic's, else the namespace's) is at or over is refused (NotAllowed, 412). Every
    front end that sets a retention asks it (the admin API, Kafka's alter configs)."""
    ns_policies = await policies.namespace_policies(astore, tenant, ns)
    topic_policies = await policies.topic_policies(astore, name) if name is not None else None
    stored = {**ns_policies.get(QUOTA_KEY, {}), **(topic_policies or {}).get(QUOTA_KEY, {})}
    if any(conflicts_with_retention(BacklogQuota.from_json(q), retention) for q in stored.values()):
        word = "topic" if name is not None else "namespace"
        raise NotAllowed(f"Retention Quota must exceed configured backlog quota for {word}.")

# --- the cached quotas of each loaded topic ------------------------------------------------------

_quotas: weakref.WeakKeyDictionary[PersistentTopic, dict[str, BacklogQuota]] = weakref.WeakKeyDictionary()
_evictions: weakref.WeakKeyDictionary[PersistentTopic, collections.Counter[str]] = weakref.WeakKeyDictionary()


async def load(ctx: BrokerContext, topic: PersistentTopic) -> dict[str, BacklogQuota]:
    """Read the topic's effective quotas from the metadata store and cache them."""
    name = topic.name
    ns = await policies.namespace_policies(ctx.astore, name.tenant, name.namespace)
    found = effective(ns, await policies.topic_policies(ctx.astore, name), ctx.config)
    _quotas[topic] = found
    return found


async def reload_matching(ctx: BrokerContext, loaded: LoadedTopics, match: Callable[[TopicName], bool]) -> None:
    """Read again the quotas of the loaded topics whose name matches (a policy changed)."""
    for topic in list(loaded.topics.values()):
        if match(topic.name) and not topic.closing:
            await load(ctx, topic)


def quotas_of(topic: PersistentTopic) -> dict[str, BacklogQuota]:
    """The cached quotas (the broker defaults until first loaded)."""
    found = _quotas.get(topic)
    if found is None:
        return {kind: default_quota(topic.config) for kind in TYPES}
    return found


def evictions_of(topic: PersistentTopic) -> collections.Counter[str]:
    """Evictions done on the topic since it was loaded, by "size" / "time"."""
    return _evictions.setdefault(topic, collections.Counter())


# --- measuring -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SubscriptionBacklog:
    name: str
    size_bytes: int            # backlog bytes (backlogSize)
    oldest_publish_ms: int     # publish time of its oldest unacked entry; 0: no backlog


def _oldest_publish_ms(sub: Subscription, entries: int) -> int:
    if entries == 0:
        return 0
    try:
        return sub.ml.entry_meta(sub.ml.next_position(sub.cursor.mark_delete_position)).publish_time_ms
    except InvalidPosition:          # trimmed meanwhile
        return 0


def measure(topic: PersistentTopic) -> list[SubscriptionBacklog]:
    """Each durable subscription's backlog (readers' do not hold storage, as in Pulsar)."""
    out = []
    for sub in list(topic.subscriptions.values()):
        if not sub.durable or sub.closed:
            continue
        entries, _, size = backlog(sub.cursor, sub.ml)
        out.append(SubscriptionBacklog(sub.name, size, _oldest_publish_ms(sub, entries)))
    return out


def _largest(subs: list[SubscriptionBacklog]) -> SubscriptionBacklog | None:
    return max(subs, key=lambda s: s.size_bytes, default=None)


def _oldest(subs: list[SubscriptionBacklog]) -> SubscriptionBacklog | None:
    with_backlog = [s for s in subs if s.oldest_publish_ms > 0]
    return min(with_backlog, key=lambda s: s.oldest_publish_ms, default=None)


def exceeded(kind: str, quota: BacklogQuota, subs: list[SubscriptionBacklog], now_ms: int) -> bool:
    if kind == SIZE:
        largest = _largest(subs)
        return (quota.limit_size_bytes >= 0 and largest is not None and largest.size_bytes > 0
                and largest.size_bytes >= quota.limit_size_bytes)
    oldest = _oldest(subs)
    return (quota.limit_time_s > 0 and oldest is not None
            and now_ms - oldest.oldest_publish_ms > quota.limit_time_s * 1000)


def _limited(quotas: dict[str, BacklogQuota]) -> bool:
    return quotas[SIZE].limit_size_bytes >= 0 or quotas[AGE].limit_time_s > 0


# --- producers -----------------------------------------------------------------------------------

async def refuse_producer(ctx: BrokerContext, topic: PersistentTopic) -> None:
    """Refuse a new producer while the topic is over a quota whose policy holds producers back.
    The quotas are the cached ones (read when the topic was loaded, at every check, and when
    changed through this broker); the backlog is measured now."""
    quotas = quotas_of(topic)
    if not ctx.config.backlog_quota_check_enabled or not _limited(quotas):
        return
    subs = measure(topic)
    now_ms = ctx.clock.wall_ms()
    for kind in TYPES:
        quota = quotas[kind]
        if quota.policy == EVICTION or not exceeded(kind, quota, subs, now_ms):
            continue
        error = ProducerBlockedQuotaExceededError if quota.policy == HOLD else ProducerBlockedQuotaExceededException
        raise error(REFUSAL, topic=str(topic.name), quota_type=kind)


async def disconnect_producers(topic: PersistentTopic) -> int:
    """Close every producer of the topic once its appends in flight got their receipts; the
    client reconnects and meets `refuse_producer`. Returns how many."""
    producers = list(topic.producers.values())
    for producer in producers:
        producer.quiesce()
    try:
        await asyncio.wait_for(asyncio.gather(*(p.settled() for p in producers)), DISCONNECT_SETTLE_S)
    except TimeoutError:
        log.warning("%s: receipts still pending after %.1f s; disconnecting anyway", topic.name, DISCONNECT_SETTLE_S)
    for producer in producers:
        log.info("producer %s exceeded the backlog quota of %s: disconnecting it", producer.name, topic.name)
        topic.remove_producer(producer)
        producer.close_by_broker()
    return len(producers)


# --- eviction ------------------------------------------------------------------------------------

def evict_size(topic: PersistentTopic, quota: BacklogQuota) -> int:
    """Skip the largest subscription backlog's oldest entries (a share of its entries as large
    as the share of its bytes over the target, rounded up) until every backlog is at most 90% of
    the limit; returns the entries skipped. Bounded: `EVICTION_ROUNDS_MAX` rounds, and a round
    that skips nothing ends it."""
    target = EVICTION_TARGET_RATIO * quota.limit_size_bytes
    skipped = 0
    for _ in range(EVICTION_ROUNDS_MAX):
        largest = _largest(measure(topic))
        if largest is None or largest.size_bytes <= target:
            break
        sub = topic.subscriptions[largest.name]
        entries, _, size = backlog(sub.cursor, sub.ml)
        moved = sub.cursor.skip(max(1, math.ceil(entries * (size - target) / size)))
        sub.on_cursor_moved()
        if moved == 0:
            break
        skipped += moved
    return skipped


def evict_age(topic: PersistentTopic, quota: BacklogQuota, now_ms: int) -> int:
    """Ack, on every durable subscription, what was published more than 90% of limitTime ago;
    returns how many subscriptions moved."""
    before_ms = now_ms - int(EVICTION_TARGET_RATIO * quota.limit_time_s * 1000)
    moved = 0
    for sub in list(topic.subscriptions.values()):
        if sub.durable and not sub.closed and sub.cursor.expire_before(before_ms):
            sub.on_cursor_moved()
            moved += 1
    return moved


async def apply(topic: PersistentTopic, quotas: dict[str, BacklogQuota], now_ms: int) -> list[str]:
    """Apply the policy of every quota the topic is over; returns the types exceeded."""
    over = []
    for kind in TYPES:
        quota = quotas[kind]
        if not exceeded(kind, quota, measure(topic), now_ms):
            continue
        over.append(kind)
        log.info("%s: backlog quota %s exceeded, applying %s", topic.name, kind, quota.policy)
        if quota.policy == EVICTION:
            moved = evict_size(topic, quota) if kind == SIZE else evict_age(topic, quota, now_ms)
            if moved:
                evictions_of(topic)["size" if kind == SIZE else "time"] += 1
        elif topic.producers:
            await disconnect_producers(topic)
    return over


class BacklogQuotaChecker(PeriodicPass):
    """The periodic check over the loaded topics (see the module docstring)."""

    def __init__(self, ctx: BrokerContext, loaded: LoadedTopics) -> None:
        super().__init__(ctx, loaded, ctx.config.backlog_quota_check_interval_ms / 1000)

    def start(self) -> None:
        if self.ctx.config.backlog_quota_check_enabled:
            super().start()

    async def reload(self, match: Callable[[TopicName], bool]) -> None:
        """A policy changed: read the matching loaded topics' quotas again."""
        await reload_matching(self.ctx, self.loaded, match)

    async def check_all(self) -> None:
        """One pass; never raises but for cancellation. Each namespace's policies and all its
        topic-level policies are read once per pass (a get and a prefix listing)."""
        read: dict[tuple[str, str], tuple[dict, dict[str, dict]]] = {}
        astore = self.ctx.astore

        async def check(topic: PersistentTopic) -> None:
            key = (topic.name.tenant, topic.name.namespace)
            if key not in read:
                read[key] = (await policies.namespace_policies(astore, *key),
                             await policies.namespace_topic_policies(astore, *key))
            ns_policies, topic_level = read[key]
            quotas = _quotas[topic] = effective(ns_policies, topic_level.get(topic.name.base.local), self.ctx.config)
            if _limited(quotas) and not topic.closing:
                await apply(topic, quotas, self.ctx.clock.wall_ms())

        await self.each_topic(check, "backlog quota check")


# --- stats and metrics ---------------------------------------------------------------------------

def stats_fields(topic: PersistentTopic, subs_json: dict[str, dict], now_ms: int) -> dict:
    """The topic's quota fields for its stats (see the module docstring), from its subscriptions'
    stats as `broker.stats.topic_stats` made them (no backlog is computed twice); each subscription's
    own fields are added to its entry of `subs_json`."""
    quotas = quotas_of(topic)
    size_limit, time_limit = quotas[SIZE].limit_size_bytes, quotas[AGE].limit_time_s
    subs = [SubscriptionBacklog(name, sub["backlogSize"], sub["earliestMsgPublishTimeInBacklog"])
            for name, sub in subs_json.items() if sub["isDurable"]]
    for sub in subs:
        age_s = (now_ms - sub.oldest_publish_ms) // 1000 if sub.oldest_publish_ms else 0
        subs_json[sub.name]["backlogQuotaRemainingSize"] = size_limit - sub.size_bytes if size_limit >= 0 else None
        subs_json[sub.name]["backlogQuotaRemainingTimeSeconds"] = time_limit - age_s if time_limit > 0 else None
    oldest = _oldest(subs)
    return {
        "backlogQuotaLimitSize": size_limit,
        "backlogQuotaLimitTime": time_limit,
        "oldestBacklogMessageAgeSeconds": (now_ms - oldest.oldest_publish_ms) // 1000 if oldest else 0,
        "oldestBacklogMessageSubscriptionName": oldest.name if oldest else None,
        "backlogQuotaEvictions": {kind: evictions_of(topic)[kind] for kind in ("size", "time")},
    }


def merge_partitions(per_partition: dict[str, dict]) -> dict:
    """The quota fields of a partitioned topic's stats: the partitions' quota (one policy for
    all), the oldest backlog message of any partition and its subscription."""
    stats = list(per_partition.values())
    oldest = max(stats, key=lambda st: st.get("oldestBacklogMessageAgeSeconds", 0), default={})
    return {
        "backlogQuotaLimitSize": stats[0].get("backlogQuotaLimitSize", -1) if stats else -1,
        "backlogQuotaLimitTime": stats[0].get("backlogQuotaLimitTime", -1) if stats else -1,
        "oldestBacklogMessageAgeSeconds": oldest.get("oldestBacklogMessageAgeSeconds", 0),
        "oldestBacklogMessageSubscriptionName": oldest.get("oldestBacklogMessageSubscriptionName"),
    }
