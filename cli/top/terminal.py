"""`strata top`'s keyboard: stdin in cbreak mode while the live view runs, restored however it ends.

`Keyboard` is a context manager. When stdin is a TTY it saves the terminal's attributes, switches
to cbreak (keys arrive one by one, unechoed; Ctrl-C still interrupts), and restores the saved
attributes on exit, on an exception or Ctrl-C too. When stdin is not a TTY it does nothing and
`read` only waits: there is no key handling. `read(timeout_s)` waits at most `timeout_s` for keys
and returns their names (`keys.decode`).
"""

from __future__ import annotations

import os
import select
import sys
import time
from types import TracebackType

from cli.top.keys import decode

READ_BYTES_MAX = 256        # bytes read per wake-up; more keys wait for the next read


class Keyboard:
    def __init__(self, stream=None) -> None:
        self._stream = stream if stream is not None else sys.stdin
        self._fd: int | None = None
        self._saved: list | None = None     # termios attributes to restore; None: not changed

    @property
    def active(self) -> bool:
        """True while keys are read (stdin is a TTY in cbreak mode)."""
        return self._saved is not None

    def __enter__(self) -> Keyboard:
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return self
        if not os.isatty(fd):
            return self
        import termios
        import tty
        self._fd = fd
        self._saved = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._fd is not None and self._saved is not None:
            import termios
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
        self._saved = None

    def read(self, timeout_s: float) -> list[str]:
        """Keys pressed within `timeout_s` (returns as soon as some arrive); [] when none or not a TTY."""
        if self._fd is None or self._saved is None:
            time.sleep(max(0.0, timeout_s))
            return []
        ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout_s))
        if not ready:
            return []
        return decode(os.read(self._fd, READ_BYTES_MAX))
