"""Backpressure of one `ServerConnection` over a real socket (a socketpair on uvloop).

The broker side is the product's `ServerConnection` with a real transport, so `pause_writing` /
`resume_writing` come from the transport's own flow control when the peer stops or starts
reading. Consumers are real (`Consumer`, `Subscription`, the Shared dispatcher of
tests/broker/topics/dispatch_harness.py, whose only fake is the ledger's read side); the service the
connection holds is reduced to its config, which is all these paths use.

What is checked:
- a connection whose write buffer passed the high mark is not writable: its consumer takes
  nothing, the dispatcher serves the other consumer, and when the peer reads again
  `resume_writing` kicks the dispatcher and the stalled consumer gets the rest;
- the bytes queued never pass the high mark by more than one frame from dispatch;
- replies written while paused are bounded: past the hard cap the connection is aborted, logged;
- at `broker_connection_requests_inflight_max` request tasks the connection stops reading (a
  PING from the peer waits) and reads again once one completes (the PING is answered).
Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import types

import uvloop

from auth.service import AuthenticationService
from broker.protocol.connection import ServerConnection
from broker.protocol.state import ConnState
from broker.protocol.topic_lists import TopicListRegistry
from broker.topics.consumer import Consumer
from common.config import KIB, default_config
from entries.entry import build_entry
from proto import pulsar_api_pb2 as pb
from tests.broker.topics.dispatch_harness import SHARED, Harness
from tests.support.waiting import until
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder, encode_command, encode_ping, encode_pong

TEST_TIMEOUT_S = 60.0
SOCKET_BUFFER_BYTES = 4 * KIB          # kernel buffers kept small, so the transport's own fills
HIGH_BYTES = 16 * KIB
ENTRY_PAYLOAD_BYTES = 1000
ENTRIES = 1_000                        # ~1 MB of MESSAGE frames: far past what the buffers hold


def run(coro) -> None:
    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(coro, TEST_TIMEOUT_S))
    finally:
        loop.close()


async def open_connection(**overrides) -> tuple[ServerConnection, socket.socket]:
    """A ServerConnection on one end of a socketpair; the other end (returned) is the client."""
    config = default_config(**overrides)
    front = types.SimpleNamespace(ctx=types.SimpleNamespace(config=config),
                                  authentication=AuthenticationService.from_config(config),   # off: anonymous
                                  topic_lists=TopicListRegistry(None))   # released when the connection closes
    server_sock, client_sock = socket.socketpair()
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
    client_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
    client_sock.setblocking(False)
    _, conn = await asyncio.get_running_loop().connect_accepted_socket(
        lambda: ServerConnection(front), server_sock)
    return conn, client_sock


async def read_frames(sock: socket.socket, decoder: FrameDecoder, until_frames: int, into: list) -> None:
    """Read the client's end until `into` holds `until_frames` frames (the caller bounds the wait)."""
    loop = asyncio.get_running_loop()
    while len(into) < until_frames:
        data = await loop.sock_recv(sock, 65536)
        if not data:
            raise ConnectionError("broker side closed")
        into.extend(decoder.feed(data))


def attach(h: Harness, conn: ServerConnection, consumer_id: int, permits: int) -> Consumer:
    consumer = Consumer(conn, consumer_id, "slow", int(SHARED), 0, -1, f"slow#{consumer_id}")
    consumer.subscription = h.sub
    h.sub.add_consumer(consumer, None)
    consumer.announce()
    conn.consumers[consumer_id] = consumer
    h.flow(consumer, permits)
    return consumer


def produce_big(h: Harness, count: int) -> None:
    for i in range(count):
        md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1)
        h.ml.append(build_entry(md, b"x" * ENTRY_PAYLOAD_BYTES), 1)
    h.sub.on_appended()


