"""A subscription's unacked messages against its limit (Pulsar's maxUnackedMessagesPerSubscription).

A Shared or Key_Shared dispatcher owns one `UnackedGate`; each of its consumers adds the messages
it is sent and takes away those acked or given back. At `max_messages` the gate closes
(`blocked`: the dispatcher sends nothing more to any consumer); it opens again once acks bring
the total below half the limit, so a subscription at the edge does not flip on every ack
(Pulsar's PersistentDispatcherMultipleConsumers blockedDispatcherOnUnackedMsgs, which unblocks
at `< max / 2`). A consumer's own limit (maxUnackedMessagesPerConsumer) lives on the consumer
(`broker.topics.consumer`), with the same hysteresis at `<= max / 2`.

What must hold: `total` equals the sum of the unacked counts of the consumers attached to the
gate; with `max_messages` 0 the gate is never blocked.
"""

from __future__ import annotations


class UnackedGate:
    __slots__ = ("blocked", "max_messages", "total")

    def __init__(self, max_messages: int) -> None:
        self.max_messages = max_messages   # close at this many unacked messages; 0: never
        self.total = 0                     # unacked messages of the consumers attached
        self.blocked = False               # closed: reached the limit, not yet back under half

    def add(self, messages: int) -> None:
        """`messages` were sent (> 0) or acked / given back (< 0)."""
        self.total += messages
        if messages > 0:
            if not self.blocked and 0 < self.max_messages <= self.total:
                self.blocked = True
        elif self.blocked and self.total < self.max_messages // 2:
            self.blocked = False

    def set_max(self, max_messages: int) -> bool:
        """A new limit (a policy changed); True if the gate opened because of it."""
        was = self.blocked
        self.max_messages = max_messages
        if max_messages <= 0 or self.total < max_messages // 2:
            self.blocked = False
        elif self.total >= max_messages:
            self.blocked = True
        return was and not self.blocked
