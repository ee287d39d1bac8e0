"""Redis 7 streams as a peer: XADD / XREADGROUP / XACK through redis-py (hiredis parser), pipelined.

A topic is a stream key with one consumer group `bench` created at offset 0 (so it reads the
backlog from the start). A producer batch is one pipeline of XADDs (no MULTI), acknowledged when
the pipeline's replies arrive; a consumer calls XREADGROUP COUNT n BLOCK t and XACKs what it got
in one more round trip. Each producer and consumer has its own connection, as separate client
processes would.

Durability: `--appendonly yes` with `--appendfsync everysec` (one fsync a second, so a crash may
lose the last second of acknowledged writes) or `always` (fsync of the AOF before the reply: an
acknowledged XADD is on disk). RDB snapshots are off.

`RedisBenchmarkDriver` adds the C `redis-benchmark` doing pipelined XADD of 1 KiB values, for the
max-rate produce workloads only: what the server can take when the client costs nothing.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.driver import Driver
from bench.server import ServerProcess
from common.net import free_port

GROUP = "bench"
ACK_SEMANTICS = {
    "everysec": "Redis AOF everysec: the reply comes after the write to the AOF in memory; "
                "fsync happens once a second, so a crash can lose about the last second of acknowledged messages.",
    "always": "Redis AOF always: the AOF is fsynced before the reply (group commit across clients "
              "in one event-loop iteration): an acknowledged message is on disk.",
}


def available() -> bool:
    return shutil.which("redis-server") is not None


class RedisServer:
    """redis-server on a free loopback port with AOF in a temp dir."""

    def __init__(self, fsync: str) -> None:
        self.fsync = fsync
        self.port = 0
        self.proc: ServerProcess | None = None

    def start(self, workdir: Path) -> None:
        data = workdir / f"redis-{self.fsync}"
        data.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(data),
               "--appendonly", "yes", "--appendfsync", self.fsync, "--save", "",
               "--maxclients", "10000", "--daemonize", "no", "--loglevel", "warning"]
        self.proc = ServerProcess(f"redis-{self.fsync}", cmd, data.parent / f"redis-{self.fsync}.log").start()
        self.proc.wait_port(self.port, 30)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


class RedisDriver(Driver):
    system = "redis"
    client = "redis-py (hiredis), packed pipelines of 128"

    def __init__(self, fsync: str = "everysec") -> None:
        self.server = RedisServer(fsync)
        self.name = f"redis streams ({fsync})"
        self.ack_semantics = ACK_SEMANTICS[fsync]
        self._conns: list[aioredis.Connection] = []

    def start(self, workdir: Path) -> None:
        self.server.start(workdir)

    def stop(self) -> None:
        self.server.stop()

    def session_ids(self) -> list[int]:
        return [self.server.proc.pid] if self.server.proc else []

    def endpoint(self) -> dict:
        return {"port": self.server.port}

    def use_endpoint(self, endpoint: dict) -> None:
        self.server.port = endpoint["port"]

    async def _conn(self) -> aioredis.Connection:
        """A raw redis-py connection (hiredis parser): packed pipelines, replies without callbacks."""
        conn = aioredis.Connection(host="127.0.0.1", port=self.server.port, socket_timeout=60)
        await conn.connect()
        self._conns.append(conn)
        return conn

    async def _drop(self, conn: aioredis.Connection) -> None:
        await conn.disconnect()
        self._conns.remove(conn)

    async def close(self) -> None:
        for conn in list(self._conns):
            await self._drop(conn)

    async def create_topics(self, topics: list[str], partitioned_as: str | None = None) -> None:
        conn = await self._conn()
        try:
            for i in range(0, len(topics), 500):
                chunk = topics[i:i + 500]
                await self._pipeline(conn, [("XGROUP", "CREATE", t, GROUP, "0", "MKSTREAM") for t in chunk])
        finally:
            await self._drop(conn)

    @staticmethod
    async def _pipeline(conn: aioredis.Connection, commands: list[tuple]) -> list:
        await conn.send_packed_command(conn.pack_commands(commands))
        replies = [await conn.read_response() for _ in commands]
        errors = [r for r in replies if isinstance(r, Exception)]
        if errors:
            raise errors[0]
        return replies

    async def open_producer(self, topic: str) -> Any:
        return (topic, await self._conn(), asyncio.Lock())

    async def send(self, producer: Any, payloads: list[bytes]) -> asyncio.Future:
        topic, conn, lock = producer
        commands = [("XADD", topic, "*", "d", payload) for payload in payloads]
        return asyncio.ensure_future(self._locked(lock, conn, commands))

    async def _locked(self, lock: asyncio.Lock, conn: aioredis.Connection, commands: list[tuple]) -> None:
        # one connection carries one pipeline at a time; batches queue on the lock, in order
        async with lock:
            await self._pipeline(conn, commands)

    async def close_producer(self, producer: Any) -> None:
        await self._drop(producer[1])

    async def open_consumer(self, topic: str) -> Any:
        return (topic, await self._conn())

    async def receive(self, consumer: Any, max_n: int, timeout_s: float,
                      want_payloads: bool) -> tuple[int, list[bytes]]:
        topic, conn = consumer
        block_ms = str(max(1, int(timeout_s * 1000)))
        reply = (await self._pipeline(conn, [("XREADGROUP", "GROUP", GROUP, "c", "COUNT", str(min(max_n, 1000)),
                                               "BLOCK", block_ms, "STREAMS", topic, ">")]))[0]
        if not reply:
            return 0, []
        entries = reply[0][1]  # [[stream, [[id, [field, value]], ...]]]
        await self._pipeline(conn, [("XACK", topic, GROUP, *[entry[0] for entry in entries])])
        return len(entries), [entry[1][1] for entry in entries]

    async def close_consumer(self, consumer: Any) -> None:
        await self._drop(consumer[1])


class RedisBenchmarkDriver(RedisDriver):
    """`redis-benchmark` (C) pipelining XADD: the produce workloads only, no per-message latency."""

    client = "redis-benchmark (C), -P 128 -c 16"
    reports_latency = False
    workloads = frozenset({"produce-1x1", "produce-1x16"})
    PIPELINE = 128
    CLIENTS = 16

    def __init__(self, fsync: str = "everysec") -> None:
        super().__init__(fsync)
        self.name = f"redis-benchmark XADD ({fsync})"

    async def produce(self, topics, n_per_topic, payloads, deadline, rate_per_s=None):
        """One redis-benchmark per topic, all at once; the latency pairs carry the counts only."""
        value = b"x" * payloads.size_bytes
        procs = []
        for topic in topics:
            cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.server.port), "-n", str(n_per_topic),
                   "-P", str(self.PIPELINE), "-c", str(self.CLIENTS), "-q", "--csv",
                   "XADD", topic, "*", "d", value.decode()]
            procs.append(await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.PIPE,
                                                              stderr=subprocess.STDOUT))
        try:
            outs = [await asyncio.wait_for(p.communicate(), max(1.0, deadline - time.monotonic())) for p in procs]
        finally:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    await p.wait()
        conn = await self._conn()
        try:
            lengths = [(await self._pipeline(conn, [("XLEN", t)]))[0] for t in topics]
        finally:
            await self._drop(conn)
        self.last_extra = {}
        for p, (out, _) in zip(procs, outs):
            if p.returncode != 0 or not re.search(rb'"XADD', out):
                raise RuntimeError(f"redis-benchmark failed: {out[-300:]!r}")
        self.last_extra = _csv_latencies(outs[0][0])
        return [(0.0, length) for length in lengths]


def _csv_latencies(out: bytes) -> dict:
    """redis-benchmark's own per-request (pipeline of 128) latency columns, from its --csv output."""
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith('"')]
    if len(lines) < 2:
        return {}
    names = [c.strip('"') for c in lines[0].split(",")]
    values = [c.strip('"') for c in lines[-1].split(",")]
    return {f"redis_benchmark_{k}": v for k, v in zip(names, values) if "latency" in k}
