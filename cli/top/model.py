"""What `strata top` shows, as plain data: one snapshot of the cluster's topics, and their backlog history.

A `Snapshot` merges the answers of every broker's `GET /admin/v2/broker-stats/topics`
(namespace → bundle → domain → topic → topic stats, see `broker.admin.broker_stats`) into one
row per topic (`TopicRow`) with its subscriptions (`SubscriptionRow`), and says which brokers
answered and which did not. `History` keeps the last `SPARK_SAMPLES` backlog values of every
topic and subscription, for the sparklines. Everything here is pure: no I/O, no clock, no terminal.

What must hold: a topic that two brokers both report (a moment during a handover) is counted once,
as the copy with the larger `msgInCounter`; History keeps at most `SPARK_SAMPLES` values per key
and only keys present in the latest snapshot, so it cannot grow without bound.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

SPARK_SAMPLES = 30           # backlog values kept per topic / subscription (one per refresh)
SPARK_BARS = "▁▂▃▄▅▆▇█"

SORT_KEYS = ("rate", "backlog", "storage")


@dataclass(frozen=True)
class SubscriptionRow:
    name: str
    sub_type: str                 # Exclusive, Shared, Failover, Key_Shared
    rate_out_msgs_s: float
    backlog_msgs: int
    unacked_msgs: int
    consumers: int
    mark_delete: str              # "ledger:entry"


@dataclass(frozen=True)
class TopicRow:
    name: str                     # persistent://tenant/ns/topic
    rate_in_msgs_s: float
    rate_out_msgs_s: float
    backlog_msgs: int
    storage_bytes: int
    msg_in_counter: int           # to choose between two brokers' copies of one topic
    subscriptions: tuple[SubscriptionRow, ...] = ()
    kafka_producers: int = 0      # Kafka clients producing to it (their connections)
    kafka_consumers: int = 0      # Kafka clients fetching from it outside any subscription

    @property
    def consumers(self) -> int:
        """Consumers of every subscription, plus Kafka consumers reading by offset."""
        return sum(s.consumers for s in self.subscriptions) + self.kafka_consumers

    @property
    def rate_msgs_s(self) -> float:
        """msg/s in + out: what `--sort rate` orders by."""
        return self.rate_in_msgs_s + self.rate_out_msgs_s

    @property
    def namespace(self) -> str:
        return self.name.split("://", 1)[-1].rsplit("/", 1)[0]


@dataclass(frozen=True)
class Snapshot:
    topics: dict[str, TopicRow]
    brokers_answered: tuple[str, ...] = ()
    brokers_failed: tuple[str, ...] = ()

    @property
    def rate_in_msgs_s(self) -> float:
        return sum(t.rate_in_msgs_s for t in self.topics.values())

    @property
    def rate_out_msgs_s(self) -> float:
        return sum(t.rate_out_msgs_s for t in self.topics.values())

    @property
    def backlog_msgs(self) -> int:
        return sum(t.backlog_msgs for t in self.topics.values())

    @property
    def storage_bytes(self) -> int:
        return sum(t.storage_bytes for t in self.topics.values())

    @property
    def consumers(self) -> int:
        return sum(t.consumers for t in self.topics.values())


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def subscription_row(name: str, stats: Mapping) -> SubscriptionRow:
    consumers = stats.get("consumers")
    return SubscriptionRow(
        name=name, sub_type=str(stats.get("type", "")), rate_out_msgs_s=_float(stats.get("msgRateOut")),
        backlog_msgs=_int(stats.get("msgBacklog")), unacked_msgs=_int(stats.get("unackedMessages")),
        consumers=len(consumers) if isinstance(consumers, list) else 0,
        mark_delete=str(stats.get("markDeletePosition", "")))


def topic_row(name: str, stats: Mapping) -> TopicRow:
    """One topic's row from its stats (Pulsar's TopicStats JSON)."""
    subs = stats.get("subscriptions")
    subs = subs if isinstance(subs, Mapping) else {}
    return TopicRow(
        name=name, rate_in_msgs_s=_float(stats.get("msgRateIn")), rate_out_msgs_s=_float(stats.get("msgRateOut")),
        backlog_msgs=_int(stats.get("msgBacklog")), storage_bytes=_int(stats.get("storageSize")),
        msg_in_counter=_int(stats.get("msgInCounter")),
        subscriptions=tuple(subscription_row(n, s) for n, s in sorted(subs.items()) if isinstance(s, Mapping)),
        kafka_producers=_kafka(stats.get("publishers")), kafka_consumers=_kafka(stats.get("protocolConsumers")))


def _kafka(clients: object) -> int:
    """How many entries of a publishers/protocolConsumers list are Kafka clients."""
    if not isinstance(clients, list):
        return 0
    return sum(1 for c in clients if isinstance(c, Mapping) and c.get("protocol") == "kafka")


def topics_of(answer: object) -> Iterable[TopicRow]:
    """The topic rows of one broker's broker-stats/topics answer (anything malformed is skipped)."""
    if not isinstance(answer, Mapping):
        return
    for bundles in answer.values():
        for domains in (bundles.values() if isinstance(bundles, Mapping) else ()):
            for topics in (domains.values() if isinstance(domains, Mapping) else ()):
                for name, stats in (topics.items() if isinstance(topics, Mapping) else ()):
                    if isinstance(stats, Mapping):
                        yield topic_row(str(name), stats)


