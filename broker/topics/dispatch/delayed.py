"""Delayed delivery: a time-ordered, bounded index of entries read but not yet due (docs/protocol.md §8.7).

How it works. Shared and Key_Shared dispatchers read entries in position order. An entry whose
metadata carries a `deliver_at_time` later than now (wall clock in ms; the producer computed it
from its own wall clock) is not sent: the dispatcher moves past it and records
(deliver_at_ms, position) here, so later entries keep flowing and a delayed message never holds
back one that is due. `pop_due()` hands back the positions whose time has come, earliest due
first; the dispatcher puts them in its replay set, which goes out before new entries.
`wake_in_ms()` says when to look again, rounded up to the tick (`broker_delayed_delivery_tick_ms`),
so an index full of different due times costs at most one wake-up per tick, and a message is
delivered at most about one tick after it is due. Exclusive and Failover never consult the index:
they deliver at once, as Pulsar does.

A `deliver_at_time` at or before now — which is what a client makes of a negative
`deliver_after` — means "deliver now": `holds()` is False and the entry never enters the index.
It is not an error (Pulsar does the same). A negative `deliver_at_time` on the wire is no time at
all; the producer refuses it with SEND_ERROR before anything is stored (`broker.topics.producer`).

Restart. The index lives in memory and needs no persisting, because it is a function of the stored
entries after mark-delete: a new dispatcher (after a broker restart, a seek, or the subscription
losing its last consumer) reads again from the first unacked entry after mark-delete, and every
delayed entry it meets that is not yet due goes back into the index, with its due time read from
the stored metadata. So a restart never releases the pending delayed messages all at once
(apache/pulsar#20638); it only costs a re-read.

Bound. At most `capacity` entries (`broker_delayed_delivery_entries_max`); `add` past capacity is
a `LimitExceeded`, never silent growth. The dispatcher checks `room()` first and, when the index
is full, reads on: a delayed entry that does not fit is overflowed (left unacked in the cursor,
found again later by a bounded re-scan, `broker.topics.dispatch.delayed_overflow`), so entries that are not
delayed are never held back by a full index, and nothing is dropped.

Policy (the topic's delayedDelivery, `broker.topics.storage_policies`): `tick_ms` is its tickTime;
with `active` False (Pulsar's delayedDeliveryEnabled=false) `holds()` is False for every entry, so
the dispatcher sends delayed messages at once, as Pulsar's dispatcher does when delayed delivery is
off; switching it off live releases what the index held (`pop_all`).

What must hold: a position is handed out by `pop_due` at most once per `add`, and never before its
due time by the injected clock while `active`; `len(self) <= capacity`.
"""

from __future__ import annotations

import heapq

from common.clock import Clock
from common.errors import InvalidArgument, LimitExceeded
from ledger.position import Position

# Heap items left behind by remove() are compacted away once they outnumber live ones this much.
STALE_FACTOR = 2


class DelayedDeliveryIndex:
    def __init__(self, capacity: int, tick_ms: int, clock: Clock) -> None:
        if capacity < 1 or tick_ms < 1:
            raise InvalidArgument("delayed index needs capacity >= 1 and tick_ms >= 1",
                                  capacity=capacity, tick_ms=tick_ms)
        self.capacity = capacity
        self.tick_ms = tick_ms
        self.clock = clock
        self.active = True                            # False: nothing waits (delayed delivery off)
        self._heap: list[tuple[int, Position]] = []   # (due ms, position); may hold stale items
        self._due_at: dict[Position, int] = {}        # live entries: position -> due ms

    def __len__(self) -> int:
        return len(self._due_at)

    def __contains__(self, position: Position) -> bool:
        return position in self._due_at

    def room(self) -> int:
        """How many more entries the index takes before it is full."""
        return self.capacity - len(self._due_at)

    def holds(self, deliver_at_ms: int | None) -> bool:
        """True if an entry with this deliver_at_time must wait (None or not later than now: no)."""
        return self.active and deliver_at_ms is not None and deliver_at_ms > self.clock.wall_ms()

    def add(self, position: Position, deliver_at_ms: int) -> None:
        """Remember a not-yet-due entry; adding one already there just updates its due time."""
        if position not in self._due_at and len(self._due_at) >= self.capacity:
            raise LimitExceeded("delayed delivery index is full", capacity=self.capacity)
        known = position in self._due_at
        self._due_at[position] = deliver_at_ms
        heapq.heappush(self._heap, (deliver_at_ms, position))
        if known:
            self._compact_if_stale()

    def remove(self, position: Position) -> None:
        """Forget an entry (acked or otherwise gone); unknown positions are ignored."""
        if self._due_at.pop(position, None) is not None:
            self._compact_if_stale()

    def remove_through(self, position: Position) -> None:
        """Forget every entry at or before `position` (mark-delete moved past them)."""
        for key in [p for p in self._due_at if p <= position]:
            del self._due_at[key]
        self._compact_if_stale()

    def clear(self) -> None:
        self._heap.clear()
        self._due_at.clear()

    def pop_due(self) -> list[Position]:
        """Positions due now (due time <= now), earliest due first; they leave the index."""
        now = self.clock.wall_ms()
        out: list[Position] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, position = heapq.heappop(heap)
            if self._due_at.get(position) == due:
                del self._due_at[position]
                out.append(position)
        return out

    def pop_all(self) -> list[Position]:
        """Every entry, due or not, earliest due first; the index is empty after."""
        out = [position for _, position in sorted((due, p) for p, due in self._due_at.items())]
        self.clear()
        return out

    def next_due_ms(self) -> int | None:
        """Wall time (ms) of the earliest live entry, None when empty."""
        heap = self._heap
        while heap and self._due_at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def wake_in_ms(self) -> int | None:
        """How long until the next entry is due, rounded up to a whole tick; 0 when one is due
        now; None when the index is empty (nothing to wake for)."""
        due = self.next_due_ms()
        if due is None:
            return None
        wait = due - self.clock.wall_ms()
        if wait <= 0:
            return 0
        return -(-wait // self.tick_ms) * self.tick_ms

    def _compact_if_stale(self) -> None:
        if len(self._heap) > STALE_FACTOR * len(self._due_at) + 64:
            self._heap = [(due, p) for p, due in self._due_at.items()]
            heapq.heapify(self._heap)
