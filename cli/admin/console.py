"""`AdminConsole`: the admin client of `strata admin`, and how every command's answer is printed.

The calls are `admin_client.AdminClient`'s (`call`, `call_raw`): a 307/308 is followed for every
method, so every command works against any broker of a cluster; credentials
(`cli.admin.credentials`) go with every hop, never from https:// to plain http://; a failure is a
typed AdminError (`cli.admin.main` prints the broker's `reason` and exits 1). Every call is
bounded by `timeout_s`.

Output: `show` prints a rich table by default and the broker's JSON with `-o json` (for scripts);
`progress` draws a bar on stderr for long operations; `confirm` asks before a destructive command
unless `--yes` was given, and refuses (ConfirmationRefused) when nobody can answer (stdin is not a
terminal).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from admin_client import NO_CREDENTIALS, TIMEOUT_S, AdminClient, Credentials
from common.errors import ConfirmationRefused

OUTPUTS = ("table", "json")


class AdminConsole(AdminClient):
    """One cluster's admin API (any of its brokers), and how the answers are printed."""

    def __init__(self, admin_url: str, *, output: str = "table", yes: bool = False,
                 timeout_s: float = TIMEOUT_S, credentials: Credentials = NO_CREDENTIALS) -> None:
        super().__init__(admin_url, credentials=credentials, timeout_s=timeout_s)
        self.output = output
        self.yes = yes

    # --- output --------------------------------------------------------------------------------

    def show(self, value: object, *, columns: Sequence[str] | None = None, title: str | None = None) -> None:
        """Print `value`: JSON with `-o json`, else a table (`columns` picks and orders the
        columns of a list of objects)."""
        if self.output == "json":
            print(json.dumps(value, indent=2, sort_keys=True))
            return
        from cli.admin import tables
        tables.print_value(value, columns=columns, title=title)

    def say(self, text: str) -> None:
        """A line for people (not printed with `-o json`, where only the JSON goes to stdout)."""
        if self.output != "json":
            print(text)

    def confirm(self, question: str) -> None:
        """Go on only if confirmed: `--yes`, or "y" typed at a terminal; else ConfirmationRefused."""
        if self.yes:
            return
        if not sys.stdin.isatty():
            raise ConfirmationRefused(f"{question} Refusing without confirmation: pass --yes")
        answer = input(f"{question} [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            raise ConfirmationRefused("not confirmed")

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Any]:
        """A progress bar on stderr (transient); yields `update(completed, total=None)`."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(description, total=total)

            def update(completed: int, total: int | None = None) -> None:
                if total is None:
                    bar.update(task, completed=completed)
                else:
                    bar.update(task, completed=completed, total=total)

            yield update
