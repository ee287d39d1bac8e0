"""The analytics pipelines (analytics/pipelines) on a known DataFrame of message rows, in the
source's schema, built with createDataFrame: exact counts and bytes per hour, top keys, producers,
publish→event lag percentiles; a subscription's ack state parsed from internalStats JSON, the
unacked messages it leaves, and their count and age per bucket and per partition.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from analytics.pipelines import chart, consumer_lag, summary
from analytics.pipelines.consumer_lag import AckState
from analytics.source import message_schema
from common.errors import AnalyticsError, SubscriptionNotFound
from common.topic_names import parse_topic

T0 = dt.datetime(2026, 1, 1, 10, 0, 0, tzinfo=dt.UTC)
TOPIC = "persistent://public/default/orders"


def _ms(delta_ms: int) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=delta_ms)


def row(partition: int, ledger: int, entry: int, key: str | None, producer: str, publish_ms: int,
        payload_bytes: int, event_lag_ms: int | None = None, batch_index: int = -1) -> tuple:
    name = TOPIC if partition < 0 else f"{TOPIC}-partition-{partition}"
    event = None if event_lag_ms is None else _ms(publish_ms - event_lag_ms)
    offset = 100 * ledger + entry                 # a Kafka offset: the pipelines ignore it
    return (name, partition, ledger, entry, batch_index, 0 if batch_index < 0 else 2, offset, b"id", key, None,
            {"k": "v"}, _ms(publish_ms), event, producer, entry, b"x" * payload_bytes)


HOUR_MS = 3_600_000
ROWS = [
    # hour 10: four messages, keys a a a b, producers p1 p1 p2 p2, 10+20+30+40 bytes
    row(-1, 3, 0, "a", "p1", 1_000, 10, event_lag_ms=100),
    row(-1, 3, 1, "a", "p1", 2_000, 20, event_lag_ms=200),
    row(-1, 3, 2, "a", "p2", 3_000, 30, event_lag_ms=300),
    row(-1, 3, 3, "b", "p2", 4_000, 40),
    # hour 12: two messages, no key and key b, 5+7 bytes
    row(-1, 4, 0, None, "p1", 2 * HOUR_MS + 5, 5, event_lag_ms=-50),
    row(-1, 4, 1, "b", "p3", 2 * HOUR_MS + 9, 7),
]


@pytest.fixture(scope="module")
def messages(spark):
    return spark.createDataFrame(ROWS, message_schema())


@pytest.fixture(scope="module")
def report(messages) -> summary.Summary:
    return summary.summarize(messages, top_keys_limit=2)


def test_messages_and_bytes_per_hour(report):
    assert report.hourly.to_pylist() == [
        {"hour": T0, "messages": 4, "payload_bytes": 100, "keys": 2, "producers": 2},
        {"hour": T0 + dt.timedelta(hours=2), "messages": 2, "payload_bytes": 12, "keys": 1, "producers": 2},
    ]


def test_top_keys_by_messages_then_name(report):
    rows = report.keys.to_pylist()
    assert [(r["key"], r["messages"], r["payload_bytes"]) for r in rows] == [("a", 3, 60), ("b", 2, 47)]
    assert rows[1]["first_publish_time"] == _ms(4_000) and rows[1]["last_publish_time"] == _ms(2 * HOUR_MS + 9)


def test_producers(report):
    assert [(r["producer_name"], r["messages"], r["payload_bytes"]) for r in report.producers.to_pylist()] == [
        ("p1", 3, 35), ("p2", 2, 70), ("p3", 1, 7)]


def test_event_lag_per_hour_is_exact(report):
    first, second = report.lag.to_pylist()
    assert first["messages_with_event_time"] == 3
    assert (first["event_lag_ms_min"], first["event_lag_ms_max"]) == (100, 300)
    assert first["event_lag_ms_p50"] == 200.0 and first["event_lag_ms_p99"] == pytest.approx(298.0)
    assert first["event_lag_ms_avg"] == 200.0
    assert second["messages_with_event_time"] == 1 and second["event_lag_ms_p50"] == -50.0


def test_totals_agree_with_the_parts(report):
    t = report.totals
    assert (t["messages"], t["payload_bytes"], t["keys"], t["producers"], t["partitions"]) == (6, 112, 2, 3, 1)
    assert t["messages_with_event_time"] == 4 and t["event_lag_ms_p50"] == 150.0
    assert (t["first_publish_time"], t["last_publish_time"]) == (_ms(1_000), _ms(2 * HOUR_MS + 9))


def test_an_empty_topic_summarises_to_zero(spark, tmp_path: Path):
    empty = summary.summarize(spark.createDataFrame([], message_schema()))
    assert empty.hourly.num_rows == 0 and empty.keys.num_rows == 0
    assert empty.totals["messages"] == 0 and empty.totals["payload_bytes"] == 0
    png = chart.summary_chart(empty, tmp_path / "empty.png", title="empty")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_chart_is_a_png(report, tmp_path: Path):
    from PIL import Image

    png = chart.summary_chart(report, tmp_path / "s.png", title=TOPIC)
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (1200, 800)


# ---- consumer lag ------------------------------------------------------------------------------

def test_internal_stats_json_becomes_an_ack_state():
    stats = {"lastConfirmedEntry": "7:9", "ledgers": [{"ledgerId": 3}, {"ledgerId": 5}, {"ledgerId": 7}],
             "cursors": {"sub": {"markDeletePosition": "3:1",
                                 "individuallyDeletedMessages": "[(3:2..3:4], (3:8..7:1], (7:5..7:6]]"}}}
    state = consumer_lag.ack_state(stats, "sub", parse_topic(TOPIC + "-partition-2"), now_ms=42)
    assert state.partition == 2 and state.mark_delete == (3, 1) and state.last_confirmed == (7, 9)
    assert state.acked == ((3, 3, 4), (3, 9, consumer_lag.ENTRY_MAX), (5, 0, consumer_lag.ENTRY_MAX),
                           (7, 0, 1), (7, 6, 6))
    with pytest.raises(SubscriptionNotFound):
        consumer_lag.ack_state(stats, "other", parse_topic(TOPIC), now_ms=42)
    with pytest.raises(AnalyticsError):
        consumer_lag.parse_position("3-1")


LAG_ROWS = [row(0, 3, e, "k", "p", e * 1_000, 10) for e in range(10)] + [
    row(1, 8, 0, "k", "p", 500, 1, batch_index=0), row(1, 8, 0, "k", "p", 500, 1, batch_index=1),
    row(1, 8, 1, "k", "p", 65_000, 2)]
NOW_MS = int(T0.timestamp() * 1000) + 100_000


def _states() -> list[AckState]:
    # partition 0: acked up to 3:1, plus 3:3..3:4 and 3:7; 3:9 is after the stats' last confirmed
    p0 = AckState(TOPIC + "-partition-0", 0, (3, 1), (3, 8), ((3, 3, 4), (3, 7, 7)), NOW_MS)
    # partition 1: nothing acked (mark-delete before the first entry)
    p1 = AckState(TOPIC + "-partition-1", 1, (8, -1), (8, 1), (), NOW_MS)
    return [p0, p1]


def test_unacked_rows_are_after_mark_delete_outside_acked_ranges(spark):
    rows = consumer_lag.unacked(spark.createDataFrame(LAG_ROWS, message_schema()), _states())
    found = sorted((r["partition"], r["ledger_id"], r["entry_id"], r["batch_index"]) for r in rows.collect())
    assert found == [(0, 3, 2, -1), (0, 3, 5, -1), (0, 3, 6, -1), (0, 3, 8, -1),
                     (1, 8, 0, 0), (1, 8, 0, 1), (1, 8, 1, -1)]


def test_backlog_age_per_partition_and_bucket(spark, tmp_path: Path):
    lag = consumer_lag.backlog_report(spark.createDataFrame(LAG_ROWS, message_schema()), _states(), bucket_s=5)
    assert lag.partitions.to_pylist() == [
        {"partition": 0, "unacked_messages": 4, "unacked_payload_bytes": 40, "oldest_age_s": 98.0,
         "newest_age_s": 92.0, "oldest_unacked": "3:2"},
        {"partition": 1, "unacked_messages": 3, "unacked_payload_bytes": 4, "oldest_age_s": 99.5,
         "newest_age_s": 35.0, "oldest_unacked": "8:0"}]
    buckets = [(r["partition"], (r["bucket_start"] - T0).total_seconds(), r["unacked_messages"], r["oldest_age_s"])
               for r in lag.buckets.to_pylist()]
    assert buckets == [(0, 0.0, 1, 98.0), (0, 5.0, 3, 95.0), (1, 0.0, 2, 99.5), (1, 65.0, 1, 35.0)]
    png = chart.lag_chart(lag, tmp_path / "lag.png", title="sub")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_fully_acked_partition_is_listed_with_zero(spark):
    states = [AckState(TOPIC, -1, (4, 1), (4, 1), (), NOW_MS)]
    lag = consumer_lag.backlog_report(spark.createDataFrame(ROWS, message_schema()), states)
    assert lag.partitions.to_pylist() == [{"partition": -1, "unacked_messages": 0, "unacked_payload_bytes": 0,
                                           "oldest_age_s": None, "newest_age_s": None, "oldest_unacked": None}]
    assert lag.buckets.num_rows == 0


def test_bucket_width_keeps_the_chart_readable():
    assert consumer_lag.choose_bucket_s(0) == 1
    assert consumer_lag.choose_bucket_s(60) == 1
    assert consumer_lag.choose_bucket_s(61) == 5
    assert consumer_lag.choose_bucket_s(3 * 3600) == 300
    assert consumer_lag.choose_bucket_s(10**9) == 7 * 86400
