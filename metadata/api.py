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

    def put_many(self, ops: Sequence[tuple[str, bytes, int | None]]) -> list[int | StrataError]:
        """Several `put(path, value, expected_version=...)` in one transaction (one commit): each
        op is checked on its own, so one op's BadVersion/NotFound is returned in its slot, leaves
        that key untouched, and does not undo the others. Results are in the order of `ops`."""
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

    def close(self) -> None:
        """Stop watches, end the session (its ephemeral keys are deleted), release the DB."""
        ...


class AsyncStore(Protocol):
    """`MetadataStore` for asyncio callers: the same calls, same semantics, awaited.

    `watch` callbacks run on the event loop that called `watch`."""

    @property
    def session_id(self) -> str: ...

    async def get(self, path: str) -> Versioned | None: ...

    async def create(self, path: str, value: bytes, *, ephemeral: bool = False) -> int: ...

    async def put(self, path: str, value: bytes, *, expected_version: int | None = None) -> int: ...

    async def put_many(self, ops: Sequence[tuple[str, bytes, int | None]]) -> list[int | StrataError]: ...

    async def delete(self, path: str, *, expected_version: int | None = None) -> None: ...

    async def delete_recursive(self, path: str) -> int: ...

    async def list_prefix(self, path: str, *, limit: int | None = None) -> list[tuple[str, Versioned]]: ...

    async def children(self, path: str) -> list[str]: ...

    async def next_id(self, name: str) -> int: ...

    async def watch(self, prefix: str, callback: Callable[[WatchEvent], None]) -> Watch: ...

    async def close(self) -> None: ...
