"""common.retry: bounded by attempts or a deadline, logged, counted; sync and async; errors that
are not retried pass straight through; jitter comes from the injected random.Random."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from common import retry
from common.errors import BadVersion, NotFound, StrataError


class Flaky:
    """Fails with the given errors in order, then returns "done"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"

    async def run_async(self) -> str:
        await asyncio.sleep(0)
        return self()


@pytest.fixture(autouse=True)
def _fresh_counters():
    """Each test's ops start uncounted and unlogged (the registry is process-wide)."""
    for registry in (retry.RETRIES, retry.EXHAUSTED, retry._last_logged_s):
        for op in [op for op in registry if op.startswith("t.")]:
            del registry[op]


def _policy(op: str, **kwargs) -> retry.Retry:
    kwargs.setdefault("retry_on", BadVersion)
    kwargs.setdefault("wait", retry.no_wait())
    return retry.Retry(op, **kwargs)


def test_first_attempt_success_is_not_counted():
    policy = _policy("t.success", attempts_max=3)
    assert policy.call(Flaky()) == "done"
    assert "t.success" not in retry.RETRIES and "t.success" not in retry.EXHAUSTED


def test_retries_until_success_counted_and_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="common.retry")
    policy = _policy("t.until_success", attempts_max=5, log_level=logging.INFO)
    flaky = Flaky(BadVersion("lost"), BadVersion("lost again"))
    assert policy.call(flaky, about="key 7") == "done"
    assert flaky.calls == 3
    assert retry.RETRIES["t.until_success"] == 2
    lines = [r for r in caplog.records if "t.until_success [key 7]" in r.getMessage()]
    assert len(lines) == 2 and "attempt 1 failed (BadVersion: lost" in lines[0].getMessage()
    # rate-limited: the first retry at the policy's level, the next one inside the interval at DEBUG
    assert [r.levelno for r in lines] == [logging.INFO, logging.DEBUG]


def test_bounded_by_attempts_raises_the_last_error(caplog):
    policy = _policy("t.attempts", attempts_max=3)
    errors = [BadVersion("a"), BadVersion("b"), BadVersion("c"), BadVersion("never reached")]
    flaky = Flaky(*errors)
    with pytest.raises(BadVersion) as raised:
        policy.call(flaky)
    assert raised.value is errors[2] and flaky.calls == 3
    assert retry.RETRIES["t.attempts"] == 2 and retry.EXHAUSTED["t.attempts"] == 1
    assert any("t.attempts: giving up after 3 attempts" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)


def test_give_up_raises_the_call_sites_error():
    policy = _policy("t.give_up", attempts_max=2)
    with pytest.raises(NotFound, match="kept changing") as raised:
        policy.call(Flaky(BadVersion("a"), BadVersion("b")),
                    give_up=lambda last: NotFound("kept changing", last=str(last)))
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


@pytest.mark.parametrize("error", [NotFound("not retried"), ValueError("a bug"), KeyboardInterrupt()])
def test_errors_not_retried_pass_straight_through(error):
    policy = _policy("t.pass_through", attempts_max=5)
    flaky = Flaky(error)
    with pytest.raises(type(error)) as raised:
        policy.call(flaky, give_up=lambda last: AssertionError("must not give up"))
    assert raised.value is error and flaky.calls == 1
    assert "t.pass_through" not in retry.RETRIES


def test_when_narrows_what_is_retried():
    policy = _policy("t.when", retry_on=OSError, when=lambda exc: "busy" in str(exc), attempts_max=5)
    assert policy.call(Flaky(OSError("busy"), OSError("busy"))) == "done"
    other = OSError("disk on fire")
    with pytest.raises(OSError) as raised:
        policy.call(Flaky(other))
    assert raised.value is other
    assert retry.RETRIES["t.when"] == 2


def test_try_again_is_always_retried():
    policy = _policy("t.try_again", retry_on=(), attempts_max=3)
    assert policy.call(Flaky(retry.TryAgain("raced"))) == "done"
    with pytest.raises(StrataError, match="too often"):
        policy.call(Flaky(*[retry.TryAgain("raced")] * 3), give_up=lambda _: StrataError("too often"))


def test_bounded_by_deadline_and_last_wait_capped():
    now = [0.0]
    slept = []

    def attempt() -> None:
        now[0] += 0.4         # each attempt takes 0.4 s on the fake clock
        raise BadVersion("lost")

    def wait(attempt_number: int, rng: random.Random) -> float:
        slept.append(attempt_number)
        return 0.001 if attempt_number < 3 else 10.0  # the third wait would pass the deadline

    policy = _policy("t.deadline", deadline_s=1.0, wait=wait, monotonic_s=lambda: now[0])
    with pytest.raises(BadVersion):
        policy.call(attempt)
    # attempts end at 0.4, 0.8 (retried), 1.2 (past the deadline: give up)
    assert slept == [1, 2] and retry.EXHAUSTED["t.deadline"] == 1


