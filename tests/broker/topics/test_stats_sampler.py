"""The stats sampler visits only topics with recent traffic (broker.topics.rates.StatsSampler).

Idle topics cost no CPU and hold no rate meters; a topic that gets traffic again reports the same
rates as if it had been sampled all along. Driven by a manual clock with fake topics.
"""

from __future__ import annotations

from types import SimpleNamespace

from broker.topics import rates as topic_rates
from broker.topics.rates import StatsSampler, rates
from common.clock import ManualClock

CONFIG = SimpleNamespace(broker_stats_rate_window_ms=5_000, broker_stats_sample_interval_ms=1_000)


class FakeCounters:
    def __init__(self) -> None:
        self.msg_in_counter = self.bytes_in_counter = 0
        self.msg_out_counter = self.bytes_out_counter = 0
        self.msg_redeliver_counter = 0      # a consumer's (broker.topics.consumer.Consumer)


class FakeSub:
    def __init__(self) -> None:
        self.consumers = [FakeCounters()]

    @property
    def msg_out_counter(self) -> int:
        return sum(c.msg_out_counter for c in self.consumers)

    @property
    def bytes_out_counter(self) -> int:
        return sum(c.bytes_out_counter for c in self.consumers)


class FakeTopic:
    def __init__(self) -> None:
        self.config = CONFIG
        self.closing = False
        self.msg_in_counter = self.bytes_in_counter = 0
        self.producers = {"p": FakeCounters()}
        self.subscriptions = {"s": FakeSub()}

    @property
    def msg_out_counter(self) -> int:
        return sum(s.msg_out_counter for s in self.subscriptions.values())

    @property
    def bytes_out_counter(self) -> int:
        return sum(s.bytes_out_counter for s in self.subscriptions.values())

    def publish(self, sampler: StatsSampler, messages: int) -> None:
        sampler.touch(self)
        self.msg_in_counter += messages
        self.bytes_in_counter += 10 * messages
        self.producers["p"].msg_in_counter += messages
        self.producers["p"].bytes_in_counter += 10 * messages


def run_ticks(sampler: StatsSampler, clock: ManualClock, seconds: int, each=None) -> None:
    for _ in range(seconds):
        clock.advance_s(1)
        if each is not None:
            each()
        sampler.tick()


def test_idle_topics_are_never_sampled_and_hold_no_meters() -> None:
    clock = ManualClock()
    sampler = StatsSampler(CONFIG, clock)
    topics = [FakeTopic() for _ in range(100)]
    run_ticks(sampler, clock, 3)
    assert not sampler.active
    assert all(topic_rates._meters.get(t) is None for t in topics)
    assert all(rates(t) == (0.0, 0.0) for t in topics)


def test_rate_while_active_then_forgotten_after_a_flat_window() -> None:
    clock = ManualClock()
    sampler = StatsSampler(CONFIG, clock)
    topic = FakeTopic()
    run_ticks(sampler, clock, 2)                          # idle: not visited
    run_ticks(sampler, clock, 4, lambda: topic.publish(sampler, 100))
    assert rates(topic) == (100.0, 1000.0)                # the first second counts, as before
    assert rates(topic.producers["p"])[0] == 100.0
    assert topic in sampler.active
    run_ticks(sampler, clock, 4)                          # flat, still within the window
    assert topic in sampler.active and rates(topic)[0] > 0
    run_ticks(sampler, clock, 2)                          # flat for a whole window: let go
    assert topic not in sampler.active
    assert rates(topic) == (0.0, 0.0) and topic_rates._meters.get(topic.producers["p"]) is None
    run_ticks(sampler, clock, 3, lambda: topic.publish(sampler, 50))
    assert rates(topic)[0] == 50.0                        # back again: same rates as sampled all along


def test_closing_topic_leaves_the_sampler() -> None:
    clock = ManualClock()
    sampler = StatsSampler(CONFIG, clock)
    topic = FakeTopic()
    topic.publish(sampler, 1)
    topic.closing = True
    sampler.tick()
    assert topic not in sampler.active and topic_rates._meters.get(topic) is None
