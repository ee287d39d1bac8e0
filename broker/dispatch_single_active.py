"""Exclusive and Failover: one active consumer gets every entry, in order.

Exclusive admits one consumer; a second is refused with ConsumerBusy. Failover admits many and
picks the active one by Pulsar's rule: consumers sorted by (priority_level, consumer_name, arrival);
partition i of a partitioned topic goes to sorted[i mod n], a non-partitioned topic to sorted[0].
Whenever the active consumer changes, every consumer whose role changed is told with
ACTIVE_CONSUMER_CHANGE and the subscription is rewound to just after the mark-delete position, so
the new active consumer receives everything the old one left unacknowledged (acked holes are
skipped as they are read).

What must hold: only the active consumer ever receives entries; after a switch nothing the old
active consumer left unacked is lost (it is re-read from the cursor).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from broker.consumer import Consumer
from broker.dispatch_base import Dispatcher
from common.errors import ConsumerBusy
from ledger.position import Position

if TYPE_CHECKING:
    from broker.subscription import Subscription

_arrival = itertools.count()


class SingleActiveDispatcher(Dispatcher):
    def __init__(self, sub: "Subscription", read_position: Position, batch_entries_max: int,
                 failover: bool, partition_index: int) -> None:
        super().__init__(sub, read_position, batch_entries_max)
        self.failover = failover
        self.partition_index = partition_index
        self.active: Consumer | None = None      # the one consumer entries go to; None: nobody
        self._arrival: dict[Consumer, int] = {}  # tie-break for equal (priority, name)

    def add_consumer(self, consumer: Consumer) -> None:
        if self.consumers and not self.failover:
            raise ConsumerBusy("exclusive subscription already has a consumer", subscription=self.sub.name)
        self.consumers.append(consumer)
        self._arrival[consumer] = next(_arrival)
        changed = self._choose_active()
        if self.failover and not (changed and consumer is self.active):
            consumer.set_active(consumer is self.active)
        self.kick()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        self._arrival.pop(consumer, None)
        consumer.pending.clear()
        was_active = consumer is self.active
        if not self._choose_active() and was_active:
            self.rewind()
        self.kick()

    def _choose_active(self) -> bool:
        """Re-pick the active consumer; on a change notify and rewind. True if it changed."""
        ordered = sorted(self.consumers, key=lambda c: (c.priority, c.name, self._arrival[c]))
        if not ordered:
            new = None
        else:
            new = ordered[max(0, self.partition_index) % len(ordered)]
        old = self.active
        if new is old:
            return False
        self.active = new
        for consumer in self.consumers:
            consumer.pending.clear()
        self.rewind()
        if self.failover:
            for consumer in self.consumers:
                if consumer is new or consumer is old:
                    consumer.set_active(consumer is new)
        return True

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Single-active redelivery rewinds to mark-delete (ids or not): Pulsar's behaviour."""
        if consumer is not self.active:
            return
        consumer.pending.clear()
        self.rewind()
        self.kick()

    async def _dispatch_pass(self) -> None:
        while True:
            consumer = self.active
            if consumer is None or not consumer.can_take():
                return
            entries = await self.read_new(self.permits_entries(consumer))
            if entries is None:
                continue
            if not entries:
                return
            if consumer is not self.active:
                continue
            self._send_run(consumer, entries)

    def _send_run(self, consumer: Consumer, entries: list) -> None:
        cursor = self.sub.cursor
        for entry in entries:
            if not consumer.can_take():
                return
            self.read_position = self.sub.ml.next_position(entry.position)
            if cursor.is_acked(entry.position):
                continue
            self.deliver(consumer, entry.position, entry.data, self.facts(entry.data))
