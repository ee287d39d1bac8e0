"""Read entries of offloaded ledgers with ranged GETs, read-ahead and two bounded caches.

    reader = ColdReader(bucket, decode_pool)
    entries = await reader.read(copy, first, last)     # [(entry_id, stored bytes)], in order

- Footer: one suffix GET (`FOOTER_GUESS_BYTES`, a second GET if the footer is longer) per object,
  parsed by pyarrow and checked against the ColdCopy (object size, strata.entries, format
  version, ledger id from the key). Parsed footers live in an LRU of `open_objects_max`.
- Row group i (entries `row_group_entry_ranges(meta)[i]`): its byte span, as the footer's strata
  row-group map gives it (`offload.format.row_group_byte_spans`), fetched as several ranged GETs
  of at most `read_range_bytes` at once (so one reader has several GETs in flight, not one: a
  single stream from S3 is capped well below the network), at most `reads_in_flight_max` GETs
  of this reader running at once (`_gets`, the rest wait their turn), joined, decoded in
  `decode_pool` through `_SparseFile` (serves the footer and the fetched span, nothing else) with
  `pq.ParquetFile(..., metadata=footer)`, only the rebuild columns (format.REBUILD_COLUMNS),
  page checksums verified, rebuilt into entries by `offload.format.entries_from_table` (which
  checks each entry's CRC). Spans come from the strata map, never from pyarrow's per-column
  metadata objects: on some damaged footers reading those aborts the whole process (a C++
  exception pyarrow does not translate), and a broker must survive any object. The message-only
  columns fetched along (ids, keys, properties, times) are a few percent of a row group.
- Decoded row groups live in an LRU bounded by `read_cache_bytes_max` (entry bytes); concurrent
  readers of the same row group (or footer) share one fetch (`_shared`).
- Read-ahead: serving row group i starts background fetches of i+1..i+N (N =
  `read_ahead_row_groups_max`, none if the cache or `read_ahead_bytes_max` is 0) that are neither cached nor being
  fetched, while the bytes of read-ahead fetches under way stay within `read_ahead_bytes_max`
  (one row group at least, if any read-ahead is allowed); at most `FETCHES_IN_FLIGHT_MAX`
  fetches run at once; a read-ahead beyond either bound is skipped, not queued.

What must hold: `read` returns exactly entries first..last, in order, or raises; a truncated or
garbled object is ColdObjectCorrupt, S3 down is ColdTierUnavailable (from offload.s3). No bytes
are delivered from an object whose footer disagrees with its ColdCopy.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import io
import logging
import struct
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from common.errors import ColdObjectCorrupt, InvalidArgument, StrataError
from ledger.cold import ColdCopy
from offload import keys
from offload.format import (
    REBUILD_COLUMNS,
    entries_from_table,
    object_summary,
    row_group_byte_spans,
    row_group_entry_ranges,
)
from offload.s3 import S3Bucket

log = logging.getLogger(__name__)
T = TypeVar("T")

FOOTER_GUESS_BYTES = 64 * 1024       # first suffix GET: most footers fit
PARQUET_TAIL = struct.Struct("<I4s")  # footer length, b"PAR1"
FETCHES_IN_FLIGHT_MAX = 16           # footer + row-group fetches running at once (read-ahead skipped past it)

Entries = list[tuple[int, bytes]]


class _SparseFile(io.RawIOBase):
    """A read-only file of `size_bytes` that only has the byte spans it was given; a read
    elsewhere means the footer points outside them (a garbled object)."""

    def __init__(self, size_bytes: int, spans: dict[int, bytes]) -> None:
        super().__init__()
        self._size = size_bytes
        self._spans = sorted(spans.items())
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def size(self) -> int:
        return self._size

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        for start, data in self._spans:
            if start <= self._pos and end <= start + len(data):
                out = data[self._pos - start:end - start]
                self._pos = end
                return out
        raise ColdObjectCorrupt("the footer points outside the fetched byte ranges", first_byte=self._pos,
                                end_byte=end)


@dataclass
class ReaderStats:
    """Counters since start (for metrics and tests)."""
    footer_fetches: int = 0         # footers fetched from S3
    row_group_fetches: int = 0      # row groups fetched from S3 (read-ahead included)
    read_ahead_fetches: int = 0     # of which started ahead of a reader
    cache_hits: int = 0             # row groups served from the cache
    shared_waits: int = 0           # reads that joined a fetch already under way
    fetched_bytes: int = 0          # bytes of ranged GETs
    range_gets: int = 0             # ranged GETs of row groups (several per row group)
    gets_in_flight_peak: int = 0    # most ranged GETs running at once
    ahead_bytes_peak: int = 0       # most bytes of read-ahead fetches under way at once


@dataclass(frozen=True)
class _Footer:
    size_bytes: int
    tail_offset: int                      # where `tail` starts in the object
    tail: bytes                           # the object's last bytes, footer included
    metadata: Any                         # pq.FileMetaData
    ranges: list[tuple[int, int]]         # row group i holds entries ranges[i][0]..ranges[i][1]
    firsts: list[int]                     # ranges[i][0], for bisect
    spans: list[tuple[int, int]]          # row group i lies in bytes [spans[i][0], spans[i][1])


class _Lru:
    """An LRU of values with a size each, bounded by the sum of sizes (and by count)."""

    def __init__(self, size_max: int, count_max: int) -> None:
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._size_max = size_max
        self._count_max = count_max
        self.size = 0

    def get(self, key: Hashable) -> Any:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        if size > self._size_max:
            return                                  # too big to keep: served once, not cached
        self.pop(key)
        self._items[key] = (value, size)
        self.size += size
        while self.size > self._size_max or len(self._items) > self._count_max:
            _, (_, dropped) = self._items.popitem(last=False)
            self.size -= dropped

    def pop(self, key: Hashable) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self.size -= item[1]

    def drop_where(self, keep: Callable[[Hashable], bool]) -> None:
        for key in [k for k in self._items if not keep(k)]:
            self.pop(key)


class ColdReader:
    def __init__(self, bucket: S3Bucket, decode_pool: Executor) -> None:
        settings = bucket.settings
        self._bucket = bucket
        self._pool = decode_pool
        ahead_allowed = settings.read_cache_bytes_max > 0 and settings.read_ahead_bytes_max > 0
        self._read_ahead = settings.read_ahead_row_groups_max if ahead_allowed else 0
        self._ahead_bytes_max = settings.read_ahead_bytes_max
        self._ahead_bytes = 0                   # bytes of the read-ahead fetches under way
        self._range_bytes = settings.read_range_bytes
        self._gets = asyncio.Semaphore(settings.reads_in_flight_max)   # ranged GETs running at once
        self._gets_running = 0
        self._footers = _Lru(size_max=2 ** 62, count_max=settings.open_objects_max)
        self._row_groups = _Lru(size_max=settings.read_cache_bytes_max, count_max=2 ** 62)
        self._fetching: dict[Hashable, asyncio.Task[Any]] = {}   # key -> the one fetch under way
        self.stats = ReaderStats()

    async def read(self, copy: ColdCopy, first: int, last: int) -> Entries:
        """Entries first..last (inclusive) of an offloaded ledger, in order."""
        if not 0 <= first <= last < copy.entries:
            raise InvalidArgument("read outside the offloaded entries", key=copy.key, first=first, last=last,
                                  entries=copy.entries)
        footer = await self._footer(copy)
        index = bisect.bisect_right(footer.firsts, first) - 1
        out: Entries = []
        while index < len(footer.ranges) and footer.ranges[index][0] <= last:
            rg_first, _ = footer.ranges[index]
            entries = await self._row_group(copy, footer, index)
            self._start_read_ahead(copy, footer, index)
            out.extend(entries[max(0, first - rg_first):last - rg_first + 1])
            index += 1
        if [e for e, _ in out] != list(range(first, last + 1)):
            raise ColdObjectCorrupt("object does not hold the entries its footer promises", key=copy.key,
                                    first=first, last=last)
        return out

    def forget(self, key: str) -> None:
        """Drop everything cached about an object (it was deleted)."""
        self._footers.drop_where(lambda k: not (isinstance(k, tuple) and k[0] == key))
        self._row_groups.drop_where(lambda k: not (isinstance(k, tuple) and k[0] == key))

    async def close(self) -> None:
        tasks = list(self._fetching.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- shared fetches -----------------------------------------------------------------------

    def _shared(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
        """The one task fetching `key`: the one under way, or a new one."""
        task = self._fetching.get(key)
        if task is not None:
            self.stats.shared_waits += 1
        else:
            task = asyncio.ensure_future(fetch())
            self._fetching[key] = task

            def done(t: asyncio.Task[Any]) -> None:
                if self._fetching.get(key) is t:
                    del self._fetching[key]
                if not t.cancelled() and t.exception() is not None:   # retrieved: a read-ahead may have no reader
                    log.debug("cold fetch %s failed: %s", key, t.exception())
            task.add_done_callback(done)
        return task

    # --- footers ------------------------------------------------------------------------------

    async def _footer(self, copy: ColdCopy) -> _Footer:
        cache_key = (copy.key, copy.size_bytes, "footer")
        footer = self._footers.get(cache_key)
        if footer is None:
            footer = await asyncio.shield(self._shared(cache_key, lambda: self._fetch_footer(copy)))
            self._footers.put(cache_key, footer, 1)
        return footer

    async def _fetch_footer(self, copy: ColdCopy) -> _Footer:
        self.stats.footer_fetches += 1
        tail, size_bytes = await self._bucket.get_suffix(copy.key, FOOTER_GUESS_BYTES)
        self.stats.fetched_bytes += len(tail)
        if size_bytes != copy.size_bytes:
            raise ColdObjectCorrupt("object size differs from the recorded offload", key=copy.key,
                                    s3_bytes=size_bytes, recorded_bytes=copy.size_bytes)
        if len(tail) < PARQUET_TAIL.size + 4:
            raise ColdObjectCorrupt("object too short to be Parquet", key=copy.key, s3_bytes=size_bytes)
        footer_bytes, magic = PARQUET_TAIL.unpack(tail[-PARQUET_TAIL.size:])
        if magic != b"PAR1" or footer_bytes + PARQUET_TAIL.size + 4 > size_bytes:
            raise ColdObjectCorrupt("object does not end in a Parquet footer", key=copy.key, s3_bytes=size_bytes)
        if footer_bytes + PARQUET_TAIL.size > len(tail):
            start = size_bytes - footer_bytes - PARQUET_TAIL.size
            tail = await self._bucket.get_range(copy.key, start, size_bytes - 1)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, _parse_footer, copy, size_bytes, tail)

    # --- row groups ---------------------------------------------------------------------------

    async def _row_group(self, copy: ColdCopy, footer: _Footer, index: int) -> Entries:
        cache_key = (copy.key, copy.size_bytes, index)
        entries = self._row_groups.get(cache_key)
        if entries is not None:
            self.stats.cache_hits += 1
        else:
            entries = await asyncio.shield(self._shared(cache_key, lambda: self._fetch_row_group(copy, footer, index)))
        return entries

    def _start_read_ahead(self, copy: ColdCopy, footer: _Footer, index: int) -> None:
        for ahead in range(index + 1, min(len(footer.ranges), index + 1 + self._read_ahead)):
            cache_key = (copy.key, copy.size_bytes, ahead)
            if len(self._fetching) >= FETCHES_IN_FLIGHT_MAX:
                return
            if self._row_groups.get(cache_key) is not None or cache_key in self._fetching:
                continue
            start, end = footer.spans[ahead]
            if self._ahead_bytes > 0 and self._ahead_bytes + end - start > self._ahead_bytes_max:
                return                                      # enough bytes on their way already
            self.stats.read_ahead_fetches += 1
            self._ahead_bytes += end - start
            self.stats.ahead_bytes_peak = max(self.stats.ahead_bytes_peak, self._ahead_bytes)
            task = self._shared(cache_key, lambda a=ahead: self._fetch_row_group(copy, footer, a))  # type: ignore[misc]
            task.add_done_callback(functools.partial(self._ahead_done, end - start))

    def _ahead_done(self, size_bytes: int, _: asyncio.Task[Entries]) -> None:
        self._ahead_bytes -= size_bytes

    async def _fetch_row_group(self, copy: ColdCopy, footer: _Footer, index: int) -> Entries:
        spans = _row_group_spans(footer, index, copy.key)
        self.stats.row_group_fetches += 1
        self.stats.fetched_bytes += sum(end - start for start, end in spans)
        ranges = [piece for start, end in spans for piece in _pieces(start, end, self._range_bytes)]
        data = await asyncio.gather(*(self._get(copy.key, start, end) for start, end in ranges))
        fetched = {start: b"".join(part for (a, _), part in zip(ranges, data) if start <= a < end)
                   for start, end in spans}
        loop = asyncio.get_running_loop()
        entries = await loop.run_in_executor(self._pool, _decode_row_group, copy, footer, index, fetched)
        self._row_groups.put((copy.key, copy.size_bytes, index), entries, sum(len(d) for _, d in entries))
        return entries

    async def _get(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object: one ranged GET, once one of `reads_in_flight_max` is free."""
        async with self._gets:
            self._gets_running += 1
            self.stats.range_gets += 1
            self.stats.gets_in_flight_peak = max(self.stats.gets_in_flight_peak, self._gets_running)
            try:
                return await self._bucket.get_range(key, start, end - 1)
            finally:
                self._gets_running -= 1


