"""Position: where an entry lives, `(ledger_id, entry_id)`.

Positions order lexicographically, which is the order entries were appended in a managed ledger
(ledger ids only grow over a topic's life). `entry_id == -1` names the point just before the
first entry of a ledger: a cursor whose mark-delete is `(L, -1)` has acked nothing in L.
"""

from __future__ import annotations

from typing import NamedTuple


class Position(NamedTuple):
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    @classmethod
    def parse(cls, text: str) -> Position:
        ledger, _, entry = text.partition(":")
        return cls(int(ledger), int(entry))


# Earliest/latest markers as Pulsar's clients send them (signed 64-bit view).
EARLIEST = Position(-1, -1)
LATEST = Position(2**63 - 1, 2**63 - 1)
