"""An injectable clock, so core code never reads time directly.

`Clock` has wall time in milliseconds (for publish times, TTL, retention: things that are
compared with client clocks) and monotonic seconds (for timeouts and rates). `SystemClock` reads
the OS; `ManualClock` only moves when a test advances it, so tests drive time instead of sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    def monotonic_s(self) -> float:
        """Seconds on a clock that never goes back; only differences mean anything."""
        ...


class SystemClock:
    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that tests move by hand. Starts at `start_wall_ms` and monotonic 0."""

    def __init__(self, start_wall_ms: int = 1_700_000_000_000) -> None:
        self._wall_ms = start_wall_ms
        self._monotonic_s = 0.0

    def wall_ms(self) -> int:
        return self._wall_ms

    def monotonic_s(self) -> float:
        return self._monotonic_s

    def advance_s(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._monotonic_s += seconds
        self._wall_ms += int(seconds * 1000)


SYSTEM_CLOCK = SystemClock()
