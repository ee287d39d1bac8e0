"""One compaction run: the latest value per key, written as a new compacted ledger.

Two phases over the same input, as Pulsar's TwoPhaseCompactor:
1. **Keys.** Read the previous compacted view (its surviving members) and then the topic's
   entries after the previous horizon up to the new horizon (the topic's last entry when the
   run starts), and note for every key the position (entry, batch index) of its latest message.
   A tombstone (`broker.compaction.format`) removes the key. Messages without a key are counted
   and left out. A chunked message counts once its last chunk is read with all the chunks
   before it (`_Chunks`); its key's latest is then the set of its chunks' positions.
2. **Write.** Read the same input again and write to a new ledger every entry that still holds
   the latest message of some key, with the mask of the batch members that do, and every chunk
   of a key's latest message when that message is chunked.

The input of an incremental run is the previous compacted ledger plus the tail after its
horizon, so a run reads what changed, not the whole history. The new ledger's id goes to `on_ledger` (the caller
records it as pending) before anything is written to it; the ledger is closed before the run
returns; installing it (the record, deleting the old ledger) is the caller's
(`broker.compaction.topic_compaction`). On any failure the new ledger is deleted (best effort)
and the previous view stays as it was.

Bounds: at most `compaction_keys_max` distinct keys are held (CompactionTooManyKeys past it),
and at most CHUNKED_IN_PROGRESS_MAX chunked messages whose last chunk is not read yet (the
oldest is dropped: a message whose producer gave up is never complete);
at most `compaction_entries_in_flight_max` adds are in flight on the new ledger; entries are
read `READ_BATCH_ENTRIES` at a time.

What must hold: the view written has, for every key whose latest message up to the horizon is
not a tombstone, exactly that message, and nothing else; entries keep the topic's order.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from broker.compaction import format as fmt
from broker.compaction.view import CompactedView
from common.config import Config
from common.errors import CompactionTooManyKeys, StrataError
from ledger.client import LedgerClient
from ledger.handle import WriteHandle
from ledger.position import Position

log = logging.getLogger(__name__)

READ_BATCH_ENTRIES = 256
CHUNKED_IN_PROGRESS_MAX = 10_000     # chunked messages being assembled at once in phase one
COMPACTED_LEDGER_PROPERTY = "compacted-topic"   # ledger property naming the topic it compacts


@dataclass
class Progress:
    """What a running compaction has done (the CLI's progress bar)."""
    entries_done: int = 0       # entries read in both phases so far
    entries_total: int = 0      # entries both phases read (0 until known)


@dataclass
class CompactionResult:
    horizon: Position                 # last topic position covered
    handle: WriteHandle | None        # the new compacted ledger (closed); None: no key at all
    entries: int = 0                  # entries written
    size_bytes: int = 0               # bytes written (headers included)
    keys: int = 0                     # live keys in the view
    messages_read: int = 0            # messages of the input (previous view + tail)
    keyless_messages: int = 0         # messages without a key (left out)
    tombstones: int = 0               # tombstones seen in the tail
    bytes_read: int = 0               # entry bytes of the input, phase one
    notes: list[str] = field(default_factory=list)


def _pack(position: Position, index: int) -> int:
    """A (position, batch index) as one int (a dict of ints is small next to one of tuples)."""
    return (position.ledger_id << 64) | (position.entry_id << 24) | index


class _Chunks:
    """Phase one's chunked messages: the chunks read so far of each message (by uuid), and, for
    each complete one, its chunks' positions by the position of its last chunk."""

    def __init__(self) -> None:
        self.assembling: dict[str, list[int]] = {}     # uuid -> packed positions of chunks 0..n
        self.complete: dict[int, list[int]] = {}       # last chunk's packed position -> all chunks

    def add(self, uuid: str, chunk_id: int, count: int, packed: int) -> int | None:
        """Note one chunk; the packed position of the message's last chunk once it is complete."""
        if chunk_id == 0:
            self.assembling.pop(uuid, None)
            self.assembling[uuid] = []
            if len(self.assembling) > CHUNKED_IN_PROGRESS_MAX:
                self.assembling.pop(next(iter(self.assembling)))
        parts = self.assembling.get(uuid)
        if parts is None or chunk_id < len(parts):      # a chunk 0 never seen, or a resent chunk
            return None
        if chunk_id > len(parts):                       # a chunk missing: the message is lost
            del self.assembling[uuid]
            return None
        parts.append(packed)
        if chunk_id < count - 1:
            return None
        del self.assembling[uuid]
        self.complete[packed] = parts
        return packed

    def kept(self, latest: dict[str, int]) -> set[int]:
        """Packed positions of every chunk of a message that is still its key's latest."""
        return {part for last in latest.values() if last in self.complete for part in self.complete[last]}


async def _tail(ml, start: Position, horizon: Position) -> AsyncIterator[tuple[Position, bytes]]:
    """The topic's entries from `start` through `horizon`."""
    position = start
    while position <= horizon:
        entries = await ml.read(position, READ_BATCH_ENTRIES)
        if not entries:
            return
        for entry in entries:
            if entry.position > horizon:
                return
            yield entry.position, entry.data
        position = ml.next_position(entries[-1].position)


async def _input(ml, previous: CompactedView | None, start: Position,
                 horizon: Position) -> AsyncIterator[tuple[Position, list[int] | None, bytes, bool]]:
    """(position, mask, data, from the previous view) over the whole input, in topic order."""
    if previous is not None:
        async for position, mask, data in previous.read_all(READ_BATCH_ENTRIES):
            yield position, mask, data, True
    async for position, data in _tail(ml, start, horizon):
        yield position, None, data, False


class Compactor:
    def __init__(self, ml, client: LedgerClient, config: Config, previous: CompactedView | None,
                 progress: Progress, on_ledger: Callable[[int], Awaitable[None]] | None = None) -> None:
        self.ml = ml
        self.on_ledger = on_ledger     # awaited with the new ledger's id before anything is written to it
        self.client = client
        self.config = config
        self.previous = previous
        self.progress = progress
        self.horizon = ml.last_confirmed
        after = previous.horizon if previous is not None else None
        self.start = ml.first_position if after is None else max(ml.next_position(after), ml.first_position)

    async def run(self) -> CompactionResult:
        result = CompactionResult(self.horizon, None)
        before_start = Position(self.start.ledger_id, self.start.entry_id - 1)
        tail_entries = self.ml.entries_between(before_start, self.horizon) if self.start <= self.horizon else 0
        previous_entries = self.previous.entries if self.previous is not None else 0
        self.progress.entries_total = 2 * (previous_entries + tail_entries)
        chunks = _Chunks()
        latest = await self._phase_one(result, chunks)
        if not latest and (self.previous is None or self.previous.entries == 0):
            if result.messages_read == 0:
                result.notes.append(f"nothing to compact: no message up to {self.horizon}")
            elif result.keyless_messages == result.messages_read:
                result.notes.append(f"nothing to compact: none of the {result.messages_read} message(s) "
                                    f"up to {self.horizon} has a key")
            # else: every key was tombstoned; the usual summary says so (0 keys, the tombstones)
            self.progress.entries_done = self.progress.entries_total
            return result
        result.keys = len(latest)
        await self._phase_two(latest, chunks.kept(latest), result)
        return result

    async def _phase_one(self, result: CompactionResult, chunks: _Chunks) -> dict[str, int]:
        latest: dict[str, int] = {}
        keys_max = self.config.compaction_keys_max
        async for position, mask, data, _old in _input(self.ml, self.previous, self.start, self.horizon):
            self.progress.entries_done += 1
            result.bytes_read += len(data)
            members = fmt.entry_keys(data)
            if not members:
                self._chunk(position, data, chunks, latest, result)
                continue
            for index, (key, tombstone) in enumerate(members):
                if not fmt.mask_keeps(mask, index):
                    continue
                result.messages_read += 1
                if key is None:
                    result.keyless_messages += 1
                elif tombstone:
                    result.tombstones += 1
                    latest.pop(key, None)
                else:
                    latest[key] = _pack(position, index)
                    if len(latest) > keys_max:
                        raise CompactionTooManyKeys("more distinct keys than compaction_keys_max",
                                                    keys_max=keys_max, topic=self.ml.name)
        return latest

    @staticmethod
    def _chunk(position: Position, data: bytes, chunks: _Chunks, latest: dict[str, int],
               result: CompactionResult) -> None:
        """Phase one for an entry without members: a chunk (a marker is left out)."""
        chunk = fmt.chunk_of(data)
        if chunk is None:
            return
        key, uuid, chunk_id, count = chunk
        last = chunks.add(uuid, chunk_id, count, _pack(position, 0))
        if last is None:
            return
        result.messages_read += 1
        if key is None:
            result.keyless_messages += 1
        else:
            latest[key] = last

    async def _phase_two(self, latest: dict[str, int], kept_chunks: set[int], result: CompactionResult) -> None:
        c = self.config
        handle = await self.client.create_ledger(c.ledger_ensemble_size, c.ledger_write_quorum, c.ledger_ack_quorum,
                                                 properties={COMPACTED_LEDGER_PROPERTY: self.ml.name})
        in_flight: deque[asyncio.Future] = deque()
        try:
            if self.on_ledger is not None:
                await self.on_ledger(handle.ledger_id)
            async for position, mask, data, _old in _input(self.ml, self.previous, self.start, self.horizon):
                self.progress.entries_done += 1
                members = fmt.entry_keys(data)
                kept = [key is not None and not tombstone and fmt.mask_keeps(mask, index)
                        and latest.get(key) == _pack(position, index)
                        for index, (key, tombstone) in enumerate(members)]
                if not members and _pack(position, 0) in kept_chunks:
                    kept = [True]                       # a chunk of a key's latest message
                if not any(kept):
                    continue
                out_mask = None if all(kept) else fmt.mask_of(kept)
                raw = fmt.encode(position, out_mask, data)
                in_flight.append(handle.add_future(raw))
                result.entries += 1
                result.size_bytes += len(raw)
                if len(in_flight) >= c.compaction_entries_in_flight_max:
                    await in_flight.popleft()
            while in_flight:
                await in_flight.popleft()
            await handle.close()
        except BaseException:
            for pending in in_flight:
                if not pending.done():
                    pending.cancel()
                elif not pending.cancelled():
                    pending.exception()       # retrieved: the failure is the one raised below
            await _discard(self.client, handle)
            raise
        result.handle = handle


async def _discard(client: LedgerClient, handle: WriteHandle) -> None:
    """Delete a compacted ledger that will not be installed (best effort: logged)."""
    try:
        await handle.close()
    except StrataError:
        pass
    try:
        await client.delete_ledger(handle.ledger_id)
    except StrataError as exc:
        log.warning("deleting unused compacted ledger %d failed: %s", handle.ledger_id, exc)
