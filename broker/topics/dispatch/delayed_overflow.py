"""Delayed entries that did not fit in the delayed index: where they are, and the scan that finds them.

Why. The delayed index (`broker.topics.dispatch.delayed`) is bounded in memory. When it is full, a
dispatcher must not stop reading, or messages that are not delayed would wait behind delayed
ones. So it reads on: a delayed entry that meets a full index is *overflowed* — neither sent nor
indexed, just left unacked in the cursor — and this object remembers two facts about all of them:
`from_position`, the lowest overflowed position, and `due_ms`, a lower bound of their due times.
Nothing else is kept per entry, so memory stays bounded however many overflow.

Finding them again. Every overflowed entry lies in [from_position, read_position): the dispatcher
read past it and nothing else moves it. A **scan** re-reads that range (at most
`broker_delayed_delivery_scan_entries_per_pass` entries per dispatch pass, so normal delivery goes on between steps) and
puts each overflowed entry it meets back where it belongs: into the index if it is not yet due and
the index has room, into the replay set if it is due, else it stays overflowed and the scan notes
its position and due time. When the scan reaches the read position it has seen every overflowed
entry, so its notes become the new `from_position` / `due_ms` (None: none left).

When to scan (`should_scan`): when the index has drained to half (refill it, so later due times
are served from memory) or when `due_ms` has come (an overflowed entry may be due: it must not
wait longer than about a tick). The dispatcher's wake-up timer also looks at `due_ms`. So an
overflowed entry is never delivered early (it is only released by the same due-time check as any
other) and is late by at most a tick plus a scan.

What must hold: every delayed entry that is unacked, not pending, not in replay and not in the
index lies in [from_position, read_position) and has a due time >= due_ms; a rewind or seek that
moves the read position to or before `from_position` makes all of them unread again, and then
this object forgets them (`forget_from`).
"""

from __future__ import annotations

from dataclasses import dataclass

from common.invariant import present
from ledger.position import Position


@dataclass
class Scan:
    """One pass over [from_position, read_position), possibly spread over several dispatch passes."""
    next_position: Position              # the next entry to re-read
    first_out: Position | None = None    # lowest position seen that stays overflowed
    due_ms: int | None = None            # earliest due time among those that stay overflowed

    def stays_out(self, position: Position, due_ms: int) -> None:
        if self.first_out is None or position < self.first_out:
            self.first_out = position
        if self.due_ms is None or due_ms < self.due_ms:
            self.due_ms = due_ms


class DelayedOverflow:
    def __init__(self) -> None:
        self.from_position: Position | None = None   # lowest overflowed entry (None: none)
        self.due_ms: int | None = None               # lower bound of their due times
        self.scan: Scan | None = None                # the scan under way (None: none)
        self.overflowed = 0                          # entries overflowed so far (a counter)
        self.scans = 0                               # scans completed (a counter)

    def __bool__(self) -> bool:
        return self.from_position is not None

    def add(self, position: Position, due_ms: int) -> None:
        """A delayed entry met a full index and was read past."""
        self.overflowed += 1
        if self.from_position is None or position < self.from_position:
            self.from_position = position
        if self.due_ms is None or due_ms < self.due_ms:
            self.due_ms = due_ms

    def should_scan(self, index_room: int, index_capacity: int, now_ms: int) -> bool:
        if self.from_position is None:
            return False
        if self.scan is not None:
            return True
        refill = index_room >= max(1, index_capacity // 2)
        return refill or (self.due_ms is not None and self.due_ms <= now_ms)

    def begin_scan(self) -> Scan:
        if self.scan is None:
            self.scan = Scan(present(self.from_position, "a scan starts only with entries overflowed"))
        return self.scan

    def finish_scan(self) -> None:
        """The scan reached the read position: what it noted is now the whole truth."""
        scan = self.scan
        if scan is None:
            return
        self.from_position, self.due_ms, self.scan = scan.first_out, scan.due_ms, None
        self.scans += 1

    def forget_from(self, read_position: Position) -> None:
        """The read position moved back to `read_position`: entries at or after it are unread
        again (they will be met as new). If that covers every overflowed entry, forget them."""
        if self.from_position is not None and self.from_position >= read_position:
            self.clear()
        elif self.scan is not None and self.scan.next_position >= read_position:
            self.finish_scan()

    def clear(self) -> None:
        self.from_position = self.due_ms = self.scan = None

    def wake_in_ms(self, now_ms: int, tick_ms: int) -> int | None:
        """When the next overflowed entry may be due (rounded up to a tick); None: nothing to wait for."""
        if self.from_position is None or self.due_ms is None:
            return None
        wait = self.due_ms - now_ms
        return 0 if wait <= 0 else -(-wait // tick_ms) * tick_ms
