"""`strata perf ledger` runs end to end with tiny counts and prints the keys its issue names."""

from __future__ import annotations

import json

from perf.ledger import main


def test_perf_ledger_json(capsys):
    assert main(["--entries-1k", "200", "--entries-64k", "20", "--window", "50", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("entries_per_s_111_1k", "entries_per_s_322_1k", "p99_ms_322_1k",
                "entries_per_s_111_64k", "mb_per_s_322_64k", "cost_ratio_322_vs_111_1k"):
        assert result[key] > 0, key
