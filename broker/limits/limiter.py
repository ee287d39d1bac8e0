"""Token buckets for Pulsar's rate policies: pure arithmetic over an injected clock, no timers.

    bucket = TokenBucket(rate=100, period_s=1.0, clock=clock)   # 100 tokens per second
    bucket.consume(3)              # may go below zero: what was accepted is never taken back
    bucket.has_tokens()            # False: the caller throttles (pauses reads, skips a dispatch)
    bucket.refill_delay_s()        # how long until it has tokens again: one timer, not one per use

A bucket holds at most `rate` tokens (one period's worth, as Pulsar's AsyncTokenBucket, whose
capacity defaults to the rate) and starts full. Refill is computed lazily from the clock on each
call, so an idle bucket costs nothing. `consume` takes what it is told even past zero (a message
already read from the socket is stored, never dropped); the debt is paid by the next refills, so
over any long window the average is the rate.

`RateLimiter` pairs a messages bucket with a bytes bucket (either may be absent: Pulsar's -1/0
"no limit"); `rate_limiter(msgs, bytes, period_s, clock)` builds one, or None when neither field
limits anything, so the enforcing code tests `limiter is None` on its hot path.

`PeriodPermits` is Pulsar's SubscribeRateLimiter's counter: a fixed number of permits per period
for each key (a consumer), renewed when the period ends; `try_acquire` refuses once they are used.

What must hold: tokens never exceed the capacity; `refill_delay_s() > 0` exactly when
`has_tokens()` is False; no method sleeps or schedules anything.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable

from common.clock import Clock

# The shortest wait `refill_delay_s` reports: a timer finer than this would fire for almost nothing.
REFILL_DELAY_MIN_S = 0.001
# Keys `PeriodPermits` remembers at most (the oldest go first: a forgotten key starts afresh).
PERMIT_KEYS_MAX = 100_000


class TokenBucket:
    __slots__ = ("_clock", "_last_s", "_tokens", "capacity", "rate_per_s")

    def __init__(self, rate: int, period_s: float, clock: Clock) -> None:
        if rate <= 0 or period_s <= 0:
            raise ValueError("a bucket needs a positive rate and period")
        self.capacity = float(rate)               # one period's tokens
        self.rate_per_s = rate / period_s
        self._clock = clock
        self._tokens = self.capacity              # starts full; below 0: a debt being repaid
        self._last_s = clock.monotonic_s()        # when `_tokens` was last brought up to date

    def _refill(self) -> float:
        now = self._clock.monotonic_s()
        elapsed = now - self._last_s
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate_per_s)
            self._last_s = now
        return self._tokens

    def tokens(self) -> float:
        return self._refill()

    def consume(self, count: float) -> bool:
        """Take `count` tokens (past zero if need be); True if some remain."""
        self._tokens = self._refill() - count
        return self._tokens > 0

    def has_tokens(self) -> bool:
        return self._refill() > 0

    def set_rate(self, rate: int, period_s: float) -> None:
        """A new rate from now on (a relative dispatch rate follows the publish rate); the tokens
        held so far stay, capped at the new capacity."""
        if rate <= 0 or period_s <= 0:
            raise ValueError("a bucket needs a positive rate and period")
        self._refill()
        self.capacity = float(rate)
        self.rate_per_s = rate / period_s
        self._tokens = min(self._tokens, self.capacity)

    def refill_delay_s(self) -> float:
        """Seconds until the bucket has tokens again (0.0 if it has some now)."""
        tokens = self._refill()
        if tokens > 0:
            return 0.0
        return max(REFILL_DELAY_MIN_S, (-tokens + 1) / self.rate_per_s)


class RateLimiter:
    """A messages bucket and a bytes bucket, consumed together (Pulsar's publish and dispatch
    rate limiters: each limit applies on its own)."""

    __slots__ = ("bytes", "messages")

    def __init__(self, messages: TokenBucket | None, bytes_: TokenBucket | None) -> None:
        self.messages = messages      # None: messages are not limited
        self.bytes = bytes_           # None: bytes are not limited

    def consume(self, messages: int, size_bytes: int) -> bool:
        """Take the tokens; True while both buckets still have some."""
        ok = True
        if self.messages is not None:
            ok = self.messages.consume(messages)
        if self.bytes is not None:
            ok = self.bytes.consume(size_bytes) and ok
        return ok

    def messages_blocked(self) -> bool:
        return self.messages is not None and not self.messages.has_tokens()

    def bytes_blocked(self) -> bool:
        return self.bytes is not None and not self.bytes.has_tokens()

    def has_tokens(self) -> bool:
        return not (self.messages_blocked() or self.bytes_blocked())

    def available_messages(self, wanted: int) -> int:
        """How many of `wanted` messages may go now by the messages bucket (at least 1 if it has
        any token: a whole entry goes, its last messages repaid later)."""
        if self.messages is None:
            return wanted
        tokens = self.messages.tokens()
        return min(wanted, max(1, int(tokens))) if tokens > 0 else 0

    def refill_delay_s(self) -> float:
        """Seconds until both buckets have tokens again."""
        delays = [b.refill_delay_s() for b in (self.messages, self.bytes) if b is not None]
        return max(delays, default=0.0)


def rate_limiter(messages: int, size_bytes: int, period_s: float, clock: Clock) -> RateLimiter | None:
    """A limiter for `messages` and `size_bytes` per `period_s` (0 or less: that one is not
    limited); None when neither is."""
    msg_bucket = TokenBucket(messages, period_s, clock) if messages > 0 else None
    byte_bucket = TokenBucket(size_bytes, period_s, clock) if size_bytes > 0 else None
    if msg_bucket is None and byte_bucket is None:
        return None
    return RateLimiter(msg_bucket, byte_bucket)


class PeriodPermits:
    """`permits` acquisitions per `period_s` for each key; the count renews when a key's period
    (started by its first acquisition) ends."""

    def __init__(self, permits: int, period_s: float, clock: Clock) -> None:
        if permits <= 0 or period_s <= 0:
            raise ValueError("permits and period must be positive")
        self.permits = permits
        self.period_s = period_s
        self._clock = clock
        # key -> (when its period started, acquisitions in it), oldest key first
        self._used: collections.OrderedDict[Hashable, tuple[float, int]] = collections.OrderedDict()

    def try_acquire(self, key: Hashable) -> bool:
        now = self._clock.monotonic_s()
        started, used = self._used.get(key, (now, 0))
        if now - started >= self.period_s:
            started, used = now, 0
        if used >= self.permits:
            return False
        self._used[key] = (started, used + 1)
        self._used.move_to_end(key)
        while len(self._used) > PERMIT_KEYS_MAX:
            self._used.popitem(last=False)
        return True

    def available(self, key: Hashable) -> int:
        now = self._clock.monotonic_s()
        started, used = self._used.get(key, (now, 0))
        return self.permits if now - started >= self.period_s else max(0, self.permits - used)
