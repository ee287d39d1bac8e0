"""Opt-in allocation tracing of the broker process (off unless `STRATA_TRACEMALLOC` is set).

    STRATA_TRACEMALLOC=<frames>            # e.g. 1 (cheap) or 8 (tracebacks); unset/0 = off
    STRATA_TRACEMALLOC_OUT=<file>          # where diffs go (appended); default: the log

With it set, the broker starts `tracemalloc` at start-up and, on each SIGUSR1, takes a snapshot.
The first snapshot is the baseline; every later one writes the top allocation sites by growth
since the baseline (size, count, average) — e.g. `strata perf topics --tracemalloc` signals once
before opening its topics and once after, which shows where per-topic memory goes.

Off by default and costs nothing then: no import of tracemalloc, no signal handler.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tracemalloc  # imported for real only when the tracer is switched on

log = logging.getLogger(__name__)

TOP_SITES = 40


class _Tracer:
    def __init__(self, out_path: str | None) -> None:
        self.out_path = out_path
        self.baseline: tracemalloc.Snapshot | None = None  # the first snapshot; None until SIGUSR1 arrives once
        self.dumps = 0

    def on_signal(self) -> None:
        import tracemalloc
        snapshot = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),))
        if self.baseline is None:
            self.baseline = snapshot
            self._emit(f"tracemalloc baseline taken: {_mb(tracemalloc.get_traced_memory()[0])} MB traced")
            return
        self.dumps += 1
        group = "traceback" if tracemalloc.get_traceback_limit() > 1 else "lineno"
        stats = snapshot.compare_to(self.baseline, group)
        total = sum(s.size_diff for s in stats)
        lines = [f"tracemalloc diff #{self.dumps} vs baseline: {total / 1024:+.0f} KiB in "
                 f"{sum(s.count_diff for s in stats):+d} blocks; top {TOP_SITES} sites by growth:"]
        for stat in sorted(stats, key=lambda s: s.size_diff, reverse=True)[:TOP_SITES]:
            avg = stat.size / stat.count if stat.count else 0
            lines.append(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks "
                         f"(avg {avg:.0f} B)")
            lines.extend(f"    {line}" for line in stat.traceback.format()[-2 * min(4, len(stat.traceback)):])
        self._emit("\n".join(lines))

    def _emit(self, text: str) -> None:
        if self.out_path:
            with open(self.out_path, "a") as f:
                f.write(text + "\n\n")
        else:
            log.warning("%s", text)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f}"


def install_from_env(loop: asyncio.AbstractEventLoop) -> bool:
    """Start tracing and hook SIGUSR1 if STRATA_TRACEMALLOC asks for it. True if installed."""
    raw = os.environ.get("STRATA_TRACEMALLOC", "").strip()
    if not raw or raw == "0":
        return False
    import tracemalloc
    frames = int(raw) if raw.isdigit() else 1
    tracemalloc.start(max(1, frames))
    tracer = _Tracer(os.environ.get("STRATA_TRACEMALLOC_OUT") or None)
    loop.add_signal_handler(signal.SIGUSR1, tracer.on_signal)
    log.warning("tracemalloc on (%d frames): SIGUSR1 takes a snapshot", max(1, frames))
    return True
