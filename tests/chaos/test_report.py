"""The report: report.txt (seed first, VALID or INVALID last), a real PNG timeline, verdict.json."""

from __future__ import annotations

import json

from chaos.checker import check
from chaos.orphans import OrphanReport
from chaos.report import write_report
from tests.chaos.synth import clean_history

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_a_valid_run_writes_all_three_files(tmp_path, seed):
    built = clean_history(seed, faults=True)
    verdict = check(built.records, lease_s=10.0, orphans=OrphanReport())
    paths = write_report(tmp_path / "out", verdict, built.records, seed=seed, cluster={"brokers": 2, "bookies": 3})
    png = paths["timeline"].read_bytes()
    assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
    text = paths["report"].read_text()
    assert text.splitlines()[0] == f"strata chaos report: seed {seed}"
    kinds = {r["fault"] for r in built.records if r["op"] == "fault"}
    assert kinds, f"the synthetic history has faults (seed {seed})"
    assert "cluster: brokers=2, bookies=3" in text and all(kind in text for kind in kinds), seed
    assert text.splitlines()[-1] == "VALID"
    doc = json.loads(paths["verdict"].read_text())
    assert doc["seed"] == seed and doc["valid"] is True


def test_an_invalid_run_says_why_on_its_last_line(tmp_path):
    built = clean_history(2)
    built.drop(built.find("read", value=built.sends[5]["value"])[0])
    verdict = check(built.records, lease_s=10.0, orphans=None)
    paths = write_report(tmp_path, verdict, built.records, seed=77)
    text = paths["report"].read_text()
    assert "seed 77" in text and built.sends[5]["value"] in text      # the lost value as an example
    assert text.splitlines()[-1].startswith("INVALID (") and "lost" in text.splitlines()[-1]
    assert "not checked" in text                                      # no orphan report was given
    assert paths["timeline"].read_bytes().startswith(PNG_SIGNATURE)
