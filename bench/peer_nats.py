"""NATS JetStream as a peer: nats-py, file storage, async publish with acks, pull consumers.

A topic is a JetStream stream (file storage) with one subject of the same name and one durable
pull consumer `bench` (deliver all, ack policy `all`: acknowledging a message acknowledges every
earlier one, so a consumer acks once per received batch). A producer batch is `publish_async` of
each message, done when every PubAck has arrived (nats-py bounds the acks pending per client).

The consumer pulls continuously, as nats.go's `Consume()` does: one pull request for
PULL_BATCH messages is outstanding at a time, messages are taken as they arrive, and the next
request goes out when the batch is used up, the server ends the request with a status message
(408 on expiry), or the request is older than its expiry (a lost 408 must not leave a consumer
waiting on a request the server already dropped; a duplicate request is harmless). nats-py's
`fetch(n)` waits until it has n messages or times out, which would turn the end-to-end test
into a test of the fetch timeout.

nats-server runs with `-js -sd <tmp>` on a free loopback port.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

from bench.driver import Driver
from bench.server import ServerProcess
from common.net import free_port

GROUP = "bench"
PUBLISH_PENDING_MAX = 16_384
ACK_PENDING_MAX = 1_000_000
PULL_BATCH = 1000
PULL_EXPIRES_S = 5.0
PULL_STATUS_GRACE_S = 2.0  # a request older than its expiry plus this is taken as ended
ACK_SEMANTICS = ("NATS JetStream (2.9, file storage, one server): the PubAck comes once the message is "
                 "appended to the stream's block file (the OS page cache); the file store fsyncs on its own "
                 "schedule, not before the ack, so a machine crash can lose acknowledged messages.")


def available() -> bool:
    return shutil.which("nats-server") is not None


class NatsDriver(Driver):
    system = "nats"
    name = "nats jetstream (file)"
    client = "nats-py, publish_async + pull fetch"
    ack_semantics = ACK_SEMANTICS

    def __init__(self) -> None:
        self.port = 0
        self.proc: ServerProcess | None = None
        self.nc = None
        self.js = None

    def start(self, workdir: Path) -> None:
        data = workdir / "nats"
        data.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cmd = ["nats-server", "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(data)]
        self.proc = ServerProcess("nats-server", cmd, workdir / "nats.log").start()
        self.proc.wait_port(self.port, 30)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def session_ids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []

    def endpoint(self) -> dict:
        return {"port": self.port}

    def use_endpoint(self, endpoint: dict) -> None:
        self.port = endpoint["port"]

    async def connect(self) -> None:
        import nats
        self.nc = await nats.connect(f"nats://127.0.0.1:{self.port}", connect_timeout=10,
                                     max_reconnect_attempts=0, pending_size=64 * 1024 * 1024)
        self.js = self.nc.jetstream(timeout=30, publish_async_max_pending=PUBLISH_PENDING_MAX)

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.close()
            self.nc = None

    async def create_topics(self, topics: list[str], partitioned_as: str | None = None) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
        for topic in topics:
            await self.js.add_stream(name=topic, subjects=[topic], storage=StorageType.FILE)
            await self.js.add_consumer(topic, ConsumerConfig(
                durable_name=GROUP, deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.ALL,
                max_ack_pending=ACK_PENDING_MAX))

    async def open_producer(self, topic: str) -> Any:
        return topic

    async def send(self, producer: Any, payloads: list[bytes]) -> asyncio.Future:
        acks = [await self.js.publish_async(producer, payload) for payload in payloads]
        return asyncio.ensure_future(_all_acked(acks))

    async def open_consumer(self, topic: str) -> Any:
        pull = _Pull(f"$JS.API.CONSUMER.MSG.NEXT.{topic}.{GROUP}", self.nc.new_inbox())
        pull.sub = await self.nc.subscribe(pull.inbox, cb=pull.on_msg)
        return pull

    async def receive(self, consumer: Any, max_n: int, timeout_s: float,
                      want_payloads: bool) -> tuple[int, list[bytes]]:
        from nats.js.client import JetStreamContext
        pull: _Pull = consumer
        if pull.outstanding > 0 and time.monotonic() - pull.requested_s > PULL_EXPIRES_S + PULL_STATUS_GRACE_S:
            pull.outstanding = 0  # expired without its 408 reaching us: never wait on it forever
        if pull.outstanding == 0:
            request = {"batch": PULL_BATCH, "expires": int(PULL_EXPIRES_S * 1e9)}
            await self.nc.publish(pull.next_subject, json.dumps(request).encode(), reply=pull.inbox)
            pull.outstanding = PULL_BATCH
            pull.requested_s = time.monotonic()
        if not pull.arrived:
            pull.event.clear()
            try:
                await asyncio.wait_for(pull.event.wait(), timeout_s)
            except TimeoutError:
                return 0, []
        msgs, pull.arrived = pull.arrived[:max_n], pull.arrived[max_n:]
        data, last = [], None
        for msg in msgs:
            if JetStreamContext.is_status_msg(msg):
                pull.outstanding = 0  # the server ended this pull request (408 expired, 409, ...)
                continue
            pull.outstanding = max(0, pull.outstanding - 1)
            data.append(msg.data)
            last = msg
        if last is not None:
            await last.ack()  # AckPolicy.ALL: covers every earlier message
        return len(data), data

    async def close_consumer(self, consumer: Any) -> None:
        await consumer.sub.unsubscribe()


class _Pull:
    """One continuous pull: its inbox, what arrived there, and what the open request still owes."""

    def __init__(self, next_subject: str, inbox: str) -> None:
        self.next_subject = next_subject
        self.inbox = inbox
        self.sub: Any = None
        self.outstanding = 0      # messages the open pull request still owes; 0: no request open
        self.requested_s = 0.0    # monotonic s the open request went out
        self.arrived: list = []   # delivered, not yet taken by receive(); at most PULL_BATCH + statuses
        self.event = asyncio.Event()

    async def on_msg(self, msg: Any) -> None:
        self.arrived.append(msg)
        self.event.set()


async def _all_acked(acks: list[asyncio.Future]) -> None:
    for ack in acks:
        await ack  # a PubAck error raises here
