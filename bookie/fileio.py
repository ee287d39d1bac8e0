"""The file-writing seam of the bookie: storage and journal write through `FileSystem`, never `os`.

Two kinds of writes go through it: the journal appends records to the active segment
(`open_append` → `AppendFile`), and storage writes small whole files atomically (`.idx`,
`checkpoint.json`, `BOOKIE_ID`: temp name, fsync, rename, fsync the directory) and removes
files (GC). Reads stay plain `os` calls: a failing read is not what these doubles model.

`OsFileSystem` is the real thing. `FailingFileSystem` is a fake that fails on purpose
(a test double that can be told to fail), with real files underneath:
- after `fail_after_bytes` bytes written in total (appends and whole files alike) it writes only
  the bytes still allowed (a torn write, as a full disk produces) and raises `OSError(ENOSPC)`;
- `file_write_errno`: when set, every whole-file write fails with that errno (an `.idx` or
  checkpoint that cannot be written while the journal still can);
- `fail_fsync`: the journal's fsync fails with EIO;
- `hold_fsync()` / `release_fsync()`: the journal's fsync waits (at most `FSYNC_HOLD_S_MAX`)
  until released, so a test can look at the bookie while a batch is written but not durable.
Tests and `strata bookie --inject-enospc-after-bytes` use it to prove that a full or failing
disk turns the bookie read-only without corrupting what is stored.

`disk_error` is where an `OSError` from these writes becomes the project's error tree:
ENOSPC/EDQUOT → `DiskFull`, anything else → `ReadOnly` (the bookie's I/O-error refusal).

What must hold: `AppendFile.size_bytes` is the length of what this writer appended (the file
may be longer by reserved zeros until it is closed), so the journal can truncate a failed batch
back to the last durable record; a whole-file write leaves
the old file or the new one, never half of one.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Protocol

from common.errors import BookieError, DiskFull, ReadOnly

# os.writev takes at most IOV_MAX buffers per call.
_IOV_MAX = 1024
# An append file reserves disk space this many bytes ahead of what it holds (posix_fallocate):
# an fdatasync after appending into reserved blocks need not allocate them. Measured on this
# ext4 VM disk, 1 KiB append + fdatasync: 52 us CPU and 137 us wall with the space reserved,
# 85 us and 250 us without; at a few thousand small entries a second (one fsync each) that is
# most of a bookie's CPU.
APPEND_RESERVE_BYTES = 4 * 1024 * 1024
# A held fsync proceeds on its own after this long, so a test that forgets to release it
# slows down instead of hanging.
FSYNC_HOLD_S_MAX = 60.0
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the file system has no room (rather than that it failed)."""
    return isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS


def disk_error(exc: OSError, what: str) -> BookieError:
    """The typed error for a failed write of `what` (DiskFull when out of space)."""
    if is_disk_full(exc):
        return DiskFull(f"disk full writing {what}: {exc}")
    return ReadOnly(f"I/O error writing {what}: {exc}")


class AppendFile(Protocol):
    size_bytes: int

    def write_all(self, buffers: list[bytes]) -> None: ...
    def fsync(self) -> None: ...
    def truncate(self, size_bytes: int) -> None: ...
    def close(self) -> None: ...


class FileSystem(Protocol):
    def open_append(self, path: str) -> AppendFile: ...
    def fsync_dir(self, path: str) -> None: ...
    def write_file_atomically(self, path: str, data: bytes) -> None: ...
    def unlink(self, path: str) -> int: ...


