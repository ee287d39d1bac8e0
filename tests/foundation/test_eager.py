"""common.eager.start_eager: a coroutine that never waits finishes in the call, no Task; one that
waits is resumed by a Task exactly as a Task would resume it (results, exceptions, sleep(0),
cancellation)."""

from __future__ import annotations

import asyncio

import pytest

from common.eager import start_eager


def test_a_coroutine_that_never_waits_finishes_in_the_call() -> None:
    async def main() -> None:
        ran: list[str] = []

        async def cached() -> None:
            ran.append("step")

        assert start_eager(asyncio.get_running_loop(), cached()) is None
        assert ran == ["step"]

    asyncio.run(main())


def test_a_coroutine_that_waits_is_resumed_with_results_and_errors() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        seen: list[object] = []

        async def reader() -> str:
            seen.append("before")
            seen.append(await first)
            await asyncio.sleep(0)
            try:
                await second
            except KeyError as exc:
                seen.append(type(exc).__name__)
            return "done"

        task = start_eager(loop, reader())
        assert task is not None and seen == ["before"]     # ran up to its first wait, in the call
        first.set_result(1)
        second.set_exception(KeyError("x"))
        assert await asyncio.wait_for(task, 5) == "done"
        assert seen == ["before", 1, "KeyError"]

    asyncio.run(main())


def test_cancelling_the_task_cancels_the_wait_and_reaches_the_coroutine() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        never = loop.create_future()
        cleaned: list[bool] = []

        async def waits() -> None:
            try:
                await never
            finally:
                cleaned.append(True)

        task = start_eager(loop, waits())
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        assert never.cancelled() and cleaned == [True]

    asyncio.run(main())


def test_an_error_in_the_first_step_reaches_the_caller() -> None:
    async def main() -> None:
        async def broken() -> None:
            raise ValueError("first step")

        with pytest.raises(ValueError):
            start_eager(asyncio.get_running_loop(), broken())

    asyncio.run(main())
