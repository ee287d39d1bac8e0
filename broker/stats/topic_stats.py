"""Topic stats in Pulsar's shape (`/admin/v2/persistent/{t}/{ns}/{topic}/stats`).

Field names follow Pulsar's TopicStats / SubscriptionStats / ConsumerStats / PublisherStats JSON:
`msgInCounter`, `bytesInCounter`, `msgBacklog`, `backlogSize`, `storageSize`, `publishers`,
`subscriptions.{name}.{msgBacklog, msgBacklogNoDelayed, unackedMessages, consumers, type,
msgRateOut, ...}`, and per consumer `unackedMessages` and `blockedConsumerOnUnackedMsgs` (true
while `broker_consumer_unacked_messages_max` holds it back). Backlog and storage numbers come from
the cursor arithmetic (`cursor.stats`). Strata adds, per subscription, the cursor's persisted state:
`cursorStateBytes` (as last encoded), `cursorPersistedBytes`, `cursorStateBytesMax`,
`cursorStateError` (set while acks that add ack holes are refused: the state is over
`cursor_state_bytes_max`) and `cursorPersistError` (the last persist failure, e.g. fenced);
the errors are null when all is well. `subscriptionProperties` (Pulsar's name) are the properties
persisted with the cursor: a Kafka consumer group's subscription shows its group and last commit
there (`kafka.group`, `kafka.offset`, `kafka.metadata`, `kafka.md`: `broker.topics.group_offsets`).

Read and backlog positions, Pulsar's meanings:
- a subscription's `readPosition` is the next entry its dispatcher reads (as internalStats'
  cursor `readPosition`), the cursor's own read position only while it has no dispatcher;
- a subscription's `msgBacklog` counts entries after its mark-delete not acked (cursor.stats);
- the topic's `msgBacklog` (Strata's: Pulsar's TopicStats has none) is the SUM of all its
  subscriptions' `msgBacklog`, durable or not: what Pulsar exports as `pulsar_msg_backlog`
  (NamespaceStatsAggregator adds every subscription's backlog), so the metric is this field
  unchanged. The slowest subscription is in `backlogSize` instead: the bytes of the largest
  durable subscription backlog (Pulsar's estimated backlog size, `pulsar_storage_backlog_size`).

Fields Pulsar has that Strata fills from what it knows (all cheap: no entry is read):
- topic `averageMsgSize` = msgThroughputIn / msgRateIn (0.0 without traffic), per publisher
  the same of its own rates; `earliestMsgPublishTimeInBacklogs` = the earliest non-zero
  `earliestMsgPublishTimeInBacklog` of its subscriptions (0: no backlog anywhere);
- subscription `earliestMsgPublishTimeInBacklog`: publish time (ms) of the first entry after the
  mark-delete (from the managed ledger's entry index; 0 with no backlog; Pulsar fills it only
  with ?getEarliestTimeInBacklog=true, Strata always); `nonContiguousDeletedMessagesRanges`: its
  ack ranges above the mark-delete (internalStats' `totalNonContiguousDeletedMessagesRange`);
  `msgRateRedeliver`: the sum of its consumers'; `totalMsgExpired` (entries expiry acked: TTL,
  through `expire_counted`), `msgRateExpired` (their rate), `lastExpireTimestamp` (ms, 0 never),
  kept in memory since the topic was loaded, as Pulsar's;
- consumer `msgRateRedeliver`: messages/s of the pending entries its client asked to have
  redelivered (counted at the request, as Pulsar's; an exclusive/failover consumer's request
  gives back all its pending entries, so counts them all);
- consumer and publisher `address` ("/host:port", Pulsar's format), `connectedSince` (ISO 8601
  with offset, as Pulsar's DateFormatter: when the consumer subscribed / the producer was
  created on this broker), `clientVersion` (the CONNECT's client_version).

Counters are cumulative, as Pulsar's (what must hold, at any instant the event loop is between
callbacks):
- a consumer's `msgOutCounter`/`bytesOutCounter`: messages and entry bytes sent to it
  (redeliveries count again);
- a subscription's: its attached consumers' plus those of consumers that have left
  (`Subscription.msg_out_from_removed_consumers`), so closing a consumer takes nothing away;
- the topic's `msgOutCounter`/`bytesOutCounter` = the sum over its subscriptions + what
  subscriptions since removed had counted (Pulsar's msgOutFromRemovedSubscriptions);
- the topic's `msgInCounter`/`bytesInCounter` = messages and bytes ever stored in it, trimmed
  ledgers included (restored from the managed ledger on load: `PersistentTopic`), so with
  unbatched producers `msgInCounter` = entries kept + entries trimmed.
Out counters live in memory and start at 0 when the topic is loaded (restart, unload), as
Pulsar's do; in counters survive it (Pulsar's restart at 0: Strata keeps the identity above).

Backlog quotas (`broker.retention.backlog_quota.stats_fields`): `backlogQuotaLimitSize`,
`backlogQuotaLimitTime`, `oldestBacklogMessageAgeSeconds`, `oldestBacklogMessageSubscriptionName`,
and per durable subscription `backlogQuotaRemainingSize` / `backlogQuotaRemainingTimeSeconds`.

Offload (Pulsar's names): `storageSize` counts every kept
ledger, offloaded ones included; `offloadedStorageSize` the offloaded ledgers' bytes;
`lastOffloadLedgerId`, `lastOffloadSuccessTimeStamp`, `lastOffloadFailureTimeStamp` (ms; 0 if
never since the topic was loaded). `partitioned_stats` sums the partitions' stats (Pulsar's
PartitionedTopicStats) and lists each under `partitions`.

Rates come from `broker.topics.rates` (sampled counters over a window; idle topics cost nothing).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pyroaring import BitMap64

from broker.retention import backlog_quota
from broker.topics.rates import event_rate, expiry_of, out_rates, rates
from broker.topics.subscription import SUB_TYPE_NAMES, SubType
from common.errors import InvalidPosition
from common.human import iso_ms
from cursor.stats import SubscriptionStats, storage_size_bytes, subscription_stats

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic


def _address(link: object) -> str:
    """The client's address as Pulsar prints it ("/127.0.0.1:50362"); "" when unknown."""
    peer = getattr(link, "peer", "")
    return f"/{peer}" if peer and peer != "?" else ""


