"""Strata: `strata standalone` (1 bookie at 1/1/1, or 3 bookies at 3/2/2) driven by the native driver
(perf/native_client.py) or by the official pulsar-client.

The standalone runs as a subprocess in its own session (broker, bookie and SeaweedFS processes: all
counted by procstat) with its data in the run's temp dir, on free loopback ports; it is launched
by launch/standalone.py, as the perf tools and the tests launch theirs. A topic is
`persistent://public/default/<name>` with one exclusive subscription `bench` created at its start
(EARLIEST); the 16-partition workload creates a real partitioned topic through the admin API and
drives its partitions.

Native driver: one NativeClient; a batch is one SEND (one stored entry) of up to 128 messages,
acknowledged by its SEND_RECEIPT, which the broker sends once Qa bookies have fsynced the entry;
consumers ack cumulatively once per receive. pulsar-client driver: the official client configured
as OpenMessaging Benchmark's Pulsar driver does (batching on, `batchingMaxPublishDelayMs` 1,
block if the queue is full) rather than with the client's default 10 ms delay, which would add
up to 10 ms to every publish at 5k msg/s; `send_async` with a callback on each batch's last
message only; consumers use a message listener and cumulative acks. Its callbacks run on the
client's threads and hand results to the asyncio loop.

The native driver paced (`e2e-5k`) sends what is owed every 1 ms tick as one SEND: the same
1 ms linger as the official client's batching.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from pathlib import Path
from typing import Any

from bench.driver import Driver
from common.invariant import present
from launch.standalone import StandaloneProcess

SUBSCRIPTION = "bench"
RECEIVER_QUEUE = 10_000
PRODUCER_PENDING_MAX = 10_000
START_WAIT_S = 90.0
INBOX_MESSAGES_MAX = RECEIVER_QUEUE  # messages handed over by the listener, not yet taken
INBOX_WAIT_S = 120.0                 # bound on the listener's wait for a free place
ACK_SEMANTICS = ("Strata: a send receipt comes once Qa bookies have the entry in their journal and have "
                 "fsynced it (group commit): an acknowledged message is on disk on Qa bookies "
                 "(1 at 1/1/1, 2 at 3/2/2).")


def full_name(topic: str) -> str:
    return f"persistent://public/default/{topic}"


class StrataServer:
    """`strata standalone` (with its embedded S3) on free ports in `workdir/strata`, its output in
    `workdir/strata.log`; stopped with SIGTERM (SIGKILL of its session after the bound).
    proc: the running standalone, None when stopped. urls: (service, admin) of a standalone
    another process started (a client-only driver), else None."""

    def __init__(self, bookies: int) -> None:
        self.bookies = bookies
        self.proc: StandaloneProcess | None = None
        self.urls: tuple[str, str] | None = None

    @property
    def service_url(self) -> str:
        return self.urls[0] if self.urls else present(self.proc, "started").service_url

    @property
    def admin_url(self) -> str:
        return self.urls[1] if self.urls else present(self.proc, "started").admin_url

    def start(self, workdir: Path) -> None:
        self.proc = StandaloneProcess(workdir / "strata", False, self.bookies, embedded_s3=True)
        try:
            self.proc.launch(START_WAIT_S)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc = None


def StrataDriver(bookies: int = 1, driver: str = "native") -> Driver:
    """The row for this standalone size and client (factory used by bench/run.py)."""
    if driver == "native":
        return StrataNativeDriver(bookies)
    if driver == "pulsar-client":
        return StrataPulsarClientDriver(bookies)
    raise ValueError(f"unknown Strata driver {driver!r}")


class _StrataBase(Driver):
    system = "strata"
    ack_semantics = ACK_SEMANTICS

    def __init__(self, bookies: int, client: str) -> None:
        self.server = StrataServer(bookies)
        quorum = "1/1/1" if bookies == 1 else f"{bookies}/{min(bookies, 2)}/{min(bookies, 2)}"
        self.name = f"strata {quorum} ({client})"

    def start(self, workdir: Path) -> None:
        self.server.start(workdir)

    def stop(self) -> None:
        self.server.stop()

    def session_ids(self) -> list[int]:
        return [self.server.proc.pid] if self.server.proc else []

    def endpoint(self) -> dict:
        return {"service_url": self.server.service_url, "admin_url": self.server.admin_url}

    def use_endpoint(self, endpoint: dict) -> None:
        self.server.urls = (endpoint["service_url"], endpoint["admin_url"])

    async def _create_partitioned(self, parent: str, partitions: int) -> None:
        from perf.harness import create_partitioned_topic
        await asyncio.to_thread(create_partitioned_topic, self.server.admin_url, full_name(parent), partitions)


class StrataNativeDriver(_StrataBase):
    client = "native (perf/native_client.py)"

    def __init__(self, bookies: int) -> None:
        super().__init__(bookies, "native")
        self.nc = None

    async def connect(self) -> None:
        from perf.native_client import NativeClient
        self.nc = NativeClient(self.server.service_url)

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.close()
            self.nc = None

    async def create_topics(self, topics: list[str], partitioned_as: str | None = None) -> None:
        from perf.native_client import EARLIEST
        if partitioned_as is not None:
            await self._create_partitioned(partitioned_as, len(topics))
        for topic in topics:
            for consumer in await self.nc.subscribe(full_name(topic), SUBSCRIPTION, initial_position=EARLIEST,
                                                    send_flow=False):
                await consumer.close()

    async def open_producer(self, topic: str) -> Any:
        producer = await self.nc.create_producer(full_name(topic), max_pending_messages=PRODUCER_PENDING_MAX)
        return producer, producer.encoder()

    async def send(self, producer: Any, payloads: list[bytes]) -> asyncio.Future:
        handle, encoder = producer
        return await handle.send_payloads(encoder, payloads, want_future=True)

    async def close_producer(self, producer: Any) -> None:
        await producer[0].close()

    async def open_consumer(self, topic: str) -> Any:
        from perf.native_client import EARLIEST
        consumers = await self.nc.subscribe(full_name(topic), SUBSCRIPTION, initial_position=EARLIEST,
                                            receiver_queue_size=RECEIVER_QUEUE)
        return consumers[0]

    async def receive(self, consumer: Any, max_n: int, timeout_s: float,
                      want_payloads: bool) -> tuple[int, list[bytes]]:
        entries = await consumer.receive_entries(timeout_s=timeout_s)
        if not entries:
            return 0, []
        consumer.ack_cumulative(entries[-1])
        count = sum(entry.num_messages for entry in entries)
        if not want_payloads:
            return count, []
        return count, [m.payload for entry in entries for m in entry.messages()]

    async def close_consumer(self, consumer: Any) -> None:
        await consumer.flush_acks()
        await consumer.close()


class StrataPulsarClientDriver(_StrataBase):
    """The official client: its calls block, so they run in threads; its callbacks come on its threads."""

    client = "pulsar-client (official), batching, send_async"

    def __init__(self, bookies: int) -> None:
        super().__init__(bookies, "pulsar-client")
        self.pc = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def connect(self) -> None:
        import pulsar
        self.loop = asyncio.get_running_loop()
        self.pc = await asyncio.to_thread(pulsar.Client, self.server.service_url, operation_timeout_seconds=60,
                                          io_threads=1, message_listener_threads=1,
                                          logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))

    async def close(self) -> None:
        if self.pc is not None:
            await asyncio.to_thread(self.pc.close)
            self.pc = None

    async def create_topics(self, topics: list[str], partitioned_as: str | None = None) -> None:
        import pulsar
        if partitioned_as is not None:
            await self._create_partitioned(partitioned_as, len(topics))

        def subscribe_all() -> None:
            for topic in topics:
                self.pc.subscribe(full_name(topic), SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Exclusive,
                                  initial_position=pulsar.InitialPosition.Earliest).close()
        await asyncio.to_thread(subscribe_all)

    async def open_producer(self, topic: str) -> Any:
        return await asyncio.to_thread(
            self.pc.create_producer, full_name(topic), batching_enabled=True, batching_max_messages=1000,
            batching_max_allowed_size_in_bytes=128 * 1024, batching_max_publish_delay_ms=1,
            max_pending_messages=PRODUCER_PENDING_MAX, block_if_queue_full=True, send_timeout_millis=60_000)

    async def send(self, producer: Any, payloads: list[bytes]) -> asyncio.Future:
        """Only the batch's last message gets a callback: one producer's sends complete in order
        (a failure fails every later pending send too), so its receipt settles the whole batch,
        and the client's I/O thread takes the GIL once per batch instead of once per message."""
        import pulsar
        loop = self.loop
        done = loop.create_future()

        def callback(result, msg_id) -> None:  # on the client's I/O thread
            error = None if result == pulsar.Result.Ok else RuntimeError(f"send failed: {result}")
            # the ack time is taken here, not when the loop gets round to the future: publish
            # latency is the client's, not this harness's queueing behind its other threads
            loop.call_soon_threadsafe(_settle, done, error, time.perf_counter())

        for payload in payloads[:-1]:
            producer.send_async(payload, None)
        producer.send_async(payloads[-1], callback)
        return done

    async def close_producer(self, producer: Any) -> None:
        await asyncio.to_thread(producer.flush)
        await asyncio.to_thread(producer.close)

    async def open_consumer(self, topic: str) -> Any:
        import pulsar
        inbox = _ListenerInbox(self.loop)
        inbox.consumer = await asyncio.to_thread(
            self.pc.subscribe, full_name(topic), SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=RECEIVER_QUEUE,
            message_listener=inbox.on_message)
        return inbox

    async def receive(self, consumer: Any, max_n: int, timeout_s: float,
                      want_payloads: bool) -> tuple[int, list[bytes]]:
        inbox: _ListenerInbox = consumer
        messages = await inbox.take(max_n, timeout_s)
        if not messages:
            return 0, []
        inbox.consumer.acknowledge_cumulative(messages[-1])
        return len(messages), ([m.data() for m in messages] if want_payloads else [])

    async def close_consumer(self, consumer: Any) -> None:
        await asyncio.to_thread(consumer.consumer.close)


