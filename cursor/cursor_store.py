"""Where durable cursors live: one metadata-store key per cursor.

Layout: `/managed-ledgers/<ml name>/cursors/<cursor name>` (the managed ledger's own key is
`ledger.ml_metadata.ml_path(name)`; cursors are its `cursors/` children), value = `cursor.codec`
bytes (magic, version, zlib of a JSON header plus run-optimised roaring bitmaps). Cursor names
are escaped into one path segment (`%XX` for every byte outside `[A-Za-z0-9_.:=@+-]`), as the
managed ledger escapes its name, so subscription names with `/` fit.

Why a metadata-store row and not a cursor ledger on bookies: the state is small by construction
(it grows with ack holes, bounded by `cursor_state_bytes_max`, default 4 MiB, under the store's
`metadata_value_bytes_max` when that is raised to match), and one row is one atomic write.

Ownership and fencing (as `ledger.ml_open.take_ownership` does for the managed ledger): opening a
cursor draws a fresh writer token (`new_writer_token`) and *claims* the key: it reads the value
and writes it back carrying the token, by compare-and-set, retrying lost races (opening always
wins over the owner being replaced), and starts from the state it wrote. That bumps the version,
so a stale owner's next save loses its compare-and-set. Every save passes the version it last
read or wrote; after a lost one the key is re-read: if the stored value carries our own token it
is our own earlier write whose reply was lost (or an admin touch of our value), and we write once
more over its version; any other token (or none: written by older code) means another owner has
the cursor: `CursorFenced`, and the cursor stops persisting (`ManagedCursor`). A stale owner
therefore never overwrites the new owner's acks, nor undoes its reset or seek. Deleting a cursor
(unsubscribe) is fenced the same way. Values without a token (written before tokens existed)
load normally and get one at the claim.

Deleting a managed ledger's key requires deleting its cursors first (`delete_all`). Given a
`cursor.cursor_writer.CursorWriter`, saves of existing keys ride its group transactions (same
compare-and-set per key, one commit for many cursors).

The store may be the synchronous `MetadataStore` (calls run in a worker thread) or an async one
whose methods are coroutines (awaited directly).
"""

from __future__ import annotations

import logging
import re
import secrets

from common import retry
from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config, default_config
from common.errors import AlreadyExists, BadVersion, CursorFenced, CursorNotFound, InvalidArgument, NotFound
from cursor import metrics
from cursor.codec import CursorSnapshot, decode, encode, writer_of
from cursor.cursor_writer import CursorWriter
from cursor.managed_cursor import ManagedCursor
from ledger.ml_metadata import ml_path
from ledger.position import LATEST, Position
from ledger.types import LedgerView
from metadata.api import AsyncStore

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[A-Za-z0-9_.:=@+-]")
# Lost races while taking a cursor over, then CursorFenced.
_CLAIM_RETRY = retry.Retry("cursor.claim", retry_on=BadVersion, wait=retry.linear(0.01), attempts_max=20)
# Writes over our own (lost-reply) value, then the last BadVersion.
_OVERWRITE_RETRY = retry.Retry("cursor.overwrite_own", retry_on=BadVersion, wait=retry.no_wait(), attempts_max=3)


