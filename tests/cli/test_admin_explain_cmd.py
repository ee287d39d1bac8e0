"""`strata admin topics explain-storage`'s ledger table (`cli.admin.explain`): consecutive ledgers
with the same story are one row (entries and bytes summed, the first and the last one's `goes`),
so a topic of hundreds of ledgers held by one old unacked message reads in a few rows;
`--all-ledgers` keeps a row per ledger; the header names both backlogs for what they are. The
broker's JSON (`-o json`) is not touched."""

from __future__ import annotations

import pytest

from cli.admin import explain


def _ledger(ledger_id: int, keeper: str, goes: str, *, state: str = "closed", s3: bool = False) -> dict:
    return {"ledgerId": ledger_id, "entries": 50, "size": 1000, "state": state,
            "firstPublishMs": 1_795_509_339_000 + ledger_id, "lastPublishMs": 1_795_509_340_000 + ledger_id,
            "location": {"bookieCopy": True, "bookies": ["127.0.0.1:3181"],
                         "s3": {"bucket": "b", "key": f"ledger-{ledger_id}"} if s3 else None},
            "keptBy": [{"kind": "subscription", "detail": keeper}], "goes": goes}


def _explanation() -> dict:
    pinned = "acked by sub-old, but its mark-delete 7:-1 is before it (1 ack hole)"
    ledgers = [_ledger(7, "sub-old has not acked 1 of its entries (mark-delete 7:-1)",
                       "when sub-old acks up to 7:49 (its oldest unacked entry is 7:0)")]
    ledgers += [_ledger(i, pinned, f"when sub-old acks up to {i}:49 (its oldest unacked entry is 7:0)")
                for i in range(8, 208)]
    ledgers += [_ledger(208, "the open ledger takes appends: never trimmed", "at rollover", state="open")]
    return {"topic": "persistent://public/default/t-old", "storageSize": 202_000, "backlogSize": 56,
            "ledgers": ledgers, "decomposition": [], "advice": []}


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(explain, "_console", explain.Console(soft_wrap=False))


def test_runs_of_ledgers_with_the_same_story_are_one_row(wide, capsys) -> None:
    explain.print_explanation(_explanation())
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│ ") and line[2].isdigit()]
    assert [row.split("│")[1].strip() for row in rows] == ["7", "8-207 (200)", "208"]
    assert "10000" in rows[1] and "195.3 KiB" in rows[1]                 # 200 x 50 entries, 200 x 1000 B
    assert "first: when sub-old acks up to 8:49" in out and "last: when sub-old acks up to 207:49" in out


def test_all_ledgers_keeps_a_row_per_ledger(wide, capsys) -> None:
    explain.print_explanation(_explanation(), group=False)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│ ") and line[2].isdigit()]
    assert len(rows) == 202


def test_ledgers_with_different_stories_are_not_grouped() -> None:
    a = _ledger(1, "retention (2h or 1024 MB) keeps it", "when retention lets it go, at 2026-11-24T10:40:03Z")
    b = _ledger(2, "retention (2h or 1024 MB) keeps it", "when retention lets it go, at 2026-11-24T10:40:04Z")
    offloaded = _ledger(3, "retention (2h or 1024 MB) keeps it", "when retention lets it go, at 2026-11-24T10:40:05Z",
                        state="offloaded", s3=True)
    other = _ledger(4, "sub has not acked 1 of its entries (mark-delete 3:49)", "when sub acks up to 4:49")
    assert [len(run) for run in explain._runs([a, b, offloaded, other], True)] == [2, 1, 1]
    lag = "its bookie copy stays until 2026-11-24T09:50:5{}Z (offloadDeletionLagMs 1h)"
    copies = [_ledger(i, lag.format(i), "when retention lets it go, at 2026-11-24T10:50:57Z", state="offloaded",
                      s3=True) for i in (5, 6, 7)]
    assert [len(run) for run in explain._runs(copies, True)] == [3]           # times apart, one story
    assert explain._first_last(explain._kept(copies[0]), explain._kept(copies[-1])) == (
        "first: " + lag.format(5) + "\nlast: " + lag.format(7))


def _decomposition(unconsumed: int) -> list[dict]:
    return [{"category": "unconsumedBacklog", "label": "unconsumed by some subscription", "size": unconsumed,
             "percent": 0.0, "ledgers": 1}]


def test_the_header_names_both_backlogs_for_what_they_are() -> None:
    subs = {"sub-x": {"backlogSize": 56}, "sub-y": {"backlogSize": 40}}
    e = {"storageSize": 20_480, "backlogSize": 56, "backlogSubscription": "sub-x", "subscriptions": subs,
         "decomposition": _decomposition(535)}
    assert explain.header(e) == ("storage 20.0 KiB; largest subscription backlog 56 B (sub-x); "
                                 "unconsumed by some subscription 535 B")
    del e["backlogSubscription"]                        # a broker from before the field: the largest one
    assert "largest subscription backlog 56 B (sub-x)" in explain.header(e)
    one = {**e, "subscriptions": {"sub-x": {"backlogSize": 56}}}
    assert explain.header(one).startswith("storage 20.0 KiB; subscription backlog 56 B (sub-x); ")
    none = {"storageSize": 100, "backlogSize": 0, "subscriptions": {}, "decomposition": _decomposition(0)}
    assert explain.header(none) == "storage 100 B; no subscription (backlog 0 B)"


def test_a_narrow_terminal_gets_blocks_not_a_wrapped_table(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(explain, "_console", explain.Console(soft_wrap=False))
    explain.print_explanation(_explanation())
    out = capsys.readouterr().out
    assert "┏" not in out.split("storageSize")[0]               # no ledger table before the decomposition
    assert "ledger 7: closed, 50 entries" in out
    assert "ledgers 8-207 (200): closed, 10000 entries" in out
    assert "    kept by: sub-old has not acked 1 of its entries (mark-delete 7:-1)" in out
    assert "ledger 208: open" in out and "    goes: at rollover" in out


def test_the_compacted_ledger_says_when_compaction_wrote_it(wide, capsys) -> None:
    compacted = _ledger(300, "the topic's compacted view up to 208:49 (12 keys)",
                        "when the next compaction replaces it", state="compacted")
    compacted.update(firstPublishMs=0, lastPublishMs=0, createdMs=1_795_509_400_000)
    e = _explanation()
    e["ledgers"].append(compacted)
    explain.print_explanation(e)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│ 300"))
    assert "compacted at" in row
    blocks = "\n".join(explain.ledger_blocks(e))
    assert "ledger 300[/bold]: compacted, 50 entries, 1000 B, written by compaction at 2026-11-24 " in blocks
    assert "nothing published yet" not in blocks
