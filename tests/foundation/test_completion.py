"""common.completion: a result reaches the callback in the same call, an exception a turn later,
a raising callback is logged and contained, and `as_future` lets code await it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from common.completion import Completion, as_future


def test_result_runs_the_callback_in_the_same_call() -> None:
    async def main() -> None:
        seen: list[object] = []
        c = Completion(asyncio.get_running_loop(), lambda done: seen.append(done.result()))
        assert not c.done()
        c.set_result(7)
        assert seen == [7] and c.done() and c.exception() is None and not c.cancelled()
        with pytest.raises(asyncio.InvalidStateError):
            c.set_result(8)

    asyncio.run(main())


def test_exception_runs_the_callback_on_the_next_turn() -> None:
    async def main() -> None:
        seen: list[BaseException | None] = []
        c = Completion(asyncio.get_running_loop(), lambda done: seen.append(done.exception()))
        error = ValueError("bookie gone")
        c.set_exception(error)
        assert c.done() and seen == []           # not inside the caller's teardown
        await asyncio.sleep(0)
        assert seen == [error]
        with pytest.raises(ValueError):
            c.result()
        with pytest.raises(asyncio.InvalidStateError):
            c.set_exception(error)

    asyncio.run(main())


def test_a_raising_callback_is_logged_and_contained(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        def broken(done: Completion) -> None:
            raise RuntimeError("listener bug")

        later: list[object] = []
        c = Completion(asyncio.get_running_loop(), broken)
        c.add_done_callback(lambda done: later.append(done.result()))
        with caplog.at_level(logging.ERROR, logger="common.completion"):
            c.set_result(1)                      # does not raise into the caller
        assert later == [1]                      # the other callbacks still ran
        assert "listener bug" in caplog.text

    asyncio.run(main())


def test_not_set_yet_is_an_error() -> None:
    async def main() -> None:
        c = Completion(asyncio.get_running_loop(), lambda done: None)
        with pytest.raises(asyncio.InvalidStateError):
            c.result()
        with pytest.raises(asyncio.InvalidStateError):
            c.exception()

    asyncio.run(main())


def test_as_future_settles_with_the_completion() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        ok = Completion(loop, lambda done: None)
        failed = Completion(loop, lambda done: None)
        waits = [as_future(ok), as_future(failed)]
        ok.set_result(3)
        failed.set_exception(KeyError("x"))
        results = await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 5)
        assert results[0] == 3 and isinstance(results[1], KeyError)
        done_already = Completion(loop, lambda done: None)
        done_already.set_result(4)
        assert await asyncio.wait_for(as_future(done_already), 5) == 4
        plain = loop.create_future()
        assert as_future(plain) is plain

    asyncio.run(main())
