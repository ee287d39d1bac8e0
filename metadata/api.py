"""The MetadataStore interface: Strata's ZooKeeper.

Every component that needs shared, versioned state (bookie registration, ledger metadata,
managed-ledger lists, cursors, topic ownership, policies) goes through this interface. It has
one suite of conformance tests that every backend (SQLite, PostgreSQL) must pass.

Paths look like `/ledgers/00000000000000000042`: they start with `/`, have no empty segment and
no trailing `/`, and use only `[A-Za-z0-9_.:=@+%-]` in segments. A key's `version` starts at 1
on create and goes up by one on every put; compare-and-set compares it. Parents are implicit
(as in Pulsar): `/a/b/c` may exist without `/a/b`, and `children("/a")` is then `["b"]`; the
root `/` is a valid prefix for `children`, `list_prefix`, `delete_recursive` and `watch`.

What must hold:
- A version is won at most once: two puts with the same expected version cannot both succeed.
- `next_id()` never returns the same id twice for a name, across restarts and processes.
- An ephemeral key lives only while its session's lease is renewed; it is gone within
  lease + ~1 s after the owner dies, and at once when the session closes.
- A watcher sees every change under its prefix, in commit order, within about 1 s.
- A stalled owner never writes after its lease. `lease_valid()` is True only while the local
  monotonic clock is before (start of the last successful renewal) + lease - lease/10; the
  database's expiry was set from the wall clock read at that same start, so by the local clock
  the lease ends at least lease/10 before any other store may reap it (clocks agreeing to well
  within lease/10, NTP). While it is False every write (create, put, put_many, delete,
  delete_recursive, next_id) raises `LeaseLost`, checked before the transaction and again inside
  it, under the write lock, just before commit: a process frozen (SIGSTOP, a long GC, a paused
  VM) past its lease has its first write after it refused, whether or not the keeper has run
  since (frozen after that last check it holds the write lock, so no other store can reap it
  or take its keys before that commit). Reads are always allowed. Once the session was reaped
  (EXPIRED) it stays invalid until `new_session()`; an ephemeral create then raises
  `SessionExpired`.
- Session events (`SessionEvent`), each to every listener, in order: LEASE_LOST when the lease
  goes from valid to invalid (noticed by the store's lease thread within ~0.1 s, or by a refused
  write), LEASE_REGAINED when a renewal succeeds after LEASE_LOST and the session still exists,
  EXPIRED once when the session row is found gone (LEASE_LOST comes first if it had not yet).
  `new_session()` fires nothing: the caller knows. Listeners run on the store's own threads (or
  the thread of the refused write) and must return quickly; `AsyncStore` listeners run on the
  event loop.

Two flavours of the one contract: `MetadataStore` (blocking; `SqlMetadataStore` implements it)
and `AsyncStore` (the same calls as coroutines; `metadata.aio.AsyncMetadataStore`
implements it by running the blocking store in a thread pool). asyncio code (ledger, cursor,
broker) takes the async flavour and calls it one way; it never sniffs which one it was given.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from common.errors import StrataError


@dataclass(frozen=True)
class Versioned:
    """A value with its version (1 = as created) and, for ephemeral keys, the owner session."""

    value: bytes
    version: int
    ephemeral_owner: str | None = None


class EventKind(enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


@dataclass(frozen=True)
class WatchEvent:
    kind: EventKind
    path: str
    # The value and version after the change; None/0 for DELETED.
    value: bytes | None
    version: int


class SessionEvent(enum.Enum):
    """A change of this store's session lease (see "What must hold" above)."""

    LEASE_LOST = "lease_lost"          # valid -> invalid by the local clock: writes are refused
    LEASE_REGAINED = "lease_regained"  # a renewal succeeded after LEASE_LOST: writes work again
    EXPIRED = "expired"                # the session row was reaped: its ephemeral keys are gone


class Watch(Protocol):
    def cancel(self) -> None: ...


