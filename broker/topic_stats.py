"""Topic stats in Pulsar's shape (`/admin/v2/persistent/{t}/{ns}/{topic}/stats`).

Field names follow Pulsar's TopicStats / SubscriptionStats / ConsumerStats / PublisherStats JSON:
`msgInCounter`, `bytesInCounter`, `msgBacklog`, `backlogSize`, `storageSize`, `publishers`,
`subscriptions.{name}.{msgBacklog, msgBacklogNoDelayed, unackedMessages, consumers, type,
msgRateOut, ...}`, and per consumer `unackedMessages` and `blockedConsumerOnUnackedMsgs` (true
while `broker_consumer_unacked_messages_max` holds it back). Backlog and storage numbers come from
the cursor arithmetic (`cursor.stats`). Strata adds, per subscription, the cursor's persisted state:
`cursorStateBytes` (as last encoded), `cursorPersistedBytes`, `cursorStateBytesMax`,
`cursorStateError` (set while acks that add ack holes are refused: the state is over
`cursor_state_bytes_max`) and `cursorPersistError` (the last persist failure, e.g. fenced);
the errors are null when all is well.

Counters are cumulative, as Pulsar's (what must hold, at any instant the event loop is between
callbacks):
- a consumer's `msgOutCounter`/`bytesOutCounter`: messages and entry bytes sent to it
  (redeliveries count again);
- a subscription's: its attached consumers' plus those of consumers that have left
  (`Subscription.msg_out_from_removed_consumers`), so closing a consumer takes nothing away;
- the topic's `msgOutCounter`/`bytesOutCounter` = the sum over its subscriptions + what
  subscriptions since removed had counted (Pulsar's msgOutFromRemovedSubscriptions);
- the topic's `msgInCounter`/`bytesInCounter` = messages and bytes ever stored in it, trimmed
  ledgers included (restored from the managed ledger on load: `PersistentTopic`), so with
  unbatched producers `msgInCounter` = entries kept + entries trimmed.
Out counters live in memory and start at 0 when the topic is loaded (restart, unload), as
Pulsar's do; in counters survive it (Pulsar's restart at 0: Strata keeps the identity above).

Offload (Pulsar's names): `storageSize` counts every kept
ledger, offloaded ones included; `offloadedStorageSize` the offloaded ledgers' bytes;
`lastOffloadLedgerId`, `lastOffloadSuccessTimeStamp`, `lastOffloadFailureTimeStamp` (ms; 0 if
never since the topic was loaded). `partitioned_stats` sums the partitions' stats (Pulsar's
PartitionedTopicStats) and lists each under `partitions`.

Rates (`msgRateIn/Out` in messages/s, `msgThroughputIn/Out` in bytes/s): the broker samples every
cumulative counter (topic, producer, subscription, consumer) every
`broker_stats_sample_interval_ms` with its injected clock (`sample_topic`); a rate is the
counter's growth over the last `broker_stats_rate_window_ms` of samples (`RateWindow`). No
counter goes down (a consumer that leaves keeps its counts in its subscription's, a removed
subscription in its topic's), so no rate is negative and none spikes when a consumer leaves.
Objects without samples yet report 0.0.

Idle topics cost nothing (`StatsSampler`): only topics in its `active` set are sampled. A topic
joins it through `touch()` (called before its counters move: on publish and on every delivery),
and leaves it, its meters dropped, once its counters have been flat for a whole rate window,
when every rate it could report is 0.0 anyway. On joining, the topic is sampled at once at the
time of the previous tick with its still unchanged counters, so its first rate covers the same
interval it would have covered had it been sampled all along.
"""

from __future__ import annotations

import weakref
from array import array
from typing import TYPE_CHECKING, ClassVar

from broker.subscription import SUB_TYPE_NAMES, SubType
from cursor.stats import storage_size_bytes, subscription_stats

if TYPE_CHECKING:
    from broker.subscription import Subscription
    from broker.topic import PersistentTopic


