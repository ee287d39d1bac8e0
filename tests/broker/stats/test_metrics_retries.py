"""/metrics exports common.retry's counters: strata_retries_total and
strata_retries_exhausted_total, one line per retry policy (label `op`)."""

from __future__ import annotations

import pytest

from broker.stats.metrics import retry_lines
from common import retry
from common.errors import BadVersion

OP = "test.metrics_export"


def test_retry_counters_are_exported_per_op() -> None:
    for registry in (retry.RETRIES, retry.EXHAUSTED):
        registry.pop(OP, None)
    policy = retry.Retry(OP, retry_on=BadVersion, wait=retry.no_wait(), attempts_max=3)

    def always_lost() -> None:
        raise BadVersion("lost")

    with pytest.raises(BadVersion):
        policy.call(always_lost)
    lines = retry_lines()
    assert "# TYPE strata_retries_total counter" in lines
    assert "# TYPE strata_retries_exhausted_total counter" in lines
    assert f'strata_retries_total{{cluster="standalone",op="{OP}"}} 2.0' in lines
    assert f'strata_retries_exhausted_total{{cluster="standalone",op="{OP}"}} 1.0' in lines
