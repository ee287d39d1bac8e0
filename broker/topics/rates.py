"""Rates of the topics with traffic: meters over sampled cumulative counters, and the sampler.

Rates (`msgRateIn/Out` in messages/s, `msgThroughputIn/Out` in bytes/s): the broker samples every
cumulative counter (topic, producer, subscription, consumer) every
`broker_stats_sample_interval_ms` with its injected clock (`sample_topic`); a rate is the
counter's growth over the last `broker_stats_rate_window_ms` of samples (`SampleWindow`: one
object's counters share their sample times, `TrafficMeter`). No
counter goes down (a consumer that leaves keeps its counts in its subscription's, a removed
subscription in its topic's), so no rate is negative and none spikes when a consumer leaves.
Objects without samples yet report 0.0. `msgRateRedeliver` and `msgRateExpired` are rates of a
consumer's redelivery counter and a subscription's expiry counter, sampled alike (the
subscription's redelivery rate is its present consumers' sum, as Pulsar's).

Idle topics cost nothing (`StatsSampler`, the broker's `ActivityTracker`): only topics in its
`active` set are sampled. A topic joins it through `touch()` (called before its counters move: on
publish and on every delivery), and leaves it, its meters dropped, once its counters have been flat
for a whole rate window, when every rate it could report is 0.0 anyway. On joining, the topic is
sampled at once at the time of the previous tick with its still unchanged counters, so its first
rate covers the same interval it would have covered had it been sampled all along. A tick finds
the meters of an active topic's objects in the topic's own plain dict (`_Activity.meters`), not
through the weak registry that the stats readers use.

Expiry counts (TTL, the admin expireMessages) live here too: `expire_counted` runs an expiry and
counts the entries it acked (`totalMsgExpired`, `msgRateExpired`).

What must hold: no counter goes down, so no rate is negative; a meter lives exactly as long as
the object it measures (weak keys).
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic
    from common.clock import Clock
    from common.config import Config


class SampleWindow:
    """Samples of `width` cumulative counters taken together, over the last `window_s`.

    Two compact arrays: the sample times, and the values, `width` per sample; at most
    `samples_max` samples (about 200 bytes at the default 12). The counters of one object share
    their sample times and are trimmed together, once per sample: the sampler visits every
    meter of every topic with traffic once per tick.
    """

    __slots__ = ("__weakref__", "_times", "_values", "samples_max", "width", "window_s")

    def __init__(self, window_s: float, samples_max: int, width: int) -> None:
        self.window_s = window_s
        self.samples_max = max(2, samples_max)
        self.width = width
        self._times = array("d")    # sample times (monotonic s), oldest first
        self._values = array("q")   # `width` counter values per sample (never decreasing)

    def _trim(self, now_s: float) -> None:
        """Drop the samples older than needed: past `samples_max`, and those whose successor is
        out of the window too (the oldest kept one is the last at or before the window's start)."""
        times = self._times
        count = len(times)
        drop = count - self.samples_max if count > self.samples_max else 0
        start_s = now_s - self.window_s
        while count - drop > 2 and times[drop + 1] <= start_s:
            drop += 1
        if drop:
            del times[:drop]
            del self._values[:drop * self.width]

    def rate_of(self, column: int) -> float:
        """Growth per second of counter `column` over the samples; 0.0 until sampled twice."""
        times = self._times
        if len(times) < 2 or column >= self.width:
            return 0.0
        t0, t1 = times[0], times[-1]
        if t1 <= t0:
            return 0.0
        values = self._values
        return (values[column - self.width] - values[column]) / (t1 - t0)


class RateWindow(SampleWindow):
    """Growth rate per second of one cumulative counter over the last `window_s` of samples."""

    __slots__ = ()

    def __init__(self, window_s: float, samples_max: int) -> None:
        super().__init__(window_s, samples_max, 1)

    @property
    def samples(self) -> list[tuple[float, int]]:
        return list(zip(self._times, self._values))

    def sample(self, now_s: float, counter: int) -> None:
        self._times.append(now_s)
        self._values.append(counter)
        self._trim(now_s)

    def rate(self) -> float:
        return self.rate_of(0)


class TrafficMeter(SampleWindow):
    """Message and byte rates of one object's counters, and for consumers and subscriptions the
    rate of one event counter (a consumer's redeliveries, a subscription's expiries)."""

    __slots__ = ()

    def __init__(self, window_s: float, samples_max: int, with_events: bool) -> None:
        super().__init__(window_s, samples_max, 3 if with_events else 2)

    def sample(self, now_s: float, messages: int, size: int, events: int | None) -> None:
        """Sample the counters at `now_s` (`events` None: an events meter repeats its last value)."""
        values = self._values
        self._times.append(now_s)
        values.append(messages)
        values.append(size)
        if self.width == 3:
            values.append(events if events is not None else (values[-4] if len(values) > 3 else 0))
        self._trim(now_s)

    @property
    def messages(self) -> _Column:
        return _Column(self, 0)

    @property
    def bytes(self) -> _Column:
        return _Column(self, 1)

    @property
    def events(self) -> _Column | None:
        return _Column(self, 2) if self.width == 3 else None


class _Column:
    """One counter of a meter, read as a rate (`meter.messages.rate()`)."""

    __slots__ = ("column", "meter")

    def __init__(self, meter: SampleWindow, column: int) -> None:
        self.meter = meter
        self.column = column

    def rate(self) -> float:
        return self.meter.rate_of(self.column)


# object (topic, producer, subscription, consumer) -> its meter; gone with the object.
_meters: weakref.WeakKeyDictionary[object, TrafficMeter] = weakref.WeakKeyDictionary()


def _meter(obj: object, config: Config, with_events: bool, held: dict[object, TrafficMeter]) -> TrafficMeter:
    """`obj`'s meter: the one its topic's previous sample held (a plain dict lookup), else the
    registered one, else a new one, registered."""
    meter = held.get(obj)
    if meter is None:
        meter = _meters.get(obj)
        if meter is None:
            window_s = config.broker_stats_rate_window_ms / 1000
            samples_max = config.broker_stats_rate_window_ms // config.broker_stats_sample_interval_ms + 2
            meter = _meters[obj] = TrafficMeter(window_s, samples_max, with_events)
    return meter


def rates(obj: object) -> tuple[float, float]:
    """(messages/s, bytes/s) of `obj`; zeros until it has been sampled twice."""
    meter = _meters.get(obj)
    if meter is None:
        return 0.0, 0.0
    return meter.rate_of(0), meter.rate_of(1)


def event_rate(obj: object) -> float:
    """Events/s of `obj`'s event counter (redeliveries of a consumer, expiries of a
    subscription); 0.0 until it has been sampled twice."""
    meter = _meters.get(obj)
    return meter.rate_of(2) if meter is not None else 0.0


class Expiry:
    """What message expiry (TTL, the admin expireMessages) did to one subscription since its
    topic was loaded: entries it acked (`totalMsgExpired`) and when it last acked any."""

    __slots__ = ("__weakref__", "entries", "last_ms")

    def __init__(self) -> None:
        self.entries = 0
        self.last_ms = 0


# subscription -> its Expiry; gone with the subscription (Pulsar's counts live in memory too).
_expiries: weakref.WeakKeyDictionary[object, Expiry] = weakref.WeakKeyDictionary()
_EXPIRY_SEEN = False   # an expiry was ever counted (until then the sampler skips the look-up)


def expiry_of(sub: object) -> Expiry | None:
    return _expiries.get(sub)


def expire_counted(sub: Subscription, expire: Callable[[], bool], now_ms: int) -> bool:
    """Run `expire` (a call of the subscription's cursor's expire/expire_before) and count the
    entries it acked: those between the old and new mark-delete that were not acked already.
    Returns what `expire` returned (True if the mark-delete moved)."""
    cursor, topic = sub.cursor, sub.topic
    md_before, acked_before = cursor.mark_delete_position, cursor.individually_acked_count()
    if not expire():
        return False
    expired = (sub.ml.entries_between(md_before, cursor.mark_delete_position)
               - (acked_before - cursor.individually_acked_count()))
    topic.ctx.activity.touch(topic)        # before the counter moves (msgRateExpired)
    global _EXPIRY_SEEN
    _EXPIRY_SEEN = True
    expiry = _expiries.get(sub)
    if expiry is None:
        expiry = _expiries[sub] = Expiry()
    expiry.entries += max(0, expired)
    expiry.last_ms = now_ms
    return True


def sample_topic(topic: PersistentTopic, now_s: float,
                 held: dict[object, TrafficMeter]) -> tuple[tuple[int, int], dict[object, TrafficMeter]]:
    """Sample every counter of `topic`. `held`: the meters of its objects at its previous sample
    (empty the first time). Returns (messages in, messages out) as sampled, and the meters of its
    objects now (those that left are not in it: their meters live on in `_meters` as long as
    they do)."""
    c = topic.config
    now: dict[object, TrafficMeter] = {}
    msgs_in = topic.msg_in_counter
    meter = now[topic] = _meter(topic, c, False, held)
    meter.sample(now_s, msgs_in, topic.bytes_in_counter, None)
    for p in topic.producers.values():
        meter = now[p] = _meter(p, c, False, held)
        meter.sample(now_s, p.msg_in_counter, p.bytes_in_counter, None)
    for sub in topic.subscriptions.values():
        for consumer in sub.consumers:
            meter = now[consumer] = _meter(consumer, c, True, held)
            meter.sample(now_s, consumer.msg_out_counter, consumer.bytes_out_counter,
                         consumer.msg_redeliver_counter)
        expiry = _expiries.get(sub) if _EXPIRY_SEEN else None
        meter = now[sub] = _meter(sub, c, True, held)
        meter.sample(now_s, sub.msg_out_counter, sub.bytes_out_counter,
                     expiry.entries if expiry is not None else 0)
    out_key = _OutKey.of(topic)
    msgs_out = topic.msg_out_counter
    meter = now[out_key] = _meter(out_key, c, False, held)
    meter.sample(now_s, msgs_out, topic.bytes_out_counter, None)
    return (msgs_in, msgs_out), now


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

    __slots__ = ("changed_s", "counters", "meters")

    def __init__(self, counters: tuple[int, int], changed_s: float, meters: dict[object, TrafficMeter]) -> None:
        self.counters = counters    # (messages in, messages out) at the last sample
        self.changed_s = changed_s  # when a sample last saw them change (or the topic joined)
        self.meters = meters        # the topic's objects at the last sample -> their meters


class StatsSampler:
    """Samples the topics with traffic in the last rate window; idle topics cost nothing.

    active: topic -> its _Activity, for topics touched since they were last found idle.
    last_tick_s: monotonic time of the previous tick; None before the first.
    """

    def __init__(self, config: Config, clock: Clock) -> None:
        self.clock = clock
        self.window_s = config.broker_stats_rate_window_ms / 1000
        self.active: dict = {}
        self.last_tick_s: float | None = None

    def touch(self, topic: PersistentTopic) -> None:
        """`topic`'s counters are about to move (call before they do)."""
        if topic in self.active:
            return
        at_s = self.last_tick_s if self.last_tick_s is not None else self.clock.monotonic_s()
        counters, meters = sample_topic(topic, at_s, {})
        self.active[topic] = _Activity(counters, at_s, meters)

    def tick(self) -> None:
        """Sample every active topic; let go of those flat for a whole rate window."""
        now_s = self.clock.monotonic_s()
        self.last_tick_s = now_s
        for topic, activity in list(self.active.items()):
            if topic.closing:
                self.discard(topic)
                continue
            counters, activity.meters = sample_topic(topic, now_s, activity.meters)
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
