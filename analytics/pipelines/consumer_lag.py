"""`strata analytics consumer-lag`: the messages a subscription has not acked, and how old they are.

    states = fetch_ack_states(admin_url, "persistent://t/ns/x", "sub")   # one per partition
    report = backlog_report(messages, states, bucket_s=None)            # None: picked from the span
    report.buckets    # partition, bucket_start, unacked_messages, unacked_payload_bytes,
                      # oldest_age_s, newest_age_s   (per publish-time bucket)
    report.partitions # partition, unacked_messages, unacked_payload_bytes, oldest/newest age,
                      # oldest_unacked "L:E"

The ack state comes from the broker's admin REST API, Pulsar's internalStats of each partition
(`cursors.{sub}`: `markDeletePosition` "L:E" and `individuallyDeletedMessages`
"[(L:E..L:E], ...]", ranges open below and closed above), with the partition's
`lastConfirmedEntry` and ledger list; no broker code is imported (tests/foundation/test_layering.py).
The calls carry the query's credentials and TLS trust (`access=`, analytics.access) when given.

A message is unacked when its entry (ledger_id, entry_id) lies after the mark-delete position,
at or before the last confirmed entry as of the stats, and in none of the acked ranges. The
members of a partially acked batch count as unacked (internalStats does not list them). Its age
is `now_ms` − publish_time, with `now_ms` taken when the stats were fetched, so the report
describes the backlog at that instant even if the read takes longer.

What must hold: the stats are fetched before the messages are read, and the read is bounded by
each partition's last confirmed entry then, so a message published meanwhile never shows up as
"unacked"; acked ranges spanning ledgers are split per ledger with the stats' ledger list.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from analytics.access import ClusterAccess
from analytics.authorization import admin_get
from common.errors import (
    AdminAnswerTooLarge,
    AdminError,
    AdminHttpError,
    AdminNotFound,
    AnalyticsError,
    SubscriptionNotFound,
    TopicNotFound,
)
from common.topic_names import TopicName, parse_topic

ADMIN_TIMEOUT_S = 10.0
ENTRY_MAX = (1 << 63) - 1
RESPONSE_BYTES_MAX = 64 << 20
BUCKETS_MAX = 60
# bucket widths tried in order; the first that covers the backlog's span in <= BUCKETS_MAX buckets
BUCKET_LADDER_S = (1, 5, 10, 30, 60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)

Position = tuple[int, int]
_POSITION = re.compile(r"^\s*(-?\d+)\s*:\s*(-?\d+)\s*$")
_RANGE = re.compile(r"[(\[]\s*(-?\d+):(-?\d+)\s*\.\.\s*(-?\d+):(-?\d+)\s*[)\]]")


@dataclass(frozen=True)
class AckState:
    """One (partition) topic's subscription state as of `now_ms`.
    partition: the index, -1 for a non-partitioned topic. acked: entry ranges (ledger_id,
    first entry, last entry), inclusive, one ledger each, acked above the mark-delete position."""
    topic: str
    partition: int
    mark_delete: Position
    last_confirmed: Position
    acked: tuple[tuple[int, int, int], ...]
    now_ms: int


@dataclass(frozen=True)
class LagReport:
    buckets: pa.Table
    partitions: pa.Table
    bucket_s: int
    now_ms: int


def parse_position(text: str) -> Position:
    match = _POSITION.match(str(text))
    if not match:
        raise AnalyticsError("not a position L:E", value=str(text)[:80])
    return int(match.group(1)), int(match.group(2))


def parse_ack_ranges(text: str, ledger_ids: list[int]) -> list[tuple[int, int, int]]:
    """Pulsar's "[(L1:E1..L2:E2], ...]" (open below, closed above) as inclusive per-ledger
    ranges (ledger_id, first, last); a range across ledgers covers the rest of L1, every
    ledger of `ledger_ids` in between, and L2 up to E2."""
    out: list[tuple[int, int, int]] = []
    for match in _RANGE.finditer(text or ""):
        low_l, low_e, high_l, high_e = (int(g) for g in match.groups())
        if (low_l, low_e) >= (high_l, high_e):
            continue
        if low_l == high_l:
            out.append((low_l, low_e + 1, high_e))
            continue
        out.append((low_l, low_e + 1, ENTRY_MAX))
        out += [(ledger_id, 0, ENTRY_MAX) for ledger_id in ledger_ids if low_l < ledger_id < high_l]
        if high_e >= 0:
            out.append((high_l, 0, high_e))
    return out


def ack_state(stats: dict[str, Any], subscription: str, topic: TopicName, now_ms: int) -> AckState:
    """The AckState of `subscription` in one (partition) topic's internalStats JSON."""
    cursor = (stats.get("cursors") or {}).get(subscription)
    if cursor is None:
        raise SubscriptionNotFound("no such subscription on the topic", topic=str(topic), subscription=subscription)
    ledger_ids = sorted(int(ledger["ledgerId"]) for ledger in stats.get("ledgers") or [])
    return AckState(topic=str(topic), partition=topic.partition_index,
                    mark_delete=parse_position(cursor["markDeletePosition"]),
                    last_confirmed=parse_position(stats.get("lastConfirmedEntry", "-1:-1")),
                    acked=tuple(parse_ack_ranges(cursor.get("individuallyDeletedMessages", "[]"), ledger_ids)),
                    now_ms=now_ms)


