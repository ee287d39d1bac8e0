"""Shared: entries spread round robin over every consumer that has permits.

Besides `read_position` (entries never read yet) the dispatcher keeps a **replay set**: entries
that must be sent again because their consumer closed, or because the client asked for them with
REDELIVER_UNACKNOWLEDGED_MESSAGES. Replays go out before new entries, oldest first: the set is a
dict (position -> cached bytes or None) plus `replay_order`, the same positions kept sorted, so a
pass walks it in order without sorting. `owner` maps every delivered, unacked entry to the
consumer holding it, so an ack, a close or a redelivery finds it in O(1).

Bounds. The replay set holds at most `replay_entries_max` entries. An entry that does not fit is
not dropped: it stays unacked in the cursor and goes back to the unread range — the largest
position of the set (or the newcomer, if it is the largest) is handed back by moving
`read_position` back to it (`reread_from`), and it is read again as new once the set drains.
Entries met again that way which are pending, in replay or delayed are skipped. Shared reads new
entries only when the replay set is empty; Key_Shared reads ahead while the set has room, so in
both the entries read but not yet sent (the look-ahead) never exceed `replay_entries_max` (plus
the delayed index, bounded on its own).

Read errors. The bytes of a replayed entry are re-read when not cached; a storage error keeps the
entry in the set and ends the pass (the base retries with backoff). Only an entry that is acked
or no longer kept (`is_gone`) leaves the set without being sent.

Redelivery counts (what MESSAGE.redelivery_count carries, what the dead-letter policy counts) go
up when the client asks for a redelivery (nack, ack timeout), not when a consumer merely closes,
as in Pulsar. They live in the cursor, which persists them, so they survive a broker restart.
REDELIVER for a position this consumer does not hold (unknown, acked, held by another consumer) is
a no-op: it neither counts nor moves anything.

Delayed delivery (`broker.topics.dispatch.delayed`): a new entry whose deliver_at_time is still in the
future goes into `delayed` instead of to a consumer, and the pass goes on with later entries. At
the start of every pass the entries that became due move to the replay set; a timer (`_wake`)
kicks a pass when the next one falls due. The index is bounded; when it is full, reading goes on
(entries that are not delayed are never held back) and a delayed entry that does not fit is
*overflowed*: read past and left unacked, to be found again by a bounded re-scan once the index
has room or its due time comes (`broker.topics.dispatch.delayed_overflow`).

Unacked limits (the topic's caps, `broker.limits.topic_caps`): each consumer gets
maxUnackedMessagesPerConsumer (see `broker.topics.consumer`) and shares the subscription's `gate`
(maxUnackedMessagesPerSubscription, `broker.limits.unacked`); a blocked consumer, or any consumer
while the gate is closed, counts as one without permits. `set_unacked_limits` applies a changed
policy to the consumers attached.

What must hold: an entry is at most one of {in replay, pending at exactly one consumer, delayed};
an entry acknowledged is in none; every unacked entry before `read_position` is in one of them or
was handed back by moving `read_position` to or before it (so nothing unacked is lost);
`len(replay) <= replay_entries_max`; an entry in `delayed` leaves it only when due (never early),
or when the topic's delayedDelivery policy switches delayed delivery off (`set_delayed_policy`);
every other unacked delayed entry read so far is overflowed (see `broker.topics.dispatch.delayed_overflow`).
"""

from __future__ import annotations

import asyncio
import bisect
from typing import TYPE_CHECKING

from broker.limits.persistence import DelayedDelivery
from broker.limits.unacked import UnackedGate
from broker.topics.consumer import Consumer
from broker.topics.dispatch.base import Dispatcher
from broker.topics.dispatch.delayed import DelayedDeliveryIndex
from broker.topics.dispatch.delayed_overflow import DelayedOverflow
from broker.topics.entry_facts import EntryFacts
from common.errors import StrataError
from common.invariant import invariant, present
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription



