"""`/metrics` families of the storage policies (`broker.limits.persistence.StorageCounters`).

Broker-wide counters, label `cluster`, since the broker started:
- `strata_dedup_snapshots_total`: dedup snapshots written, every deduplicationSnapshotInterval
  seconds (or `broker_dedup_snapshot_interval_entries` entries, or at a topic's close) on the
  topics with deduplication on;
- `strata_dedup_snapshot_failures_total`: snapshot writes that failed (logged; the next one
  retries).
A message refused by delayedDelivery's maxDeliveryDelayInMillis is counted with the caps, in
`strata_cap_refusals_total{policy="delayedDelivery"}` (`broker.stats.metrics_caps`).

The service adds `families` to its `protocol_metrics` (the families other parts add at scrape time).
"""

from __future__ import annotations

from prometheus_client.core import Metric

from broker.limits.persistence import StorageCounters
from broker.stats.metrics_lifecycle import broker_counters


def families(counters: StorageCounters, cluster: str) -> list[Metric]:
    return broker_counters(cluster, (
        ("strata_dedup_snapshots", "dedup snapshots written (deduplicationSnapshotInterval)", counters.dedup_snapshots),
        ("strata_dedup_snapshot_failures", "dedup snapshot writes that failed", counters.dedup_snapshot_failures)))