def test_a_policy_must_be_bounded():
    with pytest.raises(ValueError):
        retry.Retry("t.unbounded", retry_on=BadVersion, wait=retry.no_wait())
    with pytest.raises(ValueError):
        retry.Retry("t.zero", retry_on=BadVersion, wait=retry.no_wait(), attempts_max=0)
    retry.Retry("t.said_why", retry_on=BadVersion, wait=retry.no_wait(), unbounded_because="close() cancels it")


def test_waits():
    rng = random.Random(7)
    assert [retry.linear(0.01)(n, rng) for n in (1, 2, 3)] == pytest.approx([0.01, 0.02, 0.03])
    assert [retry.exponential(0.1, 0.5)(n, rng) for n in (1, 2, 3, 4, 100)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.5, 0.5])
    assert retry.fixed(0.2)(9, rng) == 0.2 and retry.no_wait()(9, rng) == 0.0
    scaled = retry.jittered(0.01, 0.05, scaled=True)
    first, third = scaled(1, random.Random(3)), scaled(3, random.Random(3))
    assert 0.01 <= first <= 0.05 and third == pytest.approx(3 * first)


def test_jitter_comes_from_the_injected_rng():
    seen: list[float] = []
    policy = _policy("t.jitter", attempts_max=4, wait=retry.jittered(0.0, 0.002))

    def run(seed: int) -> list[float]:
        seen.clear()
        policy.call(Flaky(BadVersion("x"), BadVersion("y"), BadVersion("z")), rng=random.Random(seed),
                    on_retry=lambda exc, attempt, delay_s: seen.append(delay_s))
        return list(seen)

    assert run(11) == run(11) != run(12)
    assert len(seen) == 3


def test_on_retry_sees_every_retry():
    calls = []
    policy = _policy("t.on_retry", retry_on=Exception, attempts_max=3)
    policy.call(Flaky(BadVersion("a"), RuntimeError("b")),
                on_retry=lambda exc, attempt, delay_s: calls.append((type(exc).__name__, attempt)))
    assert calls == [("BadVersion", 1), ("RuntimeError", 2)]


def test_unexpected_errors_are_logged_with_traceback(caplog):
    caplog.set_level(logging.DEBUG, logger="common.retry")
    policy = _policy("t.traceback", retry_on=Exception, attempts_max=3)
    policy.call(Flaky(RuntimeError("a bug"), BadVersion("a race")))
    records = [r for r in caplog.records if r.getMessage().startswith("t.traceback")]
    assert records[0].exc_info is not None and records[1].exc_info is None


def test_async_retries_counted_and_bounded():
    asyncio.run(_async_retries_counted_and_bounded())


async def _async_retries_counted_and_bounded():
    policy = _policy("t.async", attempts_max=3, wait=retry.linear(0.001))
    flaky = Flaky(BadVersion("a"), BadVersion("b"))
    assert await policy.call_async(flaky.run_async) == "done"
    assert flaky.calls == 3 and retry.RETRIES["t.async"] == 2
    with pytest.raises(StrataError, match="kept losing"):
        await policy.call_async(Flaky(*[BadVersion("x")] * 3).run_async,
                                give_up=lambda _: StrataError("kept losing"))
    assert retry.EXHAUSTED["t.async"] == 1


def test_async_errors_not_retried_pass_straight_through():
    asyncio.run(_async_errors_not_retried_pass_straight_through())


async def _async_errors_not_retried_pass_straight_through():
    policy = _policy("t.async_pass", attempts_max=3)
    error = NotFound("gone")
    flaky = Flaky(error)
    with pytest.raises(NotFound) as raised:
        await policy.call_async(flaky.run_async)
    assert raised.value is error and flaky.calls == 1


def test_async_retry_ends_on_cancel():
    asyncio.run(_async_retry_ends_on_cancel())


async def _async_retry_ends_on_cancel():
    policy = _policy("t.async_cancel", retry_on=Exception, wait=retry.fixed(0.01),
                     unbounded_because="the test cancels it")

    async def always_fails() -> None:
        raise BadVersion("never wins")

    task = asyncio.ensure_future(policy.call_async(always_fails))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert retry.RETRIES["t.async_cancel"] >= 2