def _pieces(start: int, end: int, piece_bytes: int) -> list[tuple[int, int]]:
    """[start, end) cut into consecutive [a, b) of at most piece_bytes, the last ones about even."""
    count = -(-(end - start) // piece_bytes)
    step = -(-(end - start) // count)
    return [(a, min(end, a + step)) for a in range(start, end, step)]


def _parse_footer(copy: ColdCopy, size_bytes: int, tail: bytes) -> _Footer:
    """Parse and check the footer (runs in the decode pool)."""
    tail_offset = size_bytes - len(tail)
    try:
        metadata = pq.read_metadata(_SparseFile(size_bytes, {tail_offset: tail}))
        summary = object_summary(metadata)
        ranges = [(int(a), int(b)) for a, b in row_group_entry_ranges(metadata)]
        spans = [(int(a), int(b)) for a, b in row_group_byte_spans(metadata)]
    except StrataError:
        raise
    except Exception as exc:
        raise ColdObjectCorrupt(f"unreadable Parquet footer: {exc}", key=copy.key) from exc
    expect = {"entries": copy.entries, "format_version": copy.format_version, "first_entry_id": 0,
              "ledger_id": keys.ledger_id_of(copy.key)}
    wrong = {name: summary.get(name) for name, value in expect.items() if summary.get(name) != value}
    contiguous = all(ranges[i + 1][0] == ranges[i][1] + 1 for i in range(len(ranges) - 1))
    if wrong or not ranges or ranges[0][0] != 0 or ranges[-1][1] != copy.entries - 1 or not contiguous:
        raise ColdObjectCorrupt("footer does not describe the recorded ledger", key=copy.key, wrong=wrong,
                                row_groups=len(ranges))
    return _Footer(size_bytes, tail_offset, tail, metadata, ranges, [a for a, _ in ranges], spans)


def _row_group_spans(footer: _Footer, index: int, key: str) -> list[tuple[int, int]]:
    """The [start, end) byte span of row group `index`, checked to lie between the header magic
    and the footer."""
    start, end = footer.spans[index]
    if not 4 <= start < end <= footer.tail_offset + len(footer.tail) - PARQUET_TAIL.size:
        raise ColdObjectCorrupt("row group byte range outside the object", key=key, row_group=index,
                                start=start, end=end)
    return [(start, end)]


def _decode_row_group(copy: ColdCopy, footer: _Footer, index: int, spans: dict[int, bytes]) -> Entries:
    """Decode a fetched row group into entries (runs in the decode pool)."""
    first, last = footer.ranges[index]
    source = _SparseFile(footer.size_bytes, {footer.tail_offset: footer.tail, **spans})
    try:
        parquet = pq.ParquetFile(source, metadata=footer.metadata, page_checksum_verification=True)
        table = parquet.read_row_group(index, columns=list(REBUILD_COLUMNS), use_threads=False)
        entries = entries_from_table(table, first, last)
    except StrataError:
        raise
    except (pa.ArrowException, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ColdObjectCorrupt(f"undecodable row group: {type(exc).__name__}: {exc}", key=copy.key,
                                row_group=index) from exc
    if [e for e, _ in entries] != list(range(first, last + 1)):
        raise ColdObjectCorrupt("row group does not hold the entries the footer says", key=copy.key,
                                row_group=index, first=first, last=last)
    return entries
