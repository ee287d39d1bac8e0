"""Rich tables for `strata admin` answers (the default output; `-o json` bypasses this).

A JSON answer becomes: an object → a two-column Field/Value table (nested objects and lists of
scalars inline as compact JSON, lists of objects and maps of objects as their own tables after
it); a list of objects → one row per object; a list of scalars → one column; a scalar → printed as
is. A list of objects whose row table would be wider than the terminal (every header and cell
whole), or holding objects of its own (a topic's subscriptions with their consumers, internal
stats' cursors), is printed one Field/Value table per object instead, titled by its path
(`subscriptions sub-a`, `subscriptions sub-a consumers[0]`): squeezed into one row table its
headers and cells were cut to `…`. Booleans read `true`/`false`, as in the JSON. Nothing is
dropped: every field of the answer appears somewhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

_console = Console(soft_wrap=False)
_NAME = "name"              # the key given to a map of objects' keys when shown as rows
_FIELD_WIDTH_MAX = 40       # a field name is shown whole up to this many characters


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def _columns(rows: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _fits(rows: list[dict]) -> bool:
    """The rows' table, every header and cell whole, is no wider than the terminal."""
    widths = [max(len(column), *(len(_cell(row.get(column))) for row in rows)) for column in _columns(rows)]
    return sum(widths) + 3 * len(widths) + 1 <= _console.width


def _rows_table(rows: list[dict], columns: Sequence[str] | None, title: str | None) -> Table:
    if columns is None:
        columns = _columns(rows)
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(row.get(column)) for column in columns))
    return table


def _objects(value: object) -> bool:
    """A non-empty list of objects, or a map whose values are objects not all empty."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, dict) for v in value)
    return (isinstance(value, dict) and bool(value) and all(isinstance(v, dict) for v in value.values())
            and any(value.values()))


def _print_rows(rows: list[dict], columns: Sequence[str] | None, title: str | None) -> None:
    """Rows of one table, or one Field/Value table per row when they would not fit one."""
    nested = any(_objects(v) for row in rows for v in row.values())
    if columns is not None or (not nested and _fits(rows)):
        _console.print(_rows_table(rows, columns, title))
        return
    for index, row in enumerate(rows):
        if _NAME in row and title is not None:
            _print_object({k: v for k, v in row.items() if k != _NAME}, f"{title} {row[_NAME]}")
        else:
            _print_object(row, f"{title or ''}[{index}]")


def print_value(value: object, *, columns: Sequence[str] | None = None, title: str | None = None) -> None:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        _print_rows(value, columns, title)
    elif isinstance(value, list):
        table = Table(title=title)
        table.add_column(title or "value")
        for item in value:
            table.add_row(_cell(item))
        _console.print(table)
    elif isinstance(value, dict):
        _print_object(value, title)
    else:
        _console.print("null" if value is None else _cell(value), highlight=False)


def _print_object(value: dict, title: str | None) -> None:
    table = Table(title=title)
    table.add_column("Field", no_wrap=True, min_width=min(_FIELD_WIDTH_MAX, max(map(len, map(str, value)), default=0)))
    table.add_column("Value")
    nested: list[tuple[str, list[dict]]] = []
    for key, item in value.items():
        if isinstance(item, list) and _objects(item):
            nested.append((key, item))
            continue
        if isinstance(item, dict) and _objects(item):
            nested.append((key, [{_NAME: k, **v} for k, v in item.items()]))
            continue
        table.add_row(str(key), _cell(item))
    _console.print(table)
    for key, rows in nested:
        _print_rows(rows, None, f"{title} {key}" if title else str(key))
