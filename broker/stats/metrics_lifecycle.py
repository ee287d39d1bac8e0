"""`/metrics` families of the lifecycle policies (`broker.limits.lifecycle.LifecycleCounters`).

Broker-wide counters, label `cluster`, since the broker started:
- `strata_inactive_topics_deleted_total`: topics (partitions) deleted by inactiveTopicPolicies;
- `strata_inactive_partitioned_topics_deleted_total`: partitioned topics whose metadata went with
  their last partition (broker_delete_inactive_partitioned_topic_metadata_enabled);
- `strata_subscriptions_expired_total`: subscriptions removed by subscriptionExpirationTimeMinutes;
- `strata_topics_auto_created_total`: topics created by naming them (autoTopicCreation);
- `strata_topic_auto_creation_refused_total`: namings refused with TopicNotFound;
- `strata_subscription_auto_creation_refused_total`: subscriptions refused by
  autoSubscriptionCreation;
- `strata_lifecycle_errors_total`: topic checks of the lifecycle task that failed (logged).

The service adds `families` to its `protocol_metrics` (the families other parts add at scrape time).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric

from broker.limits.lifecycle import LifecycleCounters


def broker_counters(cluster: str, rows: Iterable[tuple[str, str, float]]) -> list[Metric]:
    """One counter family per (name, help, value), each with the one sample `{cluster}`."""
    out: list[Metric] = []
    for name, help_text, value in rows:
        family = CounterMetricFamily(name, help_text, labels=["cluster"])
        family.add_metric([cluster], value)
        out.append(family)
    return out


def families(counters: LifecycleCounters, cluster: str) -> list[Metric]:
    return broker_counters(cluster, (
            ("strata_inactive_topics_deleted_total", "topics deleted by inactiveTopicPolicies",
             counters.inactive_topics_deleted),
            ("strata_inactive_partitioned_topics_deleted_total",
             "partitioned topics deleted with their last inactive partition", counters.partitioned_metadata_deleted),
            ("strata_subscriptions_expired_total", "subscriptions removed by subscriptionExpirationTimeMinutes",
             counters.subscriptions_expired),
            ("strata_topics_auto_created_total", "topics created by naming them (autoTopicCreation)",
             counters.topics_auto_created),
            ("strata_topic_auto_creation_refused_total", "topic namings refused by autoTopicCreation",
             counters.topic_creations_refused),
            ("strata_subscription_auto_creation_refused_total",
             "subscriptions refused by autoSubscriptionCreation", counters.subscription_creations_refused),
            ("strata_lifecycle_errors_total", "topic checks of the lifecycle task that failed", counters.errors)))
