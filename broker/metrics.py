"""`/metrics` in Prometheus text format, with Pulsar's metric names and labels.

Per topic (labels `cluster`, `namespace`, `topic`): `pulsar_in_messages_total`,
`pulsar_in_bytes_total`, `pulsar_rate_in`, `pulsar_rate_out`, `pulsar_throughput_in`,
`pulsar_throughput_out`, `pulsar_producers_count`, `pulsar_subscriptions_count`,
`pulsar_consumers_count`, `pulsar_msg_backlog`, `pulsar_storage_size`,
`pulsar_storage_offloaded_size`; per subscription (plus
label `subscription`): `pulsar_subscription_back_log`, `pulsar_subscription_unacked_messages`,
`pulsar_subscription_consumers_count`, and Strata's `strata_subscription_cursor_state_bytes`
(the cursor state as last encoded) and `strata_subscription_cursor_state_error` (1 while acks
that add ack holes are refused: state over `cursor_state_bytes_max`). Plus broker-wide
`pulsar_topics_count` and Strata's own counters (label `cluster`): cursor persists
(`strata_cursor_*_total`, from `cursor.metrics`), the cursor writer's group transactions, and the
retention task's passes, errors, TTL-expired cursors and trimmed ledgers
(`strata_retention_*_total`) and offloaded ledgers' deleted bookie copies
(`strata_offload_bookie_copies_deleted_total`); and per retry policy (label `op`, from `common.retry`)
`strata_retries_total` and `strata_retries_exhausted_total`. From the ledger auditor's last scan
(`ledger.auditor.STATE`, cluster-wide: every ledger, not only this broker's): the gauge
`strata_ledgers_under_replicated` (ledgers with a copy on a bookie no longer registered, as
BookKeeper's auditor counts them) and the counter `strata_ledgers_rereplicated_total` (ledgers
this broker re-replicated as the auditor leader).
Values are computed on request from the loaded topics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.topic_stats import topic_stats
from common import retry
from cursor import metrics as cursor_metrics
from ledger import auditor

if TYPE_CHECKING:
    from broker.service import BrokerService

CLUSTER = "standalone"

_TOPIC_METRICS = (
    ("pulsar_in_messages_total", "counter", "messages stored on the topic since it was loaded",
     lambda s: s["msgInCounter"]),
    ("pulsar_in_bytes_total", "counter", "bytes stored on the topic since it was loaded",
     lambda s: s["bytesInCounter"]),
    ("pulsar_rate_in", "gauge", "messages/s stored (sliding window)", lambda s: s["msgRateIn"]),
    ("pulsar_rate_out", "gauge", "messages/s dispatched (sliding window)", lambda s: s["msgRateOut"]),
    ("pulsar_throughput_in", "gauge", "bytes/s stored (sliding window)", lambda s: s["msgThroughputIn"]),
    ("pulsar_throughput_out", "gauge", "bytes/s dispatched (sliding window)", lambda s: s["msgThroughputOut"]),
    ("pulsar_producers_count", "gauge", "connected producers", lambda s: len(s["publishers"])),
    ("pulsar_subscriptions_count", "gauge", "subscriptions", lambda s: len(s["subscriptions"])),
    ("pulsar_consumers_count", "gauge", "connected consumers",
     lambda s: sum(len(x["consumers"]) for x in s["subscriptions"].values())),
    ("pulsar_msg_backlog", "gauge", "largest subscription backlog in entries", lambda s: s["msgBacklog"]),
    ("pulsar_storage_size", "gauge", "bytes of every ledger the topic keeps", lambda s: s["storageSize"]),
    ("pulsar_storage_offloaded_size", "gauge", "bytes of the topic's ledgers offloaded to the cold tier",
     lambda s: s["offloadedStorageSize"]),
)

_SUB_METRICS = (
    ("pulsar_subscription_back_log", "gauge", "subscription backlog in entries", lambda s: s["msgBacklog"]),
    ("pulsar_subscription_unacked_messages", "gauge", "delivered, unacked messages",
     lambda s: s["unackedMessages"]),
    ("pulsar_subscription_consumers_count", "gauge", "consumers of the subscription",
     lambda s: len(s["consumers"])),
    ("strata_subscription_cursor_state_bytes", "gauge", "cursor state bytes as last encoded",
     lambda s: s["cursorStateBytes"]),
    ("strata_subscription_cursor_state_error", "gauge",
     "1 while the cursor state is over cursor_state_bytes_max (acks adding holes are refused)",
     lambda s: int(s["cursorStateError"] is not None)),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _broker_counters(service: BrokerService) -> dict[str, tuple[str, int]]:
    out = {name: ("cursor persistence counter", value) for name, value in cursor_metrics.snapshot().items()}
    writer = service.cursor_writer
    out["strata_cursor_writer_transactions_total"] = ("group transactions carrying cursor persists",
                                                      writer.transactions)
    out["strata_cursor_writer_saves_total"] = ("cursor persists carried by group transactions", writer.saves)
    retention = service.retention
    out["strata_retention_passes_total"] = ("completed TTL/retention passes over the loaded topics",
                                            retention.passes)
    out["strata_retention_errors_total"] = ("topic checks of the TTL/retention task that failed", retention.errors)
    out["strata_retention_expired_cursors_total"] = ("cursors moved forward by TTL", retention.expired_cursors)
    out["strata_retention_trimmed_ledgers_total"] = ("ledgers deleted by retention", retention.trimmed_ledgers)
    out["strata_offload_bookie_copies_deleted_total"] = (
        "offloaded ledgers whose bookie copy was deleted after offloadDeletionLagMs",
        retention.bookie_copies_deleted)
    return out


def auditor_lines() -> list[str]:
    """The auditor's gauge of under-replicated ledgers and its counter of re-replicated ones."""
    state = auditor.STATE
    labels = _labels(cluster=CLUSTER)
    return ["# HELP strata_ledgers_under_replicated ledgers with fewer than Qw live copies (a copy on a "
            "bookie no longer registered), at the auditor's last scan",
            "# TYPE strata_ledgers_under_replicated gauge",
            f"strata_ledgers_under_replicated{labels} {len(state.under_replicated)}",
            "# HELP strata_ledgers_rereplicated_total ledgers this broker's auditor re-replicated",
            "# TYPE strata_ledgers_rereplicated_total counter",
            f"strata_ledgers_rereplicated_total{labels} {state.rereplicated_total}"]


