"""Load placement: which live broker takes an unowned bundle.

The least-loaded broker wins: fewest bundles owned (as this broker's ownership view counts them,
including bundles it just redirected elsewhere, so a burst of lookups spreads instead of piling
onto whoever looked idle in the last report), then the lowest reported message rate, then the
registry key, so the choice is deterministic for one view.

What must hold: only live (registered) brokers are chosen; no broker at all gives None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.cluster.registry import BrokerInfo


def least_loaded(brokers: Iterable[BrokerInfo], bundle_counts: Mapping[str, int]) -> BrokerInfo | None:
    """The broker to give an unowned bundle to, or None if `brokers` is empty."""
    return min(brokers, key=lambda b: (bundle_counts.get(b.service_url, 0), b.msg_rate, b.key), default=None)


def load_score(broker: BrokerInfo, bundle_counts: Mapping[str, int]) -> float:
    """One number for shedding: bundles owned, plus message rate in thousands per second, plus
    CPU as a fraction of the broker's limit × 10 (each worth about one bundle at typical loads)."""
    cpu = broker.report.get("cpu") or {}
    try:
        cpu_part = 10.0 * float(cpu.get("usage", 0.0)) / max(1.0, float(cpu.get("limit", 100.0)))
    except (TypeError, ValueError, AttributeError):
        cpu_part = 0.0
    return bundle_counts.get(broker.service_url, 0) + broker.msg_rate / 1000.0 + cpu_part
