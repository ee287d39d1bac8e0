"""Offload one closed ledger: bookie entries -> Parquet (offload.format) -> one S3 object, streamed.

    copy = await offload_ledger(bucket, encode_pool, clock, ml_name, ledger_id, source, entries)

Three stages overlap and each is bounded:
- bookie reads: chunks of about `READ_CHUNK_BYTES` (entry count from the ledger's average entry
  size), `READ_AHEAD_CHUNKS` chunks read while the current one is encoded;
- encoding: `LedgerWriter.add` in `encode_pool` (one call per chunk, never on the event loop),
  writing into `_PartSink`, which cuts the Parquet bytes into parts of `part_bytes`;
- uploads: up to `parts_in_flight_max` parts at once; encoding waits for a free slot, so memory
  stays near (parts in flight + 1) x part_bytes + (READ_AHEAD_CHUNKS + 1) read chunks + one row group.

Visibility: the multipart upload is created when the first part is full and completed only after
the Parquet footer is written, so nothing is visible under the key before the object is whole; a
ledger smaller than one part is one PUT at the end. Any failure or cancellation aborts the upload.
S3 user metadata (fixed at create time, so only what is known before encoding) is
`strata.format_version`, `strata.ledger_id`, `strata.first_entry_id`, `strata.last_entry_id`,
`strata.entries`, `strata.topic` and `strata.partition`; the Parquet footer carries all of the format's strata.* keys
(and the footer's values for these keys are checked to agree).

Idempotency: a complete object under the key whose metadata names the same ledger id, format
version and entry count is reused (its ColdCopy returned, nothing uploaded). Before uploading,
incomplete multipart uploads of the same key (a crashed earlier attempt) are aborted. Ownership
of a managed ledger is exclusive, so no live upload of the same key is expected; if a racing one
were aborted, it fails and its retry finds the winner's object.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable
from concurrent.futures import Executor
from datetime import datetime
from typing import BinaryIO, TypeVar, cast

import pyarrow as pa

from common.clock import Clock
from common.errors import ColdObjectMissing, ColdTierError, InvalidArgument, LimitExceeded
from common.invariant import invariant
from ledger.cold import ColdCopy, LedgerOffsets, OffloadProgress
from ledger.handle import ReadHandle
from offload import keys
from offload.format import FORMAT_VERSION, LedgerOrigin, LedgerWriter
from offload.s3 import S3Bucket

log = logging.getLogger(__name__)
T = TypeVar("T")

READ_CHUNK_BYTES = 1024 * 1024         # bookie bytes read (and then encoded) per step, and progress
READ_CHUNK_ENTRIES_MAX = 2_000
READ_AHEAD_CHUNKS = 2                # bookie reads under way while a chunk is encoded
PARTS_MAX = 10_000                   # S3's limit on the parts of one multipart upload
SINK_BUFFER_BYTES = 1024 * 1024      # pyarrow's writes are buffered natively up to this before reaching _PartSink


class _PartSink:
    """The binary file LedgerWriter's output reaches: cuts the bytes into full parts as they come.
    pyarrow writes through a native buffer (`SINK_BUFFER_BYTES`, see `_Upload`), so this gets
    few large writes; each byte is copied once, into the part it belongs to (a bytearray of
    part_bytes, handed to boto3 as it is once full), not joined and sliced again (three copies
    under the GIL before).

    Written only from the encoding thread, drained only by the event loop between two encoding
    calls (the executor future orders the two), so it needs no lock."""

    def __init__(self, part_bytes: int) -> None:
        self._part_bytes = part_bytes
        self._current = bytearray(part_bytes)   # the part being filled
        self._filled = 0                        # bytes of it written
        self._full: list[bytearray] = []        # full parts waiting for the event loop to ship them
        self._position = 0                      # bytes written so far (the file offset)
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        self._position += size
        while view:
            take = min(len(view), self._part_bytes - self._filled)
            self._current[self._filled:self._filled + take] = view[:take]
            self._filled += take
            view = view[take:]
            if self._filled == self._part_bytes:
                self._full.append(self._current)
                self._current, self._filled = bytearray(self._part_bytes), 0
        return size

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True                # the bytes stay; the uploader takes them

    def take_full(self) -> list[bytearray]:
        full, self._full = self._full, []
        return full

    def take_tail(self) -> bytes:
        tail = bytes(self._current[:self._filled])
        self._current, self._filled = bytearray(0), 0
        return tail


def s3_metadata(ml_name: str, ledger_id: int, entries: int) -> dict[str, str]:
    """The object's S3 user metadata: the format's strata.* keys known before encoding."""
    topic, partition = keys.topic_origin(ml_name)
    return {"strata.format_version": str(FORMAT_VERSION), "strata.ledger_id": str(ledger_id),
            "strata.first_entry_id": "0", "strata.last_entry_id": str(entries - 1),
            "strata.entries": str(entries), "strata.topic": topic, "strata.partition": str(partition)}


async def existing_copy(bucket: S3Bucket, key: str, ledger_id: int, entries: int) -> ColdCopy | None:
    """The ColdCopy of a complete object already under `key` for this ledger, or None."""
    try:
        head = await bucket.head(key)
    except ColdObjectMissing:
        return None
    meta = head.get("Metadata", {})
    if (meta.get("strata.ledger_id") == str(ledger_id) and meta.get("strata.entries") == str(entries)
            and meta.get("strata.format_version") == str(FORMAT_VERSION)):
        modified = head.get("LastModified")
        completed_ms = int(modified.timestamp() * 1000) if isinstance(modified, datetime) else 0
        return ColdCopy(key, int(head["ContentLength"]), entries, completed_ms, FORMAT_VERSION)
    log.warning("object %s exists but is not ledger %d with %d entries in format %d (metadata %s); "
                "uploading it again", key, ledger_id, entries, FORMAT_VERSION, meta)
    return None


async def abort_stale_uploads(bucket: S3Bucket, key: str) -> int:
    """Abort incomplete multipart uploads of exactly `key`; how many there were."""
    stale = [upload_id for k, upload_id in await bucket.list_multipart(key) if k == key]
    for upload_id in stale:
        log.info("aborting a stale multipart upload of %s (%s)", key, upload_id)
        await bucket.abort_multipart(key, upload_id)
    return len(stale)


async def offload_ledger(bucket: S3Bucket, encode_pool: Executor, clock: Clock, ml_name: str, ledger_id: int,
                         source: ReadHandle, entries: int, progress: OffloadProgress | None = None,
                         offsets: LedgerOffsets | None = None) -> ColdCopy:
    """Copy entries 0..entries-1 of a closed ledger to its object; return once it is complete.
    `offsets`: the ledger's Kafka offsets (the object's `offset` column; null without them)."""
    if offsets is not None and len(offsets.messages) != entries:
        raise InvalidArgument("offsets must give every entry's messages", ledger_id=ledger_id,
                              entries=entries, messages=len(offsets.messages))
    if entries < 1:
        raise InvalidArgument("an empty ledger is not offloaded", ledger_id=ledger_id)
    key = keys.ledger_key(bucket.settings.prefix, ml_name, ledger_id)
    found = await existing_copy(bucket, key, ledger_id, entries)
    if found is not None:
        log.info("ledger %d of %s is already offloaded as %s; reused", ledger_id, ml_name, key)
        if progress is not None:
            progress(entries, entries)
        return found
    await abort_stale_uploads(bucket, key)
    upload = _Upload(bucket, encode_pool, ml_name, ledger_id, key, entries, offsets)
    started_s = time.monotonic()
    try:
        size_bytes = await upload.run(source, progress)
    except BaseException:
        await upload.abort()
        raise
    elapsed_s = time.monotonic() - started_s
    log.info("offloaded ledger %d of %s: %d entries, %d bytes in %.2f s (%.1f MB/s); waited on %s", ledger_id,
             ml_name, entries, size_bytes, elapsed_s, size_bytes / 1e6 / max(elapsed_s, 1e-9),
             ", ".join(f"{stage} {s:.2f} s" for stage, s in sorted(upload.waited_s.items())))
    return ColdCopy(key, size_bytes, entries, clock.wall_ms(), FORMAT_VERSION)


class _Upload:
    """One attempt at uploading one ledger's object."""

    def __init__(self, bucket: S3Bucket, encode_pool: Executor, ml_name: str, ledger_id: int, key: str,
                 entries: int, offsets: LedgerOffsets | None = None) -> None:
        settings = bucket.settings
        self._bucket = bucket
        self._pool = encode_pool
        self._key = key
        self._ledger_id = ledger_id
        self._entries = entries
        self._metadata = s3_metadata(ml_name, ledger_id, entries)
        topic, partition = keys.topic_origin(ml_name)
        self._sink = _PartSink(settings.part_bytes)
        origin = LedgerOrigin(topic, partition, ledger_id, offsets.first_offset if offsets is not None else -1)
        self._messages = offsets.messages if offsets is not None else None   # per entry, as recorded
        # pyarrow writes page by page; a native buffer in front of the Python sink turns those
        # thousands of small calls per row group into a few large ones (a fifth of the encoding
        # thread's time went to _PartSink.write before)
        self._stream = pa.output_stream(cast(BinaryIO, self._sink), buffer_size=SINK_BUFFER_BYTES)
        self._writer = LedgerWriter(self._stream, origin, settings.row_group_bytes)
        self._slots = asyncio.Semaphore(settings.parts_in_flight_max)
        self._upload_id: str | None = None          # None until the first full part exists
        self._parts: list[asyncio.Task[str]] = []   # part i+1's upload, in part order
        self._size_bytes = 0
        self.waited_s: dict[str, float] = {}        # stage -> seconds the offload waited on it (log)

    async def run(self, source: ReadHandle, progress: OffloadProgress | None) -> int:
        """Read, encode and upload everything; complete the object; its size in bytes."""
        loop = asyncio.get_running_loop()
        chunk = self._chunk_entries(source)
        reads: deque[asyncio.Task[list[tuple[int, bytes]]]] = deque()   # chunks being read, in order
        next_first = 0                                                  # first entry not asked for yet
        done = 0
        try:
            while done < self._entries:
                while len(reads) < READ_AHEAD_CHUNKS and next_first < self._entries:
                    last_asked = min(self._entries, next_first + chunk) - 1
                    reads.append(asyncio.ensure_future(source.read(next_first, last_asked)))
                    next_first = last_asked + 1
                batch = await self._timed("read_wait", reads.popleft())
                first, last = done, done + len(batch) - 1
                invariant(bool(batch) and [e for e, _ in batch] == list(range(first, last + 1)),
                          "bookie read returns the asked entries in order", ledger_id=self._ledger_id, first=first)
                await self._timed("encode", loop.run_in_executor(self._pool, self._encode, batch))
                del batch
                await self._ship(self._sink.take_full())
                done = last + 1
                if progress is not None:
                    progress(done, self._entries)
        finally:
            for task in reads:
                task.cancel()
        footer_metadata = await self._timed("encode", loop.run_in_executor(self._pool, self._close_writer))
        self._check_metadata(footer_metadata)
        await self._ship(self._sink.take_full())
        return await self._finish(self._sink.take_tail())

    def _close_writer(self) -> dict[str, str]:
        """Finish the file and push the native buffer's last bytes into the sink."""
        footer_metadata = self._writer.close()
        self._stream.flush()
        return footer_metadata

    async def _timed(self, stage: str, awaitable: Awaitable[T]) -> T:
        started_s = time.monotonic()
        try:
            return await awaitable
        finally:
            self.waited_s[stage] = self.waited_s.get(stage, 0.0) + time.monotonic() - started_s

    def _chunk_entries(self, source: ReadHandle) -> int:
        average_bytes = max(1, source.length_bytes // self._entries)
        return max(1, min(READ_CHUNK_ENTRIES_MAX, READ_CHUNK_BYTES // average_bytes))

    def _encode(self, batch: list[tuple[int, bytes]]) -> None:
        add, messages = self._writer.add, self._messages
        for entry_id, data in batch:
            add(entry_id, data, messages[entry_id] if messages is not None else None)

    def _check_metadata(self, footer: dict[str, str]) -> None:
        for name, value in self._metadata.items():
            invariant(footer.get(name) == value, "the footer agrees with the S3 metadata", key=self._key,
                      name=name, footer=footer.get(name), s3=value)

    async def _ship(self, parts: list[bytes] | list[bytearray]) -> None:
        """Start the upload of full parts, each once a slot is free (the backpressure on encoding)."""
        for data in parts:
            self._raise_failed_part()
            if self._upload_id is None:
                self._upload_id = await self._bucket.create_multipart(self._key, self._metadata)
            if len(self._parts) >= PARTS_MAX:
                raise LimitExceeded("ledger needs more than 10,000 parts; raise offload_s3_part_bytes",
                                    key=self._key, part_bytes=len(data))
            await self._timed("slot_wait", self._slots.acquire())
            self._parts.append(asyncio.ensure_future(self._upload_part(len(self._parts) + 1, data)))
            self._size_bytes += len(data)

    async def _upload_part(self, part_number: int, data: bytes | bytearray) -> str:
        try:
            return await self._bucket.upload_part(self._key, self._upload_id or "", part_number, data)
        finally:
            self._slots.release()

    def _raise_failed_part(self) -> None:
        for task in self._parts:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _finish(self, tail: bytes) -> int:
        """Upload the last bytes and make the object visible; its size."""
        if self._upload_id is None:
            await self._bucket.put(self._key, tail, self._metadata)
            self._size_bytes = len(tail)
        else:
            await self._ship([tail] if tail else [])
            etags = list(await self._timed("last_parts", asyncio.gather(*self._parts)))
            await self._bucket.complete_multipart(self._key, self._upload_id, etags)
            self._upload_id = None                    # complete: nothing to abort any more
        head = await self._bucket.head(self._key)
        if int(head["ContentLength"]) != self._size_bytes:
            raise ColdTierError("completed object has the wrong size", key=self._key,
                                expected_bytes=self._size_bytes, s3_bytes=head["ContentLength"])
        return self._size_bytes

    async def abort(self) -> None:
        """Stop the part uploads and abort the multipart upload (best effort, bounded by S3's timeouts)."""
        for task in self._parts:
            task.cancel()
        await asyncio.gather(*self._parts, return_exceptions=True)
        if self._upload_id is not None:
            upload_id, self._upload_id = self._upload_id, None
            try:
                await self._bucket.abort_multipart(self._key, upload_id)
            except Exception as exc:   # the next attempt, or clean_orphans, aborts it
                log.warning("could not abort the multipart upload of %s (%s): %s", self._key, upload_id, exc)
