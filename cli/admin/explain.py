"""`strata admin topics explain-storage TOPIC`: why the topic's storage exceeds its backlog.

A thin client of `GET /admin/v2/persistent/{t}/{ns}/{topic}/explain-storage`
(`broker.admin.explain`). With `-o json` it prints the broker's JSON as is; otherwise, per topic
(per partition for a partitioned topic): a table of the ledgers (entries, size, state, where it
lives, publish span, what keeps it, when it goes), the decomposition of storageSize (sizes
human-readable, percent) and the advice lines.
"""

from __future__ import annotations

import argparse
import datetime
import json

from rich.console import Console
from rich.table import Table

from cli.admin.client import AdminClient
from cli.admin.commands import Groups, command, topic_path
from common.human import human_bytes

_console = Console(soft_wrap=False)


def add_parsers(groups: Groups) -> None:
    parser = command(groups["topics"], "explain-storage", run,
                     help="why storage is bigger than backlog: every ledger, what keeps it, when it goes")
    parser.add_argument("topic")


def run(args: argparse.Namespace, client: AdminClient) -> int:
    answer = client.call("GET", topic_path(args.topic) + "/explain-storage")
    if client.output == "json":
        print(json.dumps(answer, indent=2, sort_keys=True))
        return 0
    if isinstance(answer, dict) and "partitions" in answer:
        for explanation in answer["partitions"].values():
            print_explanation(explanation)
    else:
        print_explanation(answer)
    return 0


def print_explanation(e: dict) -> None:
    """The tables and advice of one topic's (or partition's) explanation."""
    _console.print(f"[bold]{e['topic']}[/bold]: storage {human_bytes(e['storageSize'])}, "
                   f"backlog {human_bytes(e['backlogSize'])}")
    _console.print(_ledgers_table(e))
    _console.print(_decomposition_table(e))
    for line in e["advice"]:
        _console.print(f"- {line}", highlight=False)


def _time(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _where(ledger: dict) -> str:
    location = ledger["location"]
    places = []
    if location["bookieCopy"]:
        places.append(", ".join(location["bookies"]) or "bookies")
    if location["s3"] is not None:
        places.append(f"s3://{location['s3']['bucket']}/{location['s3']['key']}")
    return "\n".join(places)


def _ledgers_table(e: dict) -> Table:
    table = Table(title="ledgers, oldest first")
    for column in ("ledger", "entries", "size", "state", "where", "published", "kept by", "goes"):
        table.add_column(column, overflow="fold")
    for ledger in e["ledgers"]:
        span = f"{_time(ledger['firstPublishMs'])}\n{_time(ledger['lastPublishMs'])}"
        kept = "\n".join(keeper["detail"] for keeper in ledger["keptBy"])
        table.add_row(str(ledger["ledgerId"]), str(ledger["entries"]), human_bytes(ledger["size"]),
                      ledger["state"], _where(ledger), span, kept, ledger["goes"])
    return table


def _decomposition_table(e: dict) -> Table:
    table = Table(title=f"storageSize {e['storageSize']} bytes =")
    for column in ("part", "size", "percent", "ledgers"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for part in e["decomposition"]:
        table.add_row(part["label"], human_bytes(part["size"]), f"{part['percent']:.2f} %", str(part["ledgers"]))
    return table