def new_writer_token() -> str:
    """A token unique to one opening of one cursor by one owner."""
    return secrets.token_hex(8)


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

    def __init__(self, metadata: AsyncStore, ml_name: str, writer: CursorWriter | None = None) -> None:
        self.metadata = metadata
        self.ml_name = ml_name
        self.writer = writer  # group commit shared by the broker's cursors; None: one put each
        self.prefix = f"{ml_path(ml_name)}/cursors"
        self._versions: dict[str, int] = {}  # cursor name -> version last read or written
        self._paths: dict[str, str] = {}     # cursor name -> its key (escaped once, not per persist)

    def path(self, cursor_name: str) -> str:
        path = self._paths.get(cursor_name)
        if path is None:
            path = self._paths[cursor_name] = f"{self.prefix}/{escape_segment(cursor_name)}"
        return path

    async def claim(self, cursor_name: str, writer: str) -> tuple[CursorSnapshot, int] | None:
        """Take the cursor over for `writer`: read it and write it back carrying the token by
        compare-and-set, retrying lost races. The snapshot as written and its size in bytes;
        None if there is no such cursor."""
        path = self.path(cursor_name)

        async def attempt() -> tuple[CursorSnapshot, int] | None:
            found = await self.metadata.get(path)
            if found is None:
                self._versions.pop(cursor_name, None)
                return None
            snapshot = decode(found.value)
            snapshot.writer = writer
            value = encode(snapshot)
            try:  # BadVersion: the owner being replaced wrote meanwhile, take its newer state
                self._versions[cursor_name] = await self._put(path, value, found.version)
            except NotFound:
                self._versions.pop(cursor_name, None)
                return None
            return snapshot, len(value)

        return await _CLAIM_RETRY.call_async(attempt, give_up=lambda _: CursorFenced(
            "could not take the cursor over: its value kept changing", ml=self.ml_name, cursor=cursor_name))

    async def save(self, cursor_name: str, value: bytes, writer: str | None) -> None:
        """Write by compare-and-set on the version last seen (create if never seen). `writer` is
        the token inside `value`; a lost compare-and-set over a value of another writer is
        `CursorFenced`, never an overwrite."""
        version = self._versions.get(cursor_name)
        path = self.path(cursor_name)
        if version is None:
            self._versions[cursor_name] = await self.metadata.create(path, value)
            return
        current = version
        lost: BadVersion | None = None

        async def attempt() -> None:
            nonlocal current, lost
            if lost is not None:
                ours = await self._version_if_ours(cursor_name, writer, lost)
                if ours is None:  # deleted behind us: never re-create a dropped subscription
                    raise CursorFenced("the cursor was deleted by another owner", ml=self.ml_name,
                                       cursor=cursor_name) from None
                current = ours
            try:
                self._versions[cursor_name] = await self._put(path, value, current)
            except BadVersion as exc:
                metrics.CURSOR_PERSIST_CONFLICTS_TOTAL += 1
                lost = exc
                raise

        await _OVERWRITE_RETRY.call_async(attempt, about=f"{self.ml_name}/{cursor_name}")

    async def _put(self, path: str, value: bytes, version: int) -> int:
        if self.writer is not None:
            return await self.writer.put(path, value, version)
        return await self.metadata.put(path, value, expected_version=version)

    async def _version_if_ours(self, cursor_name: str, writer: str | None,
                               lost: BadVersion) -> int | None:
        """After a lost compare-and-set: the stored version if the stored value carries our own
        token (our earlier write whose reply was lost); None if the key is gone; `CursorFenced`
        if another owner wrote it."""
        found = await self.metadata.get(self.path(cursor_name))
        if found is None:
            return None
        stored = writer_of(found.value)
        if writer is None or stored != writer:
            raise CursorFenced("another owner has taken the cursor over", ml=self.ml_name,
                               cursor=cursor_name, ours=writer, theirs=stored) from lost
        log.info("cursor %s/%s: version moved behind us (%s) but the stored value is our own "
                 "write (a lost reply): writing over version %d", self.ml_name, cursor_name,
                 lost, found.version)
        return found.version

    async def delete_owned(self, cursor_name: str, writer: str | None) -> None:
        """Delete the key by compare-and-set, as its owner `writer` (fenced like `save`)."""
        version = self._versions.get(cursor_name)
        lost: BadVersion | None = None

        async def attempt() -> None:
            nonlocal version, lost
            if lost is not None:
                version = await self._version_if_ours(cursor_name, writer, lost)
                if version is None:
                    raise CursorNotFound("no such cursor", ml=self.ml_name, cursor=cursor_name) from None
            try:
                await self.metadata.delete(self.path(cursor_name), expected_version=version)
            except NotFound:
                raise CursorNotFound("no such cursor", ml=self.ml_name, cursor=cursor_name) from None
            except BadVersion as exc:
                lost = exc
                raise

        await _OVERWRITE_RETRY.call_async(attempt, about=f"{self.ml_name}/{cursor_name}")
        self._versions.pop(cursor_name, None)

    async def delete(self, cursor_name: str) -> None:
        """Delete the key whatever its version (dropping a whole managed ledger)."""
        try:
            await self.metadata.delete(self.path(cursor_name))
        except NotFound:
            raise CursorNotFound("no such cursor", ml=self.ml_name, cursor=cursor_name) from None
        self._versions.pop(cursor_name, None)

    async def names(self) -> list[str]:
        return [unescape_segment(s) for s in await self.metadata.children(self.prefix)]

    async def delete_all(self) -> None:
        for name in await self.names():
            await self.delete(name)

    # ---- cursors ---------------------------------------------------------------------------

    async def open_cursor(self, view: LedgerView, cursor_name: str, *, start: Position = LATEST,
                          clock: Clock = SYSTEM_CLOCK, config: Config | None = None) -> ManagedCursor:
        """The durable cursor `cursor_name`: loaded (and claimed) if persisted, else created
        reading from `start` (EARLIEST / LATEST / a position) and persisted at once."""
        cursor = await self.load_cursor(view, cursor_name, clock=clock, config=config)
        if cursor is not None:
            return cursor
        config = config or default_config()
        cursor = ManagedCursor.starting_at(cursor_name, view, start, durable=True, store=self,
                                           clock=clock, writer_token=new_writer_token(),
                                           **_limits(config))
        try:
            await cursor.flush(force=True)  # a new cursor is written at once, so a restart finds it
        except AlreadyExists:  # created by another opener since we looked: take it over
            cursor = await self.load_cursor(view, cursor_name, clock=clock, config=config)
            if cursor is None:
                raise CursorNotFound("cursor created and deleted while opening", ml=self.ml_name,
                                     cursor=cursor_name) from None
        return cursor

    async def load_cursor(self, view: LedgerView, cursor_name: str, *, clock: Clock = SYSTEM_CLOCK,
                          config: Config | None = None) -> ManagedCursor | None:
        """The persisted cursor, claimed for a fresh writer token (which fences out any previous
        owner); None if there is none."""
        writer = new_writer_token()
        claimed = await self.claim(cursor_name, writer)
        if claimed is None:
            return None
        snapshot, state_bytes = claimed
        return ManagedCursor(cursor_name, view, mark_delete_position=snapshot.mark_delete,
                             durable=True, store=self, clock=clock, snapshot=snapshot,
                             writer_token=writer, state_bytes=state_bytes,
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
        await cursor.close(flush=False)
        await self.delete_owned(cursor.name, cursor.writer_token)


def _limits(config: Config) -> dict[str, int]:
    return {"persist_interval_ms": config.cursor_persist_interval_ms,
            "state_bytes_max": config.cursor_state_bytes_max}