class MetadataStore(Protocol):
    """Synchronous API; `metadata.aio.AsyncMetadataStore` wraps it for asyncio callers."""

    session_id: str

    def get(self, path: str) -> Versioned | None:
        """The value and version at `path`, or None if absent."""
        ...

    def create(self, path: str, value: bytes, *, ephemeral: bool = False) -> int:
        """Create `path`; raises AlreadyExists. Returns the version (1)."""
        ...

    def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> int:
        """Write `path`. With `expected_version`, compare-and-set: raises BadVersion if the stored
        version differs (or NotFound if absent); `expected_version=-1` means "must not exist yet"
        (BadVersion if it does). Without it, create or overwrite. Returns the new version."""
        ...

    def put_many(self, ops: Sequence[tuple[str, bytes, int | None]], *,
                 watched: bool = True) -> list[int | StrataError]:
        """Several `put(path, value, expected_version=...)` in one transaction (one commit): each
        op is checked on its own, so one op's BadVersion/NotFound is returned in its slot, leaves
        that key untouched, and does not undo the others. Results are in the order of `ops`.
        `watched=False`: the writes are not in the change log, so no watch ever sees them (for
        state written often that nobody watches: cursor positions; a reader reads the key)."""
        ...

    def delete(self, path: str, *, expected_version: int | None = None) -> None:
        """Delete `path`; raises NotFound if absent, BadVersion on a version mismatch, NotEmpty
        if keys exist below it."""
        ...

    def delete_recursive(self, path: str) -> int:
        """Delete `path` and every key below it in one transaction; returns how many."""
        ...

    def list_prefix(self, path: str, *, limit: int | None = None) -> list[tuple[str, Versioned]]:
        """`(path, Versioned)` of `path` and every key below it, sorted, at most `limit` (None,
        or more than the store's `metadata_list_prefix_keys_max`: that setting)."""
        ...

    def children(self, path: str) -> list[str]:
        """Names (last segment only) of the direct children of `path`, sorted."""
        ...

    def next_id(self, name: str) -> int:
        """The next id of a monotonically increasing sequence named `name` (first id: 1)."""
        ...

    def watch(self, prefix: str, callback: Callable[[WatchEvent], None]) -> Watch:
        """Call `callback` for every change to `prefix` or any path under it, in order, from a
        background thread, starting with changes committed after this call."""
        ...

    def lease_valid(self) -> bool:
        """True while this session's lease holds by the local clock: writes are allowed."""
        ...

    def add_session_listener(self, callback: Callable[[SessionEvent], None]) -> None:
        """Call `callback(event)` for every later `SessionEvent` of this store."""
        ...

    def new_session(self) -> str:
        """Open a fresh session (new id, renewed from now on; the old one, if still alive, is
        ended and its ephemeral keys deleted) and return its id. Used after EXPIRED."""
        ...

    def close(self) -> None:
        """Stop watches, end the session (its ephemeral keys are deleted), release the DB."""
        ...


class AsyncStore(Protocol):
    """`MetadataStore` for asyncio callers: the same calls, same semantics, awaited (the lease
    calls `lease_valid`, `add_session_listener` and `new_session` are plain methods).

    `watch` callbacks run on the event loop that called `watch`."""

    @property
    def session_id(self) -> str: ...

    async def get(self, path: str) -> Versioned | None: ...

    async def create(self, path: str, value: bytes, *, ephemeral: bool = False) -> int: ...

    async def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> int: ...

    async def put_many(self, ops: Sequence[tuple[str, bytes, int | None]], *,
                       watched: bool = True) -> list[int | StrataError]: ...

    async def delete(self, path: str, *, expected_version: int | None = None) -> None: ...

    async def delete_recursive(self, path: str) -> int: ...

    async def list_prefix(self, path: str, *, limit: int | None = None) -> list[tuple[str, Versioned]]: ...

    async def children(self, path: str) -> list[str]: ...

    async def next_id(self, name: str) -> int: ...

    async def watch(self, prefix: str, callback: Callable[[WatchEvent], None]) -> Watch: ...

    def lease_valid(self) -> bool: ...

    def add_session_listener(self, callback: Callable[[SessionEvent], None]) -> None:
        """Like the sync one, but `callback` runs on the event loop that registered it."""
        ...

    def new_session(self) -> str:
        """Blocking (one short write transaction): call it off the loop if that matters."""
        ...

    async def close(self) -> None: ...
