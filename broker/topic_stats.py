"""Topic stats in Pulsar's shape (`/admin/v2/persistent/{t}/{ns}/{topic}/stats`).

Field names follow Pulsar's TopicStats / SubscriptionStats / ConsumerStats / PublisherStats JSON:
`msgInCounter`, `bytesInCounter`, `msgBacklog`, `backlogSize`, `storageSize`, `publishers`,
`subscriptions.{name}.{msgBacklog, msgBacklogNoDelayed, unackedMessages, consumers, type,
msgRateOut, ...}`. Backlog and storage numbers come from the cursor arithmetic
(`cursor.stats`); rates are not sampled here and read 0.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.subscription import SUB_TYPE_NAMES, SubType
from cursor.stats import storage_size_bytes, subscription_stats

if TYPE_CHECKING:
    from broker.subscription import Subscription
    from broker.topic import PersistentTopic


def _consumer_stats(consumer) -> dict:
    return {
        "consumerName": consumer.name,
        "availablePermits": consumer.permits,
        "unackedMessages": consumer.unacked_messages(),
        "msgOutCounter": consumer.msg_out_counter,
        "bytesOutCounter": consumer.bytes_out_counter,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "priorityLevel": consumer.priority,
    }


def subscription_json(sub: "Subscription") -> dict:
    stats = subscription_stats(sub.cursor, sub.ml)
    consumers = sub.consumers
    sub_type = SUB_TYPE_NAMES[sub.sub_type] if sub.sub_type is not None else SUB_TYPE_NAMES[SubType.EXCLUSIVE]
    return {
        "msgBacklog": stats.backlog_entries,
        "msgBacklogNoDelayed": stats.backlog_entries,
        "backlogSize": stats.backlog_bytes,
        "unackedMessages": sum(c.unacked_messages() for c in consumers),
        "type": sub_type,
        "isDurable": sub.durable,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "msgOutCounter": sum(c.msg_out_counter for c in consumers),
        "bytesOutCounter": sum(c.bytes_out_counter for c in consumers),
        "markDeletePosition": str(stats.mark_delete_position),
        "readPosition": str(stats.read_position),
        "consumers": [_consumer_stats(c) for c in consumers],
    }


def topic_stats(topic: "PersistentTopic") -> dict:
    subs = {name: subscription_json(sub) for name, sub in topic.subscriptions.items()}
    durable = [s for s in topic.subscriptions.values() if s.durable]
    backlog = max((subs[s.name]["msgBacklog"] for s in durable), default=0)
    return {
        "msgRateIn": 0.0,
        "msgThroughputIn": 0.0,
        "msgRateOut": 0.0,
        "msgThroughputOut": 0.0,
        "msgInCounter": topic.msg_in_counter,
        "bytesInCounter": topic.bytes_in_counter,
        "msgOutCounter": sum(s["msgOutCounter"] for s in subs.values()),
        "bytesOutCounter": sum(s["bytesOutCounter"] for s in subs.values()),
        "msgBacklog": backlog,
        "backlogSize": max((subs[s.name]["backlogSize"] for s in durable), default=0),
        "storageSize": storage_size_bytes(topic.ml),
        "publishers": [
            {"producerName": p.name, "producerId": p.producer_id, "msgRateIn": 0.0,
             "msgThroughputIn": 0.0, "msgInCounter": p.msg_in_counter, "bytesInCounter": p.bytes_in_counter}
            for p in topic.producers.values()
        ],
        "subscriptions": subs,
    }
