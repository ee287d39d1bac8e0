"""broker.stats.metrics_topics: each sample is the stats field it names; with
`broker_metrics_topic_level` off, the topic families are summed per namespace and the
subscription families left out (Pulsar's namespace view). Helpers: ack ranges counted on the
cursor's bitmaps, cumulative histogram buckets. The text is what prometheus_client's parser reads.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from pyroaring import BitMap64

from broker.stats.metrics import text_of
from broker.stats.metrics_storage import ack_ranges
from broker.stats.metrics_topics import TOPIC_METRICS, families, namespace_of
from common.histogram import LatencyHistogram


def _sub(backlog: int, blocked: bool = False) -> dict:
    return {"msgBacklog": backlog, "msgBacklogNoDelayed": backlog, "unackedMessages": 1,
            "msgRateOut": 2.5, "msgThroughputOut": 25.0, "cursorStateBytes": 40, "cursorStateError": None,
            "consumers": [{"blockedConsumerOnUnackedMsgs": blocked}]}


def _topic(n: int) -> dict:
    return {"msgInCounter": 10 * n, "bytesInCounter": 100 * n, "msgOutCounter": 5 * n, "bytesOutCounter": 50 * n,
            "msgRateIn": 1.5 * n, "msgRateOut": 0.5 * n, "msgThroughputIn": 15.0 * n, "msgThroughputOut": 5.0 * n,
            "publishers": [{}] * n, "msgBacklog": 3 * n, "storageSize": 1000 * n, "backlogSize": 300 * n,
            "offloadedStorageSize": 0, "subscriptions": {"a": _sub(3 * n), "b": _sub(n, blocked=True)},
            "backlogQuotaLimitSize": 4096 * n, "backlogQuotaLimitTime": -1, "oldestBacklogMessageAgeSeconds": 7 * n,
            "backlogQuotaEvictions": {"size": n, "time": 0}}


STATS = {"persistent://public/default/t1": _topic(1), "persistent://public/default/t2": _topic(2),
         "persistent://other/ns/t3": _topic(4)}


def _samples(topic_level: bool) -> dict[tuple[str, tuple], float]:
    text = text_of(families(STATS, "c1", topic_level))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_topic_level_samples_are_the_stats_fields() -> None:
    samples = _samples(True)
    labels = (("cluster", "c1"), ("namespace", "public/default"), ("topic", "persistent://public/default/t2"))
    assert samples[("pulsar_msg_backlog", labels)] == 6
    assert samples[("pulsar_storage_size", labels)] == 2000
    assert samples[("pulsar_storage_backlog_size", labels)] == 600
    assert samples[("pulsar_in_messages_total", labels)] == 20
    assert samples[("pulsar_out_bytes_total", labels)] == 100
    assert samples[("pulsar_consumers_count", labels)] == 2
    sub = tuple(sorted((*labels, ("subscription", "b"))))
    assert samples[("pulsar_subscription_back_log", sub)] == 2
    assert samples[("pulsar_subscription_blocked_on_unacked_messages", sub)] == 1
    assert samples[("pulsar_subscription_msg_rate_out", sub)] == 2.5
    assert samples[("strata_subscription_cursor_state_error", sub)] == 0
    assert samples[("pulsar_storage_backlog_quota_limit", labels)] == 8192
    assert samples[("pulsar_storage_backlog_age_seconds", labels)] == 14
    assert samples[("pulsar_storage_backlog_quota_exceeded_evictions_total",
                    tuple(sorted((*labels, ("quota_type", "size")))))] == 2
    assert len({name for name, _ in samples}) == len(TOPIC_METRICS) + 13   # + 10 subscription, 2 throttle, evictions


def test_namespace_level_sums_topics_and_drops_subscriptions() -> None:
    samples = _samples(False)
    default = (("cluster", "c1"), ("namespace", "public/default"))
    assert samples[("pulsar_msg_backlog", default)] == 3 + 6
    assert samples[("pulsar_storage_size", default)] == 3000
    assert samples[("pulsar_in_messages_total", default)] == 30
    assert samples[("pulsar_rate_in", default)] == 4.5
    assert samples[("pulsar_storage_size", (("cluster", "c1"), ("namespace", "other/ns")))] == 4000
    assert not any(name.startswith(("pulsar_subscription_", "strata_subscription_")) for name, _ in samples)
    assert not any(dict(labels).get("topic") for _, labels in samples)


def test_namespace_of() -> None:
    assert namespace_of("persistent://public/default/t-partition-3") == "public/default"


def test_ack_ranges_count_runs_per_ledger() -> None:
    assert ack_ranges({}) == 0
    assert ack_ranges({5: BitMap64([1, 2, 3, 7, 9, 10]), 6: BitMap64([0])}) == 4


def test_histogram_buckets_are_cumulative() -> None:
    h = LatencyHistogram((0.001, 0.01))
    for seconds in (0.0005, 0.001, 0.005, 0.5):
        h.observe(seconds)
    assert h.buckets() == [("0.001", 2.0), ("0.01", 3.0), ("+Inf", 4.0)]
    assert h.count() == 4 and abs(h.sum_s - 0.5065) < 1e-12
