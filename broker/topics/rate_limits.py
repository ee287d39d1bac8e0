"""Pulsar's rate policies enforced on one topic: publishRate (and the broker-wide publish limit),
dispatchRate, subscriptionDispatchRate and subscribeRate.

Publishing (Pulsar's PublishRateLimiter). Every SEND a producer accepts takes its messages and
bytes from the topic's bucket and from the broker's (`broker.limits.limiter`). Nothing is refused
or dropped: when a bucket runs dry, the producer that emptied it is paused (its connection stops
reading, `ProducerLink.producer_rate_limited`), the topic's `publishRateLimitedTimes` counts one,
and ONE timer per throttle (not per message) fires when the bucket has tokens again and resumes
every producer it paused. The messages already read are stored; the client's next ones wait in
its socket, so its sends slow down to the rate.

Dispatching (Pulsar's DispatchRateLimiter). A dispatch pass asks `dispatch_delay_s(sub)` before
sending: while the topic's or the subscription's bucket is dry the pass sends nothing, counts a
throttled event (Pulsar's `dispatchThrottled{Msg,Bytes}EventsBy{Topic,Subscription}Limit`) and
the dispatcher schedules one retry at the refill time. A read asks for at most what the bucket
allows (`dispatch_budget`); each entry sent takes its messages and bytes (`on_dispatch`). With
`relativeToPublishRate` the rate is the topic's publish rate plus the configured one, as Pulsar's
getRelativeDispatchRateInMsg/Byte, re-read at most once a second.

Subscribing (Pulsar's SubscribeRateLimiter): `subscribeThrottlingRatePerConsumer` SUBSCRIBEs per
`ratePeriodInSecond` for each consumer, keyed as Pulsar keys it (client host, consumer name,
consumer id); one more is refused with NotAllowed "Subscribe limited by subscribe rate limit per
consumer." (ServerError NotAllowedError).

Policy changes apply live: `apply` re-reads the four policies (topic > namespace > broker) and
replaces only the limiters whose policy changed (a replaced publish limiter resumes the producers
it paused). With no limit set, each hot path costs one attribute test.

What must hold: a paused producer is resumed exactly once per pause (by the refill timer or a
replacement); no accepted message is dropped or refused; at most one refill timer per throttle
and one retry timer per dispatcher exist at a time.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.limits import rates as rate_specs
from broker.limits.limiter import PeriodPermits, RateLimiter, rate_limiter
from common.clock import Clock
from common.config import Config
from common.errors import NotAllowed

if TYPE_CHECKING:
    from broker.limits.view import PolicyView
    from broker.topics.producer import Producer
    from broker.topics.subscription import Subscription
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

RELATIVE_REFRESH_S = 1.0      # how often a relative dispatch rate re-reads the publish rate
SUBSCRIBE_REFUSED = "Subscribe limited by subscribe rate limit per consumer."


class PublishThrottle:
    """One publish limiter (a topic's or the broker's) and the producers it has paused."""

    def __init__(self, limiter: RateLimiter, scope: str) -> None:
        self.limiter = limiter
        self.scope = scope                     # "topic" or "broker" (logs)
        self.paused: dict[Producer, None] = {}  # producers this throttle paused, not yet resumed
        self._timer: asyncio.TimerHandle | None = None   # the one refill timer, while any is paused
        self.paused_times = 0                  # pauses so far (the broker-wide metric)

    def on_publish(self, producer: Producer, messages: int, size_bytes: int) -> None:
        if self.limiter.consume(messages, size_bytes) or producer in self.paused:
            return
        self.paused[producer] = None
        self.paused_times += 1
        producer.topic.rates.publish_rate_limited_times += 1
        producer.link.producer_rate_limited(producer, True)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.limiter.refill_delay_s(), self._refilled)

    def _refilled(self) -> None:
        self._timer = None
        delay_s = self.limiter.refill_delay_s()
        if delay_s > 0:    # a debt bigger than one timer's worth (a large batch): wait again
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._refilled)
            return
        self.release()

    def release(self) -> None:
        """Resume every producer paused here (the bucket refilled, or the limit changed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        paused, self.paused = self.paused, {}
        for producer in paused:
            producer.link.producer_rate_limited(producer, False)


def broker_publish_throttle(config: Config, clock: Clock) -> PublishThrottle | None:
    """Pulsar's brokerPublisherThrottlingMaxMessageRate/ByteRate: one bucket for every topic of
    this broker (None: not set)."""
    limiter = rate_limiter(config.broker_publish_rate_messages_max, config.broker_publish_rate_bytes_max,
                           1.0, clock)
    return PublishThrottle(limiter, "broker") if limiter is not None else None


class DispatchLimit:
    """One dispatch limiter built from a dispatchRate policy value."""

    def __init__(self, policy: dict[str, Any], clock: Clock) -> None:
        self.messages = int(policy["dispatchThrottlingRateInMsg"])
        self.size_bytes = int(policy["dispatchThrottlingRateInByte"])
        self.period_s = float(policy["ratePeriodInSecond"])
        self.relative = bool(policy["relativeToPublishRate"])
        self.limiter = present_limiter(rate_limiter(self.messages, self.size_bytes, self.period_s, clock))
        self._clock = clock
        self._refreshed_s = clock.monotonic_s()

    def current(self, publish_rates: Callable[[], tuple[float, float]]) -> RateLimiter:
        if self.relative and self._clock.monotonic_s() - self._refreshed_s >= RELATIVE_REFRESH_S:
            self._refreshed_s = self._clock.monotonic_s()
            rate_in, throughput_in = publish_rates()
            if self.limiter.messages is not None:
                self.limiter.messages.set_rate(int(rate_in) + self.messages, self.period_s)
            if self.limiter.bytes is not None:
                self.limiter.bytes.set_rate(int(throughput_in) + self.size_bytes, self.period_s)
        return self.limiter


def present_limiter(limiter: RateLimiter | None) -> RateLimiter:
    if limiter is None:
        raise ValueError("a dispatch limit needs a messages or bytes rate")
    return limiter


def _limits(policy: dict[str, Any]) -> bool:
    return policy["dispatchThrottlingRateInMsg"] > 0 or policy["dispatchThrottlingRateInByte"] > 0


THROTTLE_FIELDS = tuple(f"dispatchThrottled{kind}EventsBy{scope}Limit"
                        for scope in ("Subscription", "Topic", "Broker") for kind in ("Msg", "Bytes"))


class SubscriptionRates:
    """A subscription's own dispatch limiter and its throttled-event counts (Pulsar's fields)."""

    def __init__(self) -> None:
        self.limit: DispatchLimit | None = None
        self.policy: dict[str, Any] | None = None     # what `limit` was built from
        self.counts = dict.fromkeys(THROTTLE_FIELDS, 0)


class TopicRates:
    """The rate limiters of one topic (see the module docstring); `topic.rates`."""

    def __init__(self, clock: Clock, publish_rates: Callable[[], tuple[float, float]]) -> None:
        self._clock = clock
        self._publish_rates = publish_rates      # the topic's (msgRateIn, msgThroughputIn)
        self.publish: PublishThrottle | None = None          # publishRate
        self.broker_publish: PublishThrottle | None = None   # the broker-wide limit (shared)
        self.publish_limited = False            # either is set: the producer's one test
        self.publish_rate_limited_times = 0     # Pulsar's publishRateLimitedTimes
        self.dispatch: DispatchLimit | None = None            # dispatchRate (the topic's)
        self.dispatch_limited = False           # a topic or subscription dispatch limit is set
        self._sub_policy: dict[str, Any] | None = None        # subscriptionDispatchRate (limits)
        self._subs: weakref.WeakKeyDictionary[Subscription, SubscriptionRates] = weakref.WeakKeyDictionary()
        self.subscribe: PeriodPermits | None = None           # subscribeRate
        self._values: dict[str, Any] = {}       # policy name -> the value the limiter was built from

    # --- publishing ---------------------------------------------------------------------------

    def on_publish(self, producer: Producer, messages: int, size_bytes: int) -> None:
        if self.publish is not None:
            self.publish.on_publish(producer, messages, size_bytes)
        if self.broker_publish is not None:
            self.broker_publish.on_publish(producer, messages, size_bytes)

    def is_paused(self, producer: Producer) -> bool:
        return any(t is not None and producer in t.paused for t in (self.publish, self.broker_publish))

    # --- dispatching --------------------------------------------------------------------------

    def subscription(self, sub: Subscription) -> SubscriptionRates:
        state = self._subs.get(sub)
        if state is None:
            state = self._subs[sub] = SubscriptionRates()
        if state.policy is not self._sub_policy:
            state.policy = self._sub_policy
            state.limit = DispatchLimit(self._sub_policy, self._clock) if self._sub_policy is not None else None
        return state

    def _limiters(self, sub: Subscription) -> list[tuple[RateLimiter, str, SubscriptionRates]]:
        state = self.subscription(sub)
        found = []
        if self.dispatch is not None:
            found.append((self.dispatch.current(self._publish_rates), "Topic", state))
        if state.limit is not None:
            found.append((state.limit.current(self._publish_rates), "Subscription", state))
        return found

    def dispatch_delay_s(self, sub: Subscription) -> float:
        """0.0 if `sub` may dispatch now; else seconds until its limiters have tokens (and the
        throttled event is counted)."""
        delay_s = 0.0
        for limiter, scope, state in self._limiters(sub):
            if limiter.messages_blocked():
                state.counts[f"dispatchThrottledMsgEventsBy{scope}Limit"] += 1
            if limiter.bytes_blocked():
                state.counts[f"dispatchThrottledBytesEventsBy{scope}Limit"] += 1
            delay_s = max(delay_s, limiter.refill_delay_s())
        return delay_s

    def dispatch_budget(self, sub: Subscription, wanted: int) -> int:
        for limiter, _scope, _state in self._limiters(sub):
            wanted = limiter.available_messages(wanted)
        return max(1, wanted)

    def on_dispatch(self, sub: Subscription, messages: int, size_bytes: int) -> None:
        for limiter, _scope, _state in self._limiters(sub):
            limiter.consume(messages, size_bytes)

    def throttle_counts(self, sub: Subscription) -> dict[str, int]:
        state = self._subs.get(sub)
        return dict(state.counts) if state is not None else dict.fromkeys(THROTTLE_FIELDS, 0)

    # --- subscribing --------------------------------------------------------------------------

    def check_subscribe(self, host: str, consumer_name: str, consumer_id: int) -> None:
        permits = self.subscribe
        if permits is not None and not permits.try_acquire((host, consumer_name, consumer_id)):
            raise NotAllowed(SUBSCRIBE_REFUSED)   # Pulsar's text, nothing added

    # --- policies -----------------------------------------------------------------------------

    def set_publish(self, value: dict[str, Any], broker: PublishThrottle | None) -> None:
        if self._values.get("publish") != value:
            self._values["publish"] = value
            if self.publish is not None:
                self.publish.release()
            limiter = rate_limiter(value["publishThrottlingRateInMsg"], value["publishThrottlingRateInByte"],
                                   1.0, self._clock)
            self.publish = PublishThrottle(limiter, "topic") if limiter is not None else None
        self.broker_publish = broker
        self.publish_limited = self.publish is not None or broker is not None

    def set_dispatch(self, topic_value: dict[str, Any], sub_value: dict[str, Any]) -> None:
        if self._values.get("dispatch") != topic_value:
            self._values["dispatch"] = topic_value
            self.dispatch = DispatchLimit(topic_value, self._clock) if _limits(topic_value) else None
        if self._values.get("subscription") != sub_value:
            self._values["subscription"] = sub_value
            self._sub_policy = sub_value if _limits(sub_value) else None   # a new object: limiters rebuilt
        self.dispatch_limited = self.dispatch is not None or self._sub_policy is not None

    def set_subscribe(self, value: dict[str, Any]) -> None:
        if self._values.get("subscribe") == value:
            return
        self._values["subscribe"] = value
        rate = value["subscribeThrottlingRatePerConsumer"]
        self.subscribe = PeriodPermits(rate, value["ratePeriodInSecond"], self._clock) if rate > 0 else None

    def close(self) -> None:
        """The topic closes: resume its paused producers (their connections read on)."""
        if self.publish is not None:
            self.publish.release()


async def apply(topic: PersistentTopic, view: PolicyView, broker: PublishThrottle | None) -> None:
    """Read the topic's rate policies (topic > namespace > broker) and set its limiters."""
    name = topic.name
    rates = topic.rates
    publish = await view.value(name, rate_specs.PUBLISH_RATE)
    dispatch = await view.value(name, rate_specs.DISPATCH_RATE)
    sub_dispatch = await view.value(name, rate_specs.SUBSCRIPTION_DISPATCH_RATE)
    subscribe = await view.value(name, rate_specs.SUBSCRIBE_RATE)
    before = dict(rates._values)
    rates.set_publish(publish, broker)
    rates.set_dispatch(dispatch, sub_dispatch)
    rates.set_subscribe(subscribe)
    if before and before != rates._values:
        log.info("rate limits of %s now: publish %s, dispatch %s, subscription dispatch %s, subscribe %s",
                 name, publish, dispatch, sub_dispatch, subscribe)
    if rates.dispatch_limited or before.get("dispatch") != dispatch or before.get("subscription") != sub_dispatch:
        for sub in list(topic.subscriptions.values()):   # a lifted limit: dispatch what waited
            if sub.dispatcher is not None:
                sub.dispatcher.kick()