# consumer or producer -> its connectedSince text, formatted once (a third of the new fields' cost)
_since_texts: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


def _connected_since(obj) -> str:
    text = _since_texts.get(obj)
    if text is None:
        text = _since_texts[obj] = iso_ms(obj.connected_since_ms)
    return text


def _consumer_stats(consumer) -> dict:
    rate_out, throughput_out = rates(consumer)
    return {
        "consumerName": consumer.name,
        "availablePermits": consumer.permits,
        "unackedMessages": consumer.unacked_messages(),
        # Pulsar's name: at broker_consumer_unacked_messages_max, until acks bring it to half
        "blockedConsumerOnUnackedMsgs": consumer.blocked_on_unacked,
        "msgOutCounter": consumer.msg_out_counter,
        "bytesOutCounter": consumer.bytes_out_counter,
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "msgRateRedeliver": event_rate(consumer),
        "priorityLevel": consumer.priority,
        "address": _address(consumer.link),
        "connectedSince": _connected_since(consumer),
        "clientVersion": getattr(consumer.link, "client_version", ""),
    }


def _ack_range_count(acked_ledgers: Mapping[int, BitMap64]) -> int:
    """How many runs of consecutive acked entries there are (per ledger, as `ack_ranges` lists
    them), counted in C: a run starts at every acked entry whose predecessor is not acked."""
    return sum(len(acked) - acked.intersection_cardinality(acked.shift(1))
               for acked in acked_ledgers.values() if acked)


def _earliest_publish_ms(sub: Subscription, stats: SubscriptionStats) -> int:
    """Publish time (ms) of the first entry after the mark-delete position (the oldest in the
    backlog: it is never acked, else the mark-delete would have moved past it); 0 with no
    backlog. Read from the managed ledger's entry index, no entry is read."""
    if stats.backlog_entries == 0:
        return 0
    try:
        return sub.ml.entry_meta(sub.ml.next_position(stats.mark_delete_position)).publish_time_ms
    except InvalidPosition:                   # trimmed meanwhile: nothing older is kept
        return 0


def _gate_blocked(dispatcher: object) -> bool:
    """A Shared/Key_Shared dispatcher stopped at its subscription's unacked limit."""
    gate = getattr(dispatcher, "gate", None)
    return gate is not None and bool(gate.blocked)