class RateWindow:
    """Growth rate per second of a cumulative counter over the last `window_s` of samples.

    Samples are kept in two compact arrays (times, values), at most `samples_max` of them: about
    200 bytes per window instead of a deque of tuples (~1.4 KiB at the default 12 samples).
    """

    __slots__ = ("_times", "_values", "samples_max", "window_s")

    def __init__(self, window_s: float, samples_max: int) -> None:
        self.window_s = window_s
        self.samples_max = max(2, samples_max)
        self._times = array("d")            # sample times (monotonic s), oldest first
        self._values = array("q")           # the counter at those times (never decreasing)

    @property
    def samples(self) -> list[tuple[float, int]]:
        return list(zip(self._times, self._values))

    def sample(self, now_s: float, counter: int) -> None:
        times, values = self._times, self._values
        times.append(now_s)
        values.append(counter)
        drop = max(0, len(times) - self.samples_max)
        while len(times) - drop > 2 and now_s - times[drop + 1] >= self.window_s:
            drop += 1
        if drop > 0:
            del times[:drop]
            del values[:drop]

    def rate(self) -> float:
        times, values = self._times, self._values
        if len(times) < 2:
            return 0.0
        t0, t1 = times[0], times[-1]
        return (values[-1] - values[0]) / (t1 - t0) if t1 > t0 else 0.0


class TrafficMeter:
    """Message and byte rates of one object's counters."""

    __slots__ = ("__weakref__", "bytes", "messages")

    def __init__(self, window_s: float, samples_max: int) -> None:
        self.messages = RateWindow(window_s, samples_max)
        self.bytes = RateWindow(window_s, samples_max)

    def sample(self, now_s: float, messages: int, size: int) -> None:
        self.messages.sample(now_s, messages)
        self.bytes.sample(now_s, size)


# object (topic, producer, subscription, consumer) -> its meter; gone with the object.
_meters: weakref.WeakKeyDictionary[object, TrafficMeter] = weakref.WeakKeyDictionary()


def _sample(obj: object, config, now_s: float, messages: int, size: int) -> None:
    meter = _meters.get(obj)
    if meter is None:
        window_s = config.broker_stats_rate_window_ms / 1000
        samples_max = config.broker_stats_rate_window_ms // config.broker_stats_sample_interval_ms + 2
        meter = _meters[obj] = TrafficMeter(window_s, samples_max)
    meter.sample(now_s, messages, size)


def rates(obj: object) -> tuple[float, float]:
    """(messages/s, bytes/s) of `obj`; zeros until it has been sampled twice."""
    meter = _meters.get(obj)
    if meter is None:
        return 0.0, 0.0
    return meter.messages.rate(), meter.bytes.rate()


def sample_topic(topic: PersistentTopic, now_s: float) -> tuple[int, int]:
    """Sample every counter of `topic`; returns (messages in, messages out) as sampled."""
    c = topic.config
    _sample(topic, c, now_s, topic.msg_in_counter, topic.bytes_in_counter)
    for p in list(topic.producers.values()):
        _sample(p, c, now_s, p.msg_in_counter, p.bytes_in_counter)
    for sub in list(topic.subscriptions.values()):
        for consumer in list(sub.consumers):
            _sample(consumer, c, now_s, consumer.msg_out_counter, consumer.bytes_out_counter)
        _sample(sub, c, now_s, sub.msg_out_counter, sub.bytes_out_counter)
    out_msgs = topic.msg_out_counter
    _sample(_OutKey.of(topic), c, now_s, out_msgs, topic.bytes_out_counter)
    return topic.msg_in_counter, out_msgs


def forget_topic(topic: PersistentTopic) -> None:
    """Drop the meters of `topic` and of its producers, subscriptions and consumers."""
    _meters.pop(topic, None)
    for p in list(topic.producers.values()):
        _meters.pop(p, None)
    for sub in list(topic.subscriptions.values()):
        _meters.pop(sub, None)
        for consumer in list(sub.consumers):
            _meters.pop(consumer, None)
    key = _OutKey._by_topic.pop(topic, None)
    if key is not None:
        _meters.pop(key, None)


