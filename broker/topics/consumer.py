"""One consumer attached to a subscription: its permits and its pending entries.

Permits are counted in **messages** (FLOW adds them); an entry costs its `num_messages` and the
count may go negative for the last entry sent (the client refills). `pending` maps every entry
delivered to this consumer and not yet acknowledged to its message count; the dispatcher uses it
to give the entries back (close, redelivery) and Key_Shared uses it to know which hashes this
consumer still holds.

End of topic: `reached_end_of_topic` tells the client once (Pulsar's Consumer.reachedEndOfTopic),
after the SUBSCRIBE's SUCCESS. The link decides whether its client understands the notice (the
Pulsar front end sends REACHED_END_OF_TOPIC only to clients that handle it; docs/protocol.md §10).

The consumer knows no wire protocol: it talks to its client through a `ConsumerLink`, which the
protocol front end implements (`broker.protocol.connection` frames MESSAGE, ACTIVE_CONSUMER_CHANGE,
REACHED_END_OF_TOPIC and CLOSE_CONSUMER).

What must hold: an entry is in `pending` of at most one consumer of a subscription at a time
(dispatchers enforce it); `send_entry` is the only way an entry reaches the client;
`unacked_count == sum(pending.values())`, and `gate` (the subscription's unacked limit,
`broker.limits.unacked`) counts exactly those messages while the consumer is attached to
it. `msg_redeliver_counter` (messages of pending entries
the client asked to have redelivered) only grows. `msg_out_counter`/`bytes_out_counter` (messages and
entry bytes sent, redeliveries included) only grow; when the consumer leaves, its subscription
keeps them (`Subscription._detach`), so the subscription's counters never go down.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from broker.limits.unacked import UnackedGate
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.subscription import Subscription

class ConsumerLink(Protocol):
    """What a consumer needs from its client's connection (a protocol front end implements it)."""

    def send_message(self, consumer_id: int, partition: int, position: Position, data: bytes,
                     redelivery_count: int, ack_set: list[int] | None) -> None:
        """Deliver one stored entry (`data`, as stored) to the client's consumer `consumer_id`."""
        ...

    def active_consumer_changed(self, consumer_id: int, is_active: bool) -> None:
        """A Failover consumer became (or stopped being) the active one."""
        ...

    def reached_end_of_topic(self, consumer_id: int) -> None:
        """The topic is terminated and the consumer has everything (dropped if the client
        does not understand the notice)."""
        ...

    def consumer_closed(self, consumer_id: int) -> None:
        """The broker closed the consumer: the client subscribes again (seek, topic unload)."""
        ...

    def writable(self) -> bool:
        """False while the client lags (write buffer over its high mark) or the link is closed."""
        ...

    def forget_consumer(self, consumer: Consumer) -> None: ...


