"""`strata admin topics explain-storage TOPIC`: why the topic's storage exceeds its backlog.

A thin client of `GET /admin/v2/persistent/{t}/{ns}/{topic}/explain-storage`
(`broker.admin.explain`). With `-o json` it prints the broker's JSON as is; otherwise, per topic
(per partition for a partitioned topic): a header with storageSize and both backlogs, each named
for what it is (backlogSize is the largest subscription's, "unconsumed by some subscription" the
union over subscriptions from the decomposition; they differ when subscriptions are behind at
different places), a table of the ledgers (entries, size, state, where it
lives, publish span, what keeps it, when it goes), the decomposition of storageSize (sizes
human-readable, percent) and the advice lines.

Consecutive ledgers with the same story (state, bookies, in S3 or not, `keptBy` lines equal but for
times, `goes` equal but for times and positions) are one row, `8-14 (7)`, with their entries and
bytes summed, the first publish time to the last, and what keeps and when goes the first and the
last of them: a topic of thousands of ledgers held by one subscription reads in a few rows, not
thousands. `--all-ledgers` shows a row per ledger. On a terminal narrower than TABLE_WIDTH_MIN
columns the ledgers print as indented blocks (`ledger_blocks`) instead of a table whose eight
columns would wrap every cell.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re

from rich.console import Console
from rich.table import Table

from cli.admin.commands import Groups, command, topic_path
from cli.admin.console import AdminConsole
from common.human import human_bytes

_console = Console(soft_wrap=False)


def add_parsers(groups: Groups) -> None:
    parser = command(groups["topics"], "explain-storage", run,
                     help="why storage is bigger than backlog: every ledger, what keeps it, when it goes")
    parser.add_argument("topic")
    parser.add_argument("--all-ledgers", action="store_true",
                        help="a row per ledger (by default runs of ledgers with the same story are one row)")


def run(args: argparse.Namespace, client: AdminConsole) -> int:
    answer = client.call("GET", topic_path(args.topic) + "/explain-storage")
    if client.output == "json":
        print(json.dumps(answer, indent=2, sort_keys=True))
        return 0
    if isinstance(answer, dict) and "partitions" in answer:
        for explanation in answer["partitions"].values():
            print_explanation(explanation, group=not args.all_ledgers)
    else:
        print_explanation(answer, group=not args.all_ledgers)
    return 0


# Below this terminal width the eight-column ledger table wraps every cell: ledgers print as blocks.
TABLE_WIDTH_MIN = 120


def print_explanation(e: dict, *, group: bool = True) -> None:
    """The tables and advice of one topic's (or partition's) explanation."""
    _console.print(f"[bold]{e['topic']}[/bold]: {header(e)}", highlight=False)
    if _console.width >= TABLE_WIDTH_MIN:
        _console.print(_ledgers_table(e, group))
    else:
        for line in ledger_blocks(e, group):
            _console.print(line, highlight=False)
    _console.print(_decomposition_table(e))
    for line in e["advice"]:
        _console.print(f"- {line}", highlight=False)


def header(e: dict) -> str:
    """"storage 20 KiB; largest subscription backlog 56 B (sub-x); unconsumed by some subscription
    535 B": both backlogs, each named for what it is (they differ when subscriptions are behind at
    different places; see `broker.explain.analysis`)."""
    subscriptions = e.get("subscriptions") or {}
    text = f"storage {human_bytes(e['storageSize'])}; "
    if not subscriptions:
        return text + f"no subscription (backlog {human_bytes(e['backlogSize'])})"
    name = e.get("backlogSubscription")
    if name is None:      # a broker from before backlogSubscription: the largest one, as it picks
        name = max(subscriptions, key=lambda sub: subscriptions[sub]["backlogSize"])
    largest = "subscription backlog" if len(subscriptions) == 1 else "largest subscription backlog"
    text += f"{largest} {human_bytes(e['backlogSize'])} ({name})"
    unconsumed = sum(part["size"] for part in e["decomposition"] if part["category"] == "unconsumedBacklog")
    return text + f"; unconsumed by some subscription {human_bytes(unconsumed)}"


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


_TIME = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")
_POSITION_OR_TIME = re.compile(r"-?\d+:-?\d+|" + _TIME.pattern)


def _story(ledger: dict) -> tuple:
    """What a ledger shares with its neighbours when one row can tell them all."""
    location = ledger["location"]
    return (ledger["state"], tuple(location["bookies"]) if location["bookieCopy"] else None,
            location["s3"] is None, _TIME.sub("#", _kept(ledger)), _POSITION_OR_TIME.sub("#", ledger["goes"]))


def _kept(ledger: dict) -> str:
    return "\n".join(keeper["detail"] for keeper in ledger["keptBy"])


def _first_last(first: str, last: str) -> str:
    return f"each:\n{first}" if first == last else f"first: {first}\nlast: {last}"


def _runs(ledgers: list[dict], group: bool) -> list[list[dict]]:
    """Consecutive ledgers with the same story (each ledger alone when not grouping)."""
    runs: list[list[dict]] = []
    for ledger in ledgers:
        if group and runs and _story(runs[-1][-1]) == _story(ledger):
            runs[-1].append(ledger)
        else:
            runs.append([ledger])
    return runs


def _ledgers_table(e: dict, group: bool = True) -> Table:
    table = Table(title="ledgers, oldest first")
    for column in ("ledger", "entries", "size", "state", "where", "published", "kept by", "goes"):
        table.add_column(column, overflow="fold")
    for run in _runs(e["ledgers"], group):
        first, last = run[0], run[-1]
        name = str(first["ledgerId"]) if len(run) == 1 else f"{first['ledgerId']}-{last['ledgerId']} ({len(run)})"
        span = f"{_time(first['firstPublishMs'])}\n{_time(last['lastPublishMs'])}" if first["state"] != "compacted" \
            else f"compacted at\n{_time(first['createdMs'])}"
        kept = _kept(first) if len(run) == 1 else _first_last(_kept(first), _kept(last))
        goes = first["goes"] if len(run) == 1 else f"first: {first['goes']}\nlast: {last['goes']}"
        where = _where(first) if len(run) == 1 or first["location"]["s3"] is None else \
            _where(first) + f"\n... ({len(run)} objects)"
        table.add_row(name, str(sum(ledger["entries"] for ledger in run)),
                      human_bytes(sum(ledger["size"] for ledger in run)), first["state"], where, span, kept, goes)
    return table


def ledger_blocks(e: dict, group: bool = True) -> list[str]:
    """The ledger table's rows as text blocks, for terminals too narrow for the table: a title line
    per run of ledgers, then what keeps it, when it goes, and where it lives, indented."""
    lines = ["ledgers, oldest first:"]
    for run in _runs(e["ledgers"], group):
        first, last = run[0], run[-1]
        name = f"ledger {first['ledgerId']}" if len(run) == 1 else \
            f"ledgers {first['ledgerId']}-{last['ledgerId']} ({len(run)})"
        entries = sum(ledger["entries"] for ledger in run)
        size = human_bytes(sum(ledger["size"] for ledger in run))
        start, end = _time(first["firstPublishMs"]), _time(last["lastPublishMs"])
        if start[:10] == end[:10]:
            end = end[11:]                       # the same day: the time is enough
        if first["state"] == "compacted":        # the compacted view: written by a compaction run
            published = f"written by compaction at {_time(first['createdMs'])}"
        else:
            published = "nothing published yet" if start == "-" else f"published {start} .. {end}"
        lines.append(f"[bold]{name}[/bold]: {first['state']}, {entries} entries, {size}, {published}")
        for label, first_text, last_text in (("kept by", _kept(first), _kept(last)),
                                             ("goes", first["goes"], last["goes"])):
            if first_text == last_text:
                lines += [f"    {label}: {line}" for line in first_text.splitlines()]
            else:
                lines += [f"    {label} (first): {line}" for line in first_text.splitlines()]
                lines += [f"    {label} (last): {line}" for line in last_text.splitlines()]
        lines += [f"    where: {place}" for place in _where(first).splitlines()]
    return lines


def _decomposition_table(e: dict) -> Table:
    table = Table(title=f"storageSize {e['storageSize']} bytes =")
    for column in ("part", "size", "percent", "ledgers"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for part in e["decomposition"]:
        table.add_row(part["label"], human_bytes(part["size"]), f"{part['percent']:.2f} %", str(part["ledgers"]))
    return table