class _Activity:
    """What the sampler remembers of an active topic."""

    __slots__ = ("changed_s", "counters")

    def __init__(self, counters: tuple[int, int], changed_s: float) -> None:
        self.counters = counters    # (messages in, messages out) at the last sample
        self.changed_s = changed_s  # when a sample last saw them change (or the topic joined)


class StatsSampler:
    """Samples the topics with traffic in the last rate window; idle topics cost nothing.

    active: topic -> its _Activity, for topics touched since they were last found idle.
    last_tick_s: monotonic time of the previous tick; None before the first.
    """

    def __init__(self, config, clock) -> None:
        self.clock = clock
        self.window_s = config.broker_stats_rate_window_ms / 1000
        self.active: dict = {}
        self.last_tick_s: float | None = None

    def touch(self, topic: PersistentTopic) -> None:
        """`topic`'s counters are about to move (call before they do)."""
        if topic in self.active:
            return
        at_s = self.last_tick_s if self.last_tick_s is not None else self.clock.monotonic_s()
        self.active[topic] = _Activity(sample_topic(topic, at_s), at_s)

    def tick(self) -> None:
        """Sample every active topic; let go of those flat for a whole rate window."""
        now_s = self.clock.monotonic_s()
        self.last_tick_s = now_s
        for topic, activity in list(self.active.items()):
            if topic.closing:
                self.discard(topic)
                continue
            counters = sample_topic(topic, now_s)
            if counters != activity.counters:
                activity.counters, activity.changed_s = counters, now_s
            elif now_s - activity.changed_s >= self.window_s:
                self.discard(topic)          # every rate is 0.0 now: the same without meters

    def discard(self, topic: PersistentTopic) -> None:
        if self.active.pop(topic, None) is not None:
            forget_topic(topic)


class _OutKey:
    """The topic's outgoing meter lives on a companion object kept alive by the topic."""

    __slots__ = ("__weakref__",)
    _by_topic: ClassVar[weakref.WeakKeyDictionary[object, _OutKey]] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, topic: object) -> _OutKey:
        key = cls._by_topic.get(topic)
        if key is None:
            key = cls._by_topic[topic] = cls()
        return key


def out_rates(topic: object) -> tuple[float, float]:
    """(messages/s, bytes/s) delivered from `topic` to all its consumers."""
    return rates(_OutKey.of(topic))


def _consumer_stats(consumer) -> dict:
    return {
        "consumerName": consumer.name,
        "availablePermits": consumer.permits,
        "unackedMessages": consumer.unacked_messages(),
        # Pulsar's name: at broker_consumer_unacked_messages_max, until acks bring it to half
        "blockedConsumerOnUnackedMsgs": consumer.blocked_on_unacked,
        "msgOutCounter": consumer.msg_out_counter,
        "bytesOutCounter": consumer.bytes_out_counter,
        "msgRateOut": rates(consumer)[0],
        "msgThroughputOut": rates(consumer)[1],
        "priorityLevel": consumer.priority,
    }


def subscription_json(sub: Subscription) -> dict:
    stats = subscription_stats(sub.cursor, sub.ml)
    consumers = sub.consumers
    sub_type = SUB_TYPE_NAMES[sub.sub_type] if sub.sub_type is not None else SUB_TYPE_NAMES[SubType.EXCLUSIVE]
    return {
        "msgBacklog": stats.backlog_entries,
        "msgBacklogNoDelayed": stats.backlog_entries,
        "backlogSize": stats.backlog_bytes,
        "unackedMessages": sum(c.unacked_messages() for c in consumers),
        "type": sub_type,
        "isDurable": sub.durable,
        "msgRateOut": rates(sub)[0],
        "msgThroughputOut": rates(sub)[1],
        "msgOutCounter": sub.msg_out_counter,
        "bytesOutCounter": sub.bytes_out_counter,
        "markDeletePosition": str(stats.mark_delete_position),
        "readPosition": str(stats.read_position),
        "cursorStateBytes": stats.state_bytes,
        "cursorPersistedBytes": stats.persisted_bytes,
        "cursorStateBytesMax": sub.cursor.state_bytes_max,
        "cursorStateError": stats.state_error,
        "cursorPersistError": stats.persist_error,
        "consumers": [_consumer_stats(c) for c in consumers],
    }