class Consumer:
    def __init__(self, link: ConsumerLink, consumer_id: int, name: str, sub_type: int,
                 priority: int, partition: int, label: str) -> None:
        self.link = link
        self.consumer_id = consumer_id
        self.name = name                  # consumer_name from SUBSCRIBE ("" for readers)
        self.sub_type = sub_type          # CommandSubscribe.SubType value
        self.priority = priority          # priority_level; lower is preferred (Pulsar)
        self.partition = partition        # partition index of the topic, -1 if not partitioned
        self.label = label                # unique per broker process; Key_Shared ring label
        self.permits = 0                  # messages the client can still take; may go < 0
        self.pending: dict[Position, int] = {}   # delivered, unacked entry -> its messages
        self.key_ranges: list[tuple[int, int]] = []   # Key_Shared STICKY ranges
        self.subscription: Subscription | None = None  # the Subscription this consumer is attached to
        self.closed = False
        self.announced = False            # SUCCESS was sent; before it, notices are held back
        self._held_active: bool | None = None   # ACTIVE_CONSUMER_CHANGE held until announced
        self.end_of_topic_sent = False    # REACHED_END_OF_TOPIC went out (or was due, unsupported)
        self._held_end_of_topic = False   # REACHED_END_OF_TOPIC held until announced
        self.msg_out_counter = 0
        self.bytes_out_counter = 0
        self.unacked_count = 0            # messages in `pending` (sum of its values)
        self.unacked_messages_max = 0     # block at this many unacked messages; 0: no limit
        self.blocked_on_unacked = False   # at the limit; cleared at half of it
        self.gate: UnackedGate | None = None   # its subscription's unacked limit (Shared/Key_Shared)
        self.msg_redeliver_counter = 0    # messages this consumer asked to have redelivered
        self.connected_since_ms = int(time.time() * 1000)   # wall time it subscribed (stats)

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, id={self.consumer_id})"

    def can_take(self) -> bool:
        """True when the client has permits and the socket is not backed up."""
        return (not self.closed and self.permits > 0 and not self.blocked_on_unacked
                and (self.gate is None or not self.gate.blocked) and self.link.writable())

    def send_entry(self, position: Position, data: bytes, messages: int,
                   redelivery_count: int, ack_set: list[int] | None) -> None:
        """Deliver one entry and record it as pending; costs `messages` permits."""
        self.link.send_message(self.consumer_id, self.partition, position, data, redelivery_count, ack_set)
        self.permits -= messages
        added = messages - self.pending.get(position, 0)
        self.unacked_count += added
        self.pending[position] = messages
        if self.gate is not None:
            self.gate.add(added)
        if 0 < self.unacked_messages_max <= self.unacked_count:
            self.blocked_on_unacked = True
        self.msg_out_counter += messages
        self.bytes_out_counter += len(data)

    def set_active(self, is_active: bool) -> None:
        """Tell a Failover consumer whether it is the active one now (after its SUCCESS)."""
        if self.closed:
            return
        if not self.announced:
            self._held_active = is_active
            return
        self.link.active_consumer_changed(self.consumer_id, is_active)

    def announce(self) -> None:
        """SUCCESS for the SUBSCRIBE went out: release what was held back."""
        self.announced = True
        if self._held_active is not None:
            held, self._held_active = self._held_active, None
            self.set_active(held)
        if self._held_end_of_topic:
            self._held_end_of_topic = False
            self.end_of_topic_sent = False
            self.reached_end_of_topic()

    def reached_end_of_topic(self) -> None:
        """The topic is terminated and this consumer's subscription has everything: tell the
        client once (see the module docstring)."""
        if self.closed or self.end_of_topic_sent:
            return
        self.end_of_topic_sent = True
        if not self.announced:
            self._held_end_of_topic = True
            return
        self.link.reached_end_of_topic(self.consumer_id)

    def close_by_broker(self) -> None:
        """Ask the client to re-subscribe (seek, topic unload); the connection forgets us."""
        if not self.closed:
            self.closed = True
            self.link.consumer_closed(self.consumer_id)
            self.link.forget_consumer(self)

    # --- pending entries --------------------------------------------------------------------

    def forget(self, position: Position) -> bool:
        """Drop one pending entry (acked or taken back); True if this consumer held it."""
        messages = self.pending.pop(position, None)
        if messages is None:
            return False
        self.unacked_count -= messages
        if self.gate is not None:
            self.gate.add(-messages)
        self._maybe_unblock()
        return True

    def forget_through(self, position: Position) -> None:
        """Drop every pending entry at or before `position` (cumulative ack)."""
        for held in [p for p in self.pending if p <= position]:
            self.forget(held)

    def forget_all(self) -> list[Position]:
        """Drop every pending entry; returns them in position order."""
        held = sorted(self.pending)
        self.pending.clear()
        if self.gate is not None:
            self.gate.add(-self.unacked_count)
        self.unacked_count = 0
        self._maybe_unblock()
        return held

    def _maybe_unblock(self) -> None:
        # Pulsar's hysteresis: resume at half the limit, so a consumer at the edge does not
        # flip between blocked and unblocked on every ack.
        if self.blocked_on_unacked and self.unacked_count <= self.unacked_messages_max // 2:
            self.blocked_on_unacked = False

    def set_unacked_max(self, max_messages: int) -> bool:
        """A new limit (its policy changed): blocked at once if over it, released if under half;
        True if this released the consumer."""
        was = self.blocked_on_unacked
        self.unacked_messages_max = max_messages
        if max_messages <= 0 or self.unacked_count <= max_messages // 2:
            self.blocked_on_unacked = False
        elif self.unacked_count >= max_messages:
            self.blocked_on_unacked = True
        return was and not self.blocked_on_unacked

    def count_redelivery(self, positions: list[Position] | None) -> None:
        """The client asked for these (None: all) of its pending entries again: count their
        messages (Pulsar's msgRedeliver counts at the request, before the entries go back)."""
        if positions is None:
            self.msg_redeliver_counter += self.unacked_count
        else:
            self.msg_redeliver_counter += sum(self.pending.get(p, 0) for p in positions)

    def unacked_messages(self) -> int:
        return self.unacked_count
