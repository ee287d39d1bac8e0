"""Sends fuzz frames at a live broker over many pipelined asyncio connections and counts its answers.

Each of `connections` workers loops: take a share of the frame budget, open a TCP connection, send
a plan in one write, read every reply until the connection ends, tally. Plans:

    before CONNECT   one frame (fuzz.frames, drawn as if unconnected): the broker must close the
                     connection unless it is a CONNECT it accepts
    after CONNECT    CONNECT, then 1..`batch_frames` frames the broker routes, then (most times)
                     one that must end the connection (fatal, closing or partial). Half the plans
                     first open a session: a PRODUCER and a Shared SUBSCRIBE (with FLOW) with
                     producer and consumer id 1 on the second topic of the pool, answered before the
                     fuzz frames go, so fuzzed SEND, ACK, FLOW, SEEK, ... meet a live producer and
                     consumer. Not on the round-trip topic (the first): what sessions store there
                     is fuzzed metadata, and some of it stops the official consumer whatever the
                     broker does (an encrypted message for a consumer without a key reader stalls
                     it, Pulsar's ConsumerCryptoFailureAction.FAIL), or crashes it (docs/benchmarks.md).
                     The round-trip topic gets every other fuzzed command: lookups, producers,
                     subscriptions, flow, acks, seeks on it.

A plan whose last frame must close the connection waits for the broker to close it; any other plan
half-closes (write_eof) and waits for the broker to finish and close. Waiting is bounded by
`close_timeout_s`: a connection the broker holds past it is counted as hung.

How the broker answered is counted per reply: error replies (ERROR, SEND_ERROR, a failed lookup or
partitioned metadata, an ACK_RESPONSE or schema reply with an error), other answers (not the
MESSAGEs dispatched to sessions' consumers, nor CONNECTED to the driver's own CONNECT, nor the
answers to a session's opening), connections it closed on a bad frame, and replies that do not
decode (a broker defect). Per frame that is approximate with pipelining: `silent` is frames minus
answers minus closes (FLOW, ACK, PONG, a SEND to no producer's id ... are answered with nothing,
and so is every frame after the one that closed its connection).

What must hold: every wait is bounded (connect, session, close); at most `connections` sockets are
open at once; the read buffer per connection is one reply frame at most REPLY_FRAME_BYTES_MAX.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
from dataclasses import dataclass, field

from common.errors import StrataError
from perf.fuzz.frames import CLOSING, FATAL, FrameSource, Fuzzed, Names
from proto import pulsar_api_pb2 as pb
from wire.pulsar import CommandType as T
from wire.pulsar import FrameDecoder, encode_command

REPLY_FRAME_BYTES_MAX = 8 * 1024 * 1024   # a MESSAGE of the largest entry, with room
READ_CHUNK_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 10.0
SESSION_TIMEOUT_S = 15.0
SESSION_SHARE = 0.5         # plans after CONNECT that open a producer and a consumer first
NO_TERMINAL_SHARE = 0.2     # plans after CONNECT that end by half-closing, without a bad frame
SESSION_PERMITS = 1000
ERROR_REPLIES = frozenset({T.ERROR, T.SEND_ERROR})
# what the broker sends that answers no fuzz frame: dispatch to a session's consumer, and the
# CONNECTED to the driver's own CONNECT (a fuzzed CONNECT before CONNECTED is rarely accepted)
NOT_ANSWERS = frozenset({T.MESSAGE, T.ACTIVE_CONSUMER_CHANGE, T.CONNECTED})
# replies whose body says "failed" through a field: (type, body field, failure test)
_FAILED_BODY = {
    T.LOOKUP_RESPONSE: ("lookupTopicResponse", lambda b: b.response == pb.CommandLookupTopicResponse.Failed),
    T.PARTITIONED_METADATA_RESPONSE: (
        "partitionMetadataResponse", lambda b: b.response == pb.CommandPartitionedTopicMetadataResponse.Failed),
    T.ACK_RESPONSE: ("ackResponse", lambda b: b.HasField("error")),
    T.GET_SCHEMA_RESPONSE: ("getSchemaResponse", lambda b: b.HasField("error_code")),
    T.GET_OR_CREATE_SCHEMA_RESPONSE: ("getOrCreateSchemaResponse", lambda b: b.HasField("error_code")),
}


def _connect_frame() -> bytes:
    return encode_command(pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
        client_version="strata-fuzz", protocol_version=20)))


CONNECT_FRAME = _connect_frame()


def session_frames(topic: str, subscription: str) -> bytes:
    """PRODUCER (id 1, request 1), SUBSCRIBE (consumer 1, Shared, request 2) and FLOW on `topic`."""
    return b"".join([
        encode_command(pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(
            topic=topic, producer_id=1, request_id=1))),
        encode_command(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription=subscription, consumer_id=1, request_id=2,
            subType=pb.CommandSubscribe.Shared))),
        encode_command(pb.BaseCommand(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=SESSION_PERMITS))),
    ])


@dataclass
class Tally:
    """Everything counted over a run (one per run; workers share it: one event loop, no locks)."""

    frames: int = 0                    # fuzz frames written (CONNECT and session openings not counted)
    frames_before_connect: int = 0
    connections: int = 0               # connections opened
    connect_failures: int = 0          # could not open one within CONNECT_TIMEOUT_S
    closed_by_broker: int = 0          # plans ending on a frame that must close it, closed as they should
    closed_early: int = 0              # the broker reset the connection while we were still writing
    ended_by_us: int = 0               # plans that half-closed; the broker then closed
    hung: int = 0                      # the broker kept a connection past close_timeout_s
    sessions: int = 0                  # sessions whose PRODUCER and SUBSCRIBE were answered
    session_timeouts: int = 0
    error_replies: int = 0             # ERROR, SEND_ERROR and replies whose body says it failed
    other_replies: int = 0             # every other answer, NOT_ANSWERS and the sessions' own not counted
    bad_replies: int = 0               # connections whose reply bytes did not decode (a broker defect)
    by_kind: collections.Counter = field(default_factory=collections.Counter)   # frames by frames.KINDS
    by_fate: collections.Counter = field(default_factory=collections.Counter)   # frames by their fate
    replies: collections.Counter = field(default_factory=collections.Counter)   # reply type name -> count

    def count_frames(self, frames: list[Fuzzed], before_connect: bool) -> None:
        self.frames += len(frames)
        if before_connect:
            self.frames_before_connect += len(frames)
        for fuzzed in frames:
            self.by_kind[fuzzed.kind] += 1
            self.by_fate[fuzzed.fate] += 1

    def count_reply(self, cmd: pb.BaseCommand) -> None:
        kind = cmd.type
        self.replies[pb.BaseCommand.Type.Name(kind)] += 1
        failed = _FAILED_BODY.get(kind)
        if kind in ERROR_REPLIES or (failed is not None and failed[1](getattr(cmd, failed[0]))):
            self.error_replies += 1
        elif kind not in NOT_ANSWERS:
            self.other_replies += 1


@dataclass
class Plan:
    """One connection's worth: the fuzz frames and how it must end."""

    frames: list[Fuzzed]
    before_connect: bool
    session: bool = False
    expect_close: bool = False   # the last frame must make the broker close the connection

    def data(self) -> bytes:
        return b"".join(f.data for f in self.frames)


