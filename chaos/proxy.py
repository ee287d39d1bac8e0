"""Fault-injecting TCP proxies: every link between two roles of a chaos cluster goes through one.

Why proxies and not network namespaces: a proxy needs no root, so `strata chaos` runs for any
user; it can cut one link (broker-1 to bookie-2) while the others flow; and it can stand in front
of S3 answering `503 SlowDown`. Each node listens on 127.0.0.1 and *advertises* an address on its
own loopback IP (127.0.1.N for bookies, 127.0.2.N for brokers, 127.0.3.1 for S3, the same port);
the proxy listens there and forwards to the node. Every address in 127.0.0.0/8 is loopback on
Linux, so this needs no set-up either. Links whose every client is one node (a broker's or a
bookie's connection to PostgreSQL) get a proxy of their own, with that node as its fixed source;
on a shared link (a bookie's port, S3, a broker's ports) the proxy tells which node connected by
the peer's address (`identify(ip, port)`: the node whose process owns that socket, or None for a
client; chaos/cluster.py looks in /proc, among the nodes' own processes only, so it stays cheap
on a loaded machine).

    hub = ProxyHub(identify)                 # (ip, port) -> node name, or None (a client)
    hub.add(Link("bookie-1", ("127.0.1.1", p), ("127.0.0.1", p)))
    hub.start()
    fault = hub.partition({"broker-1"}, {"bookie-1", "bookie-2"}, mode="reset")
    hub.heal(fault)
    hub.slowdown("s3", True)                 # every new S3 request: HTTP 503 SlowDown

A partition between groups A and B blocks every connection from a node of A to a link of B and
from B to A. Modes:
- `reset`: blocked connections are closed at once, and new ones are accepted and closed (the
  peer sees a reset; what a crashed switch or a firewall's reject looks like);
- `blackhole`: blocked connections stop moving bytes both ways, and new ones are held without
  reaching the node, until the partition heals; then they flow again with nothing lost (TCP's
  own behaviour across a short outage: the peer sees only silence).

What must hold: bytes are forwarded in order and never altered or dropped on a connection that
stays open; every queue is bounded (one read of CHUNK bytes in flight per direction); a slowdown
answers each request whole, then closes; `stop` closes every socket and joins the thread within
a bound. The hub runs its own asyncio loop in one daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

CHUNK = 65536
STOP_TIMEOUT_S = 10.0
SLOWDOWN_HEAD_MAX = 65536
SLOWDOWN_BODY_MAX = 64 * 1024 * 1024
SLOWDOWN_READ_TIMEOUT_S = 10.0
CLIENT = "client"

SLOWDOWN_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                 b"<Message>Please reduce your request rate.</Message></Error>")
SLOWDOWN_RESPONSE = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                     b"Content-Length: " + str(len(SLOWDOWN_BODY)).encode() + b"\r\nConnection: close\r\n\r\n"
                     + SLOWDOWN_BODY)


@dataclass(frozen=True)
class Link:
    """One proxy: `node` is the node behind it; `source` the one node that connects to it (None:
    find out per connection); `http` marks S3, which can answer SlowDown."""
    node: str
    listen: tuple[str, int]
    target: tuple[str, int]
    source: str | None = None
    http: bool = False


@dataclass
class Partition:
    id: int
    a: frozenset[str]
    b: frozenset[str]
    mode: str

    def blocks(self, src: str, dst: str) -> bool:
        return (src in self.a and dst in self.b) or (src in self.b and dst in self.a)


@dataclass(eq=False)
class _Conn:
    link: Link
    source: str
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    def abort(self) -> None:
        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.transport.abort()


class ProxyHub:
    """Every proxy of a run, and the partitions and slowdowns in force."""

    def __init__(self, identify: Callable[[str, int], str | None]) -> None:
        self._identify = identify
        self._links: list[Link] = []
        self._partitions: dict[int, Partition] = {}
        self._slow: set[str] = set()
        self._ids = itertools.count(1)
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._changed = asyncio.Event()
        self._servers: list[asyncio.base_events.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxies", daemon=True)
        self.connections = 0

    # -- set-up --------------------------------------------------------------------------

    def add(self, link: Link) -> Link:
        self._links.append(link)
        if self._thread.is_alive():
            self._call(self._serve(link))
        return link

    def start(self) -> None:
        self._thread.start()
        for link in self._links:
            self._call(self._serve(link))

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(STOP_TIMEOUT_S)

    def _call(self, coro: object, timeout_s: float = STOP_TIMEOUT_S) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)  # type: ignore[arg-type]

    async def _serve(self, link: Link) -> None:
        server = await asyncio.start_server(lambda r, w: self._accept(link, r, w), *link.listen,
                                            reuse_address=True, limit=CHUNK)
        self._servers.append(server)

    async def _close_all(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self._conns):
            conn.abort()
        self._partitions.clear()
        self._notify()

    # -- faults (called from any thread) ---------------------------------------------------

    def partition(self, a: set[str], b: set[str], mode: str = "reset") -> int:
        """Cut every link between a node of `a` and a node of `b`; the fault's id, for `heal`."""
        if mode not in ("reset", "blackhole"):
            raise ValueError(f"unknown partition mode {mode!r}")
        fault = Partition(next(self._ids), frozenset(a), frozenset(b), mode)
        self._call(self._apply(fault))
        return fault.id

    def heal(self, fault_id: int) -> None:
        self._call(self._heal(fault_id))

    def heal_all(self) -> None:
        for fault_id in list(self._partitions):
            self.heal(fault_id)
        for node in list(self._slow):
            self.slowdown(node, False)

    def slowdown(self, node: str, on: bool) -> None:
        """While on, every new request to `node`'s HTTP links is answered `503 SlowDown`
        (its open connections are closed when it starts, so pooled ones cannot slip past)."""
        self._call(self._slowdown(node, on))

    async def _apply(self, fault: Partition) -> None:
        self._partitions[fault.id] = fault
        if fault.mode == "reset":
            for conn in list(self._conns):
                if fault.blocks(conn.source, conn.link.node):
                    conn.abort()
        self._notify()

    async def _heal(self, fault_id: int) -> None:
        self._partitions.pop(fault_id, None)
        self._notify()

    def _notify(self) -> None:
        """Wake every connection waiting on a partition; later waits use a fresh event."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _slowdown(self, node: str, on: bool) -> None:
        if on:
            self._slow.add(node)
            for conn in list(self._conns):
                if conn.link.node == node:
                    conn.abort()
        else:
            self._slow.discard(node)

    def _blocking(self, src: str, dst: str) -> Partition | None:
        for fault in self._partitions.values():
            if fault.blocks(src, dst):
                return fault
        return None

    # -- connections -------------------------------------------------------------------------

    async def _source_of(self, link: Link, writer: asyncio.StreamWriter) -> str:
        if link.source is not None:
            return link.source
        peer = writer.get_extra_info("peername")
        if not peer:
            return CLIENT
        node = await asyncio.to_thread(self._identify, peer[0], peer[1])
        return node or CLIENT

    async def _accept(self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        source = await self._source_of(link, writer)
        conn = _Conn(link, source, [writer])
        self._conns.add(conn)
        try:
            if link.node in self._slow and link.http:
                await _answer_slowdown(reader, writer)
                return
            if not await self._admit(conn):
                return
            try:
                up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*link.target, limit=CHUNK),
                                                              STOP_TIMEOUT_S)
            except (TimeoutError, OSError):
                return
            conn.writers.append(up_writer)
            await asyncio.gather(self._pump(conn, reader, up_writer), self._pump(conn, up_reader, writer))
        finally:
            self._conns.discard(conn)
            conn.abort()

    async def _admit(self, conn: _Conn) -> bool:
        """May this new connection go on now? A reset partition refuses it; a blackhole holds it."""
        while True:
            fault = self._blocking(conn.source, conn.link.node)
            if fault is None:
                return True
            if fault.mode == "reset":
                return False
            await self._changed.wait()

    async def _pump(self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                while (fault := self._blocking(conn.source, conn.link.node)) is not None:
                    if fault.mode == "reset":
                        return
                    await self._changed.wait()
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, RuntimeError):
            pass
        finally:
            conn.abort()


async def _answer_slowdown(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read one HTTP request (head, then a Content-Length body, both bounded) and answer 503."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), SLOWDOWN_READ_TIMEOUT_S)
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = min(int(value.strip() or 0), SLOWDOWN_BODY_MAX)
        if length and b"100-continue" not in head.lower():
            await asyncio.wait_for(reader.readexactly(length), SLOWDOWN_READ_TIMEOUT_S)
        writer.write(SLOWDOWN_RESPONSE)
        await writer.drain()
    except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
