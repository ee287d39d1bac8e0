"""`strata analytics summary`: what a topic holds, hour by hour, computed by Spark.

    report = summarize(messages, top_keys=10)
    report.hourly     # hour, messages, payload_bytes, keys, producers
    report.keys       # key, messages, payload_bytes, first/last publish_time (most messages first)
    report.producers  # producer_name, messages, payload_bytes, first/last publish_time
    report.lag        # hour, messages_with_event_time, event_lag_ms_{min,p50,p99,max,avg}
    report.totals     # one row: the same figures over the whole topic

Definitions:
- an hour is the UTC hour of `publish_time` (`date_trunc("hour")`); only hours with messages
  appear;
- payload bytes are the message payload's length as a consumer receives it (uncompressed);
- the event lag of a message is publish_time − event_time in milliseconds, over the messages
  that carry an event time (the others are not counted in it); a negative lag means the
  producer stamped an event time after publishing it;
- a message without a key is counted under key null (shown as "(no key)").
Percentiles are exact (`percentile`, not an approximation).

What must hold: the message rows are read once (a persisted projection without payloads) and
every figure comes from that same read, so the totals agree with the sums of the parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

TOP_KEYS_DEFAULT = 10


@dataclass(frozen=True)
class Summary:
    hourly: pa.Table
    keys: pa.Table
    producers: pa.Table
    lag: pa.Table
    totals: dict[str, Any]


def projected(messages: Any) -> Any:
    """The columns the summary needs, payloads replaced by their length (what gets persisted)."""
    from pyspark.sql import functions as F

    return messages.select(
        "partition", "key", "producer_name", "publish_time", "event_time",
        F.coalesce(F.length("payload"), F.lit(0)).cast("long").alias("payload_bytes"),
        (F.unix_millis("publish_time") - F.unix_millis("event_time")).alias("event_lag_ms"))


def _counts() -> list[Any]:
    from pyspark.sql import functions as F

    return [F.count(F.lit(1)).alias("messages"),
            F.coalesce(F.sum("payload_bytes"), F.lit(0)).cast("long").alias("payload_bytes")]


def _span() -> list[Any]:
    from pyspark.sql import functions as F

    return [F.min("publish_time").alias("first_publish_time"), F.max("publish_time").alias("last_publish_time")]


def _lag_figures() -> list[Any]:
    from pyspark.sql import functions as F

    lag = F.col("event_lag_ms")
    return [F.count(lag).alias("messages_with_event_time"),
            F.min(lag).alias("event_lag_ms_min"),
            F.percentile(lag, F.lit(0.5)).alias("event_lag_ms_p50"),
            F.percentile(lag, F.lit(0.99)).alias("event_lag_ms_p99"),
            F.max(lag).alias("event_lag_ms_max"),
            F.avg(lag).alias("event_lag_ms_avg")]


def hourly(rows: Any) -> Any:
    """Per UTC hour of publish time: messages, payload bytes, distinct keys and producers."""
    from pyspark.sql import functions as F

    return (rows.groupBy(F.date_trunc("hour", "publish_time").alias("hour"))
            .agg(*_counts(), F.count_distinct("key").alias("keys"),
                 F.count_distinct("producer_name").alias("producers"))
            .orderBy("hour"))


def top_keys(rows: Any, limit: int = TOP_KEYS_DEFAULT) -> Any:
    """The `limit` keys with the most messages (ties: by key), with their bytes and time span."""
    from pyspark.sql import functions as F

    return (rows.groupBy("key").agg(*_counts(), *_span())
            .orderBy(F.desc("messages"), F.asc_nulls_last("key")).limit(limit))


def producers(rows: Any) -> Any:
    """Every producer name with its messages, bytes and first/last publish time (most first)."""
    from pyspark.sql import functions as F

    return (rows.groupBy("producer_name").agg(*_counts(), *_span())
            .orderBy(F.desc("messages"), F.asc_nulls_last("producer_name")))


def event_lag(rows: Any) -> Any:
    """Per UTC hour of publish time: publish→event time lag (ms) of the messages with an event time."""
    from pyspark.sql import functions as F

    return (rows.groupBy(F.date_trunc("hour", "publish_time").alias("hour"))
            .agg(*_lag_figures()).orderBy("hour"))


def totals(rows: Any) -> Any:
    """One row over the whole topic: the hourly and lag figures, plus partitions seen."""
    from pyspark.sql import functions as F

    return rows.agg(*_counts(), F.count_distinct("key").alias("keys"),
                    F.count_distinct("producer_name").alias("producers"),
                    F.count_distinct("partition").alias("partitions"), *_span(), *_lag_figures())


def summarize(messages: Any, top_keys_limit: int = TOP_KEYS_DEFAULT) -> Summary:
    """Every figure of the summary, computed by Spark over one persisted read of `messages`."""
    from pyspark import StorageLevel

    rows = projected(messages).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        total = totals(rows).toArrow().to_pylist()[0]
        return Summary(hourly=hourly(rows).toArrow(), keys=top_keys(rows, top_keys_limit).toArrow(),
                       producers=producers(rows).toArrow(), lag=event_lag(rows).toArrow(), totals=total)
    finally:
        rows.unpersist()