def topic_stats(topic: PersistentTopic) -> dict:
    subs = {name: subscription_json(sub) for name, sub in topic.subscriptions.items()}
    durable = [s for s in topic.subscriptions.values() if s.durable]
    backlog = max((subs[s.name]["msgBacklog"] for s in durable), default=0)
    rate_in, throughput_in = rates(topic)
    rate_out, throughput_out = rates(_OutKey.of(topic))
    return {
        "msgRateIn": rate_in,
        "msgThroughputIn": throughput_in,
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "msgInCounter": topic.msg_in_counter,
        "bytesInCounter": topic.bytes_in_counter,
        "msgOutCounter": topic.msg_out_counter,
        "bytesOutCounter": topic.bytes_out_counter,
        "msgBacklog": backlog,
        "backlogSize": max((subs[s.name]["backlogSize"] for s in durable), default=0),
        "storageSize": storage_size_bytes(topic.ml),
        **_offload_stats(topic.ml),
        "publishers": [_publisher_stats(p) for p in topic.producers.values()],
        "subscriptions": subs,
    }


def _offload_stats(ml) -> dict:
    status = ml.offload_status
    return {
        "offloadedStorageSize": ml.offloaded_size_bytes,
        "lastOffloadLedgerId": status.last_offload_ledger_id,
        "lastOffloadSuccessTimeStamp": status.last_success_ms,
        "lastOffloadFailureTimeStamp": status.last_failure_ms,
    }


def _publisher_stats(p) -> dict:
    rate_in, throughput_in = rates(p)
    return {"producerName": p.name, "producerId": p.producer_id, "msgRateIn": rate_in,
            "msgThroughputIn": throughput_in, "msgInCounter": p.msg_in_counter,
            "bytesInCounter": p.bytes_in_counter}


# Topic fields that add up across partitions (the rest are merged or taken per partition).
_SUMMED = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgInCounter",
           "bytesInCounter", "msgOutCounter", "bytesOutCounter", "msgBacklog", "backlogSize",
           "storageSize", "offloadedStorageSize")
_SUB_SUMMED = ("msgBacklog", "msgBacklogNoDelayed", "backlogSize", "unackedMessages", "msgRateOut",
               "msgThroughputOut", "msgOutCounter", "bytesOutCounter")


def partitioned_stats(partitions: int, per_partition: dict[str, dict], include_partitions: bool) -> dict:
    """Pulsar's PartitionedTopicStats: the partitions' stats summed, publishers and consumers
    listed, plus `metadata.partitions` and (if asked) each partition's stats under `partitions`."""
    out: dict = {key: 0 for key in _SUMMED}
    for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut"):
        out[key] = 0.0
    out["publishers"] = []
    subs: dict[str, dict] = {}
    for stats in per_partition.values():
        for key in _SUMMED:
            out[key] += stats[key]
        out["publishers"] += stats["publishers"]
        for name, sub in stats["subscriptions"].items():
            merged = subs.setdefault(name, {**{k: 0 for k in _SUB_SUMMED}, "type": sub["type"],
                                            "isDurable": sub["isDurable"], "consumers": []})
            for key in _SUB_SUMMED:
                merged[key] += sub[key]
            merged["consumers"] += sub["consumers"]
    for key in ("lastOffloadLedgerId", "lastOffloadSuccessTimeStamp", "lastOffloadFailureTimeStamp"):
        out[key] = max((stats[key] for stats in per_partition.values()), default=0)
    out["subscriptions"] = subs
    out["metadata"] = {"partitions": partitions}
    out["partitions"] = per_partition if include_partitions else {}
    return out