def merge(answers: Mapping[str, object | None]) -> Snapshot:
    """broker URL → its answer (None: it did not answer) → one Snapshot of the cluster."""
    topics: dict[str, TopicRow] = {}
    for broker in sorted(answers):
        for row in topics_of(answers[broker]):
            kept = topics.get(row.name)
            if kept is None or row.msg_in_counter > kept.msg_in_counter:
                topics[row.name] = row
    return Snapshot(topics=topics,
                    brokers_answered=tuple(sorted(b for b, a in answers.items() if a is not None)),
                    brokers_failed=tuple(sorted(b for b, a in answers.items() if a is None)))


def in_namespace(snapshot: Snapshot, namespace: str | None) -> Snapshot:
    """Only the topics of `namespace` ("tenant/ns"); all of them when None."""
    if not namespace:
        return snapshot
    topics = {n: t for n, t in snapshot.topics.items() if t.namespace == namespace}
    return Snapshot(topics, snapshot.brokers_answered, snapshot.brokers_failed)


def sorted_topics(snapshot: Snapshot, sort: str, limit: int | None = None) -> list[TopicRow]:
    """Topics by `sort` (rate: msg/s in + out; backlog; storage), largest first, then by name."""
    if sort == "rate":
        rows = sorted(snapshot.topics.values(), key=lambda t: (-t.rate_msgs_s, t.name))
    elif sort == "backlog":
        rows = sorted(snapshot.topics.values(), key=lambda t: (-t.backlog_msgs, t.name))
    elif sort == "storage":
        rows = sorted(snapshot.topics.values(), key=lambda t: (-t.storage_bytes, t.name))
    else:
        raise ValueError(f"unknown sort {sort!r}: one of {', '.join(SORT_KEYS)}")
    return rows if limit is None else rows[:max(0, limit)]


def sorted_subscriptions(topic: TopicRow, sort: str) -> list[SubscriptionRow]:
    """A topic's subscriptions: by msg/s out for `rate`, else by backlog; largest first."""
    if sort == "rate":
        return sorted(topic.subscriptions, key=lambda s: (-s.rate_out_msgs_s, s.name))
    return sorted(topic.subscriptions, key=lambda s: (-s.backlog_msgs, s.name))


def subscription_key(topic: str, subscription: str) -> str:
    return f"{topic}\x00{subscription}"


@dataclass
class History:
    """The last `samples_max` backlog values of each topic and subscription, oldest first."""

    samples_max: int = SPARK_SAMPLES
    backlogs: dict[str, deque[int]] = field(default_factory=dict)

    def record(self, snapshot: Snapshot) -> None:
        seen: set[str] = set()
        for topic in snapshot.topics.values():
            self._add(topic.name, topic.backlog_msgs, seen)
            for sub in topic.subscriptions:
                self._add(subscription_key(topic.name, sub.name), sub.backlog_msgs, seen)
        for key in [k for k in self.backlogs if k not in seen]:
            del self.backlogs[key]

    def _add(self, key: str, value: int, seen: set[str]) -> None:
        seen.add(key)
        values = self.backlogs.get(key)
        if values is None:
            values = self.backlogs[key] = deque(maxlen=self.samples_max)
        values.append(value)

    def of(self, key: str) -> list[int]:
        return list(self.backlogs.get(key, ()))


def sparkline(values: Iterable[int], width: int = SPARK_SAMPLES) -> str:
    """The last `width` values as bars scaled from 0 to their largest, right-aligned in `width`
    characters (padded with spaces on the left while there are fewer samples). All zeros: ▁."""
    tail = list(values)[-width:] if width > 0 else []
    top = max(tail, default=0)
    levels = len(SPARK_BARS) - 1
    bars = "".join(SPARK_BARS[0 if top <= 0 else round(max(0, v) * levels / top)] for v in tail)
    return bars.rjust(width)


def human_rate(msgs_s: float) -> str:
    """Messages per second, short: 0, 12.5, 1.2k, 3.4M."""
    if msgs_s < 1000:
        return f"{msgs_s:.1f}" if msgs_s else "0"
    if msgs_s < 1_000_000:
        return f"{msgs_s / 1000:.1f}k"
    return f"{msgs_s / 1_000_000:.1f}M"
