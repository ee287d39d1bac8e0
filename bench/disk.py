"""This disk's sequential write bandwidth with fsync, written the way a journal does it.

Group commit: a writer appends a group of records (here 1 KiB messages) and then fsyncs once for
the whole group, as a bookie journal or Redis `appendfsync always` does. For each group size the
bandwidth is bytes written / wall time including the fsyncs. The largest of them is the physical
limit a durable log on this disk can reach; `fsyncs_per_s` at the smallest group says how many
commits per second the disk allows (what bounds latency-sensitive, unbatched writers).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

GROUP_BYTES = (4 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024)
FILE_BYTES_MAX = 2 * 1024 ** 3  # stop one measurement once its file reaches this size


@dataclass
class GroupResult:
    group_bytes: int
    mb_per_s: float
    fsyncs_per_s: float


@dataclass
class DiskLimit:
    results: list[GroupResult]
    mb_per_s: float        # best bandwidth over the group sizes
    fsyncs_per_s: float    # commits per second at the smallest group
    directory: str

    def to_dict(self) -> dict:
        return asdict(self)


def measure_group(directory: Path, group_bytes: int, duration_s: float) -> GroupResult:
    """Append `group_bytes` then fsync, repeatedly for `duration_s`, to a new file in `directory`."""
    block = os.urandom(group_bytes)
    fd, path = tempfile.mkstemp(prefix="disk-", dir=directory)
    written = fsyncs = 0
    try:
        start = time.perf_counter()
        deadline = start + duration_s
        while time.perf_counter() < deadline and written < FILE_BYTES_MAX:
            os.write(fd, block)
            os.fsync(fd)
            written += group_bytes
            fsyncs += 1
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return GroupResult(group_bytes, written / elapsed / 1e6, fsyncs / elapsed)


def measure(directory: Path, duration_s: float = 3.0) -> DiskLimit:
    directory.mkdir(parents=True, exist_ok=True)
    results = [measure_group(directory, size, duration_s) for size in GROUP_BYTES]
    return DiskLimit(results=results, mb_per_s=max(r.mb_per_s for r in results),
                     fsyncs_per_s=results[0].fsyncs_per_s, directory=str(directory))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(measure(Path(tmp), 2.0).to_dict())
