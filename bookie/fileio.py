"""The file-writing seam of the bookie: the journal writes through `FileSystem`, never `os`.

`OsFileSystem` is the real thing. `FailingFileSystem` is a fake that fails on purpose
(STYLE.md #10): after `fail_after_bytes` bytes in total it writes only the bytes still allowed
(a torn write, as a full disk produces) and raises `OSError(ENOSPC)`; it can also fail fsync.
Tests and `strata bookie --inject-enospc-after-bytes` use it to prove that a full disk turns
the bookie read-only without corrupting what is stored.

What must hold: `AppendFile.size_bytes` is the file's length as this writer left it, so the
journal can truncate a failed batch back to the last durable record.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Protocol

# os.writev takes at most IOV_MAX buffers per call.
_IOV_MAX = 1024


class AppendFile(Protocol):
    size_bytes: int

    def write_all(self, buffers: list[bytes]) -> None: ...
    def fsync(self) -> None: ...
    def truncate(self, size_bytes: int) -> None: ...
    def close(self) -> None: ...


class FileSystem(Protocol):
    def open_append(self, path: str) -> AppendFile: ...
    def fsync_dir(self, path: str) -> None: ...


class OsAppendFile:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size

    def write_all(self, buffers: list[bytes]) -> None:
        fd = self._fd
        for start in range(0, len(buffers), _IOV_MAX):
            chunk = buffers[start:start + _IOV_MAX]
            want = sum(map(len, chunk))
            done = os.writev(fd, chunk)
            self.size_bytes += done
            if done != want:  # short write: finish it byte-exactly
                rest = b"".join(chunk)[done:]
                while rest:
                    n = os.write(fd, rest)
                    self.size_bytes += n
                    rest = rest[n:]

    def fsync(self) -> None:
        os.fdatasync(self._fd)

    def truncate(self, size_bytes: int) -> None:
        os.ftruncate(self._fd, size_bytes)
        self.size_bytes = size_bytes

    def close(self) -> None:
        os.close(self._fd)


class OsFileSystem:
    def open_append(self, path: str) -> AppendFile:
        return OsAppendFile(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class FailingFileSystem:
    """Real files, but the disk "fills up" after `fail_after_bytes` bytes written in total."""

    def __init__(self, fail_after_bytes: int, *, fail_fsync: bool = False) -> None:
        self.budget_bytes = fail_after_bytes
        self.fail_fsync = fail_fsync
        self.failures = 0
        self._lock = threading.Lock()

    def open_append(self, path: str) -> AppendFile:
        return _FailingAppendFile(self, path)

    def fsync_dir(self, path: str) -> None:
        OsFileSystem().fsync_dir(path)

    def _take(self, want_bytes: int) -> int:
        with self._lock:
            granted = min(want_bytes, self.budget_bytes)
            self.budget_bytes -= granted
            return granted


class _FailingAppendFile(OsAppendFile):
    def __init__(self, fs: FailingFileSystem, path: str) -> None:
        super().__init__(path)
        self._fs = fs

    def write_all(self, buffers: list[bytes]) -> None:
        want = sum(map(len, buffers))
        granted = self._fs._take(want)
        if granted == want:
            super().write_all(buffers)
            return
        if granted:
            super().write_all([b"".join(buffers)[:granted]])  # the torn part a full disk leaves
        self._fs.failures += 1
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def fsync(self) -> None:
        if self._fs.fail_fsync:
            self._fs.failures += 1
            raise OSError(errno.EIO, "fsync failed (injected)")
        super().fsync()