class SharedDispatcher(Dispatcher):
    def __init__(self, sub: Subscription, read_position: Position, batch_entries_max: int) -> None:
        super().__init__(sub, read_position, batch_entries_max)
        self.replay: dict[Position, bytes | None] = {}   # entry -> its bytes if cached, else None
        self.replay_order: list[Position] = []            # the keys of `replay`, ascending
        self.replay_bytes = 0                             # bytes cached in `replay`
        self.replay_entries_max = sub.topic.config.broker_dispatch_replay_entries_max  # bound on len(replay)
        self.owner: dict[Position, Consumer] = {}         # pending entry -> consumer holding it
        self._next = 0                                    # round-robin index into consumers
        config = sub.topic.config
        caps = sub.topic.caps
        self.unacked_messages_max = caps.unacked_per_consumer_max   # per consumer; 0: no limit
        self.gate = UnackedGate(caps.unacked_per_subscription_max)  # the whole subscription's
        policy = sub.topic.storage.delayed           # the topic's delayedDelivery policy
        self.delayed = DelayedDeliveryIndex(config.broker_delayed_delivery_entries_max, policy.tick_ms,
                                            sub.topic.ctx.clock)
        self.delayed.active = policy.active
        self.overflow = DelayedOverflow()                 # delayed entries the full index turned away
        self._wake: asyncio.TimerHandle | None = None     # kicks a pass when the next delay ends
        self._wake_at_s = 0.0                             # loop time `_wake` fires at

    # --- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        consumer.unacked_messages_max = self.unacked_messages_max
        consumer.gate = self.gate
        self.consumers.append(consumer)
        self.kick()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        for position in consumer.forget_all():
            self._requeue(position)
        consumer.gate = None
        self.kick()

    def set_unacked_limits(self, per_consumer: int, per_subscription: int) -> None:
        """The topic's maxUnackedMessagesPerConsumer / PerSubscription changed: apply them to
        the consumers attached and the gate; dispatch resumes if that released anyone."""
        self.unacked_messages_max = per_consumer
        released = self.gate.set_max(per_subscription)
        for consumer in self.consumers:
            released = consumer.set_unacked_max(per_consumer) or released
        if released:
            self.kick()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        self.count_redelivery(consumer, positions)
        targets = sorted(consumer.pending) if positions is None else positions
        for position in targets:
            if not consumer.forget(position):
                continue
            self.sub.cursor.increment_redelivery([position])
            self._requeue(position)
        self.kick()

    def on_acked(self, positions: list[Position]) -> None:
        for position in positions:
            self._drop_replay(position)
            self._forget_delayed(position)
            consumer = self.owner.get(position)
            if consumer is not None:
                consumer.forget(position)
                self._release(position)

    def on_acked_upto(self, position: Position) -> None:
        self.on_acked([p for p in self.owner if p <= position] + [p for p in self.replay if p <= position])
        self.delayed.remove_through(position)

    def clear(self) -> None:
        """Forget every pending and replayed entry (seek)."""
        for consumer in self.consumers:
            consumer.forget_all()
        for position in list(self.owner):
            self._release(position)
        for position in list(self.replay_order):
            self._drop_replay(position)
        self.delayed.clear()
        self.overflow.clear()

    def seek(self, position: Position) -> None:
        super().seek(position)
        self.overflow.forget_from(position)

    def rewind(self) -> None:
        super().rewind()
        self.overflow.forget_from(self.read_position)

    def close(self) -> None:
        super().close()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    # --- delayed delivery ---------------------------------------------------------------------

    def _screen(self, entry) -> EntryFacts | None:
        """Move past a newly read entry; its facts if it should go out now, None if it is acked,
        already held elsewhere (met again after `reread_from`), or not yet due (then it waits in
        `delayed`)."""
        position = entry.position
        self.read_position = self.sub.ml.next_position(position)
        if (self.sub.cursor.is_acked(position) or position in self.owner or position in self.replay
                or position in self.delayed):
            return None
        facts = self.facts(position, entry.data)
        if self.delayed.holds(facts.deliver_at_ms):
            self._delay(position, facts)
            return None
        return facts

    def set_delayed_policy(self, policy: DelayedDelivery) -> None:
        """The topic's delayedDelivery changed: its tick from now on; switched off, the entries
        the index held go out now (overflowed ones when the re-scan meets them)."""
        self.delayed.tick_ms = policy.tick_ms
        if policy.active == self.delayed.active:
            return
        self.delayed.active = policy.active
        if not policy.active:
            for position in self.delayed.pop_all():
                self._add_replay(position, None, self._due_slot(position))
            self.kick()

    def _delay(self, position: Position, facts: EntryFacts) -> None:
        """Index a not-yet-due entry, or overflow it when the index is full."""
        deliver_at_ms = present(facts.deliver_at_ms, "a delayed entry has a delivery time")
        if self.delayed.room() > 0:
            self.delayed.add(position, deliver_at_ms)
        else:
            self.overflow.add(position, deliver_at_ms)

    def _replay_slot(self, facts: EntryFacts) -> int | None:
        """Key_Shared: the slot a replay entry carries (Shared has none)."""
        return None

    def _forget_delayed(self, position: Position) -> None:
        self.delayed.remove(position)

    def _due_slot(self, position: Position) -> int | None:
        """Key_Shared: the slot of an entry leaving the delayed index (Shared has none)."""
        return None

    def _release_due(self) -> None:
        """Delayed entries whose time has come join the replay set (sent before new entries)."""
        for position in self.delayed.pop_due():
            self._add_replay(position, None, self._due_slot(position))

    async def _rescan_overflow(self) -> None:
        """One bounded step of the overflow scan, when one is due (see `broker.topics.dispatch.delayed_overflow`):
        re-read overflowed entries and index, release or keep them overflowed."""
        delayed, overflow = self.delayed, self.overflow
        if not overflow.should_scan(delayed.room(), delayed.capacity, delayed.clock.wall_ms()):
            return
        scan = overflow.begin_scan()
        budget = self.sub.topic.config.broker_delayed_delivery_scan_entries_per_pass
        while budget > 0:
            if scan.next_position >= self.read_position:
                overflow.finish_scan()
                return
            epoch, start = self._epoch, scan.next_position
            entries = await self.sub.ml.read(start, min(budget, self.batch_entries_max))
            if self._closed or epoch != self._epoch or overflow.scan is not scan:
                return      # rewound, sought or cleared meanwhile: the state was reset
            if not entries:
                overflow.finish_scan()
                return
            budget -= len(entries)
            for entry in entries:
                if entry.position >= self.read_position:
                    break
                self._rescan_one(entry, scan)
            scan.next_position = self.sub.ml.next_position(entries[-1].position)
        self.kick()     # more to scan: carry on in the next pass, after others had their turn

    def _rescan_one(self, entry, scan) -> None:
        position = entry.position
        if (self.sub.cursor.is_acked(position) or position in self.owner or position in self.replay
                or position in self.delayed):
            return
        facts = self.facts(position, entry.data)
        if not self.delayed.holds(facts.deliver_at_ms):
            self._add_replay(position, entry.data, self._replay_slot(facts))   # due now
        elif self.delayed.room() > 0:
            self._delay(position, facts)
        else:
            scan.stays_out(position, facts.deliver_at_ms)

    def _read_budget(self) -> int:
        """How many new entries to read now (a full delayed index no longer stops reading)."""
        return self.batch_entries_max

    def _schedule_wake(self) -> None:
        """Make sure a pass runs when the next delayed (or overflowed) entry falls due."""
        waits = [w for w in (self.delayed.wake_in_ms(),
                             self.overflow.wake_in_ms(self.delayed.clock.wall_ms(), self.delayed.tick_ms))
                 if w is not None]
        if not waits or self._closed:
            return
        wait_ms = min(waits)
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

    # --- the replay set (Key_Shared extends the hooks) ----------------------------------------

    def _release(self, position: Position) -> int | None:
        """An entry is no longer pending; Key_Shared returns its slot (Shared: None)."""
        self.owner.pop(position, None)
        return None

    def _requeue(self, position: Position) -> None:
        """A pending entry comes back (close, redelivery): into the replay set."""
        slot = self._release(position)
        self._add_replay(position, None, slot)

    def _add_replay(self, position: Position, data: bytes | None, slot: int | None = None) -> bool:
        """Put an entry in the replay set (caching `data` while the budget allows). When the set
        is full the largest position is handed back to the unread range; False if that is this
        entry (it is then not in the set)."""
        if position in self.replay:
            self._cache(position, data)
            return True
        if len(self.replay) >= self.replay_entries_max:
            largest = self.replay_order[-1]
            if position > largest:
                self.reread_from(position)
                return False
            self._drop_replay(largest)
            self.reread_from(largest)
        bisect.insort(self.replay_order, position)
        self.replay[position] = None
        self._cache(position, data)
        self._replay_added(position, slot)
        return True

    def _cache(self, position: Position, data: bytes | None) -> None:
        if data is None or self.replay.get(position, b"") is not None:
            return      # nothing to cache, already cached, or no longer in the set
        if self.replay_bytes + len(data) > self.sub.topic.config.broker_dispatch_replay_cache_bytes_max:
            return
        self.replay[position] = data
        self.replay_bytes += len(data)

    def _replay_added(self, position: Position, slot: int | None) -> None:
        """Hook: an entry joined the replay set."""

    def _drop_replay(self, position: Position) -> None:
        if position not in self.replay:
            return
        data = self.replay.pop(position)
        if data is not None:
            self.replay_bytes -= len(data)
        index = bisect.bisect_left(self.replay_order, position)
        invariant(self.replay_order[index] == position, "replay order matches the replay set",
                  position=str(position))
        del self.replay_order[index]
        self._replay_dropped(position)

    def _replay_dropped(self, position: Position) -> None:
        """Hook: an entry left the replay set."""

    async def _replay_data(self, position: Position) -> bytes | None:
        """The bytes of a replayed entry (cached or read); None if it left the set, is acked or
        is no longer kept (then it is dropped). A storage error propagates, the entry stays."""
        data = self.replay.get(position)
        if data is None:
            try:
                data = await self.read_one(position)
            except StrataError:
                if position in self.replay and self.is_gone(position):
                    self._drop_replay(position)
                    return None
                raise
            if self._closed or position not in self.replay:
                return None     # closed, acked or handed back while the read was in flight
        if data is None or self.sub.cursor.is_acked(position):
            self._drop_replay(position)
            return None
        return data

    # --- sending ------------------------------------------------------------------------------

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

    # --- the pass -----------------------------------------------------------------------------

    async def _dispatch_pass(self) -> None:
        self._release_due()
        try:
            await self._rescan_overflow()
            await self._dispatch_replay()
            await self._dispatch_new()
        finally:
            self._schedule_wake()

    async def _dispatch_new(self) -> None:
        while not self.replay and self.any_can_take():
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
                    return      # read_position is at this entry: the rest is read again later
                facts = self._screen(entry)
                if facts is not None:
                    self._send(present(self._pick(), "a consumer can take it"), entry.position, entry.data, facts)

    async def _dispatch_replay(self) -> None:
        """Replays, oldest first; walks `replay_order` by position, so entries added or dropped
        while a read is in flight are handled correctly."""
        after: Position | None = None
        while self.replay_order and self.any_can_take():
            index = 0 if after is None else bisect.bisect_right(self.replay_order, after)
            if index >= len(self.replay_order):
                return
            position = after = self.replay_order[index]
            data = await self._replay_data(position)
            if data is None:
                continue
            consumer = self._pick()
            if consumer is None:
                self._cache(position, data)
                return
            self._drop_replay(position)
            self._send(consumer, position, data, self.facts(position, data))
