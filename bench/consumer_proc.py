"""The end-to-end consumer in a process of its own, as a separate application would run it.

`e2e-5k` times send -> receive. With the consumer in the producer's process, the two share one
event loop and one GIL: a receive waits behind a paced send and the other way round, so the
harness adds its own stalls to what it measures. `strata perf produce` runs them in separate
processes, as OpenMessaging Benchmark's workers do; so does this, for every system alike.

The parent spawns the child with the driver's factory (`Driver.factory`, set by bench/run.py)
and its servers' endpoint (`Driver.endpoint()`); the child builds a client-only driver, opens
the consumer, says "ready", runs `Driver.consume` and sends back the count and one end-to-end
latency per message. What must hold: the stamps and the child read the same clock
(bench/driver.py `clock_ns`, CLOCK_MONOTONIC, one per machine); every wait is bounded by the
workload's deadline; the child is killed if it outlives `close()`.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

import uvloop

from bench.driver import Driver, Incomplete, clock_ns, stamp_age_ms

JOIN_WAIT_S = 10.0  # bound on close()'s wait for the child to exit


class ConsumerProcess:
    """One consumer of `topic` in a spawned process; `total` messages before `deadline` (monotonic)."""

    def __init__(self, driver: Driver, topic: str, total: int, deadline: float) -> None:
        if driver.factory is None:
            raise RuntimeError(f"{driver.name}: no factory to rebuild its client in another process")
        self.deadline = deadline
        self.finished = False  # its result came: close() lets it close its client before the bound
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(driver.factory, driver.endpoint(), topic, total, deadline, theirs),
                                daemon=True)
        self.proc.start()
        theirs.close()

    async def _next(self, timeout_s: float) -> tuple:
        """The child's next message; raises its error, or Incomplete after `timeout_s`."""
        if not await asyncio.to_thread(self.conn.poll, max(0.0, timeout_s)):
            raise Incomplete(f"the consumer process said nothing for {timeout_s:.0f} s")
        try:
            message = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"the consumer process exited ({self.proc.exitcode})") from None
        if message[0] == "error":
            raise RuntimeError(f"consumer process: {message[1]}")
        return message

    async def ready(self, timeout_s: float) -> None:
        """Once its consumer is open (subscribed, permits granted)."""
        await self._next(timeout_s)

    async def result(self) -> tuple[int, list[float]]:
        """Messages received and their end-to-end latencies (ms, one per message)."""
        _, got, lat_ms = await self._next(self.deadline - time.monotonic())
        self.finished = True
        return got, lat_ms

    def close(self) -> None:
        self.conn.close()
        if not self.finished:  # the workload failed: nothing it does now is wanted
            self.proc.kill()
        self.proc.join(JOIN_WAIT_S)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(JOIN_WAIT_S)


class _PipeReady:
    """Stands for `Driver.consume`'s ready event: tells the parent when the consumers are open."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def set(self) -> None:
        self.conn.send(("ready",))


def _child(factory: tuple[str, str, dict], endpoint: dict, topic: str, total: int, deadline: float,
           conn: Connection) -> None:
    try:
        uvloop.run(_consume(factory, endpoint, topic, total, deadline, conn))
    except BaseException as exc:  # reported to the parent, which raises it in the workload
        conn.send(("error", f"{type(exc).__name__}: {exc}"[:1500]))


async def _consume(factory: tuple[str, str, dict], endpoint: dict, topic: str, total: int, deadline: float,
                   conn: Connection) -> None:
    module, cls_name, kwargs = factory
    driver: Any = getattr(importlib.import_module(module), cls_name)(**kwargs)
    driver.use_endpoint(endpoint)
    await driver.connect()
    lat_ms: list[float] = []

    def on_payloads(batch: list[bytes]) -> None:
        now = clock_ns()
        lat_ms.extend(stamp_age_ms(p, now) for p in batch)

    try:
        got = await driver.consume([topic], total, deadline, on_payloads, _PipeReady(conn))
        conn.send(("done", got, lat_ms))  # before closing: the parent's clock stops on it
    finally:
        await driver.close()