class Budget:
    """The frames still to send, handed out in plans; `stop()` ends the run early (a crash)."""

    def __init__(self, frames: int, before_connect: int) -> None:
        self.left = frames
        self.before_connect_left = before_connect
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


class Driver:
    """The workers of one run, sharing one Tally and one Budget."""

    def __init__(self, host: str, port: int, names: Names, seed: int, *, connections: int = 8,
                 batch_frames: int = 32, close_timeout_s: float = 10.0) -> None:
        self.host, self.port = host, port
        self.names = names
        self.seed = seed
        self.connections = connections
        self.batch_frames = batch_frames
        self.close_timeout_s = close_timeout_s
        self.tally = Tally()

    async def run(self, budget: Budget) -> Tally:
        await asyncio.gather(*(self._worker(index, budget) for index in range(self.connections)))
        return self.tally

    async def _worker(self, index: int, budget: Budget) -> None:
        rng = random.Random(f"{self.seed}/{index}")
        source = FrameSource(rng, self.names)
        while not budget.stopped and budget.left > 0:
            plan = self.plan(source, rng, budget)
            budget.left -= len(plan.frames)
            await self.run_plan(plan)

    def plan(self, source: FrameSource, rng: random.Random, budget: Budget) -> Plan:
        """The next connection's plan: before CONNECT while that share lasts, then after."""
        if budget.before_connect_left > 0:
            budget.before_connect_left -= 1
            fuzzed = source.draw(connected=False)
            return Plan([fuzzed], True, expect_close=fuzzed.fate in (FATAL, CLOSING) and not fuzzed.connects)
        routed = min(rng.randint(1, self.batch_frames), max(budget.left, 1))
        frames = [source.draw_fated(connected=True, routed=True) for _ in range(routed)]
        if rng.random() >= NO_TERMINAL_SHARE and budget.left > routed:
            frames.append(source.draw_fated(connected=True, routed=False))
        last = frames[-1]
        return Plan(frames, False, session=rng.random() < SESSION_SHARE,
                    expect_close=last.fate in (FATAL, CLOSING))

    async def run_plan(self, plan: Plan) -> None:
        tally = self.tally
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                    CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            tally.connect_failures += 1
            return
        tally.connections += 1
        tally.count_frames(plan.frames, plan.before_connect)
        replies = _Replies(tally)
        reading = asyncio.get_running_loop().create_task(self._read(reader, replies))
        try:
            await self._send_plan(plan, writer, replies)
            await asyncio.wait_for(asyncio.shield(reading), self.close_timeout_s)
            if plan.expect_close:
                tally.closed_by_broker += 1
            else:
                tally.ended_by_us += 1
        except (ConnectionError, OSError):
            tally.closed_early += 1
        except TimeoutError:
            tally.hung += 1
        finally:
            reading.cancel()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _send_plan(self, plan: Plan, writer: asyncio.StreamWriter, replies: _Replies) -> None:
        if not plan.before_connect:
            writer.write(CONNECT_FRAME)
            if plan.session:
                writer.write(session_frames(self.names.topics[1], self.names.subscriptions[0]))
                await writer.drain()
                try:
                    await asyncio.wait_for(replies.session_ready.wait(), SESSION_TIMEOUT_S)
                    self.tally.sessions += 1
                    self.tally.other_replies -= 2   # the answers to the session's PRODUCER and SUBSCRIBE
                except TimeoutError:
                    self.tally.session_timeouts += 1
        writer.write(plan.data())
        if not plan.expect_close:
            writer.write_eof()
        await writer.drain()

    async def _read(self, reader: asyncio.StreamReader, replies: _Replies) -> None:
        """Every reply until the broker closes the connection (EOF or reset)."""
        decoder = FrameDecoder(REPLY_FRAME_BYTES_MAX)
        try:
            while data := await reader.read(READ_CHUNK_BYTES):
                for frame in decoder.feed(data):
                    replies.seen(frame.command)
        except StrataError:
            self.tally.bad_replies += 1
        except (ConnectionError, OSError):
            pass


class _Replies:
    """One connection's replies: tallied, and whether its session's PRODUCER and SUBSCRIBE were answered."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.session_ready = asyncio.Event()
        self._answered: set[int] = set()   # session request ids (1, 2) answered, success or not

    def seen(self, cmd: pb.BaseCommand) -> None:
        self.tally.count_reply(cmd)
        if not self.session_ready.is_set():
            request_id = _session_request_id(cmd)
            if request_id in (1, 2):
                self._answered.add(request_id)
                if len(self._answered) == 2:
                    self.session_ready.set()


def _session_request_id(cmd: pb.BaseCommand) -> int | None:
    if cmd.type == T.PRODUCER_SUCCESS:
        return int(cmd.producer_success.request_id)
    if cmd.type == T.SUCCESS:
        return int(cmd.success.request_id)
    if cmd.type == T.ERROR:
        return int(cmd.error.request_id)
    return None