def subscription_json(sub: Subscription) -> dict:
    stats = subscription_stats(sub.cursor, sub.ml)
    consumers = sub.consumers
    consumer_stats = [_consumer_stats(c) for c in consumers]
    sub_type = SUB_TYPE_NAMES[sub.sub_type] if sub.sub_type is not None else SUB_TYPE_NAMES[SubType.EXCLUSIVE]
    dispatcher = sub.dispatcher
    read_position = dispatcher.read_position if dispatcher is not None else stats.read_position
    expiry = expiry_of(sub)
    rate_out, throughput_out = rates(sub)
    return {
        "msgBacklog": stats.backlog_entries,
        "msgBacklogNoDelayed": stats.backlog_entries,
        "backlogSize": stats.backlog_bytes,
        "unackedMessages": sum(c.unacked_messages() for c in consumers),
        # Pulsar's name: dispatch stopped at maxUnackedMessagesPerSubscription, until acks bring it under half
        "blockedSubscriptionOnUnackedMsgs": _gate_blocked(dispatcher),
        "type": sub_type,
        "isDurable": sub.durable,
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "msgOutCounter": sub.msg_out_counter,
        "bytesOutCounter": sub.bytes_out_counter,
        "msgRateRedeliver": sum(c["msgRateRedeliver"] for c in consumer_stats),
        "msgRateExpired": event_rate(sub),
        "totalMsgExpired": expiry.entries if expiry is not None else 0,
        "lastExpireTimestamp": expiry.last_ms if expiry is not None else 0,
        "earliestMsgPublishTimeInBacklog": _earliest_publish_ms(sub, stats),
        "nonContiguousDeletedMessagesRanges": _ack_range_count(sub.cursor.acked_ledgers),
        "markDeletePosition": str(stats.mark_delete_position),
        "readPosition": str(read_position),
        "subscriptionProperties": dict(sub.cursor.properties),
        "cursorStateBytes": stats.state_bytes,
        "cursorPersistedBytes": stats.persisted_bytes,
        "cursorStateBytesMax": sub.cursor.state_bytes_max,
        "cursorStateError": stats.state_error,
        "cursorPersistError": stats.persist_error,
        **sub.topic.rates.throttle_counts(sub),   # dispatchThrottled*EventsBy*Limit (rate_limits)
        "consumers": consumer_stats,
    }


def _earliest(times_ms: Iterable[int]) -> int:
    """The earliest of the non-zero times (0 means none); 0 if there is none."""
    return min((t for t in times_ms if t > 0), default=0)


def topic_stats(topic: PersistentTopic) -> dict:
    subs = {name: subscription_json(sub) for name, sub in topic.subscriptions.items()}
    durable = [s for s in topic.subscriptions.values() if s.durable]
    quota_fields = backlog_quota.stats_fields(topic, subs, topic.ctx.clock.wall_ms())
    rate_in, throughput_in = rates(topic)
    rate_out, throughput_out = out_rates(topic)
    return {
        "msgRateIn": rate_in,
        "msgThroughputIn": throughput_in,
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "averageMsgSize": throughput_in / rate_in if rate_in > 0 else 0.0,
        "publishRateLimitedTimes": topic.rates.publish_rate_limited_times,
        "msgInCounter": topic.msg_in_counter,
        "bytesInCounter": topic.bytes_in_counter,
        "msgOutCounter": topic.msg_out_counter,
        "bytesOutCounter": topic.bytes_out_counter,
        "msgBacklog": sum(sub["msgBacklog"] for sub in subs.values()),
        "backlogSize": max((subs[s.name]["backlogSize"] for s in durable), default=0),
        "earliestMsgPublishTimeInBacklogs": _earliest(sub["earliestMsgPublishTimeInBacklog"] for sub in subs.values()),
        "storageSize": storage_size_bytes(topic.ml) + topic.compaction.stored_bytes,   # compacted ledger too
        **_offload_stats(topic.ml),
        **quota_fields,
        "publishers": [_publisher_stats(p) for p in topic.producers.values()] + _others(topic, "publishers"),
        "subscriptions": subs,
        # readers of another protocol outside any subscription (Kafka consumers using assign())
        "protocolConsumers": _others(topic, "consumers"),
    }


