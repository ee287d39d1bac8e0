"""Managed ledger, cursor and offload families of `/metrics`, with Pulsar's names.

- Per namespace (labels cluster, namespace), like Pulsar's ManagedLedgerMetrics:
  `pulsar_ml_AddEntryBytesRate` / `pulsar_ml_AddEntryMessagesRate` (the topics' msgThroughputIn
  / msgRateIn), `pulsar_ml_NumberOfMessagesInBacklog` (every subscription's msgBacklog, summed),
  `pulsar_ml_StoredMessagesSize` (bytes of the ledgers with a bookie copy, times the write
  quorum of their managed ledger: the copies on bookies), and the histogram
  `pulsar_storage_write_latency_seconds` (Pulsar's `pulsar_storage_write_latency_le_*` buckets as
  a Prometheus histogram: a managed ledger append, submitted to the ledger until confirmed by Qa
  bookies; `ManagedLedger.add_latency`).
- Per cursor, topic-level only (labels cluster, namespace, ledger_name, cursor_name):
  `pulsar_ml_cursor_nonContiguousDeletedMessagesRange`, the acked ranges above mark-delete
  (the ack holes' other side), counted on the cursor's bitmaps.
- Offload, Pulsar's LedgerOffloaderStats names and labels (namespace, plus topic at topic level):
  `brk_ledgeroffloader_offload_bytes_total`, `brk_ledgeroffloader_offload_error_total`,
  `brk_ledgeroffloader_read_offload_bytes_total`, `brk_ledgeroffloader_read_offload_error_total`
  (`ledger.ml_offload.Offloader` counters, since the topic was loaded).

What must hold: every value is read from live state at scrape time; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from broker.stats.metrics_topics import namespace_of
from common.histogram import PULSAR_LATENCY_BOUNDS_S, LatencyHistogram

if TYPE_CHECKING:
    from broker.topics.topic import PersistentTopic
    from ledger.managed_ledger import ManagedLedger

# (name, help, Offloader attribute)
OFFLOAD_COUNTERS = (
    ("brk_ledgeroffloader_offload_bytes_total", "bytes of ledgers offloaded to the cold tier", "offloaded_bytes"),
    ("brk_ledgeroffloader_offload_error_total", "ledger offloads that failed (after retries)", "offload_errors"),
    ("brk_ledgeroffloader_read_offload_bytes_total", "entry bytes read from the cold tier", "read_offload_bytes"),
    ("brk_ledgeroffloader_read_offload_error_total", "cold tier reads that failed", "read_offload_errors"),
)


def stored_bytes_with_copies(ml: ManagedLedger) -> int:
    """Bytes of the ledgers still on bookies times the write quorum (Pulsar: StoredMessagesSize)."""
    bookie_deleted = {r.ledger_id for r in ml._meta.ledgers if r.bookie_deleted}
    write_quorum = ml._quorum[1]
    return write_quorum * sum(info.size_bytes for info in ml.ledgers() if info.ledger_id not in bookie_deleted)


def ack_ranges(acked_ledgers: Any) -> int:
    """Runs of consecutive acked entry ids over every ledger's bitmap."""
    return sum(len(bitmap) - bitmap.intersection_cardinality(bitmap.shift(1))
               for bitmap in acked_ledgers.values())


def families(topics: Mapping[str, PersistentTopic], stats: dict[str, dict], cluster: str,
             topic_level: bool) -> Iterator[Metric]:
    loaded = {name: topics[name] for name in stats if name in topics}
    yield from _ml_families(loaded, stats, cluster)
    if topic_level:
        yield _cursor_family(loaded, cluster)
    yield from _offload_families(loaded, topic_level)


def _ml_families(topics: dict[str, PersistentTopic], stats: dict[str, dict], cluster: str) -> Iterator[Metric]:
    by_namespace: dict[str, list[str]] = {}
    for name in topics:
        by_namespace.setdefault(namespace_of(name), []).append(name)
    labels = ["cluster", "namespace"]
    rows = (
        ("pulsar_ml_AddEntryBytesRate", "bytes/s appended (sliding window)",
         lambda n: stats[n]["msgThroughputIn"]),
        ("pulsar_ml_AddEntryMessagesRate", "messages/s appended (sliding window)", lambda n: stats[n]["msgRateIn"]),
        ("pulsar_ml_NumberOfMessagesInBacklog", "backlog entries summed over every subscription",
         lambda n: sum(s["msgBacklog"] for s in stats[n]["subscriptions"].values())),
        ("pulsar_ml_StoredMessagesSize", "bytes on bookies, every copy counted",
         lambda n: stored_bytes_with_copies(topics[n].ml)),
    )
    for metric, help_text, get in rows:
        family = GaugeMetricFamily(metric, help_text, labels=labels)
        for namespace, names in sorted(by_namespace.items()):
            family.add_metric([cluster, namespace], sum(get(n) for n in names))
        yield family
    latency = HistogramMetricFamily("pulsar_storage_write_latency_seconds",
                                    "managed ledger appends, submitted until confirmed by Qa bookies",
                                    labels=labels)
    for namespace, names in sorted(by_namespace.items()):
        total = LatencyHistogram(PULSAR_LATENCY_BOUNDS_S)
        for n in names:
            total.add(topics[n].ml.add_latency)
        latency.add_metric([cluster, namespace], total.buckets(), total.sum_s)
    yield latency


def _cursor_family(topics: dict[str, PersistentTopic], cluster: str) -> Metric:
    family = GaugeMetricFamily("pulsar_ml_cursor_nonContiguousDeletedMessagesRange",
                               "acked ranges above the mark-delete position (each bounds an ack hole)",
                               labels=["cluster", "namespace", "ledger_name", "cursor_name"])
    for name, topic in topics.items():
        namespace, ledger_name = namespace_of(name), topic.ml.name
        for sub_name, sub in list(topic.subscriptions.items()):
            family.add_metric([cluster, namespace, ledger_name, sub_name], ack_ranges(sub.cursor.acked_ledgers))
    return family


def _offload_families(topics: dict[str, PersistentTopic], topic_level: bool) -> Iterator[Metric]:
    labels = ["namespace", "topic"] if topic_level else ["namespace"]
    for metric, help_text, attribute in OFFLOAD_COUNTERS:
        family = CounterMetricFamily(metric, help_text, labels=labels)
        sums: dict[str, int] = {}
        for name, topic in topics.items():
            value = getattr(topic.ml._offloader, attribute)
            if topic_level:
                family.add_metric([namespace_of(name), name], value)
            else:
                sums[namespace_of(name)] = sums.get(namespace_of(name), 0) + value
        for namespace, value in sorted(sums.items()):
            family.add_metric([namespace], value)
        yield family
