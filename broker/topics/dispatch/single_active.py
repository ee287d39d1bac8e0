"""Exclusive and Failover: one active consumer gets every entry, in order.

Exclusive admits one consumer; a second is refused with ConsumerBusy. Failover admits many and
picks the active one by the rule of Pulsar 3.x/4.x (`AbstractDispatcherSingleActiveConsumer.
pickAndScheduleActiveConsumer`): consumers are sorted by (priority_level, consumer_name) — names
compared as Java's String.compareTo does, by UTF-16 code unit; arrival breaks ties — and only the
highest-priority group (lowest priority_level) is eligible.
- partition i of a partitioned topic → eligible[i mod n];
- a non-partitioned topic → a consistent-hash ring (apache/pulsar#19502): each eligible consumer
  puts 100 points `murmur3(consumer_name + str(j)) & 0x7FFFFFFF` on the ring (a later consumer wins
  a collision) and the topic takes the first point at or after `murmur3(topic name) & 0x7FFFFFFF`
  (wrapping). A consumer joining therefore takes over only if one of its points captures the topic
  (about 1 in n), and a consumer that leaves hands over only if it was the active one: no
  needless switches, while many topics subscribed with the same consumer names spread over the
  consumers. (Pulsar 2.4–2.11 picked the first-connected consumer instead; that ignores
  priority_level and puts every topic of a regex subscription on one consumer.)
Whenever the active consumer changes, every consumer whose role changed is told with
ACTIVE_CONSUMER_CHANGE and the subscription is rewound to just after the mark-delete position, so
the new active consumer receives everything the old one left unacknowledged (acked holes are
skipped as they are read).

What must hold: only the active consumer ever receives entries; after a switch nothing the old
active consumer left unacked is lost (it is re-read from the cursor); the choice depends only on
the set of consumers (names, priorities, arrival order for equal names), not on history.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from broker.topics.consumer import Consumer
from broker.topics.dispatch.base import Dispatcher
from broker.topics.dispatch.key_selector import murmur3_x86_32
from common.errors import ConsumerBusy
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription

_arrival = itertools.count()

RING_POINTS_PER_CONSUMER = 100   # Pulsar's CONSUMER_CONSISTENT_HASH_REPLICAS


def _hash31(data: bytes) -> int:
    """Pulsar's Murmur3_32Hash.makeHash: murmur3 x86 32 (seed 0), sign bit cleared."""
    return murmur3_x86_32(data) & 0x7FFFFFFF


def ring_pick(topic_name: str, names: list[str]) -> int:
    """Index into `names` (eligible consumers, in sorted order) that Pulsar's consistent-hash ring
    gives a non-partitioned topic."""
    ring: dict[int, int] = {}
    for index, name in enumerate(names):
        for point in range(RING_POINTS_PER_CONSUMER):
            ring[_hash31(f"{name}{point}".encode())] = index
    target = _hash31(topic_name.encode())
    at_or_after = [h for h in ring if h >= target]
    return ring[min(at_or_after)] if at_or_after else ring[min(ring)]


def java_name_order(name: str) -> bytes:
    """Sort key ordering names as Java's String.compareTo, by UTF-16 code unit: a character above
    U+FFFF (a surrogate pair, 0xD800.. first) sorts before U+E000..U+FFFF, unlike Python's str order."""
    return name.encode("utf-16-be", "surrogatepass")


def pick_active_index(topic_name: str, partition_index: int, ordered: list[Consumer]) -> int:
    """Pulsar's choice among consumers already sorted by (priority, name, arrival)."""
    top = ordered[0].priority
    eligible = sum(1 for c in ordered if c.priority == top)
    if partition_index >= 0:
        return partition_index % eligible
    return ring_pick(topic_name, [c.name for c in ordered[:eligible]])


def choose_active(consumers: list[Consumer], arrival: dict[Consumer, int], failover: bool,
                  topic_name: str, partition_index: int) -> Consumer | None:
    """The consumer a single-active subscription delivers to: the first by (priority, name,
    arrival) for Exclusive, Pulsar's pick among the top priority for Failover; None if none."""
    ordered = sorted(consumers, key=lambda c: (c.priority, java_name_order(c.name), arrival[c]))
    if not ordered:
        return None
    if not failover:
        return ordered[0]
    return ordered[pick_active_index(topic_name, partition_index, ordered)]


def tell_failover_roles(consumers: list[Consumer], new: Consumer | None, old: Consumer | None) -> None:
    """ACTIVE_CONSUMER_CHANGE to the consumers whose role changed (Failover only)."""
    for consumer in consumers:
        if consumer is new or consumer is old:
            consumer.set_active(consumer is new)


class SingleActiveDispatcher(Dispatcher):
    def __init__(self, sub: Subscription, read_position: Position, batch_entries_max: int,
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
        consumer.forget_all()
        was_active = consumer is self.active
        if not self._choose_active() and was_active:
            self.rewind()
        self.kick()

    def _choose_active(self) -> bool:
        """Re-pick the active consumer; on a change notify and rewind. True if it changed."""
        new = choose_active(self.consumers, self._arrival, self.failover, str(self.sub.topic.name),
                            self.partition_index)
        old = self.active
        if new is old:
            return False
        self.active = new
        for consumer in self.consumers:
            consumer.forget_all()
        self.rewind()
        if self.failover:
            tell_failover_roles(self.consumers, new, old)
        return True

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Single-active redelivery rewinds to mark-delete (ids or not): Pulsar's behaviour."""
        if consumer is not self.active:
            return
        self.count_redelivery(consumer, None)    # all of them go back, as Pulsar counts it
        consumer.forget_all()
        self.rewind()
        self.kick()

    async def _dispatch_pass(self) -> None:
        while True:
            consumer = self.active
            if consumer is None or not consumer.can_take() or not self.rate_allows():
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
        for entry in entries:
            if not consumer.can_take() or not self.rate_allows():
                return
            self.read_position = self.next_after(entry.position)
            if self.is_acked(entry.position):
                continue
            self.deliver(consumer, entry.position, entry.data, self.facts(entry.position, entry.data))
