"""Key_Shared: each hash slot belongs to one consumer; per-key order holds across changes.

An entry's slot is the Murmur3 slot of its sticky key (`broker.entry_facts`); the selector
(`broker.key_shared_selector`) names the slot's owner. Ordering follows Pulsar 4's PIP-379 rule:
**a slot is never delivered-and-unacked at two consumers at once.** `holders` records, per slot,
which consumer holds unacked entries of it and how many; an entry whose owner is not the holder
waits until the holder acks (or closes, or gives the entries back).

A slow consumer never stalls keys it does not own: an entry that cannot go now (owner without
permits, slot held elsewhere, no owner for a sticky gap) is parked in the replay set — with its
bytes, while the cache allows — and the pass carries on with later entries. Within one pass, once
a slot is parked every later entry of that slot is parked too, and replays are tried before new
entries in position order, so entries of one slot always leave in position order.

Delayed entries (deliver_at_time in the future) wait in the delayed index of the Shared base and
join the replay set when due; they do not park their slot, so later entries of the same key go
out before them (Pulsar's behaviour too: a delay is an explicit reordering).

What must hold: for every slot, all pending entries of it sit at one consumer; for every slot,
entries are sent in position order (except explicit redeliveries, which Pulsar also reorders).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.consumer import Consumer
from broker.dispatch_shared import REPLAY_ENTRIES_MAX, SharedDispatcher
from broker.entry_facts import EntryFacts
from broker.key_shared_selector import AutoSplitSelector, StickySelector
from common.errors import ConsumerAssignError
from ledger.position import Position

if TYPE_CHECKING:
    from broker.subscription import Subscription


class KeySharedDispatcher(SharedDispatcher):
    def __init__(self, sub: "Subscription", read_position: Position, batch_entries_max: int,
                 sticky: bool, allow_out_of_order: bool) -> None:
        super().__init__(sub, read_position, batch_entries_max)
        self.sticky = sticky
        self.allow_out_of_order = allow_out_of_order
        self.selector: AutoSplitSelector[Consumer] | StickySelector[Consumer] = (
            StickySelector() if sticky else AutoSplitSelector())
        self.slot_of: dict[Position, int] = {}               # pending entry -> its slot
        self.holders: dict[int, tuple[Consumer, int]] = {}   # slot -> (holder, pending entries)

    def add_consumer(self, consumer: Consumer, sticky: bool = False) -> None:
        if sticky != self.sticky:
            raise ConsumerAssignError("key_shared mode differs from the subscription's", subscription=self.sub.name)
        if self.sticky:
            self.selector.add(consumer, consumer.key_ranges)
        else:
            self.selector.add(consumer, consumer.label)
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.selector.remove(consumer)
        super().remove_consumer(consumer)

    def _release(self, position: Position) -> None:
        super()._release(position)
        slot = self.slot_of.pop(position, None)
        if slot is None:
            return
        holder, count = self.holders[slot]
        if count <= 1:
            del self.holders[slot]
            if self.replay:
                self.kick()
        else:
            self.holders[slot] = (holder, count - 1)

    def _send(self, consumer: Consumer, position: Position, data: bytes, facts: EntryFacts) -> None:
        super()._send(consumer, position, data, facts)
        self.slot_of[position] = facts.slot
        holder = self.holders.get(facts.slot)
        self.holders[facts.slot] = (consumer, (holder[1] if holder else 0) + 1)

    def _eligible(self, slot: int, parked: set[int]) -> Consumer | None:
        """The consumer this slot may go to now, or None (then the slot is parked for the pass)."""
        if slot in parked:
            return None
        owner = self.selector.select(slot)
        holder = self.holders.get(slot)
        blocked = holder is not None and holder[0] is not owner and not self.allow_out_of_order
        if owner is None or blocked or not owner.can_take():
            parked.add(slot)
            return None
        return owner

    async def _dispatch_pass(self) -> None:
        self._release_due()
        parked: set[int] = set()
        try:
            await self._dispatch_parked(parked)
            await self._dispatch_new_keyed(parked)
        finally:
            self._schedule_wake()

    async def _dispatch_new_keyed(self, parked: set[int]) -> None:
        while len(self.replay) < REPLAY_ENTRIES_MAX and self.any_can_take():
            budget = self._read_budget()
            if budget == 0:
                return
            entries = await self.read_new(budget)
            if entries is None:
                continue
            if not entries:
                return
            for entry in entries:
                facts = self._screen(entry)
                if facts is None:
                    continue
                consumer = self._eligible(facts.slot, parked)
                if consumer is None:
                    self._add_replay(entry.position, entry.data)
                else:
                    self._send(consumer, entry.position, entry.data, facts)

    async def _dispatch_parked(self, parked: set[int]) -> None:
        for position in sorted(self.replay):
            if not self.any_can_take():
                return
            data = await self._replay_data(position)
            if data is None:
                continue
            facts = self.facts(data)
            consumer = self._eligible(facts.slot, parked)
            if consumer is None:
                self._add_replay(position, data)
                continue
            self._drop_replay(position)
            self._send(consumer, position, data, facts)
