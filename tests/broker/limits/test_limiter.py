"""The token buckets of the rate policies, driven by a ManualClock (no sleeping)."""

from __future__ import annotations

import pytest

from broker.limits.limiter import PeriodPermits, TokenBucket, rate_limiter
from common.clock import ManualClock


def test_a_bucket_starts_full_refills_at_its_rate_and_never_holds_more_than_a_period() -> None:
    clock = ManualClock()
    bucket = TokenBucket(100, 1.0, clock)
    assert bucket.tokens() == 100
    assert not bucket.consume(100)            # empty: the caller throttles
    assert bucket.refill_delay_s() == pytest.approx(0.01)
    clock.advance_s(0.5)
    assert bucket.tokens() == pytest.approx(50)
    clock.advance_s(10)
    assert bucket.tokens() == 100             # capped at one period's worth


def test_a_debt_is_repaid_before_tokens_come_back() -> None:
    clock = ManualClock()
    bucket = TokenBucket(10, 1.0, clock)
    bucket.consume(40)                        # accepted anyway: 30 owed
    assert not bucket.has_tokens()
    assert bucket.refill_delay_s() == pytest.approx(3.1)
    clock.advance_s(3.0)
    assert not bucket.has_tokens()
    clock.advance_s(0.2)
    assert bucket.has_tokens()


def test_over_a_long_run_a_greedy_user_gets_the_rate() -> None:
    clock = ManualClock()
    bucket = TokenBucket(1000, 1.0, clock)
    taken = 0
    for _ in range(10_000):                   # 10 s in 1 ms steps, taking all it may
        while bucket.has_tokens():
            bucket.consume(1)
            taken += 1
        clock.advance_s(bucket.refill_delay_s() or 0.001)
        if clock.monotonic_s() >= 10:
            break
    assert 10_000 <= taken <= 11_000 + 1      # 10 s of rate plus the first full bucket


def test_a_period_longer_than_a_second_spreads_the_rate() -> None:
    clock = ManualClock()
    bucket = TokenBucket(60, 60.0, clock)
    bucket.consume(60)
    clock.advance_s(30)
    assert bucket.tokens() == pytest.approx(30)


def test_a_limiter_limits_by_messages_or_bytes_and_none_limits_nothing() -> None:
    clock = ManualClock()
    assert rate_limiter(-1, 0, 1.0, clock) is None
    limiter = rate_limiter(-1, 1000, 1.0, clock)
    assert limiter is not None and limiter.messages is None
    assert limiter.available_messages(50) == 50
    assert not limiter.consume(1, 1500)
    assert limiter.bytes_blocked() and not limiter.messages_blocked()
    assert limiter.refill_delay_s() == pytest.approx(0.501)
    both = rate_limiter(10, 1_000_000, 1.0, clock)
    assert both is not None
    assert both.available_messages(50) == 10
    both.consume(9, 10)
    assert both.available_messages(50) == 1
    both.consume(1, 10)
    assert both.available_messages(50) == 0


def test_a_new_rate_keeps_the_tokens_held_capped_at_the_new_capacity() -> None:
    clock = ManualClock()
    bucket = TokenBucket(100, 1.0, clock)
    bucket.set_rate(10, 1.0)
    assert bucket.tokens() == 10
    bucket.consume(10)
    clock.advance_s(0.5)
    assert bucket.tokens() == pytest.approx(5)


def test_period_permits_refuse_past_the_count_and_renew_after_the_period() -> None:
    clock = ManualClock()
    permits = PeriodPermits(2, 30.0, clock)
    key = ("10.0.0.1", "c", 0)
    assert permits.try_acquire(key) and permits.try_acquire(key)
    assert not permits.try_acquire(key)
    assert permits.try_acquire(("10.0.0.1", "other", 1))    # each consumer has its own
    assert permits.available(key) == 0
    clock.advance_s(30)
    assert permits.available(key) == 2
    assert permits.try_acquire(key)
