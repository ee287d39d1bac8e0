"""A harness for unit tests of the dispatchers: the real Subscription, dispatchers, Consumer and
ManagedCursor, over a fake managed ledger whose reads can be held or made to fail.

Only the storage side is faked (`FakeLedger`, on `tests.support.ledger_view.MemoryLedgerView`):
what a dispatcher does while a read is in flight, or when a read fails, is exactly what these
tests are about, and a real ledger cannot be paused at will. Everything else is the product code:
acks, redeliveries and closes go through `broker.topics.subscription.Subscription`, frames are
encoded by the product's Pulsar link (`broker.protocol.links`) and decoded back with the real
codec, so a test sees what a client would.

    h = Harness(KEY_SHARED)
    a = h.consumer("A", permits=10)
    h.produce("k")
    await h.settle()
    assert h.sent == [("A", Position(1, 0))]
"""

from __future__ import annotations

import asyncio
import itertools
import time
import types
from dataclasses import dataclass

from broker.limits.topic_caps import TopicCaps
from broker.protocol.links import PulsarClientLink
from broker.topics.consumer import Consumer
from broker.topics.entry_facts import FactsCache
from broker.topics.rate_limits import TopicRates
from broker.topics.storage_policies import TopicStorage
from broker.topics.subscription import AckedId, KeySharedSpec, Subscription, SubType
from common.clock import SYSTEM_CLOCK
from common.config import default_config
from common.errors import BookieUnavailable
from cursor.managed_cursor import ManagedCursor
from entries.batch import BatchMessage, build_batch
from entries.entry import build_entry
from ledger.position import EARLIEST, Position
from ledger.types import Entry
from proto import pulsar_api_pb2 as pb
from tests.support.ledger_view import MemoryLedgerView
from wire.pulsar import FrameDecoder

SETTLE_DEADLINE_S = 20.0
FRAME_BYTES_MAX = 64 * 1024 * 1024

EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED = SubType.EXCLUSIVE, SubType.SHARED, SubType.FAILOVER, SubType.KEY_SHARED


class FakeLedger:
    """The read side of a managed ledger, in memory. `hold_next_read()` makes the next read wait
    for an event; `fail_next_reads(n)` makes the next n reads raise a retriable storage error."""

    def __init__(self) -> None:
        self.view = MemoryLedgerView()
        self.data: dict[Position, bytes] = {}
        self.reads = 0                              # reads started
        self.waiting = 0                            # reads now held at a gate
        self._gates: list[asyncio.Event] = []       # the next reads wait for these, in order
        self._fail = 0                              # the next this-many reads fail
        self.terminated_position: Position | None = None   # never terminated here

    # --- what the test does ---
    def append(self, data: bytes, messages: int) -> Position:
        position = self.view.append(len(data), messages, int(time.time() * 1000))
        self.data[position] = data
        return position

    def roll(self) -> None:
        self.view.roll()

    def trim(self, before: Position) -> None:
        for ledger_id in self.view.trim(before):
            for position in [p for p in self.data if p.ledger_id == ledger_id]:
                del self.data[position]

    def hold_next_read(self) -> asyncio.Event:
        gate = asyncio.Event()
        self._gates.append(gate)
        return gate

    def fail_next_reads(self, count: int) -> None:
        self._fail = count

    # --- what the dispatcher uses ---
    @property
    def last_confirmed(self) -> Position:
        return self.view.last_confirmed

    @property
    def first_position(self) -> Position:
        return self.view.first_position

    def next_position(self, position: Position) -> Position:
        return self.view.next_position(position)

    async def read(self, start: Position, max_entries: int) -> list[Entry]:
        self.reads += 1
        if self._gates:
            gate = self._gates.pop(0)
            self.waiting += 1
            try:
                await asyncio.wait_for(gate.wait(), SETTLE_DEADLINE_S)
            finally:
                self.waiting -= 1
        if self._fail:
            self._fail -= 1
            raise BookieUnavailable("injected read failure", position=str(start))
        position = max(Position(*start), self.view.first_position)
        out: list[Entry] = []
        while len(out) < max_entries and position <= self.view.last_confirmed:
            out.append(Entry(position, self.data[position]))
            position = self.view.next_position(position)
        return out


@dataclass
class Delivery:
    consumer: str
    position: Position
    redelivery_count: int


