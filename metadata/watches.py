"""Watches: a poller thread that tails the change log and calls back, in commit order.

How it works. The poller keeps `_cursor`, the highest change-log seq it has read. Every
`metadata_watch_poll_ms` (or at once when this store commits a change: `wake()`), it reads rows
with `seq > _cursor` in seq order, `metadata_watch_rows_per_poll_max` at a time, and calls each matching
watch's callback from the poller thread. Because write transactions are serialised and seqs are
drawn under the write lock (see sql_schema), seqs become visible in increasing order with no
late commits, so `seq > _cursor` never skips a row.

Starting point. `add()` holds `_lock` (which a poll holds while it reads and advances the
cursor) and reads the current highest seq S; the watch sees exactly the rows with seq > S, that
is, the changes committed after the call. Since the cursor only ever holds seqs that were
visible, cursor <= S, so the next poll reads from below S and nothing after S is missed.

Callbacks run outside `_lock`, one at a time, on the poller thread: a callback may call the
store (even `watch()` or `cancel()`), but a slow callback delays every other watch of this
store; hand work off (the asyncio wrapper hops to the loop at once). A callback that raises is
logged and the poller carries on.

What must hold: each watch gets every change under its prefix committed after `add()`, once,
in commit order, until `cancel()`. Not covered: a poller stalled longer than
`metadata_changelog_keep_ms` (rows may be pruned under it). A poll that comes more than that long
after the previous successful one logs an error and counts it in `stalls` (seqs cannot tell: on
PostgreSQL a rolled-back transaction leaves a gap in them, so a gap is not proof of pruning).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import sqlalchemy as sa

from common.config import Config
from common.errors import LimitExceeded, StrataError
from common.ratelimited_log import RateLimitedLog
from metadata.api import EventKind, WatchEvent
from metadata.paths import is_under
from metadata.sql_schema import Database, changes

log = logging.getLogger("strata.metadata.watches")
_WARN = RateLimitedLog(log, interval_s=5.0)   # the database being away repeats every tick


class _Watch:
    def __init__(self, poller: WatchPoller, prefix: str, callback: Callable[[WatchEvent], None],
                 start_seq: int) -> None:
        self.prefix = prefix
        self.callback = callback
        self.start_seq = start_seq  # deliver only rows with seq > this
        self.cancelled = False
        self._poller = poller

    def cancel(self) -> None:
        self.cancelled = True
        self._poller.remove(self)


def _max_seq(conn: sa.Connection) -> int:
    return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(changes.c.seq), 0))).scalar() or 0)


class WatchPoller:
    def __init__(self, db: Database, config: Config,
                 monotonic_s: Callable[[], float] = time.monotonic) -> None:
        self._db = db
        self._poll_s = config.metadata_watch_poll_ms / 1000
        self._keep_s = config.metadata_changelog_keep_ms / 1000
        self._rows_per_poll_max = config.metadata_watch_rows_per_poll_max
        self._watches_max = config.metadata_watches_max  # past it add() raises LimitExceeded
        self._monotonic_s = monotonic_s
        self._polled_s: float | None = None  # monotonic s of the last successful read (None: none)
        self.stalls = 0  # polls that came later than the change-log keep time after the last one
        self._lock = threading.Lock()  # guards _cursor and _watches; held across a poll's read
        self._cursor = 0  # highest seq read from the log (0: none read yet)
        self._watches: list[_Watch] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None  # started with the first watch

    def add(self, prefix: str, callback: Callable[[WatchEvent], None]) -> _Watch:
        with self._lock:
            if len(self._watches) >= self._watches_max:
                raise LimitExceeded("too many watches on this store", max=self._watches_max)
            start = self._db.run_read("start watch", _max_seq)
            if not self._watches:
                self._cursor = start  # nobody needs older rows
            watch = _Watch(self, prefix, callback, start)
            self._watches.append(watch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="metadata-watch", daemon=True)
                self._thread.start()
        return watch

    def remove(self, watch: _Watch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    def wake(self) -> None:
        """Poll now rather than at the next tick (this store just committed a change)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=self._db.op_timeout_ms / 1000 * 3)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._poll_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                while self.poll_once() == self._rows_per_poll_max and not self._stop.is_set():
                    pass
            except StrataError as exc:  # database down: the cursor did not move; retry later
                _WARN.warning("watch poller", "watch poller: %s", exc)

    def _note_poll(self) -> None:
        now_s = self._monotonic_s()
        if self._polled_s is not None and now_s - self._polled_s > self._keep_s:
            self.stalls += 1
            log.error("watch poller stalled %.0f s, longer than the change log is kept (%.0f s): "
                      "watchers may have missed changes", now_s - self._polled_s, self._keep_s)
        self._polled_s = now_s

    def poll_once(self) -> int:
        """Read the next rows past the cursor and deliver them; returns rows read."""
        with self._lock:
            if not self._watches:
                return 0
            cursor, rows_max = self._cursor, self._rows_per_poll_max
            rows = self._db.run_read("poll change log", lambda conn: conn.execute(
                sa.select(changes.c.seq, changes.c.path, changes.c.kind, changes.c.version, changes.c.value)
                .where(changes.c.seq > cursor).order_by(changes.c.seq).limit(rows_max)
            ).all())
            if rows:
                self._cursor = int(rows[-1].seq)
            self._note_poll()
            watches = list(self._watches)
        for row in rows:
            event = WatchEvent(kind=EventKind(row.kind), path=row.path,
                               value=None if row.value is None else bytes(row.value),
                               version=int(row.version))
            for watch in watches:
                if watch.cancelled or row.seq <= watch.start_seq or not is_under(row.path, watch.prefix):
                    continue
                try:
                    watch.callback(event)
                except Exception:  # a broken callback must not stop the others
                    log.exception("watch callback for %s raised", watch.prefix)
        return len(rows)
