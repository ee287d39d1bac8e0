"""The interface every benchmarked system implements, and the generic produce/consume loops.

A driver owns its servers (`start`/`stop`, sync) and a client (`connect`/`close`, async). The
workloads (bench/workloads.py) only call `create_topics`, `produce` and `consume`, which are
written here once over four small primitives each driver provides:

- `open_producer(topic)` → a handle; `send(handle, payloads)` → an awaitable that completes when
  the system has acknowledged every payload of the batch (its notion of "acknowledged": see
  ACK_SEMANTICS in each module).
- `open_consumer(topic)` → a handle reading the topic's subscription from its start;
  `receive(handle, max_n, timeout_s, want_payloads)` → (messages, payloads): how many messages
  arrived (0 on timeout), already acknowledged back to the system, and their payloads when
  `want_payloads` (a driver whose unit is a whole batch need not unpack it otherwise).

What must hold: `produce` returns only when every message is acknowledged (or raises), and
`consume` counts every message it was handed, so the workloads can check that all are
accounted for. Every wait is bounded by the caller's deadline.
"""

from __future__ import annotations

import abc
import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAMP = struct.Struct("<q")  # first 8 bytes of a stamped payload: clock_ns() at send
BATCH_MESSAGES = 128         # messages per client batch at max rate (128 KiB of 1 KiB messages)
WINDOW_BATCHES = 64          # batches in flight per topic at max rate
PACE_TICK_S = 0.001          # a paced producer sends what is owed every tick
RECEIVE_TIMEOUT_S = 0.5      # one receive call waits at most this long


