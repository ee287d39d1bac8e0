"""Who gets a message of a non-persistent subscription, by subscription type (Pulsar's
NonPersistentDispatcher* classes).

A router only chooses; it never queues. `pick(facts)` names the consumer that takes the message
now, or None — and then the message is dropped for this subscription (counted by the caller),
because nothing is stored to send later. A consumer can take a message while it has permits and
its connection is writable (`Consumer.can_take`: the same test the persistent dispatchers use).

- Exclusive / Failover (`SingleActiveRouter`): one active consumer, chosen by the persistent
  dispatcher's rule (`broker.topics.dispatch.single_active.pick_active_index`: priority level, then name,
  then arrival; a partition by its index, a non-partitioned topic on Pulsar's consistent-hash
  ring); a second Exclusive consumer is refused with ConsumerBusy; Failover consumers are told
  ACTIVE_CONSUMER_CHANGE when their role changes. A message the active consumer cannot take is
  dropped, never given to another consumer (Pulsar's behaviour).
- Shared (`SharedRouter`): round robin over the consumers that can take a message, the lowest
  priority level first (Pulsar's getNextConsumer).
- Key_Shared (`KeySharedRouter`): the owner of the message's hash slot, with the persistent
  dispatcher's selectors (`broker.topics.dispatch.key_selector`: AUTO_SPLIT consistent hashing, STICKY
  ranges); dropped if the owner cannot take it or no consumer owns the slot. Nothing is held back
  for ordering: a non-persistent message is either delivered at once or gone.

What must hold: `pick` returns only an attached consumer that can take a message now; the set of
consumers is the router's `consumers` list and nothing else.
"""

from __future__ import annotations

import abc
import itertools

from broker.topics.consumer import Consumer
from broker.topics.dispatch.key_selector import AutoSplitSelector, StickySelector
from broker.topics.dispatch.single_active import choose_active, tell_failover_roles
from broker.topics.entry_facts import EntryFacts
from common.errors import ConsumerAssignError, ConsumerBusy

_arrival = itertools.count()


class Router(abc.ABC):
    def __init__(self, subscription_name: str) -> None:
        self.subscription_name = subscription_name
        self.consumers: list[Consumer] = []

    @abc.abstractmethod
    def add(self, consumer: Consumer) -> None:
        """Attach `consumer`; raise ConsumerBusy / ConsumerAssignError to refuse it."""

    @abc.abstractmethod
    def remove(self, consumer: Consumer) -> None:
        """Detach `consumer` (no-op if it is not attached)."""

    @abc.abstractmethod
    def pick(self, facts: EntryFacts) -> Consumer | None:
        """The consumer that takes this message now; None: it is dropped."""


class SingleActiveRouter(Router):
    def __init__(self, subscription_name: str, topic_name: str, partition_index: int, failover: bool) -> None:
        super().__init__(subscription_name)
        self.topic_name = topic_name
        self.partition_index = partition_index
        self.failover = failover
        self.active: Consumer | None = None       # the one consumer messages go to; None: nobody
        self._arrival: dict[Consumer, int] = {}   # tie-break for equal (priority, name)

    def add(self, consumer: Consumer) -> None:
        if self.consumers and not self.failover:
            raise ConsumerBusy("Exclusive consumer is already connected", subscription=self.subscription_name)
        self.consumers.append(consumer)
        self._arrival[consumer] = next(_arrival)
        changed = self._choose()
        if self.failover and not (changed and consumer is self.active):
            consumer.set_active(consumer is self.active)

    def remove(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self._arrival.pop(consumer, None)
            self._choose()

    def _choose(self) -> bool:
        """Re-pick the active consumer, telling Failover consumers whose role changed."""
        new = choose_active(self.consumers, self._arrival, self.failover, self.topic_name, self.partition_index)
        old, self.active = self.active, new
        if new is old:
            return False
        if self.failover:
            tell_failover_roles(self.consumers, new, old)
        return True

    def pick(self, facts: EntryFacts) -> Consumer | None:
        active = self.active
        return active if active is not None and active.can_take() else None


class SharedRouter(Router):
    def __init__(self, subscription_name: str) -> None:
        super().__init__(subscription_name)
        self._next = 0    # where the round robin looks first

    def add(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def pick(self, facts: EntryFacts) -> Consumer | None:
        consumers = self.consumers
        count = len(consumers)
        best: Consumer | None = None
        best_at = 0
        for step in range(count):
            at = (self._next + step) % count
            candidate = consumers[at]
            if candidate.can_take() and (best is None or candidate.priority < best.priority):
                best, best_at = candidate, at
        if best is not None:
            self._next = best_at + 1
        return best


class KeySharedRouter(Router):
    def __init__(self, subscription_name: str, sticky: bool) -> None:
        super().__init__(subscription_name)
        self.sticky = sticky
        self.selector: AutoSplitSelector[Consumer] | StickySelector[Consumer] = (
            StickySelector() if sticky else AutoSplitSelector())

    def add(self, consumer: Consumer, sticky: bool = False) -> None:
        if sticky != self.sticky:
            raise ConsumerAssignError("key_shared mode differs from the subscription's",
                                      subscription=self.subscription_name)
        if isinstance(self.selector, StickySelector):
            self.selector.add(consumer, consumer.key_ranges)
        else:
            self.selector.add(consumer, consumer.label)
        self.consumers.append(consumer)

    def remove(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self.selector.remove(consumer)

    def pick(self, facts: EntryFacts) -> Consumer | None:
        owner = self.selector.select(facts.slot)
        return owner if owner is not None and owner.can_take() else None
