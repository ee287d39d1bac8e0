"""The PromQL metric-name extraction the Grafana dashboard check relies on (pure: no Prometheus,
no server; tests/acceptance/test_prometheus.py uses it on the live exporters)."""

from __future__ import annotations

from tests.support.promql import metric_names


def test_metric_names_parser() -> None:
    assert metric_names('histogram_quantile(0.99, sum by (le, instance) (rate(a_bucket{x=~"$y"}[5m])))') == {
        "a_bucket"}
    assert metric_names('sum by (topic) (b{namespace=~"a"}) > 0 and c') == {"b", "c"}
