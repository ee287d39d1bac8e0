"""The bookie's reader thread: reads records back out of segment files and checks them.

One thread (a one-worker executor) does every blocking read of a bookie, so reads never stall
the event loop and need no locks: it owns one O_RDONLY fd per segment file it has read from
(opened on first use, closed when GC deletes the segment or the storage closes). The loop asks
for records by packed location (bookie/index.py) and gets each back decoded and verified
(length, both CRC32Cs: bookie/record.py), or None for one that fails its checks: the caller
turns that into ChecksumMismatch. Start-up recovery and GC's reads of .idx files run on the
same thread (`run`).

What must hold: only the reader thread touches `_fds`; a record is returned only if it
passed its checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from concurrent.futures import ThreadPoolExecutor

from bookie.record import InvalidRecord, Record, decode_one

_LOCATION_SHIFT = 80
_FIELD_MASK = (1 << 40) - 1


def segment_path(segments_dir: str, segment_id: int, suffix: str = ".seg") -> str:
    return os.path.join(segments_dir, f"{segment_id:010d}{suffix}")


class SegmentReader:
    def __init__(self, segments_dir: str, payload_bytes_max: int) -> None:
        self._segments_dir = segments_dir
        self._payload_bytes_max = payload_bytes_max
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bookie-read")
        self._fds: dict[int, int] = {}  # segment id -> O_RDONLY fd; reader thread only

    def run(self, fn, *args) -> asyncio.Future:
        """Run `fn(*args)` on the reader thread (from the event loop)."""
        return asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def payloads(self, locations: list[int]) -> list[tuple[bytes | None, int]]:
        """Reader thread: (payload, crc32c) per location; (None, 0) where checks fail."""
        return [(None, 0) if r is None else (r.payload, r.payload_crc32c)
                for r in self.records(locations)]

    def records(self, locations: list[int]) -> list[Record | None]:
        """Reader thread: read and verify whole records; None for one that fails its checks."""
        out: list[Record | None] = []
        fds = self._fds
        for location in locations:
            segment_id = location >> _LOCATION_SHIFT
            offset, length = (location >> 40) & _FIELD_MASK, location & _FIELD_MASK
            fd = fds.get(segment_id)
            if fd is None:
                fd = os.open(segment_path(self._segments_dir, segment_id),
                             os.O_RDONLY | os.O_CLOEXEC)
                fds[segment_id] = fd
            data = os.pread(fd, length, offset)
            try:
                out.append(decode_one(data, offset, payload_bytes_max=self._payload_bytes_max))
            except InvalidRecord:
                out.append(None)
        return out

    def forget(self, segment_id: int) -> None:
        """Reader thread: close a segment's fd (its file is being deleted)."""
        fd = self._fds.pop(segment_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):  # the fd is released even when close reports EIO
                os.close(fd)

    def _forget_all(self) -> None:
        for segment_id in list(self._fds):
            self.forget(segment_id)

    async def close(self) -> None:
        """Close every fd and end the thread (after what it is doing)."""
        await self.run(self._forget_all)
        self._executor.shutdown(wait=True)
