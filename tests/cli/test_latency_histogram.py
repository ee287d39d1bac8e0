"""perf.harness.LatencyHistogram (HDR, 3 significant digits): percentiles of known distributions
come out within the histogram's precision (0.1%), whether recorded in one histogram or merged
from several that crossed a process boundary as dicts; counts weight values; the server CPU and
RSS helpers read live processes (psutil)."""

from __future__ import annotations

import json
import math
import os
import random

import pytest

from perf.harness import LatencyHistogram, descendants, merge_histograms, process_cpu_s, rss_bytes

PRECISION = 1e-3  # 3 significant digits


def exact_percentile_ms(sorted_us: list[int], q: float) -> float:
    """The nearest-rank percentile, in ms."""
    return sorted_us[max(1, math.ceil(len(sorted_us) * q / 100)) - 1] / 1000.0


def test_uniform_1us_to_100ms() -> None:
    h = LatencyHistogram()
    for us in range(1, 100_001):
        h.record(us / 1e6)
    assert h.total == 100_000
    for q, expected_ms in ((50, 50.0), (99, 99.0), (99.9, 99.9)):
        assert h.percentile_ms(q) == pytest.approx(expected_ms, rel=PRECISION)


def test_lognormal_against_exact_percentiles_and_merged_across_processes() -> None:
    rng = random.Random(20261123)
    values_us = [max(1, int(rng.lognormvariate(7.0, 1.0))) for _ in range(60_000)]
    whole = LatencyHistogram()
    parts = [LatencyHistogram() for _ in range(3)]
    for i, us in enumerate(values_us):
        whole.record(us / 1e6)
        parts[i % 3].record(us / 1e6)
    # as the workers send them: plain dicts, through JSON here
    merged = merge_histograms([json.loads(json.dumps(p.to_dict())) for p in parts] + [None])
    ordered = sorted(values_us)
    for q in (50, 99, 99.9):
        exact = exact_percentile_ms(ordered, q)
        assert whole.percentile_ms(q) == pytest.approx(exact, rel=PRECISION, abs=0.001)
        assert merged.percentile_ms(q) == whole.percentile_ms(q)
    assert merged.total == whole.total == len(values_us)


def test_counts_weight_values_and_pending_values_fold() -> None:
    h = LatencyHistogram()
    h.record(0.001, count=990)      # 990 messages at 1 ms
    h.record(0.050, count=10)       # 10 at 50 ms
    assert h.percentile_ms(50) == pytest.approx(1.0, rel=PRECISION)
    assert h.percentile_ms(99) == pytest.approx(1.0, rel=PRECISION)
    assert h.percentile_ms(99.9) == pytest.approx(50.0, rel=PRECISION)
    many = LatencyHistogram()
    for us in range(3 * LatencyHistogram.PENDING_VALUES_MAX):  # several folds on the way
        many.record(us / 1e6)
    assert len(many._pending) < LatencyHistogram.PENDING_VALUES_MAX
    assert many.percentile_ms(50) == pytest.approx(1.5 * LatencyHistogram.PENDING_VALUES_MAX / 1000,
                                                   rel=PRECISION)


def test_empty_and_out_of_range() -> None:
    h = LatencyHistogram()
    assert h.percentile_ms(50) is None
    h.record(-0.5)                  # a clock step backwards: kept, as 0
    h.record(10 * 3600.0)           # past the 1 h range: kept, at the top
    assert h.total == 2
    assert h.percentile_ms(100) == pytest.approx(LatencyHistogram.HIGHEST_US / 1000, rel=PRECISION)


def test_process_figures_of_this_process() -> None:
    pid = os.getpid()
    sum(i * i for i in range(200_000))  # some CPU
    assert process_cpu_s(pid) > 0
    assert rss_bytes(pid) > 10 * 1024 * 1024
    assert descendants(pid)[0] == pid
    gone = 2 ** 22 + 12_345          # above pid_max's default: no such process
    assert process_cpu_s(gone) == 0.0 and rss_bytes(gone) == 0 and descendants(gone) == [gone]
