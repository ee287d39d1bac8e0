"""`LatencyHistogram`: bucket counts and the sum of observed durations, for Prometheus histograms.

Cheap enough for a write path: `observe` is one bisect and two additions, no lock. It is meant
to be written by one thread (an event loop, the bookie journal thread); a reader on another
thread may see a count one ahead of the sum, never a torn value (CPython ints).

What must hold: `counts[i]` is the number of observations in (bounds_s[i-1], bounds_s[i]], the
last slot counting those above every bound; `count()` is their total; nothing ever goes down.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

# Pulsar's storage write latency buckets (ms: 0.5 1 5 10 20 50 100 200 1000), in seconds.
PULSAR_LATENCY_BOUNDS_S: tuple[float, ...] = (0.0005, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 1.0)
# Finer at the bottom for fsyncs and journal adds (BookKeeper reports them in ms).
DISK_LATENCY_BOUNDS_S: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class LatencyHistogram:
    __slots__ = ("bounds_s", "counts", "sum_s")

    def __init__(self, bounds_s: Sequence[float] = PULSAR_LATENCY_BOUNDS_S) -> None:
        self.bounds_s = tuple(bounds_s)
        self.counts = [0] * (len(self.bounds_s) + 1)
        self.sum_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds_s, seconds)] += 1
        self.sum_s += seconds

    def count(self) -> int:
        return sum(self.counts)

    def add(self, other: LatencyHistogram) -> None:
        """Fold `other` (same bounds) into this one: aggregates several histograms."""
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.sum_s += other.sum_s

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative (le, count) pairs as prometheus_client's HistogramMetricFamily takes them."""
        out, running = [], 0
        for bound, n in zip(self.bounds_s, self.counts):
            running += n
            out.append((repr(bound), float(running)))
        out.append(("+Inf", float(running + self.counts[-1])))
        return out


def merged(histograms: Iterable[LatencyHistogram], bounds_s: Sequence[float] = PULSAR_LATENCY_BOUNDS_S
           ) -> LatencyHistogram:
    total = LatencyHistogram(bounds_s)
    for h in histograms:
        total.add(h)
    return total
