"""Where durable cursors live: one metadata-store key per cursor.

Layout: `/managed-ledgers/<ml name>/cursors/<cursor name>` (the managed ledger's own key is
`ledger.ml_metadata.ml_path(name)`; cursors are its `cursors/` children), value = `cursor.codec`
bytes (magic, version, zlib of a JSON header plus run-optimised roaring bitmaps). Cursor names
are escaped into one path segment (`%XX` for every byte outside `[A-Za-z0-9_.:=@+-]`), as the
managed ledger escapes its name, so subscription names with `/` fit.

Why a metadata-store row and not a cursor ledger on bookies: the state is small by construction
(it grows with ack holes, bounded by `cursor_state_bytes_max`, default 4 MiB, under the store's
`metadata_value_bytes_max` when that is raised to match), one row is one atomic write, and
compare-and-set on its version fences a stale broker: every save passes the version it last
read or wrote, so a broker that lost the topic gets `BadVersion` instead of overwriting the new
owner's acks. A lost compare-and-set is not taken at face value, though: the key is re-read, and
if its mark-delete is not ahead of ours (a rewrite of the same state, an admin touch, our own
earlier write whose reply was lost), we take its version and write once more; only a stored
mark-delete ahead of ours (another owner moved on) or a second loss raises `BadVersion`.
Deleting a managed ledger's key requires deleting its cursors first (`delete_all`). Given a
`cursor.cursor_writer.CursorWriter`, saves of existing keys ride its group transactions (same
compare-and-set per key, one commit for many cursors).

The store may be the synchronous `MetadataStore` (calls run in a worker thread) or an async one
whose methods are coroutines (awaited directly).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from typing import Any

from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config, default_config
from common.errors import BadVersion, CursorNotFound, InvalidArgument, NotFound
from cursor import metrics
from cursor.codec import decode
from cursor.cursor_writer import CursorWriter
from cursor.managed_cursor import ManagedCursor
from ledger.ml_metadata import ml_path
from ledger.position import LATEST, Position
from ledger.types import LedgerView

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[A-Za-z0-9_.:=@+-]")


def escape_segment(name: str) -> str:
    """`name` as one metadata path segment; reversible with `unescape_segment`."""
    if not name:
        raise InvalidArgument("an empty name cannot be a path segment")
    out = []
    for char in name:
        if _SAFE.fullmatch(char):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode())
    text = "".join(out)
    return text.replace(".", "%2E") if text in (".", "..") else text


def unescape_segment(segment: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(segment):
        if segment[i] == "%":
            raw.append(int(segment[i + 1:i + 3], 16))
            i += 3
        else:
            raw.extend(segment[i].encode())
            i += 1
    return raw.decode()


class CursorStore:
    """Load, save and delete the cursors of one managed ledger."""

    def __init__(self, metadata: Any, ml_name: str, writer: CursorWriter | None = None) -> None:
        self.metadata = metadata
        self.ml_name = ml_name
        self.writer = writer  # group commit shared by the broker's cursors; None: one put each
        self.prefix = f"{ml_path(ml_name)}/cursors"
        self._versions: dict[str, int] = {}  # cursor name -> version last read or written

    def path(self, cursor_name: str) -> str:
        return f"{self.prefix}/{escape_segment(cursor_name)}"

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.metadata, method)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def load(self, cursor_name: str) -> bytes | None:
        found = await self._call("get", self.path(cursor_name))
        if found is None:
            self._versions.pop(cursor_name, None)
            return None
        self._versions[cursor_name] = found.version
        return found.value

    async def save(self, cursor_name: str, value: bytes) -> None:
        """Write with compare-and-set on the version last seen (create if never seen)."""
        version = self._versions.get(cursor_name)
        path = self.path(cursor_name)
        if version is None:
            self._versions[cursor_name] = await self._call("create", path, value)
            return
        try:
            self._versions[cursor_name] = await self._put(path, value, version)
        except BadVersion as lost:
            metrics.CURSOR_PERSIST_CONFLICTS_TOTAL += 1
            version = await self._version_to_overwrite(cursor_name, value, lost)
            self._versions[cursor_name] = await self._put(path, value, version)

    async def _put(self, path: str, value: bytes, version: int) -> int:
        if self.writer is not None:
            return await self.writer.put(path, value, version)
        return await self._call("put", path, value, expected_version=version)

    async def _version_to_overwrite(self, cursor_name: str, value: bytes, lost: BadVersion) -> int:
        """After a lost compare-and-set: the stored version, if the stored state is not ahead of
        `value` (same or older mark-delete); else re-raise `lost`, we are not the owner."""
        found = await self._call("get", self.path(cursor_name))
        if found is None:
            raise lost  # deleted behind us: never re-create a dropped subscription
        stored_md, our_md = decode(found.value).mark_delete, decode(value).mark_delete
        if stored_md > our_md:
            raise lost
        log.warning("cursor %s/%s: version moved behind us (%s), stored mark-delete %s is not "
                    "ahead of ours %s: writing once more over version %d",
                    self.ml_name, cursor_name, lost, stored_md, our_md, found.version)
        return found.version

    async def delete(self, cursor_name: str) -> None:
        try:
            await self._call("delete", self.path(cursor_name))
        except NotFound:
            raise CursorNotFound("no such cursor", ml=self.ml_name, cursor=cursor_name) from None
        self._versions.pop(cursor_name, None)

    async def names(self) -> list[str]:
        return [unescape_segment(s) for s in await self._call("children", self.prefix)]

    async def delete_all(self) -> None:
        for name in await self.names():
            await self.delete(name)

    # ---- cursors ---------------------------------------------------------------------------

    async def open_cursor(self, view: LedgerView, cursor_name: str, *, start: Position = LATEST,
                          clock: Clock = SYSTEM_CLOCK, config: Config | None = None) -> ManagedCursor:
        """The durable cursor `cursor_name`: loaded if persisted, else created reading from
        `start` (EARLIEST / LATEST / a position) and persisted at once."""
        cursor = await self.load_cursor(view, cursor_name, clock=clock, config=config)
        if cursor is not None:
            return cursor
        config = config or default_config()
        cursor = ManagedCursor.starting_at(cursor_name, view, start, durable=True, store=self,
                                           clock=clock, **_limits(config))
        cursor._dirty = True  # a new cursor is written at once, so a restart finds it
        await cursor.flush()
        return cursor

    async def load_cursor(self, view: LedgerView, cursor_name: str, *, clock: Clock = SYSTEM_CLOCK,
                          config: Config | None = None) -> ManagedCursor | None:
        value = await self.load(cursor_name)
        if value is None:
            return None
        snapshot = decode(value)
        return ManagedCursor(cursor_name, view, mark_delete_position=snapshot.mark_delete,
                             durable=True, store=self, clock=clock, snapshot=snapshot,
                             **_limits(config or default_config()))

    async def load_all(self, view: LedgerView, *, clock: Clock = SYSTEM_CLOCK,
                       config: Config | None = None) -> dict[str, ManagedCursor]:
        out: dict[str, ManagedCursor] = {}
        for name in await self.names():
            cursor = await self.load_cursor(view, name, clock=clock, config=config)
            if cursor is not None:
                out[name] = cursor
        return out

    async def delete_cursor(self, cursor: ManagedCursor) -> None:
        """Drop a subscription: close the cursor without a last write and delete its key."""
        if cursor._persist_handle is not None:
            cursor._persist_handle.cancel()
            cursor._persist_handle = None
        cursor._dirty = False
        await cursor.close()
        await self.delete(cursor.name)


def _limits(config: Config) -> dict[str, int]:
    return {"persist_interval_ms": config.cursor_persist_interval_ms,
            "state_bytes_max": config.cursor_state_bytes_max}
