"""`strata admin`'s tables (`cli.admin.tables`): a topic's stats as an operator reads them at 80
columns — every field name and value whole (no `…`), wide maps of objects (subscriptions, cursors)
one Field/Value table each titled by their path, booleans spelled as in the JSON."""

from __future__ import annotations

import pytest

from cli.admin import tables


def _subscription(backlog: int, consumers: int) -> dict:
    return {"msgBacklog": backlog, "msgBacklogNoDelayed": backlog, "backlogSize": backlog * 100,
            "unackedMessages": backlog, "type": "Shared", "isDurable": True, "msgRateOut": 0.0,
            "msgThroughputOut": 0.0, "msgOutCounter": 200, "bytesOutCounter": 31662,
            "markDeletePosition": "1:0", "readPosition": "4:50", "cursorStateBytes": 183,
            "cursorPersistError": None,
            "consumers": [{"consumerName": f"c{i}", "availablePermits": 800, "unackedMessages": backlog,
                           "blockedConsumerOnUnackedMsgs": False, "msgOutCounter": 200,
                           "bytesOutCounter": 31662, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
                           "priorityLevel": 0} for i in range(consumers)]}


def test_topic_stats_with_subscriptions_are_readable_at_80_columns(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(tables, "_console", tables.Console(soft_wrap=False))
    stats = {"msgInCounter": 200, "storageSize": 31662, "publishers": [],
             "subscriptions": {"sub-shared": _subscription(100, 1), "sub-idle": _subscription(7, 0)}}
    tables.print_value(stats)
    out = capsys.readouterr().out
    assert "…" not in out
    assert "subscriptions sub-shared" in out and "subscriptions sub-idle" in out
    assert "subscriptions sub-shared consumers[0]" in out
    for field in ("markDeletePosition", "readPosition", "msgBacklogNoDelayed", "blockedConsumerOnUnackedMsgs"):
        assert field in out
    assert "true" in out and "false" in out and "True" not in out and "False" not in out
    assert "sub-idle consumers" not in out          # an empty list stays inline: `consumers │ []`


def test_narrow_lists_of_objects_stay_one_row_table(capsys) -> None:
    ledgers = [{"ledgerId": 1, "entries": 50, "size": 7540, "offloaded": False},
               {"ledgerId": 2, "entries": 0, "size": 0, "offloaded": True}]
    tables.print_value({"state": "LedgerOpened", "ledgers": ledgers, "cursors": {"a": {}, "b": {}}})
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "ledgerId" in line)
    assert "entries" in header and "offloaded" in header            # one table, a column per field
    assert "ledgers[0]" not in out
    assert '{"a": {}, "b": {}}' in out                              # a map of empty objects inline


@pytest.mark.parametrize(("value", "text"), [(True, "true"), (False, "false"), (None, ""), (1.5, "1.500")])
def test_cells(value: object, text: str) -> None:
    assert tables._cell(value) == text


def test_a_list_wider_than_the_terminal_is_one_table_per_object(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(tables, "_console", tables.Console(soft_wrap=False))
    publisher = {"producerName": "my-prod", "producerId": 0, "msgRateIn": 0.5, "msgThroughputIn": 14.489,
                 "msgInCounter": 1, "bytesInCounter": 29, "averageMsgSize": 29.0}
    tables.print_value({"publishers": [publisher]})
    out = capsys.readouterr().out
    assert "publishers[0]" in out and "…" not in out
    assert all(field in out for field in publisher)
