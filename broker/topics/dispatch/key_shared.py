"""Key_Shared: each hash slot belongs to one consumer; per-key order holds across changes.

An entry's slot is the Murmur3 slot of its sticky key (`broker.topics.entry_facts`); the selector
(`broker.topics.dispatch.key_selector`) names the slot's owner. Ordering follows Pulsar 4's PIP-379 rule:
**a slot is never delivered-and-unacked at two consumers at once.** `holders` records, per slot,
which consumer holds unacked entries of it and how many; an entry whose owner is not the holder
waits until the holder acks (or closes, or gives the entries back).

Per-slot order. Every entry in the replay set carries its slot (`replay_slot`), and
`slot_replay` lists each slot's waiting entries in position order. The rule is checked at the
point of sending, whatever happened during a read in flight: an entry of a slot goes out only if
no older entry of that slot waits in the replay set — a new entry of a slot with waiting entries
is parked behind them, and a replayed entry goes out only as its slot's oldest. So a consumer
closing while a read is in flight (its entries come back to the replay set mid-pass) cannot let a
newer entry of the same key overtake them.

Per-consumer order. What one consumer receives is in position order too (redeliveries and
entries given back by a closing consumer aside): once an entry is parked, nothing later goes to
its owner in that pass (`_held_back`), and the next pass walks the replay set in position order,
meeting the parked entry first again. A consumer joining or leaving during a pass moves owners
under it (an entry parked for one owner now belongs to another), so the rest of that pass sends
nothing (`_hold_all`: it parks what it has read and ends) and the pass the change kicked starts
over in position order. Per-slot order alone is not enough for a producer's batch: it holds
messages of many keys and is routed by its batch key (the first message's, as the client writes
it), so while a consumer that just joined waits for one of its keys to drain at another
consumer, letting later entries of its other keys through would hand it a later batch's messages
of key k before an earlier batch's (DESIGN's Key_Shared order, found with 37 keys in batches of
100: every key out of order at the newcomer). The cost is Pulsar's for recently joined
consumers: a newcomer receives nothing newer while one of its keys drains elsewhere.

A slow consumer does not stall keys it does not own, as long as no key moves: an entry that
cannot go now (owner without permits or blocked on unacked messages, slot held elsewhere, no
owner for a sticky gap, older entries of its slot waiting) is parked in the replay set — with
its bytes, while the cache allows — and the pass carries on with later entries of other owners.
A pass walks the replay set in position order (kept sorted, never sorted per pass) and skips an
entry whose slot cannot go before reading it, so parked keys cost a dict lookup each, no reads.
The look-ahead is bounded: once the replay set holds `replay_entries_max` parked entries,
reading ahead stops (then every key waits, as in Pulsar once its look-ahead limit is reached);
an entry that no longer fits is handed back to the unread range (see `broker.topics.dispatch.shared`),
the largest position first, which keeps per-slot order because nothing after it in its slot has
been sent.

Delayed entries (deliver_at_time in the future) wait in the delayed index of the Shared base (their
slot in `delayed_slot`) and join the replay set when due; they do not park their slot while
waiting, so later entries of the same key go out before them (Pulsar's behaviour too: a delay is
an explicit reordering). Once due they are ordinary replay entries of their slot.

What must hold: for every slot, all pending entries of it sit at one consumer; an entry of a slot
is sent only when no older entry of that slot is in the replay set (explicit redeliveries and
delays are the only reorderings, as in Pulsar); within a pass, no entry goes to a consumer after
an older entry of its was parked (unless allow_out_of_order).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from broker.topics.consumer import Consumer
from broker.topics.dispatch.key_selector import AutoSplitSelector, StickySelector
from broker.topics.dispatch.shared import SharedDispatcher
from broker.topics.entry_facts import EntryFacts
from common.errors import ConsumerAssignError
from common.invariant import invariant, present
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription


class KeySharedDispatcher(SharedDispatcher):
    def __init__(self, sub: Subscription, read_position: Position, batch_entries_max: int,
                 sticky: bool, allow_out_of_order: bool) -> None:
        super().__init__(sub, read_position, batch_entries_max)
        self.sticky = sticky
        self.allow_out_of_order = allow_out_of_order
        self.selector: AutoSplitSelector[Consumer] | StickySelector[Consumer] = (
            StickySelector() if sticky else AutoSplitSelector())
        self.slot_of: dict[Position, int] = {}               # pending entry -> its slot
        self.holders: dict[int, tuple[Consumer, int]] = {}   # slot -> (holder, pending entries)
        self.replay_slot: dict[Position, int] = {}           # replay entry -> its slot
        self.slot_replay: dict[int, list[Position]] = {}     # slot -> its replay entries, ascending
        self.delayed_slot: dict[Position, int] = {}          # entry in the delayed index -> slot
        self._held_back: set[Consumer] = set()   # this pass: owners of an entry parked in it
        self._hold_all = False   # consumers changed during this pass: owners moved, rerun it

    def add_consumer(self, consumer: Consumer, sticky: bool = False) -> None:
        if sticky != self.sticky:
            raise ConsumerAssignError("key_shared mode differs from the subscription's", subscription=self.sub.name)
        if isinstance(self.selector, StickySelector):   # the sticky mode's selector
            self.selector.add(consumer, consumer.key_ranges)
        else:
            self.selector.add(consumer, consumer.label)
        self._hold_all = True
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.selector.remove(consumer)
            self._hold_all = True
        super().remove_consumer(consumer)

    def on_acked_upto(self, position: Position) -> None:
        super().on_acked_upto(position)
        for gone in [p for p in self.delayed_slot if p <= position]:
            del self.delayed_slot[gone]

    def clear(self) -> None:
        super().clear()
        self.delayed_slot.clear()

    # --- bookkeeping hooks --------------------------------------------------------------------

    def _release(self, position: Position) -> int | None:
        super()._release(position)
        slot = self.slot_of.pop(position, None)
        if slot is None:
            return None
        holder, count = self.holders[slot]
        if count <= 1:
            del self.holders[slot]
            if self.replay:
                self.kick()
        else:
            self.holders[slot] = (holder, count - 1)
        return slot

    def _replay_added(self, position: Position, slot: int | None) -> None:
        slot = present(slot, "a Key_Shared replay entry has a known slot", position=str(position))
        self.replay_slot[position] = slot
        bisect.insort(self.slot_replay.setdefault(slot, []), position)

    def _replay_dropped(self, position: Position) -> None:
        slot = self.replay_slot.pop(position)
        queue = self.slot_replay[slot]
        del queue[bisect.bisect_left(queue, position)]
        if not queue:
            del self.slot_replay[slot]

    def _delay(self, position: Position, facts: EntryFacts) -> None:
        super()._delay(position, facts)
        if position in self.delayed:    # not overflowed
            self.delayed_slot[position] = facts.slot

    def _replay_slot(self, facts: EntryFacts) -> int | None:
        return facts.slot

    def _forget_delayed(self, position: Position) -> None:
        super()._forget_delayed(position)
        self.delayed_slot.pop(position, None)

    def _due_slot(self, position: Position) -> int | None:
        return self.delayed_slot.pop(position)

    def _send(self, consumer: Consumer, position: Position, data: bytes, facts: EntryFacts) -> None:
        waiting = self.slot_replay.get(facts.slot)
        invariant(not waiting or waiting[0] > position,
                  "no entry of a slot overtakes an older one waiting in the replay set",
                  position=str(position), slot=facts.slot)
        super()._send(consumer, position, data, facts)
        self.slot_of[position] = facts.slot
        holder = self.holders.get(facts.slot)
        self.holders[facts.slot] = (consumer, (holder[1] if holder else 0) + 1)

    def _eligible(self, slot: int, parked: set[int]) -> Consumer | None:
        """The consumer this slot may go to now, or None (then the slot is parked for the pass,
        and so is its owner: nothing later goes to a consumer while an older entry of its waits)."""
        owner = self.selector.select(slot)
        if slot in parked or owner in self._held_back or self._hold_all:
            self._park(slot, owner, parked)
            return None
        holder = self.holders.get(slot)
        blocked = holder is not None and holder[0] is not owner and not self.allow_out_of_order
        if owner is None or blocked or not owner.can_take():
            self._park(slot, owner, parked)
            return None
        return owner

    def _park(self, slot: int, owner: Consumer | None, parked: set[int]) -> None:
        parked.add(slot)
        if owner is not None and not self.allow_out_of_order:
            self._held_back.add(owner)

    # --- the pass -----------------------------------------------------------------------------

    async def _dispatch_pass(self) -> None:
        self._release_due()
        parked: set[int] = set()
        self._held_back.clear()
        self._hold_all = False
        try:
            await self._rescan_overflow()
            await self._dispatch_parked(parked)
            await self._dispatch_new_keyed(parked)
        finally:
            self._schedule_wake()

    async def _dispatch_new_keyed(self, parked: set[int]) -> None:
        while len(self.replay) < self.replay_entries_max and self.any_can_take() and not self._hold_all:
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
                # Entries of this slot waiting in the replay set go first (they may have come
                # back while the read was in flight).
                if facts.slot in self.slot_replay:
                    self._park(facts.slot, self.selector.select(facts.slot), parked)
                    consumer = None
                else:
                    consumer = self._eligible(facts.slot, parked)
                if consumer is not None:
                    self._send(consumer, entry.position, entry.data, facts)
                elif not self._add_replay(entry.position, entry.data, facts.slot):
                    return      # set full: this entry and the rest are read again once it drains

    async def _dispatch_parked(self, parked: set[int]) -> None:
        """Replays in position order; a parked slot is skipped before anything of it is read."""
        after: Position | None = None
        while self.any_can_take() and not self._hold_all:
            position = self._next_sendable(after, parked)
            if position is None:
                return
            after = position
            await self._dispatch_replayed(position, parked)

    def _next_sendable(self, after: Position | None, parked: set[int]) -> Position | None:
        """The first replay entry after `after` whose slot may go now (others get parked)."""
        order = self.replay_order
        index = 0 if after is None else bisect.bisect_right(order, after)
        while index < len(order):
            position = order[index]
            slot = self.replay_slot[position]
            if slot not in parked and self._eligible(slot, parked) is not None:
                return position
            index += 1
        return None

    async def _dispatch_replayed(self, position: Position, parked: set[int]) -> None:
        """Send one replay entry if it is still its slot's oldest and the slot may still go."""
        slot = self.replay_slot[position]
        data = await self._replay_data(position)
        if data is None:
            return
        waiting = self.slot_replay.get(slot)
        # An older entry of the slot may have come back during the read: the slot then waits for
        # the next pass (whatever gave it back also kicked one).
        consumer = self._eligible(slot, parked) if waiting and waiting[0] == position else None
        if consumer is None:
            self._park(slot, self.selector.select(slot), parked)
            self._cache(position, data)
            return
        facts = self.facts(position, data)
        invariant(facts.slot == slot, "a replay entry's slot matches its bytes", position=str(position))
        self._drop_replay(position)
        self._send(consumer, position, data, facts)