class RecordingLink(PulsarClientLink):
    """A consumer's connection: the product's Pulsar link, decoding every frame written with
    the real codec."""

    def __init__(self, name: str, log: list[Delivery]) -> None:
        self.name = name
        self.log = log
        self.decoder = FrameDecoder(FRAME_BYTES_MAX)
        self.commands: list[pb.BaseCommand] = []

    def write(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            cmd = frame.command
            self.commands.append(cmd)
            if cmd.type == pb.BaseCommand.MESSAGE:
                mid = cmd.message.message_id
                self.log.append(Delivery(self.name, Position(mid.ledgerId, mid.entryId),
                                         cmd.message.redelivery_count))

    def write_parts(self, parts: list) -> None:
        self.write(b"".join(parts))

    def writable(self) -> bool:
        return True

    def forget_consumer(self, consumer: Consumer) -> None:
        pass


class _TopicName:
    partition_index = -1

    def __str__(self) -> str:
        return "persistent://public/default/dispatch-test"


class Harness:
    def __init__(self, sub_type: SubType, **config_overrides) -> None:
        self.ml = FakeLedger()
        self.config = default_config(**config_overrides)
        self.sent: list[Delivery] = []
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task] = set()
        self.sub_type = sub_type
        ctx = types.SimpleNamespace(clock=SYSTEM_CLOCK, spawn=self._spawn,
                                    activity=types.SimpleNamespace(touch=lambda topic: None))
        self.topic = types.SimpleNamespace(
            ml=self.ml, config=self.config, ctx=ctx, drop_subscription=lambda sub: None,
            name=_TopicName(), entry_facts=FactsCache(), caps=TopicCaps.of_config(self.config),
            rates=TopicRates(SYSTEM_CLOCK, lambda: (0.0, 0.0)), storage=TopicStorage.defaults(self.config))
        cursor = ManagedCursor.starting_at("sub", self.ml.view, EARLIEST, durable=False)
        self.sub = Subscription(self.topic, "sub", cursor, durable=True)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def dispatcher(self):
        return self.sub.dispatcher

    # --- producing ---
    def produce(self, key: str | None = None, messages: int = 1) -> Position:
        """Store one entry (a batch of `messages` when > 1) with partition key `key`."""
        if messages > 1:
            members = [BatchMessage(b"m%d" % i, partition_key=key) for i in range(messages)]
            md, payload = build_batch(members, producer_name="p", sequence_id=0, publish_time_ms=1)
        else:
            md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
            if key is not None:
                md.partition_key = key
            payload = b"x"
        position = self.ml.append(build_entry(md, payload), messages)
        self.sub.on_appended()
        return position

    # --- consumers ---
    def consumer(self, name: str, permits: int = 1000,
                 sticky_ranges: list[tuple[int, int]] | None = None) -> Consumer:
        consumer_id = next(self._ids)
        consumer = Consumer(RecordingLink(name, self.sent), consumer_id, name, int(self.sub_type),
                            0, -1, f"{name}#{consumer_id}")
        spec = None
        if self.sub_type == KEY_SHARED:
            spec = KeySharedSpec(sticky=bool(sticky_ranges), ranges=tuple(sticky_ranges or ()))
        self.sub.add_consumer(consumer, spec)
        consumer.announce()
        if permits:
            self.sub.flow(consumer, permits)
        return consumer

    def flow(self, consumer: Consumer, permits: int) -> None:
        self.sub.flow(consumer, permits)

    def close(self, consumer: Consumer) -> None:
        self.sub.remove_consumer(consumer)

    def ack(self, consumer: Consumer, positions: list[Position]) -> None:
        self.sub.ack(consumer, [AckedId(position) for position in positions])

    def nack(self, consumer: Consumer, positions: list[Position]) -> None:
        self.sub.redeliver(consumer, list(positions) if positions else None)

    # --- waiting ---
    async def settle(self, deadline_s: float = SETTLE_DEADLINE_S) -> None:
        """Wait until the dispatcher has nothing running or scheduled (a retry after a read error
        counts as scheduled)."""
        end = time.monotonic() + deadline_s
        while True:
            await asyncio.sleep(0.001)
            d = self.dispatcher
            if d is None or (not d._running and d._retry is None and self.ml.waiting == 0):
                await asyncio.sleep(0.001)
                if d is None or (not d._running and d._retry is None):
                    return
            if time.monotonic() > end:
                raise TimeoutError("dispatcher did not settle")

    async def until_read_waits(self, deadline_s: float = SETTLE_DEADLINE_S) -> None:
        """Wait until a read is held at a gate."""
        end = time.monotonic() + deadline_s
        while self.ml.waiting == 0:
            if time.monotonic() > end:
                raise TimeoutError("no read reached the gate")
            await asyncio.sleep(0.001)
