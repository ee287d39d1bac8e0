"""Writes made while one batch of inbound events is handled leave as one system call per connection.

uvloop sends each `transport.write` at once: a system call, which on loopback also runs the
receiver's side of TCP. When one bookie answer completes entries of many topics, the receipts
(and whatever else those completions write) would go out one system call each, most of them to
the same few client connections. Inside a `begin()`/`end()` scope a `Corkable` connection keeps
what it is asked to write; at the outermost `end()` each connection that holds something writes
it all with one `writelines` (one writev).

What must hold:
- Bytes leave in the order they were written, per connection (a connection holds a list, and
  writes nothing directly while it holds something).
- Nothing is held past the scope: `end()` flushes every holder, even when a flush raises
  (scopes are opened and closed in one synchronous call, so nothing else runs in between).
- A connection that closes inside a scope flushes what it holds first (`Corkable.flush_corked`).
"""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Corkable(Protocol):
    def flush_corked(self) -> None: ...


class _Scope:
    __slots__ = ("depth", "holders")

    def __init__(self) -> None:
        self.depth = 0                     # > 0 while a scope is open
        self.holders: list[Corkable] = []  # connections holding writes, in first-write order


scope = _Scope()


def begin() -> None:
    scope.depth += 1


def end() -> None:
    scope.depth -= 1
    if scope.depth or not scope.holders:
        return
    holders, scope.holders = scope.holders, []
    for holder in holders:
        try:
            holder.flush_corked()
        except Exception:
            log.exception("flushing held writes failed")


def hold(holder: Corkable) -> None:
    """`holder` has begun holding writes in the open scope: flush it at the scope's end."""
    scope.holders.append(holder)
