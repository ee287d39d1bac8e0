"""chaos/node_logs.py: lease lapses and bundle moves read from real-format node logs, and only
those outside the nemesis's own faults become history records."""

from __future__ import annotations

import datetime

from chaos.node_logs import bundle_moves, lapses, spontaneous_lapses


def _t(clock: str) -> float:
    return datetime.datetime.strptime(f"2026-11-29 {clock}", "%Y-%m-%d %H:%M:%S,%f").timestamp()


LOG = """\
2026-11-29 08:27:12,818 ERROR strata.metadata.sessions: session 48fd: lease lapsed by the local clock
2026-11-29 08:27:13,494 WARNING strata.metadata.sessions: metadata session 48fd: lease renewed again; writes allowed
  a continuation line without a time
2026-11-29 08:27:20,000 INFO broker.cluster.ownership: unloaded bundle chaos/ns/0x00000000_0x40000000
2026-11-29 08:27:30,100 ERROR strata.metadata.sessions: session 48fd: lease lapsed by the local clock
2026-11-29 08:27:31,000 INFO strata.metadata.store: metadata session 77aa replaces 48fd
2026-11-29 08:27:40,000 ERROR strata.metadata.sessions: session 77aa: lease lapsed by the local clock
"""


def test_lapses_pair_with_their_recovery_and_an_open_one_is_reported(tmp_path):
    log = tmp_path / "broker.log"
    log.write_text(LOG)
    assert lapses(log) == [(_t("08:27:12,818"), _t("08:27:13,494")), (_t("08:27:30,100"), _t("08:27:31,000")),
                           (_t("08:27:40,000"), None)]
    assert lapses(tmp_path / "missing.log") == []


def test_only_events_outside_the_nemesis_faults_are_recorded(tmp_path):
    log = tmp_path / "broker.log"
    log.write_text(LOG)
    nodes = [("broker-1", "broker", log)]
    windows = [(_t("08:27:29,000"), _t("08:27:29,500"))]          # a fault just before the second lapse
    found = spontaneous_lapses(nodes, windows, slack_s=2.0, end_t=_t("08:27:50,000"))
    faults = [r for r in found if r["op"] == "fault"]
    assert [r["t"] for r in faults] == [_t("08:27:12,818"), _t("08:27:40,000")]
    assert all(r["fault"] == "lease-lapse" and r["spontaneous"] and r["role"] == "broker" for r in found)
    heals = [r for r in found if r["op"] == "heal"]
    assert heals[-1]["t"] == _t("08:27:50,000")                        # never recovered: heals at the end
    moves = bundle_moves(nodes, windows, slack_s=2.0)
    assert [(r["op"], r["t"], r["bundle"]) for r in moves] == [
        ("fault", _t("08:27:20,000"), "chaos/ns/0x00000000_0x40000000"),
        ("heal", _t("08:27:20,000"), "chaos/ns/0x00000000_0x40000000")]
    assert bundle_moves([("bookie-1", "bookie", log)], [], 2.0) == []
