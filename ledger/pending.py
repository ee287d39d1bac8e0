"""The write pipeline's bookkeeping: which adds are in flight and which bookies acknowledged them.

Sans-IO: `AddPipeline` never touches a socket. The write handle tells it "bookie i acked entry e"
and it answers with the adds that are now complete. An add completes when (a) Qa bookies of its
write set acknowledged it and (b) every lower entry completed; completion order is entry order,
and the last add confirmed (LAC) is the highest completed entry.

Adds that would exceed `in_flight_max` are held in a FIFO (`unsent`) and released one per
completion, so entry ids are still assigned in call order. The FIFO itself is bounded by
`queued_max`; past it, `add()` raises LimitExceeded (backpressure, never silent growth).

What must hold:
- LAC only moves forward, one entry at a time, and never past an entry short of Qa acks.
- An ack counts only from a bookie of the entry's current write set (ensemble changes reset
  the replaced index via `forget_index`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from common.errors import LimitExceeded
from common.invariant import invariant
from ledger.striping import write_set

if TYPE_CHECKING:
    import asyncio  # for annotations only: this module runs no loop

    from common.completion import Completion


@dataclass(eq=False)
class PendingAdd:
    entry_id: int
    payload: bytes
    future: asyncio.Future[int] | Completion   # set to the entry id once Qa bookies acked it
    deadline_s: float                  # monotonic time after which the add fails
    acked: set[int] = field(default_factory=set)   # ensemble indexes that acknowledged
    sent: bool = False                 # handed to the bookies (False while queued in `unsent`)


class AddPipeline:
    def __init__(self, ensemble_size: int, write_quorum: int, ack_quorum: int, *,
                 in_flight_max: int, queued_max: int, next_entry_id: int = 0) -> None:
        self.ensemble_size = ensemble_size
        self.write_quorum = write_quorum
        self.ack_quorum = ack_quorum
        self.in_flight_max = in_flight_max
        self.queued_max = queued_max
        self.next_entry_id = next_entry_id       # id the next add gets
        self.lac = next_entry_id - 1             # last add confirmed; -1 = none
        self.confirmed_bytes = 0                 # sum of payload sizes of entries 0..lac
        self.pending: dict[int, PendingAdd] = {}  # every assigned, not completed add, by entry id
        self.unsent: deque[PendingAdd] = deque()  # assigned but held back by in_flight_max
        self.in_flight = 0                        # sent and not completed

    def add(self, payload: bytes, future: asyncio.Future[int] | Completion, deadline_s: float) -> PendingAdd | None:
        """Assign the next entry id. Returns the add if it may be sent now, None if queued."""
        if len(self.unsent) >= self.queued_max:
            raise LimitExceeded("ledger add queue is full", queued=len(self.unsent))
        add = PendingAdd(self.next_entry_id, payload, future, deadline_s)
        self.next_entry_id += 1
        self.pending[add.entry_id] = add
        if self.in_flight < self.in_flight_max and not self.unsent:
            add.sent = True
            self.in_flight += 1
            return add
        self.unsent.append(add)
        return None

    def write_set(self, entry_id: int) -> list[int]:
        return write_set(entry_id, self.ensemble_size, self.write_quorum)

    def on_ack(self, entry_id: int, bookie_index: int, *, hold: bool = False) -> list[PendingAdd]:
        """Record an ack; return the adds completed by it, in entry order. With `hold` (an
        ensemble change is under way) the ack is recorded but nothing completes yet."""
        add = self.pending.get(entry_id)
        if add is None or bookie_index not in self.write_set(entry_id):
            return []
        add.acked.add(bookie_index)
        return [] if hold else self.advance()

    def advance(self) -> list[PendingAdd]:
        """Complete every add at the head that has its ack quorum."""
        done = []
        while True:
            add = self.pending.get(self.lac + 1)
            if add is None or len(add.acked) < self.ack_quorum:
                break
            invariant(add.sent, "only sent adds complete", entry=add.entry_id)
            del self.pending[add.entry_id]
            self.lac = add.entry_id
            self.confirmed_bytes += len(add.payload)
            self.in_flight -= 1
            done.append(add)
        return done

    def release(self) -> list[PendingAdd]:
        """Adds that may be sent now that completions freed in-flight room."""
        out = []
        while self.unsent and self.in_flight < self.in_flight_max:
            add = self.unsent.popleft()
            add.sent = True
            self.in_flight += 1
            out.append(add)
        return out

    def forget_index(self, bookie_index: int) -> list[PendingAdd]:
        """The bookie at `bookie_index` was replaced: drop its acks of uncompleted entries and
        return the sent adds whose write set includes it (they must be resent there)."""
        out = []
        for add in self.pending.values():
            if add.sent and bookie_index in self.write_set(add.entry_id):
                add.acked.discard(bookie_index)
                out.append(add)
        return out

    def oldest(self) -> PendingAdd | None:
        return self.pending.get(self.lac + 1)

    def drain_all(self) -> list[PendingAdd]:
        """Remove and return every uncompleted add (the handle is failing them)."""
        out = sorted(self.pending.values(), key=lambda a: a.entry_id)
        self.pending.clear()
        self.unsent.clear()
        self.in_flight = 0
        return out
