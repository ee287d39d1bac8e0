"""The one ready-wait: poll until a process serves, it exits, or the bound passes.

    wait_until_ready(lambda: marker in log(), exit_code=proc.poll, deadline=time.monotonic() + 60,
                     exited=lambda code: StrataError("x exited during start-up", returncode=code),
                     timed_out=lambda: TimeoutExpired("x not ready"))

Every launcher waits through it: for a log line (bookie, broker, standalone), an answering port
(PostgreSQL, SeaweedFS's S3) or ports becoming free. Each launcher builds its own errors, so a
user's terminal gets one line and a test's failure gets the log tail.

What must hold: the wait always ends by `deadline` (plus one probe and one poll interval); a
process that exits is noticed at the next poll, not at the deadline; `ready` is asked first, so
a process that served and then exited counts as ready.
"""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_INTERVAL_S = 0.05


def wait_until_ready(ready: Callable[[], bool], *, deadline: float,
                     timed_out: Callable[[], BaseException],
                     exit_code: Callable[[], int | None] | None = None,
                     exited: Callable[[int], BaseException] | None = None,
                     interval_s: float = POLL_INTERVAL_S) -> None:
    """Return once `ready()` is true. Raise `exited(code)` when `exit_code()` says the process
    exited first, `timed_out()` when `deadline` (time.monotonic()) passes first."""
    while not ready():
        code = exit_code() if exit_code is not None else None
        if code is not None:
            raise exited(code) if exited is not None else timed_out()
        if time.monotonic() >= deadline:
            raise timed_out()
        time.sleep(interval_s)
