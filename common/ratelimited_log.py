"""Rate-limited logging: a warning that repeats (every failed append of a topic while no bookie
quorum is live, every retry of a rollover) is logged once per interval per key, not thousands of
times a second.

    _WARN = RateLimitedLog(log, interval_s=5.0)
    _WARN.warning(topic, "append to %s failed: %s", topic, exc)

The first call for a key logs at once; later calls within `interval_s` of the last logged one are
counted and dropped; the next one logged after the interval says how many were dropped
("(1234 similar suppressed in 5.0 s)"). Keys are anything hashable (a topic name, an op name).

What must hold: memory is bounded (at most `keys_max` keys are remembered; the oldest is
forgotten first, so a flood of distinct keys degrades to logging, never to unbounded growth);
calls are cheap when suppressed (a dict lookup and a clock read); thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 5.0, *, keys_max: int = 1024,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self.interval_s = interval_s
        self._keys_max = keys_max
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # key -> [monotonic time of the last line logged, calls suppressed since]
        self._seen: OrderedDict[Hashable, list[float]] = OrderedDict()

    def warning(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def info(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.INFO, key, msg, *args)

    def error(self, key: Hashable, msg: str, *args: object) -> bool:
        return self.log(logging.ERROR, key, msg, *args)

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Log `msg % args` at `level` unless `key` was logged less than `interval_s` ago.
        Returns whether it was logged."""
        now_s = self._monotonic()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now_s - entry[0] < self.interval_s:
                entry[1] += 1
                return False
            suppressed = int(entry[1]) if entry is not None else 0
            self._seen[key] = [now_s, 0]
            self._seen.move_to_end(key)
            while len(self._seen) > self._keys_max:
                self._seen.popitem(last=False)
        if suppressed:
            msg = f"{msg} (%d similar suppressed in %.1f s)"
            args = (*args, suppressed, self.interval_s)
        self._logger.log(level, msg, *args)
        return True

    def suppressed(self, key: Hashable) -> int:
        """Calls for `key` dropped since its last logged line (tests, diagnostics)."""
        with self._lock:
            entry = self._seen.get(key)
            return int(entry[1]) if entry is not None else 0