def _get_json(url: str, timeout_s: float, access: ClusterAccess | None) -> Any:
    try:
        body = admin_get(access or _NO_CREDENTIALS, url, timeout_s, RESPONSE_BYTES_MAX)
    except AdminNotFound as exc:
        raise TopicNotFound("the admin API does not know the topic", url=url) from exc
    except AdminHttpError as exc:
        raise AnalyticsError("admin request failed", url=url, status=exc.status,
                             reason=exc.body[:2000].decode(errors="replace")) from exc
    except AdminAnswerTooLarge:
        raise AnalyticsError("admin response too large", url=url, bytes_max=RESPONSE_BYTES_MAX) from None
    except AdminError as exc:
        raise AnalyticsError("admin API unreachable", url=url, error=exc.message) from exc
    return json.loads(body)


_NO_CREDENTIALS = ClusterAccess.from_options({}, {})


def _topic_url(admin_url: str, topic: TopicName) -> str:
    parts = (topic.tenant, topic.namespace, topic.local)
    return f"{admin_url.rstrip('/')}/admin/v2/persistent/" + "/".join(urllib.parse.quote(p, safe="") for p in parts)


def fetch_ack_states(admin_url: str, topic: str, subscription: str, timeout_s: float = ADMIN_TIMEOUT_S,
                     *, access: ClusterAccess | None = None) -> list[AckState]:
    """The subscription's AckState in the topic, or in each of its partitions (asked with
    `access`'s credentials and TLS trust, if given)."""
    name = parse_topic(topic)
    partitions = int(_get_json(_topic_url(admin_url, name) + "/partitions", timeout_s, access).get("partitions", 0))
    names = [name.partition(i) for i in range(partitions)] if partitions > 0 else [name]
    states = []
    for each in names:
        now_ms = int(time.time() * 1000)
        states.append(ack_state(_get_json(_topic_url(admin_url, each) + "/internalStats", timeout_s, access),
                                subscription, each, now_ms))
    return states