def test_paused_connection_takes_nothing_and_resume_kicks_the_dispatcher() -> None:
    async def go() -> None:
        conn, client = await open_connection(broker_connection_write_buffer_bytes_high=HIGH_BYTES)
        h = Harness(SHARED)
        slow = attach(h, conn, 7, permits=1_000_000)
        fast = h.consumer("fast", permits=ENTRIES // 2)
        produce_big(h, ENTRIES)
        await h.settle()
        stalled_with = len(slow.pending)
        assert not conn.writable(), "the client reads nothing: its write buffer must be over the high mark"
        assert conn.write_buffer_bytes() <= HIGH_BYTES + ENTRY_PAYLOAD_BYTES + 200, conn.write_buffer_bytes()
        assert len(fast.pending) == ENTRIES // 2, "the dispatcher serves the other consumer meanwhile"
        assert 0 < stalled_with < ENTRIES // 2, stalled_with

        frames: list = []
        await read_frames(client, FrameDecoder(64 * KIB), ENTRIES - ENTRIES // 2, frames)
        await h.settle()
        assert len(slow.pending) == ENTRIES - ENTRIES // 2, "resume_writing kicked the dispatcher"
        ids = [(f.command.message.message_id.ledgerId, f.command.message.message_id.entryId) for f in frames]
        assert all(f.command.type == T.MESSAGE for f in frames)
        assert len(set(ids)) == len(ids) == len(slow.pending)
        assert set(slow.pending).isdisjoint(fast.pending)
        conn.close()
        client.close()
    run(go())


def test_replies_past_the_hard_cap_abort_the_connection(caplog) -> None:
    async def go() -> None:
        cap_bytes = 64 * KIB
        conn, client = await open_connection(
            broker_connection_write_buffer_bytes_high=HIGH_BYTES, broker_connection_write_buffer_bytes_max=cap_bytes,
            broker_max_message_bytes=1 * KIB, broker_frame_bytes_max=4 * KIB)
        pong = encode_pong()
        most_bytes = 0
        for _ in range(cap_bytes):                          # bounded: far more PONGs than the cap holds
            if conn.state is ConnState.CLOSED or conn._sink is None:
                break
            conn.write(pong)
            most_bytes = max(most_bytes, conn.write_buffer_bytes())
        assert conn._sink is None, "past the hard cap the connection stops writing"
        assert most_bytes <= cap_bytes + len(pong), most_bytes
        await until(lambda: conn.state is ConnState.CLOSED, 10, what="the abort reaching connection_lost")
        assert conn.write_buffer_bytes() == 0
        client.close()
    with caplog.at_level(logging.WARNING, logger="broker.protocol.connection"):
        run(go())
    assert any("broker_connection_write_buffer_bytes_max" in r.getMessage() for r in caplog.records)


def test_requests_at_the_cap_stop_reading_until_one_completes() -> None:
    async def go() -> None:
        cap = 4
        conn, client = await open_connection(broker_connection_requests_inflight_max=cap)
        loop = asyncio.get_running_loop()
        connect = pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(client_version="t", protocol_version=20))
        await loop.sock_sendall(client, encode_command(connect) + encode_ping())
        frames: list = []
        decoder = FrameDecoder(64 * KIB)
        await read_frames(client, decoder, 2, frames)      # reading works: CONNECTED, PONG
        assert [f.command.type for f in frames] == [T.CONNECTED, T.PONG]
        frames.clear()

        release = [asyncio.Event() for _ in range(cap)]
        for event in release:
            conn.spawn(event.wait())
        assert not conn.transport.is_reading(), "at the cap the connection stops reading"
        await loop.sock_sendall(client, encode_ping())
        try:
            await asyncio.wait_for(read_frames(client, decoder, 1, frames), 0.3)
            raise AssertionError("a PING was read while requests were at the cap")
        except TimeoutError:
            pass

        release[0].set()                                   # one completes: below the cap
        await asyncio.wait_for(read_frames(client, decoder, 1, frames), 10)
        assert frames.pop().command.type == T.PONG
        assert conn.transport.is_reading()
        for event in release[1:]:
            event.set()
        await until(lambda: not conn._tasks, 10, what="the requests to finish")
        conn.close()
        client.close()
    run(go())