def clock_ns() -> int:
    """CLOCK_MONOTONIC: one clock for every process of the machine, so a stamp made by the
    producer's process is read by the consumer's (bench/consumer_proc.py)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Incomplete(RuntimeError):
    """A produce or consume ran out of time before every message was accounted for."""


@dataclass
class Payloads:
    """Makes message payloads of `size_bytes`; stamped ones carry their send time for e2e latency."""
    size_bytes: int = 1024
    stamped: bool = False
    _plain: bytes = field(default=b"", init=False)

    def __post_init__(self) -> None:
        self._plain = bytes(self.size_bytes)

    def batch(self, n: int) -> list[bytes]:
        if not self.stamped:
            return [self._plain] * n
        stamp = STAMP.pack(clock_ns())
        one = stamp + self._plain[STAMP.size:]
        return [one] * n


def stamp_age_ms(payload: bytes, now_ns: int) -> float:
    return (now_ns - STAMP.unpack_from(payload)[0]) / 1e6


class Driver(abc.ABC):
    """Base class: subclasses set the class attributes and implement the abstract primitives."""

    name = "?"            # row label, e.g. "redis (everysec)"
    system = "?"          # "strata", "redis", "nats", "rabbitmq"
    client = "?"          # the client library driving it
    workloads: frozenset[str] | None = None  # None: all of them
    reports_latency = True  # False: produce() returns counts only (latency pairs of 0.0 s)
    ack_semantics = ""
    last_extra: dict = {}  # noqa: RUF012 - replaced, never mutated: the last produce()'s extras for its row
    # (module, class, kwargs) bench/run.py built it from: rebuilds its client in another process
    # (bench/consumer_proc.py); None: made otherwise, its client stays in this process
    factory: tuple[str, str, dict] | None = None

    # --- servers (sync) -------------------------------------------------------------------
    @abc.abstractmethod
    def start(self, workdir: Path) -> None:
        ...

    @abc.abstractmethod
    def stop(self) -> None:
        ...

    @abc.abstractmethod
    def session_ids(self) -> list[int]:
        """Session ids of this system's server processes (for procstat)."""
        ...

    @abc.abstractmethod
    def endpoint(self) -> dict:
        """What a client in another process needs to reach the started servers (picklable)."""

    @abc.abstractmethod
    def use_endpoint(self, endpoint: dict) -> None:
        """In a client-only process: reach the servers another process started (its `endpoint()`)."""

    # --- client (async) -------------------------------------------------------------------
    async def connect(self) -> None:  # noqa: B027 - optional hook, nothing by default
        pass

    async def close(self) -> None:  # noqa: B027 - optional hook, nothing by default
        pass

    @abc.abstractmethod
    async def create_topics(self, topics: list[str], partitioned_as: str | None = None) -> None:
        """Create topics and their subscription; `partitioned_as`: they are partitions of this topic."""
        ...

    @abc.abstractmethod
    async def open_producer(self, topic: str) -> Any:
        ...

    @abc.abstractmethod
    async def send(self, producer: Any, payloads: list[bytes]) -> Awaitable[float | None]:
        """Send one batch; the awaitable completes once every message is acknowledged. Its
        result may be the `time.perf_counter()` at which the ack was seen (drivers whose acks
        arrive on another thread), else None (the harness takes the time itself)."""

    async def close_producer(self, producer: Any) -> None:  # noqa: B027 - optional hook, nothing by default
        pass

    @abc.abstractmethod
    async def open_consumer(self, topic: str) -> Any:
        ...

    @abc.abstractmethod
    async def receive(self, consumer: Any, max_n: int, timeout_s: float,
                      want_payloads: bool) -> tuple[int, list[bytes]]:
        ...

    async def close_consumer(self, consumer: Any) -> None:  # noqa: B027 - optional hook, nothing by default
        pass

    # --- generic loops ----------------------------------------------------------------------
    async def produce(self, topics: list[str], n_per_topic: int, payloads: Payloads, deadline: float,
                      rate_per_s: float | None = None, producers: list[Any] | None = None
                      ) -> list[tuple[float, int]]:
        """Send n_per_topic to each topic; returns (ack latency s, messages) per batch. Opens a
        producer per topic unless given `producers` (opened before a timed window); closes them."""
        if producers is None:
            producers = [await self.open_producer(t) for t in topics]
        latencies: list[tuple[float, int]] = []
        try:
            if rate_per_s is None:
                await asyncio.gather(*(self._produce_max(p, n_per_topic, payloads, deadline, latencies)
                                       for p in producers))
            else:
                await self._produce_paced(producers, n_per_topic, payloads, deadline, rate_per_s, latencies)
        finally:
            for p in producers:
                await self.close_producer(p)
        return latencies

    async def _produce_max(self, producer: Any, n: int, payloads: Payloads, deadline: float,
                           latencies: list[tuple[float, int]]) -> None:
        window = asyncio.Semaphore(WINDOW_BATCHES)
        pending: list[asyncio.Future] = []
        sent = 0
        while sent < n:
            count = min(BATCH_MESSAGES, n - sent)
            await _bounded(window.acquire(), deadline)
            pending.append(await self._tracked_send(producer, payloads.batch(count), latencies, window.release))
            sent += count
            if len(pending) > 4 * WINDOW_BATCHES:
                pending = [f for f in pending if not f.done()]
        await _bounded(asyncio.gather(*pending), deadline)

    async def _tracked_send(self, producer: Any, batch: list[bytes], latencies: list[tuple[float, int]],
                            release: Callable[[], None] | None) -> asyncio.Future:
        start = time.perf_counter()
        acked = asyncio.ensure_future(await self.send(producer, batch))

        def done(fut: asyncio.Future) -> None:
            if not fut.cancelled() and fut.exception() is None:
                # a driver whose acks arrive on another thread returns the time it saw the ack
                acked_s = fut.result() if isinstance(fut.result(), float) else time.perf_counter()
                latencies.append((acked_s - start, len(batch)))
            if release is not None:
                release()
        acked.add_done_callback(done)
        return acked

    async def _produce_paced(self, producers: list[Any], n_per_topic: int, payloads: Payloads, deadline: float,
                             rate_per_s: float, latencies: list[tuple[float, int]]) -> None:
        """Round-robin over the producers at `rate_per_s` messages per second in total."""
        total = n_per_topic * len(producers)
        sent_per = [0] * len(producers)
        pending: list[asyncio.Future] = []
        start = time.perf_counter()
        sent = turn = 0
        while sent < total:
            if time.monotonic() > deadline:
                raise Incomplete(f"paced produce sent {sent}/{total}")
            owed = min(int((time.perf_counter() - start) * rate_per_s), total) - sent
            if owed <= 0:
                await asyncio.sleep(PACE_TICK_S)
                continue
            while owed > 0:
                i = turn % len(producers)
                turn += 1
                if sent_per[i] >= n_per_topic:
                    continue
                # one topic: the whole owed amount as one batch; many: one message per topic
                count = min(owed, n_per_topic - sent_per[i]) if len(producers) == 1 else 1
                pending.append(await self._tracked_send(producers[i], payloads.batch(count), latencies, None))
                sent_per[i] += count
                sent += count
                owed -= count
            if len(pending) > 10_000:
                pending = [f for f in pending if not f.done()]
        await _bounded(asyncio.gather(*pending), deadline)

    async def consume(self, topics: list[str], n_per_topic: int, deadline: float,
                      on_payloads: Callable[[list[bytes]], None] | None = None,
                      ready: asyncio.Event | None = None) -> int:
        """Read n_per_topic from each topic's subscription; returns the messages received."""
        consumers = [await self.open_consumer(t) for t in topics]
        if ready is not None:
            ready.set()
        try:
            counts = await asyncio.gather(*(self._consume_one(c, n_per_topic, deadline, on_payloads)
                                            for c in consumers))
        finally:
            for c in consumers:
                await self.close_consumer(c)
        return sum(counts)

    async def _consume_one(self, consumer: Any, n: int, deadline: float,
                           on_payloads: Callable[[list[bytes]], None] | None) -> int:
        got = 0
        while got < n:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                raise Incomplete(f"consumed {got}/{n} before the deadline")
            count, payloads = await self.receive(consumer, n - got, min(RECEIVE_TIMEOUT_S, left_s),
                                                 on_payloads is not None)
            if payloads and on_payloads is not None:
                on_payloads(payloads)
            got += count
        return got


async def _bounded(aw: Awaitable, deadline: float) -> Any:
    left_s = deadline - time.monotonic()
    if left_s <= 0:
        raise Incomplete("deadline passed")
    try:
        return await asyncio.wait_for(aw, left_s)
    except TimeoutError:
        raise Incomplete("deadline passed while waiting for acknowledgements") from None