class OsAppendFile:
    """Appends at `size_bytes` (the records written); the file may be longer by reserved,
    zero-filled space (`APPEND_RESERVE_BYTES`), which `close()` and `truncate()` give back. A
    crash may leave that zero tail: replay cuts a segment at its first record whose CRC fails,
    which a zero header is."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size
        self._file_bytes = self.size_bytes   # the file's length, reserved space included

    def write_all(self, buffers: list[bytes]) -> None:
        fd = self._fd
        self._reserve(self.size_bytes + sum(map(len, buffers)))
        for start in range(0, len(buffers), _IOV_MAX):
            chunk = buffers[start:start + _IOV_MAX]
            want = sum(map(len, chunk))
            done = os.pwritev(fd, chunk, self.size_bytes)
            self.size_bytes += done
            if done != want:  # short write: finish it byte-exactly
                rest = b"".join(chunk)[done:]
                while rest:
                    n = os.pwrite(fd, rest, self.size_bytes)
                    self.size_bytes += n
                    rest = rest[n:]
        self._file_bytes = max(self._file_bytes, self.size_bytes)

    def _reserve(self, end_bytes: int) -> None:
        """Make sure the file's blocks reach `end_bytes` (and a reserve beyond). Best effort:
        where the space cannot be reserved (a full disk, a file system without fallocate) the
        write itself says whether the bytes fit."""
        if end_bytes <= self._file_bytes:
            return
        try:
            os.posix_fallocate(self._fd, self._file_bytes, end_bytes + APPEND_RESERVE_BYTES - self._file_bytes)
            self._file_bytes = end_bytes + APPEND_RESERVE_BYTES
        except OSError:
            self._file_bytes = max(self._file_bytes, os.fstat(self._fd).st_size)

    def fsync(self) -> None:
        os.fdatasync(self._fd)

    def truncate(self, size_bytes: int) -> None:
        os.ftruncate(self._fd, size_bytes)
        self.size_bytes = self._file_bytes = size_bytes

    def close(self) -> None:
        """Give back the reserved space (durably, so a sealed file ends at its last record)."""
        try:
            if self._file_bytes > self.size_bytes:
                os.ftruncate(self._fd, self.size_bytes)
                os.fdatasync(self._fd)
        finally:
            os.close(self._fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: str, data: bytes, *, bytes_allowed: int | None = None,
                          error: OSError | None = None) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one.

    `bytes_allowed` and `error` are the failing double's seam: write only that many bytes of
    the temp file, then raise `error`. On failure the temp file is removed (best effort)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)[:bytes_allowed]
            while view:
                view = view[os.write(fd, view):]
            if error is not None:
                raise error
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)  # do not leave a full disk fuller; start-up removes it anyway
        except OSError:
            pass
        raise
    _fsync_dir(os.path.dirname(path) or ".")


class OsFileSystem:
    def open_append(self, path: str) -> AppendFile:
        return OsAppendFile(path)

    def fsync_dir(self, path: str) -> None:
        _fsync_dir(path)

    def write_file_atomically(self, path: str, data: bytes) -> None:
        write_file_atomically(path, data)

    def unlink(self, path: str) -> int:
        """Remove `path`; the bytes it held (0 if it was already gone)."""
        try:
            size_bytes = os.path.getsize(path)
            os.unlink(path)
        except FileNotFoundError:
            return 0
        return size_bytes


class FailingFileSystem(OsFileSystem):
    """Real files, but the disk "fills up" after `fail_after_bytes` bytes written in total
    (None: never), and whole-file writes, fsync can be made to fail or wait (module docstring).
    The switches are plain attributes: a test may flip them while the bookie runs."""

    def __init__(self, fail_after_bytes: int | None = None, *, fail_fsync: bool = False,
                 file_write_errno: int | None = None) -> None:
        self.budget_bytes = fail_after_bytes  # bytes still writable; None = unlimited
        self.fail_fsync = fail_fsync
        self.file_write_errno = file_write_errno
        self.failures = 0          # injected failures so far
        self.fsyncs_held = 0       # journal fsyncs waiting in hold_fsync() right now
        self._fsync_open = threading.Event()
        self._fsync_open.set()
        self._lock = threading.Lock()

    def open_append(self, path: str) -> AppendFile:
        return _FailingAppendFile(self, path)

    def write_file_atomically(self, path: str, data: bytes) -> None:
        if self.file_write_errno is not None:
            self._count_failure()
            code = self.file_write_errno
            write_file_atomically(path, data, bytes_allowed=0,
                                  error=OSError(code, f"{os.strerror(code)} (injected)"))
        granted = self._take(len(data))
        if granted < len(data):
            self._count_failure()
            write_file_atomically(path, data, bytes_allowed=granted, error=_enospc())
        write_file_atomically(path, data)

    def hold_fsync(self) -> None:
        """From now on the journal's fsync waits until `release_fsync()` (bounded)."""
        self._fsync_open.clear()

    def release_fsync(self) -> None:
        self._fsync_open.set()

    def _take(self, want_bytes: int) -> int:
        with self._lock:
            if self.budget_bytes is None:
                return want_bytes
            granted = min(want_bytes, self.budget_bytes)
            self.budget_bytes -= granted
            return granted

    def _count_failure(self) -> None:
        with self._lock:
            self.failures += 1

    def _held_fsync(self) -> None:
        with self._lock:
            self.fsyncs_held += 1
        try:
            self._fsync_open.wait(FSYNC_HOLD_S_MAX)
        finally:
            with self._lock:
                self.fsyncs_held -= 1


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device (injected)")


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
        self._fs._count_failure()
        raise _enospc()

    def fsync(self) -> None:
        if not self._fs._fsync_open.is_set():
            self._fs._held_fsync()
        if self._fs.fail_fsync:
            self._fs._count_failure()
            raise OSError(errno.EIO, "fsync failed (injected)")
        super().fsync()
