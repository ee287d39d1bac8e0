"""Topic, subscription and namespace families of `/metrics` (Pulsar's names), from topic stats.

Input: `{topic name: broker.stats.topic_stats.topic_stats(topic)}` of the loaded topics, and of the live
non-persistent ones `broker.nonpersistent.topic.metrics_json(topic)` (drop fields: `msgDropCount`,
`msgDropRate`, absent from persistent stats and read as 0). Topic-level
(Pulsar's exposeTopicLevelMetricsInPrometheus, our `broker_metrics_topic_level`): one sample
per topic (labels cluster, namespace, topic) and per subscription (+ subscription). Otherwise
Pulsar's namespace view: the topic families summed per namespace (labels cluster, namespace) and
no subscription families.

What must hold: each sample is the stats field it names, unchanged (`pulsar_msg_backlog` =
`msgBacklog`, `pulsar_storage_size` = `storageSize`, ...); a namespace sample is the sum of its
topics' samples. `pulsar_msg_backlog` is Pulsar's: the topic's total backlog, the sum over its
subscriptions of their `msgBacklog` (which the topic's `msgBacklog` is, `broker.stats.topic_stats`);
`pulsar_storage_backlog_size` is the largest durable subscription's backlog bytes (`backlogSize`,
Pulsar's estimated backlog size).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

Stats = dict[str, Any]
Getter = Callable[[Stats], float]


def _consumers(s: Stats) -> int:
    return sum(len(sub["consumers"]) for sub in s["subscriptions"].values())


# (name, kind, help, value from the topic's stats)
TOPIC_METRICS: tuple[tuple[str, str, str, Getter], ...] = (
    ("pulsar_in_messages_total", "counter", "messages stored on the topic since it was loaded",
     lambda s: s["msgInCounter"]),
    ("pulsar_in_bytes_total", "counter", "bytes stored on the topic since it was loaded",
     lambda s: s["bytesInCounter"]),
    ("pulsar_out_messages_total", "counter", "messages delivered to the topic's consumers since it was loaded",
     lambda s: s["msgOutCounter"]),
    ("pulsar_out_bytes_total", "counter", "bytes delivered to the topic's consumers since it was loaded",
     lambda s: s["bytesOutCounter"]),
    ("pulsar_rate_in", "gauge", "messages/s stored (sliding window)", lambda s: s["msgRateIn"]),
    ("pulsar_rate_out", "gauge", "messages/s dispatched (sliding window)", lambda s: s["msgRateOut"]),
    ("pulsar_throughput_in", "gauge", "bytes/s stored (sliding window)", lambda s: s["msgThroughputIn"]),
    ("pulsar_throughput_out", "gauge", "bytes/s dispatched (sliding window)", lambda s: s["msgThroughputOut"]),
    ("pulsar_publish_rate_limit_times", "gauge", "times a publish rate limit paused a producer of the topic "
     "since it was loaded (publishRateLimitedTimes)", lambda s: s.get("publishRateLimitedTimes", 0)),
    ("pulsar_producers_count", "gauge", "connected producers", lambda s: len(s["publishers"])),
    ("pulsar_subscriptions_count", "gauge", "subscriptions", lambda s: len(s["subscriptions"])),
    ("pulsar_consumers_count", "gauge", "connected consumers", _consumers),
    ("pulsar_msg_backlog", "gauge", "the topic's backlog in entries: the sum of its subscriptions' (msgBacklog)",
     lambda s: s["msgBacklog"]),
    ("pulsar_storage_size", "gauge", "bytes of every ledger the topic keeps, offloaded ones included (storageSize)",
     lambda s: s["storageSize"]),
    ("pulsar_storage_backlog_size", "gauge", "bytes of the largest durable subscription backlog (backlogSize)",
     lambda s: s["backlogSize"]),
    ("pulsar_storage_offloaded_size", "gauge", "bytes of the topic's ledgers offloaded to the cold tier",
     lambda s: s["offloadedStorageSize"]),
    ("pulsar_storage_backlog_quota_limit", "gauge", "destination_storage backlog quota in bytes, -1 none "
     "(backlogQuotaLimitSize)", lambda s: s["backlogQuotaLimitSize"]),
    ("pulsar_storage_backlog_quota_limit_time", "gauge", "message_age backlog quota in seconds, -1 none "
     "(backlogQuotaLimitTime)", lambda s: s["backlogQuotaLimitTime"]),
    ("pulsar_storage_backlog_age_seconds", "gauge", "age of the oldest unacked message of the topic's durable "
     "subscriptions (oldestBacklogMessageAgeSeconds)", lambda s: s["oldestBacklogMessageAgeSeconds"]),
    ("strata_msg_dropped", "counter", "messages of a non-persistent topic that a subscription's consumers could "
     "not take, summed over its subscriptions (msgDropCount; 0 on persistent topics)",
     lambda s: s.get("msgDropCount", 0)),
)

# (name, help, value from one subscription's stats); all gauges
SUBSCRIPTION_METRICS: tuple[tuple[str, str, Getter], ...] = (
    ("pulsar_subscription_back_log", "subscription backlog in entries (msgBacklog)", lambda s: s["msgBacklog"]),
    ("pulsar_subscription_back_log_no_delayed", "backlog without delayed messages (msgBacklogNoDelayed)",
     lambda s: s["msgBacklogNoDelayed"]),
    ("pulsar_subscription_unacked_messages", "delivered, unacked messages", lambda s: s["unackedMessages"]),
    ("pulsar_subscription_consumers_count", "consumers of the subscription", lambda s: len(s["consumers"])),
    ("pulsar_subscription_msg_rate_out", "messages/s delivered (sliding window)", lambda s: s["msgRateOut"]),
    ("pulsar_subscription_msg_throughput_out", "bytes/s delivered (sliding window)",
     lambda s: s["msgThroughputOut"]),
    ("pulsar_subscription_msg_drop_rate", "messages/s a non-persistent subscription dropped (msgDropRate; "
     "0 on persistent topics)", lambda s: s.get("msgDropRate", 0.0)),
    ("pulsar_subscription_blocked_on_unacked_messages",
     "1 while the subscription (maxUnackedMessagesPerSubscription) or one of its consumers "
     "(maxUnackedMessagesPerConsumer) is held back on unacked messages",
     lambda s: int(s.get("blockedSubscriptionOnUnackedMsgs", False)
                   or any(c["blockedConsumerOnUnackedMsgs"] for c in s["consumers"]))),
    ("strata_subscription_cursor_state_bytes", "cursor state bytes as last encoded",
     lambda s: s["cursorStateBytes"]),
    ("strata_subscription_cursor_state_error",
     "1 while the cursor state is over cursor_state_bytes_max (acks adding holes are refused)",
     lambda s: int(s["cursorStateError"] is not None)),
)


def namespace_of(topic: str) -> str:
    """`persistent://public/default/t` -> `public/default`."""
    return topic.split("://", 1)[-1].rsplit("/", 1)[0]


def _family(name: str, kind: str, help_text: str, labels: list[str]) -> CounterMetricFamily | GaugeMetricFamily:
    if kind == "counter":
        return CounterMetricFamily(name, help_text, labels=labels)
    return GaugeMetricFamily(name, help_text, labels=labels)


def families(stats: dict[str, Stats], cluster: str, topic_level: bool) -> Iterator[Metric]:
    if topic_level:
        yield from _topic_families(stats, cluster)
        yield from _subscription_families(stats, cluster)
        yield from _dispatch_throttle_families(stats, cluster)
        yield _evictions_family(stats, cluster)
        yield from _quota_distance_families(stats, cluster)
    else:
        yield from _namespace_families(stats, cluster)


def _sample_name(family: Metric) -> str:
    return family.name + "_total" if family.type == "counter" else family.name


# Samples are added with `add_sample` and one label dict per topic (or subscription) shared by
# every family: `add_metric` builds a dict per sample, a third of the render time at 1,000 topics.
def _topic_families(stats: dict[str, Stats], cluster: str) -> Iterator[Metric]:
    labels = {name: {"cluster": cluster, "namespace": namespace_of(name), "topic": name} for name in stats}
    for metric, kind, help_text, get in TOPIC_METRICS:
        family = _family(metric, kind, help_text, ["cluster", "namespace", "topic"])
        sample_name, add = _sample_name(family), family.add_sample
        for name, topic in stats.items():
            add(sample_name, labels[name], get(topic))
        yield family


def _subscription_families(stats: dict[str, Stats], cluster: str) -> Iterator[Metric]:
    keys = [({"cluster": cluster, "namespace": namespace_of(name), "topic": name, "subscription": sub_name}, sub)
            for name, topic in stats.items() for sub_name, sub in topic["subscriptions"].items()]
    for metric, help_text, get in SUBSCRIPTION_METRICS:
        family = GaugeMetricFamily(metric, help_text, labels=["cluster", "namespace", "topic", "subscription"])
        add = family.add_sample
        for label_values, sub in keys:
            add(metric, label_values, get(sub))
        yield family


def _dispatch_throttle_families(stats: dict[str, Stats], cluster: str) -> Iterator[Metric]:
    """Pulsar's pulsar_subscription_dispatch_throttled_{msg,bytes}_events, one sample per
    subscription and `reason` (the limit that held dispatch back: subscription, topic, broker)."""
    for kind, field in (("msg", "Msg"), ("bytes", "Bytes")):
        metric = f"pulsar_subscription_dispatch_throttled_{kind}_events"
        family = GaugeMetricFamily(metric, f"dispatch passes a dispatch rate limit held back ({kind} rate), "
                                   "since the topic was loaded",
                                   labels=["cluster", "namespace", "topic", "subscription", "reason"])
        for name, topic in stats.items():
            for sub_name, sub in topic["subscriptions"].items():
                for reason, scope in (("subscription", "Subscription"), ("topic", "Topic"), ("broker", "Broker")):
                    family.add_metric([cluster, namespace_of(name), name, sub_name, reason],
                                      sub.get(f"dispatchThrottled{field}EventsBy{scope}Limit", 0))
        yield family


def _evictions_family(stats: dict[str, Stats], cluster: str) -> Metric:
    """pulsar_storage_backlog_quota_exceeded_evictions_total{quota_type="size"|"time"}, from
    `backlogQuotaEvictions` (`broker.retention.backlog_quota`)."""
    family = CounterMetricFamily("pulsar_storage_backlog_quota_exceeded_evictions",
                                 "backlog evictions since the topic was loaded (consumer_backlog_eviction)",
                                 labels=["cluster", "namespace", "topic", "quota_type"])
    for name, topic in stats.items():
        for kind, count in topic["backlogQuotaEvictions"].items():
            family.add_metric([cluster, namespace_of(name), name, kind], count)
    return family


def _quota_distance_families(stats: dict[str, Stats], cluster: str) -> Iterator[Metric]:
    """How far each durable subscription is from its topic's backlog quotas, where the quota has a
    limit (`backlogQuotaRemainingSize`, `backlogQuotaRemainingTimeSeconds`; negative: over)."""
    for metric, field, help_text in (
            ("strata_subscription_backlog_quota_remaining_bytes", "backlogQuotaRemainingSize",
             "destination_storage quota minus the subscription's backlog bytes (negative: over)"),
            ("strata_subscription_backlog_quota_remaining_seconds", "backlogQuotaRemainingTimeSeconds",
             "message_age quota minus the age of the subscription's oldest unacked message (negative: over)")):
        family = GaugeMetricFamily(metric, help_text, labels=["cluster", "namespace", "topic", "subscription"])
        for name, topic in stats.items():
            for sub_name, sub in topic["subscriptions"].items():
                if sub.get(field) is not None:
                    family.add_metric([cluster, namespace_of(name), name, sub_name], sub[field])
        yield family


def _namespace_families(stats: dict[str, Stats], cluster: str) -> Iterator[Metric]:
    by_namespace: dict[str, list[Stats]] = {}
    for name, topic in stats.items():
        by_namespace.setdefault(namespace_of(name), []).append(topic)
    for metric, kind, help_text, get in TOPIC_METRICS:
        family = _family(metric, kind, help_text + ", summed over the namespace", ["cluster", "namespace"])
        for namespace, topics in sorted(by_namespace.items()):
            family.add_metric([cluster, namespace], sum(get(t) for t in topics))
        yield family