def unacked(messages: Any, states: list[AckState]) -> Any:
    """The rows of `messages` that the states say are not acked (see the module docstring)."""
    from pyspark.sql import functions as F

    spark = messages.sparkSession
    bounds = spark.createDataFrame(
        [(s.partition, s.mark_delete[0], s.mark_delete[1], s.last_confirmed[0], s.last_confirmed[1], s.now_ms)
         for s in states],
        "b_partition int, md_ledger long, md_entry long, lac_ledger long, lac_entry long, now_ms long")
    position = F.struct("ledger_id", "entry_id")
    in_window = ((position > F.struct("md_ledger", "md_entry")) & (position <= F.struct("lac_ledger", "lac_entry")))
    pending = (messages.join(F.broadcast(bounds), messages["partition"] == bounds["b_partition"])
               .where(in_window).drop("b_partition", "md_ledger", "md_entry", "lac_ledger", "lac_entry"))
    ranges = spark.createDataFrame(
        [(s.partition, ledger_id, first, last) for s in states for ledger_id, first, last in s.acked],
        "r_partition int, r_ledger long, r_first long, r_last long")
    acked = ((pending["partition"] == ranges["r_partition"]) & (pending["ledger_id"] == ranges["r_ledger"])
             & (pending["entry_id"] >= ranges["r_first"]) & (pending["entry_id"] <= ranges["r_last"]))
    return pending.join(F.broadcast(ranges), acked, "left_anti")


def choose_bucket_s(span_s: float) -> int:
    """The narrowest width of BUCKET_LADDER_S that covers `span_s` in at most BUCKETS_MAX buckets."""
    for width in BUCKET_LADDER_S:
        if span_s / width <= BUCKETS_MAX:
            return width
    return BUCKET_LADDER_S[-1]


def _aggregates() -> list[Any]:
    from pyspark.sql import functions as F

    age_s = (F.col("now_ms") - F.unix_millis("publish_time")) / 1000.0
    return [F.count(F.lit(1)).alias("unacked_messages"),
            F.coalesce(F.sum(F.length("payload")), F.lit(0)).cast("long").alias("unacked_payload_bytes"),
            F.max(age_s).alias("oldest_age_s"), F.min(age_s).alias("newest_age_s")]


def backlog_report(messages: Any, states: list[AckState], bucket_s: int | None = None) -> LagReport:
    """Unacked messages per partition and per publish-time bucket, with their age."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if not states:
        raise AnalyticsError("no subscription state to compare the messages with")
    rows = unacked(messages, states).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        per_partition = (rows.groupBy("partition").agg(
            *_aggregates(),
            F.min(F.struct("ledger_id", "entry_id")).alias("oldest"))
            .select("partition", "unacked_messages", "unacked_payload_bytes", "oldest_age_s", "newest_age_s",
                    F.concat_ws(":", "oldest.ledger_id", "oldest.entry_id").alias("oldest_unacked"))
            .orderBy("partition").toArrow())
        ages = [a for a in per_partition.column("oldest_age_s").to_pylist() if a is not None]
        newest = [a for a in per_partition.column("newest_age_s").to_pylist() if a is not None]
        width = bucket_s or choose_bucket_s(max(ages) - min(newest) if ages else 0.0)
        bucket_start = F.window("publish_time", f"{width} seconds")["start"].alias("bucket_start")
        buckets = (rows.groupBy("partition", bucket_start).agg(*_aggregates())
                   .orderBy("partition", "bucket_start").toArrow())
    finally:
        rows.unpersist()
    return LagReport(buckets=buckets, partitions=_with_empty_partitions(per_partition, states),
                     bucket_s=width, now_ms=max(s.now_ms for s in states))


def _with_empty_partitions(per_partition: pa.Table, states: list[AckState]) -> pa.Table:
    """Every partition of the states appears, with 0 unacked when it has none."""
    seen = set(per_partition.column("partition").to_pylist())
    missing = [s.partition for s in states if s.partition not in seen]
    if not missing:
        return per_partition
    empty = {"partition": missing, "unacked_messages": [0] * len(missing), "unacked_payload_bytes": [0] * len(missing),
             "oldest_age_s": [None] * len(missing), "newest_age_s": [None] * len(missing),
             "oldest_unacked": [None] * len(missing)}
    table = pa.concat_tables([per_partition, pa.table(empty, schema=per_partition.schema)])
    return table.sort_by("partition")