def retry_lines() -> list[str]:
    """`strata_retries_total` and `strata_retries_exhausted_total`, one line per retry policy (`op`)."""
    lines = []
    for metric, help_text, counts in (
            ("strata_retries_total", "failed attempts that were tried again, per retry policy", retry.RETRIES),
            ("strata_retries_exhausted_total", "calls whose retries ran out, per retry policy", retry.EXHAUSTED)):
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter"]
        lines += [f"{metric}{_labels(cluster=CLUSTER, op=op)} {n}" for op, n in sorted(counts.copy().items())]
    return lines


def render(service: BrokerService) -> str:
    stats = {name: topic_stats(topic) for name, topic in sorted(service.topics.items())}
    lines = ["# TYPE pulsar_topics_count gauge", f'pulsar_topics_count{_labels(cluster=CLUSTER)} {len(stats)}']
    for metric, (help_text, value) in _broker_counters(service).items():
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter",
                  f"{metric}{_labels(cluster=CLUSTER)} {value}"]
    lines += retry_lines()
    lines += auditor_lines()
    for metric, kind, help_text, get in _TOPIC_METRICS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        for name, topic in stats.items():
            ns = name.split("://", 1)[1].rsplit("/", 1)[0]
            lines.append(f"{metric}{_labels(cluster=CLUSTER, namespace=ns, topic=name)} {get(topic)}")
    for metric, kind, help_text, get in _SUB_METRICS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        for name, topic in stats.items():
            ns = name.split("://", 1)[1].rsplit("/", 1)[0]
            for sub_name, sub in topic["subscriptions"].items():
                labels = _labels(cluster=CLUSTER, namespace=ns, topic=name, subscription=sub_name)
                lines.append(f"{metric}{labels} {get(sub)}")
    return "\n".join(lines) + "\n"