def _settle(future: asyncio.Future, error: Exception | None, acked_s: float | None = None) -> None:
    """Complete `future`; its result is the perf_counter time of the ack when the caller knows it."""
    if future.done():
        return
    if error is None:
        future.set_result(acked_s)
    else:
        future.set_exception(error)


class _ListenerInbox:
    """Messages from the client's listener thread; the loop is woken only while receive() waits."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.consumer: Any = None
        self.messages: collections.deque = collections.deque()  # at most INBOX_MESSAGES_MAX
        # Free places in `messages`. The listener thread waits for one before appending, so a
        # harness that falls behind holds the client's listener, and the client's bounded
        # receiver queue then stops asking the broker for more (backpressure, not growth).
        self.room = threading.Semaphore(INBOX_MESSAGES_MAX)
        self.waiter: asyncio.Future | None = None  # set while take() waits for the first message

    def on_message(self, consumer: Any, message: Any) -> None:  # on the listener thread
        if not self.room.acquire(timeout=INBOX_WAIT_S):
            raise TimeoutError(f"bench consumer took nothing for {INBOX_WAIT_S} s")  # logged by the client
        self.messages.append(message)
        waiter = self.waiter
        if waiter is not None:
            self.loop.call_soon_threadsafe(_settle, waiter, None)

    async def take(self, max_n: int, timeout_s: float) -> list:
        if not self.messages:
            self.waiter = self.loop.create_future()
            try:
                if not self.messages:  # a message may have come before the waiter was set
                    await asyncio.wait_for(asyncio.shield(self.waiter), timeout_s)
            except TimeoutError:
                return []
            finally:
                self.waiter = None
        out = []
        while self.messages and len(out) < max_n:
            out.append(self.messages.popleft())
            self.room.release()
        return out
