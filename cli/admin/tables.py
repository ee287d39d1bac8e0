"""Rich tables for `strata admin` answers (the default output; `-o json` bypasses this).

A JSON answer becomes: an object → a two-column Field/Value table (nested objects and lists of
scalars inline as compact JSON, lists of objects as their own tables after it); a list of objects
→ one row per object; a list of scalars → one column; a scalar → printed as is. Nothing is
dropped: every field of the answer appears somewhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

_console = Console(soft_wrap=False)


def human_bytes(size: float) -> str:
    """1536 → "1.5 KiB" (powers of 1024), as people read storage."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def _rows_table(rows: list[dict], columns: Sequence[str] | None, title: str | None) -> Table:
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            seen.update(dict.fromkeys(row))
        columns = list(seen)
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(row.get(column)) for column in columns))
    return table


def print_value(value: object, *, columns: Sequence[str] | None = None, title: str | None = None) -> None:
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        _console.print(_rows_table(value, columns, title))
    elif isinstance(value, list):
        table = Table(title=title)
        table.add_column(title or "value")
        for item in value:
            table.add_row(_cell(item))
        _console.print(table)
    elif isinstance(value, dict):
        _print_object(value, title)
    else:
        _console.print(_cell(value), highlight=False)


def _print_object(value: dict, title: str | None) -> None:
    table = Table(title=title)
    table.add_column("Field")
    table.add_column("Value")
    nested: list[tuple[str, list[dict]]] = []
    for key, item in value.items():
        if isinstance(item, list) and item and all(isinstance(v, dict) for v in item):
            nested.append((key, item))
            continue
        if isinstance(item, dict) and item and all(isinstance(v, dict) for v in item.values()):
            nested.append((key, [{"name": k, **v} for k, v in item.items()]))
            continue
        table.add_row(str(key), _cell(item))
    _console.print(table)
    for key, rows in nested:
        _console.print(_rows_table(rows, None, key))
