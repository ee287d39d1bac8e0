"""RabbitMQ stream queues as a peer: rstream (the stream protocol), `send_batch` with confirms.

The node runs as the `rabbitmq` user from the Debian package's scripts, configured entirely by
RABBITMQ_* environment variables and a generated rabbitmq.conf in a temp dir: its own node
name, AMQP / distribution / stream ports on 127.0.0.1, its own epmd (started here on a free
port, ERL_EPMD_PORT), the `rabbitmq_stream` plugin enabled through RABBITMQ_ENABLED_PLUGINS_FILE,
Mnesia and stream data in the temp dir.

A topic is a stream queue. A producer batch is one `send_batch` (one publish frame), done when
every publishing id of the batch is confirmed. rstream Producers and Consumers carry the
topics up to PER_CLIENT_MAX publishers or subscriptions each (rstream refuses a 200th); more are
spread over further Producer / Consumer instances. A consumer
subscribes from the first offset; its
handler hands messages to a bounded queue (a full queue holds up the connection: backpressure)
and `receive` stores the consumer's offset once per batch, the stream equivalent of an ack.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
from pathlib import Path
from typing import Any

from bench.driver import Driver
from bench.server import ServerProcess
from common.net import free_port

RABBIT_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBIT_USER = "rabbitmq"
START_WAIT_S = 120.0
CONSUMER_QUEUE_MAX = 20_000
PER_CLIENT_MAX = 150  # rstream refuses a 200th publisher on one Producer, subscription on one Consumer
INITIAL_CREDIT_CHUNKS = 1000  # chunks the server may send ahead (rstream: 10), each refilled on delivery
SUBSCRIBER = "bench"
ACK_SEMANTICS = ("RabbitMQ stream (3.10, one node): a publish confirm is sent once the chunk is written "
                 "to the stream's segment file and replicated to a quorum (here the node alone); streams "
                 "do not fsync before confirming, so a machine crash can lose confirmed messages.")


def available() -> bool:
    return os.path.exists(RABBIT_SERVER) and shutil.which("epmd") is not None


def _config(stream_port: int, amqp_port: int) -> str:
    return "\n".join([
        f"listeners.tcp.1 = 127.0.0.1:{amqp_port}",
        f"stream.listeners.tcp.1 = 127.0.0.1:{stream_port}",
        "stream.advertised_host = 127.0.0.1",
        f"stream.advertised_port = {stream_port}",
        "loopback_users = none",
        "log.console = false",
        "log.file.level = warning",
        "",
    ])


class RabbitDriver(Driver):
    system = "rabbitmq"
    name = "rabbitmq stream"
    client = "rstream, send_batch + confirms"
    ack_semantics = ACK_SEMANTICS

    def __init__(self) -> None:
        self.stream_port = 0
        self.epmd: ServerProcess | None = None
        self.node: ServerProcess | None = None
        self.producer = None
        # [rstream client, publishers/subscriptions opened on it (never decremented)]
        self.consumers: list[list] = []
        self.producers: list[list] = []

    def start(self, workdir: Path) -> None:
        base = workdir / "rabbitmq"
        base.mkdir(parents=True, exist_ok=True)
        self.stream_port, amqp_port, dist_port, epmd_port = (free_port() for _ in range(4))
        (base / "rabbitmq.conf").write_text(_config(self.stream_port, amqp_port))
        (base / "enabled_plugins").write_text("[rabbitmq_stream].\n")
        cookie = base / ".erlang.cookie"
        cookie.write_text(os.urandom(16).hex())
        cookie.chmod(0o400)
        user = pwd.getpwnam(RABBIT_USER)
        for path in [base, *base.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(base), "LANG": "C.UTF-8",
               "ERL_EPMD_PORT": str(epmd_port), "ERL_EPMD_ADDRESS": "127.0.0.1",
               "RABBITMQ_NODENAME": f"bench{self.stream_port}@localhost", "RABBITMQ_USE_LONGNAME": "false",
               "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(amqp_port),
               "RABBITMQ_DIST_PORT": str(dist_port), "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
               "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
               "RABBITMQ_MNESIA_BASE": str(base / "mnesia"), "RABBITMQ_LOG_BASE": str(base / "log"),
               "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
               "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config")}
        self.epmd = ServerProcess("epmd", ["epmd", "-port", str(epmd_port), "-address", "127.0.0.1"],
                                  workdir / "epmd.log", env=env, user=RABBIT_USER).start()
        self.epmd.wait_port(epmd_port, 30)
        self.node = ServerProcess("rabbitmq-server", [RABBIT_SERVER], workdir / "rabbitmq.log",
                                  env=env, cwd=base, user=RABBIT_USER).start()
        self.node.wait_port(self.stream_port, START_WAIT_S)

    def stop(self) -> None:
        for proc in (self.node, self.epmd):
            if proc is not None:
                proc.stop()
        self.node = self.epmd = None

    def session_ids(self) -> list[int]:
        return [p.pid for p in (self.node, self.epmd) if p is not None]

    def endpoint(self) -> dict:
        return {"stream_port": self.stream_port}

    def use_endpoint(self, endpoint: dict) -> None:
        self.stream_port = endpoint["stream_port"]

    def _client_args(self) -> dict:
        return {"host": "127.0.0.1", "port": self.stream_port, "username": "guest", "password": "guest"}

    async def connect(self) -> None:
        from rstream import Producer
        self.producer = await self._client_with_room(Producer, self.producers)

    async def close(self) -> None:
        for client, _ in [*self.consumers, *self.producers]:
            await client.close()
        self.producer = None
        self.consumers, self.producers = [], []

    async def _client_with_room(self, cls: type, pool: list) -> Any:
        """The newest client of `pool` ([client, uses] pairs) with room for one more use, or a new one."""
        if not pool or pool[-1][1] >= PER_CLIENT_MAX:
            client = cls(**self._client_args())
            await client.start()
            pool.append([client, 0])
        pool[-1][1] += 1
        return pool[-1][0]

    async def create_topics(self, topics: list[str], partitioned_as: str | None = None) -> None:
        for topic in topics:
            await self.producer.create_stream(topic, exists_ok=True)

    async def open_producer(self, topic: str) -> Any:
        from rstream import Producer
        confirms = _Confirms(topic)
        confirms.client = await self._client_with_room(Producer, self.producers)
        return confirms

    async def send(self, producer: Any, payloads: list[bytes]) -> asyncio.Future:
        confirms: _Confirms = producer
        done = asyncio.get_running_loop().create_future()
        # one callback object per producer: rstream scans its waiting callbacks on every confirm frame
        ids = await confirms.client.send_batch(confirms.topic, payloads, on_publish_confirm=confirms.on_confirm)
        confirms.track(ids, done)
        return done

    async def open_consumer(self, topic: str) -> Any:
        from rstream import ConsumerOffsetSpecification, OffsetType
        inbox = _Inbox(topic)
        from rstream import Consumer
        inbox.client = await self._client_with_room(Consumer, self.consumers)
        inbox.sub_id = await inbox.client.subscribe(
            topic, inbox.on_message, subscriber_name=SUBSCRIBER, initial_credit=INITIAL_CREDIT_CHUNKS,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
        return inbox

    async def receive(self, consumer: Any, max_n: int, timeout_s: float,
                      want_payloads: bool) -> tuple[int, list[bytes]]:
        inbox: _Inbox = consumer
        if not inbox.messages:
            inbox.arrived.clear()
            try:
                await asyncio.wait_for(inbox.arrived.wait(), timeout_s)
            except TimeoutError:
                return 0, []
        taken, inbox.messages = inbox.messages[:max_n], inbox.messages[max_n:]
        if len(inbox.messages) < CONSUMER_QUEUE_MAX:
            inbox.room.set()
        await inbox.client.store_offset(inbox.topic, SUBSCRIBER, inbox.last_offset)
        return len(taken), taken

    async def close_consumer(self, consumer: Any) -> None:
        await consumer.client.unsubscribe(consumer.sub_id)


class _Inbox:
    """Messages delivered to one subscription and not yet received; full → the handler waits."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.sub_id = -1
        self.client: Any = None           # the rstream Consumer holding this subscription
        self.messages: list[bytes] = []   # at most CONSUMER_QUEUE_MAX (+ one chunk)
        self.last_offset = 0              # offset of the newest delivered message
        self.arrived = asyncio.Event()
        self.room = asyncio.Event()

    def on_message(self, message: bytes, context) -> Any:
        self.messages.append(bytes(message))
        self.last_offset = context.offset
        self.arrived.set()
        if len(self.messages) >= CONSUMER_QUEUE_MAX:
            self.room.clear()
            return self.room.wait()  # rstream awaits it: holds up this connection's deliveries
        return None


class _Confirms:
    """One producer's batches awaiting confirms: publishing id → [messages left, future] of its batch."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.client: Any = None  # the rstream Producer publishing to this topic
        self.batch_of: dict[int, list] = {}

    def track(self, ids: list[int], done: asyncio.Future) -> None:
        batch = [len(ids), done]
        for publishing_id in ids:
            self.batch_of[publishing_id] = batch

    def on_confirm(self, status) -> None:
        batch = self.batch_of.pop(status.message_id, None)
        if batch is None:
            return
        if not status.is_confirmed and not batch[1].done():
            batch[1].set_exception(RuntimeError(f"publish error {status.response_code}"))
        batch[0] -= 1
        if batch[0] == 0 and not batch[1].done():
            batch[1].set_result(None)
