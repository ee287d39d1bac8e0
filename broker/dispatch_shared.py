"""Shared: entries spread round robin over every consumer that has permits.

Besides `read_position` (entries never read yet) the dispatcher keeps a **replay set**: entries
that must be sent again because their consumer closed, or because the client asked for them with
REDELIVER_UNACKNOWLEDGED_MESSAGES. Replays go out before new entries, oldest first. `owner` maps
every delivered, unacked entry to the consumer holding it, so an ack, a close or a redelivery
finds it in O(1).

Redelivery counts (what MESSAGE.redelivery_count carries, what the dead-letter policy counts) go
up when the client asks for a redelivery (nack, ack timeout), not when a consumer merely closes,
as in Pulsar. They live in the cursor, which persists them, so they survive a broker restart.
REDELIVER for a position this consumer does not hold (unknown, acked, held by another consumer) is
a no-op: it neither counts nor moves anything.

Delayed delivery (`broker.delayed_delivery`): a new entry whose deliver_at_time is still in the
future goes into `delayed` instead of to a consumer, and the pass goes on with later entries. At
the start of every pass the entries that became due move to the replay set; a timer (`_wake`)
kicks a pass when the next one falls due. New entries are read at most `delayed.room()` at a
time, so the index never overflows: when full, reading ahead stops until something is due.

What must hold: an entry is at most one of {in replay, pending at exactly one consumer}; an entry
acknowledged is in neither; the replay set is bounded by `replay_entries_max`, past which no new
entries are read until it drains; an entry in `delayed` is in neither replay nor pending, and leaves
`delayed` only when due (never early).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.consumer import Consumer
from broker.delayed_delivery import DelayedDeliveryIndex
from broker.dispatch_base import Dispatcher
from broker.entry_facts import EntryFacts
from ledger.position import Position

if TYPE_CHECKING:
    from broker.subscription import Subscription

REPLAY_ENTRIES_MAX = 10_000
REPLAY_CACHE_BYTES_MAX = 64 * 1024 * 1024


class SharedDispatcher(Dispatcher):
    def __init__(self, sub: "Subscription", read_position: Position, batch_entries_max: int) -> None:
        super().__init__(sub, read_position, batch_entries_max)
        self.replay: dict[Position, bytes | None] = {}   # entry -> its bytes if cached, else None
        self.replay_bytes = 0                             # bytes cached in `replay`
        self.owner: dict[Position, Consumer] = {}         # pending entry -> consumer holding it
        self._next = 0                                    # round-robin index into consumers
        config = sub.topic.config
        self.delayed = DelayedDeliveryIndex(config.broker_delayed_delivery_entries_max,
                                            config.broker_delayed_delivery_tick_ms,
                                            sub.topic.service.clock)
        self._wake: asyncio.TimerHandle | None = None     # kicks a pass when the next delay ends
        self._wake_at_s = 0.0                             # loop time `_wake` fires at

    # --- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.kick()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        for position in list(consumer.pending):
            self._release(position)
            self._add_replay(position, None)
        consumer.pending.clear()
        self.kick()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        targets = list(consumer.pending) if positions is None else positions
        for position in targets:
            if position not in consumer.pending:
                continue
            del consumer.pending[position]
            self._release(position)
            self.sub.cursor.increment_redelivery([position])
            self._add_replay(position, None)
        self.kick()

    def on_acked(self, positions: list[Position]) -> None:
        for position in positions:
            self._drop_replay(position)
            self.delayed.remove(position)
            consumer = self.owner.get(position)
            if consumer is not None:
                consumer.pending.pop(position, None)
                self._release(position)

    def on_acked_upto(self, position: Position) -> None:
        self.on_acked([p for p in self.owner if p <= position] + [p for p in self.replay if p <= position])

    def clear(self) -> None:
        """Forget every pending and replayed entry (seek)."""
        for consumer in self.consumers:
            consumer.pending.clear()
        for position in list(self.owner):
            self._release(position)
        self.replay.clear()
        self.replay_bytes = 0
        self.delayed.clear()

    def close(self) -> None:
        super().close()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    # --- delayed delivery ---------------------------------------------------------------------

    def _screen(self, entry) -> EntryFacts | None:
        """Move past a newly read entry; its facts if it should go out now, None if it is already
        acked or not yet due (then it waits in `delayed`)."""
        self.read_position = self.sub.ml.next_position(entry.position)
        if self.sub.cursor.is_acked(entry.position):
            return None
        facts = self.facts(entry.data)
        if self.delayed.holds(facts.deliver_at_ms):
            self.delayed.add(entry.position, facts.deliver_at_ms)
            return None
        return facts

    def _release_due(self) -> None:
        """Delayed entries whose time has come join the replay set (sent before new entries)."""
        for position in self.delayed.pop_due():
            self._add_replay(position, None)

    def _read_budget(self) -> int:
        """How many new entries to read now: 0 while the delayed index is full."""
        return min(self.batch_entries_max, self.delayed.room())

    def _schedule_wake(self) -> None:
        """Make sure a pass runs when the next delayed entry falls due."""
        wait_ms = self.delayed.wake_in_ms()
        if wait_ms is None or self._closed:
            return
        loop = asyncio.get_running_loop()
        fire_at = loop.time() + wait_ms / 1000
        if self._wake is not None and self._wake_at_s <= fire_at:
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at_s = fire_at
        self._wake = loop.call_at(fire_at, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        self.kick()

    # --- bookkeeping helpers (Key_Shared extends _release/_send) ----------------------------

    def _release(self, position: Position) -> None:
        self.owner.pop(position, None)

    def _add_replay(self, position: Position, data: bytes | None) -> None:
        if data is not None and self.replay_bytes + len(data) > REPLAY_CACHE_BYTES_MAX:
            data = None
        if self.replay.get(position) is None and data is not None:
            self.replay_bytes += len(data)
        if position not in self.replay or data is not None:
            self.replay[position] = data

    def _drop_replay(self, position: Position) -> None:
        data = self.replay.pop(position, None)
        if data is not None:
            self.replay_bytes -= len(data)

    def _send(self, consumer: Consumer, position: Position, data: bytes, facts: EntryFacts) -> None:
        self.deliver(consumer, position, data, facts)
        self.owner[position] = consumer

    def _pick(self) -> Consumer | None:
        """Next consumer with permits, round robin."""
        count = len(self.consumers)
        for step in range(count):
            consumer = self.consumers[(self._next + step) % count]
            if consumer.can_take():
                self._next = (self._next + step + 1) % count
                return consumer
        return None

    async def _replay_data(self, position: Position) -> bytes | None:
        """The bytes of a replayed entry (cached or read); None if it vanished or was acked."""
        data = self.replay.get(position)
        if data is None:
            data = await self.read_one(position)
            if position not in self.replay:
                return None
        if data is None or self.sub.cursor.is_acked(position):
            self._drop_replay(position)
            return None
        return data

    # --- the pass -----------------------------------------------------------------------------

    async def _dispatch_pass(self) -> None:
        self._release_due()
        try:
            await self._dispatch_replay()
            await self._dispatch_new()
        finally:
            self._schedule_wake()

    async def _dispatch_new(self) -> None:
        while self.replay == {} and self.any_can_take():
            budget = self._read_budget()
            if budget == 0:
                return
            entries = await self.read_new(budget)
            if entries is None:
                continue
            if not entries:
                return
            for entry in entries:
                if not self.any_can_take():
                    return
                facts = self._screen(entry)
                if facts is not None:
                    self._send(self._pick(), entry.position, entry.data, facts)

    async def _dispatch_replay(self) -> None:
        for position in sorted(self.replay):
            if not self.any_can_take():
                return
            data = await self._replay_data(position)
            if data is None:
                continue
            consumer = self._pick()
            if consumer is None:
                return
            self._drop_replay(position)
            self._send(consumer, position, data, self.facts(data))
