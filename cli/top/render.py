"""`strata top`'s frames: a snapshot, its history and the view state → a rich renderable. Pure.

The topic list: a header line (time, sort, cluster totals, brokers answered / failed), one row per
topic (msg/s in and out, backlog in messages, storage in human bytes, consumers, backlog sparkline),
and in the live view a line of keys. The drill-down: the same header, the topic's own numbers,
and one row per subscription (type, msg/s out, backlog, unacked, consumers, mark-delete position,
backlog sparkline). Only the rows that fit (`rows_max`) are drawn, scrolled so the selection shows.
"""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from cli.top.keys import ViewState, selection
from cli.top.model import (
    History,
    Snapshot,
    TopicRow,
    human_rate,
    sorted_subscriptions,
    sorted_topics,
    sparkline,
    subscription_key,
)
from common.human import human_bytes

KEYS_LINE = "r rate  b backlog  s storage  ↑↓/j k select  Enter subscriptions  Esc back  q quit"
_SORT_COLUMN = {"rate": "MSG/S IN", "backlog": "BACKLOG", "storage": "STORAGE"}


def short_name(topic: str) -> str:
    """persistent://t/ns/x → t/ns/x (every topic Strata serves is persistent)."""
    return topic.removeprefix("persistent://")


def header(snapshot: Snapshot, state: ViewState, clock_text: str) -> Group:
    """Two lines: the time, sort and brokers answered / failed; then the cluster's totals."""
    answered, failed = len(snapshot.brokers_answered), len(snapshot.brokers_failed)
    brokers = f"brokers {answered}/{answered + failed} answered"
    if failed:
        brokers += f", {failed} failed ({', '.join(snapshot.brokers_failed)})"
    title = Text(f"strata top  {clock_text}  sort: {state.sort}  ", style="bold", no_wrap=True, overflow="ellipsis")
    title.append(brokers, style="bold red" if failed else "green")
    subs = sum(len(t.subscriptions) for t in snapshot.topics.values())
    totals = Text(f"topics {len(snapshot.topics)}  subscriptions {subs}  consumers {snapshot.consumers}"
                  f"  in {human_rate(snapshot.rate_in_msgs_s)} msg/s  out {human_rate(snapshot.rate_out_msgs_s)} msg/s"
                  f"  backlog {snapshot.backlog_msgs} msgs  storage {human_bytes(snapshot.storage_bytes)}",
                  no_wrap=True, overflow="ellipsis")
    return Group(title, totals)


def window(count: int, index: int, rows_max: int | None) -> tuple[int, int]:
    """[start, stop) of the `rows_max` rows to draw out of `count`, so that row `index` is among them."""
    if rows_max is None or count <= rows_max:
        return 0, count
    rows_max = max(1, rows_max)
    start = min(max(0, index - rows_max + 1), count - rows_max) if index >= rows_max else 0
    return start, start + rows_max


def topics_table(rows: list[TopicRow], history: History, state: ViewState, *, interactive: bool,
                 rows_max: int | None) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    for title in ("TOPIC", "MSG/S IN", "MSG/S OUT", "BACKLOG", "STORAGE", "CONS", "BACKLOG HISTORY"):
        marked = title + " ▼" if _SORT_COLUMN[state.sort] == title else title
        table.add_column(marked, justify="left" if title in ("TOPIC", "BACKLOG HISTORY") else "right",
                         no_wrap=True)
    names = [r.name for r in rows]
    chosen = selection(state, names) if interactive else None
    start, stop = window(len(rows), names.index(chosen) if chosen is not None else 0, rows_max)
    for row in rows[start:stop]:
        table.add_row(short_name(row.name), human_rate(row.rate_in_msgs_s), human_rate(row.rate_out_msgs_s),
                      str(row.backlog_msgs), human_bytes(row.storage_bytes), str(row.consumers),
                      sparkline(history.of(row.name)),
                      style="reverse" if row.name == chosen else None)
    return table


def subscriptions_view(topic: TopicRow, history: History, state: ViewState, rows_max: int | None) -> Group:
    line = Text(f"{short_name(topic.name)}", style="bold cyan")
    line.append(f"  in {human_rate(topic.rate_in_msgs_s)} msg/s  out {human_rate(topic.rate_out_msgs_s)} msg/s"
                f"  backlog {topic.backlog_msgs} msgs  storage {human_bytes(topic.storage_bytes)}"
                f"  consumers {topic.consumers}", style="none")
    if topic.kafka_producers or topic.kafka_consumers:
        line.append(f"  kafka: {topic.kafka_producers} producing, {topic.kafka_consumers} fetching", style="none")
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    for title in ("SUBSCRIPTION", "TYPE", "MSG/S OUT", "BACKLOG", "UNACKED", "CONS", "MARK-DELETE",
                  "BACKLOG HISTORY"):
        table.add_column(title, justify="right" if title in ("MSG/S OUT", "BACKLOG", "UNACKED", "CONS") else "left",
                         no_wrap=True)
    subs = sorted_subscriptions(topic, state.sort)
    start, stop = window(len(subs), 0, rows_max)
    for sub in subs[start:stop]:
        table.add_row(sub.name, sub.sub_type, human_rate(sub.rate_out_msgs_s), str(sub.backlog_msgs),
                      str(sub.unacked_msgs), str(sub.consumers), sub.mark_delete,
                      sparkline(history.of(subscription_key(topic.name, sub.name))))
    if not subs:
        return Group(line, Text("no subscriptions", style="dim"))
    return Group(line, table)


def frame(snapshot: Snapshot, history: History, state: ViewState, *, clock_text: str = "",
          limit: int | None = None, interactive: bool = False, rows_max: int | None = None) -> RenderableType:
    """One whole frame: the topic list, or the subscriptions of `state.drilled`."""
    parts: list[RenderableType] = [header(snapshot, state, clock_text)]
    if state.drilled is None:
        rows = sorted_topics(snapshot, state.sort, limit)
        parts.append(topics_table(rows, history, state, interactive=interactive, rows_max=rows_max)
                     if rows else Text("no topics loaded", style="dim"))
    else:
        topic = snapshot.topics.get(state.drilled)
        if topic is None:
            parts.append(Text(f"{short_name(state.drilled)} is not in the latest answers (unloaded, or its "
                              "broker did not answer)", style="yellow"))
        else:
            parts.append(subscriptions_view(topic, history, state, rows_max))
    if interactive:
        parts.append(Text(KEYS_LINE, style="dim"))
    return Group(*parts)


def to_text(renderable: RenderableType, width: int) -> str:
    """`renderable` as plain text `width` columns wide (no colours): for `--once` into a pipe, and tests."""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False,
                      legacy_windows=False, emoji=False, highlight=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


def text_width(snapshot: Snapshot) -> int:
    """Columns enough for the widest row without truncating a topic name or the header."""
    longest = max((len(short_name(n)) for n in snapshot.topics), default=10)
    failed = sum(len(b) + 2 for b in snapshot.brokers_failed)
    return max(160 + failed, longest + 100)