def _offload_stats(ml) -> dict:
    status = ml.offload_status
    return {
        "offloadedStorageSize": ml.offloaded_size_bytes,
        "lastOffloadLedgerId": status.last_offload_ledger_id,
        "lastOffloadSuccessTimeStamp": status.last_success_ms,
        "lastOffloadFailureTimeStamp": status.last_failure_ms,
    }


def _others(topic: PersistentTopic, kind: str) -> list[dict]:
    """Publishers or consumers of other protocols' front ends (each entry says its `protocol`)."""
    out: list[dict] = []
    for report in topic.protocol_clients.values():
        out.extend(report().get(kind, []))
    return out


def _publisher_stats(p) -> dict:
    rate_in, throughput_in = rates(p)
    return {"producerName": p.name, "producerId": p.producer_id, "msgRateIn": rate_in,
            "msgThroughputIn": throughput_in,
            "averageMsgSize": throughput_in / rate_in if rate_in > 0 else 0.0,
            "msgInCounter": p.msg_in_counter, "bytesInCounter": p.bytes_in_counter,
            "address": _address(p.link), "connectedSince": _connected_since(p),
            "clientVersion": getattr(p.link, "client_version", ""), "accessMode": p.access_mode,
            "publishRateLimited": p.topic.rates.is_paused(p)}


# Topic fields that add up across partitions (the rest are merged or taken per partition).
_SUMMED = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgInCounter",
           "bytesInCounter", "msgOutCounter", "bytesOutCounter", "msgBacklog", "backlogSize",
           "storageSize", "offloadedStorageSize")
_SUB_SUMMED = ("msgBacklog", "msgBacklogNoDelayed", "backlogSize", "unackedMessages", "msgRateOut",
               "msgThroughputOut", "msgOutCounter", "bytesOutCounter", "msgRateRedeliver", "msgRateExpired",
               "totalMsgExpired", "nonContiguousDeletedMessagesRanges")


def partitioned_stats(partitions: int, per_partition: dict[str, dict], include_partitions: bool) -> dict:
    """Pulsar's PartitionedTopicStats: the partitions' stats summed, publishers and consumers
    listed, plus `metadata.partitions` and (if asked) each partition's stats under `partitions`."""
    out: dict = {key: 0 for key in _SUMMED}
    for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut"):
        out[key] = 0.0
    out["publishers"] = []
    out["protocolConsumers"] = []
    subs: dict[str, dict] = {}
    for stats in per_partition.values():
        for key in _SUMMED:
            out[key] += stats[key]
        out["publishers"] += stats["publishers"]
        out["protocolConsumers"] += stats.get("protocolConsumers", [])
        for name, sub in stats["subscriptions"].items():
            merged = subs.setdefault(name, {**{k: 0 for k in _SUB_SUMMED}, "type": sub["type"],
                                            "isDurable": sub["isDurable"], "consumers": []})
            for key in _SUB_SUMMED:
                merged[key] += sub.get(key, 0)     # .get: a peer broker's older stats may lack some
            merged["lastExpireTimestamp"] = max(merged.get("lastExpireTimestamp", 0),
                                                sub.get("lastExpireTimestamp", 0))
            merged["earliestMsgPublishTimeInBacklog"] = _earliest(
                (merged.get("earliestMsgPublishTimeInBacklog", 0), sub.get("earliestMsgPublishTimeInBacklog", 0)))
            merged["consumers"] += sub["consumers"]
    for key in ("lastOffloadLedgerId", "lastOffloadSuccessTimeStamp", "lastOffloadFailureTimeStamp"):
        out[key] = max((stats[key] for stats in per_partition.values()), default=0)
    out["averageMsgSize"] = out["msgThroughputIn"] / out["msgRateIn"] if out["msgRateIn"] > 0 else 0.0
    out["earliestMsgPublishTimeInBacklogs"] = _earliest(
        stats.get("earliestMsgPublishTimeInBacklogs", 0) for stats in per_partition.values())
    out["subscriptions"] = subs
    out.update(backlog_quota.merge_partitions(per_partition))
    out["metadata"] = {"partitions": partitions}
    out["partitions"] = per_partition if include_partitions else {}
    return out
