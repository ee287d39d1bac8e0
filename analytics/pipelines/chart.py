"""PNG charts of the analytics reports, drawn on matplotlib's Agg canvas.

    summary_chart(report, "summary.png", title="persistent://public/default/x")
    lag_chart(lag_report, "consumer-lag.png", title="... / sub")

The figures are built with `matplotlib.figure.Figure` and `FigureCanvasAgg` directly, not
pyplot, so nothing depends on a display or on pyplot's global figure list (safe in a server or
a test run), and every figure is freed when the function returns.

What must hold: a report with no rows still gives a valid PNG (empty axes with a note).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from analytics.pipelines.consumer_lag import LagReport
from analytics.pipelines.summary import Summary

DPI = 100
KEY_LABEL_CHARS_MAX = 24


def _figure(width_in: float, height_in: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _empty(axes: Any, what: str) -> None:
    axes.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=axes.transAxes, color="grey")


def _label(value: Any, none_label: str) -> str:
    text = none_label if value is None else str(value)
    return text if len(text) <= KEY_LABEL_CHARS_MAX else text[:KEY_LABEL_CHARS_MAX - 1] + "…"


def _hourly_panel(axes: Any, report: Summary) -> None:
    hours = report.hourly.column("hour").to_pylist()
    axes.set_title("messages and payload MiB per hour (UTC)")
    if not hours:
        _empty(axes, "messages")
        return
    axes.bar(hours, report.hourly.column("messages").to_pylist(), width=0.9 / 24, color="tab:blue", align="edge")
    axes.set_ylabel("messages", color="tab:blue")
    mib = [b / (1 << 20) for b in report.hourly.column("payload_bytes").to_pylist()]
    twin = axes.twinx()
    twin.plot([h + datetime.timedelta(minutes=30) for h in hours], mib, color="tab:orange", marker="o")
    twin.set_ylabel("payload MiB", color="tab:orange")
    axes.tick_params(axis="x", labelrotation=30)


def _barh_panel(axes: Any, table: Any, column: str, title: str, none_label: str) -> None:
    axes.set_title(title)
    labels = [_label(v, none_label) for v in table.column(column).to_pylist()]
    if not labels:
        _empty(axes, column)
        return
    axes.barh(labels[::-1], table.column("messages").to_pylist()[::-1], color="tab:green")
    axes.set_xlabel("messages")


def _lag_panel(axes: Any, report: Summary) -> None:
    axes.set_title("publish → event time lag per hour (ms)")
    rows = [r for r in report.lag.to_pylist() if r["messages_with_event_time"]]
    if not rows:
        _empty(axes, "event times")
        return
    hours = [r["hour"] for r in rows]
    for figure, color in (("p50", "tab:blue"), ("p99", "tab:red"), ("max", "tab:grey")):
        axes.plot(hours, [r[f"event_lag_ms_{figure}"] for r in rows], marker="o", color=color, label=figure)
    axes.set_yscale("symlog", linthresh=10)     # p50 and max are often orders of magnitude apart
    axes.legend(loc="best")
    axes.tick_params(axis="x", labelrotation=30)


def summary_chart(report: Summary, path: str | Path, title: str) -> Path:
    figure = _figure(12, 8)
    figure.suptitle(f"{title}: {report.totals.get('messages', 0):,} messages")
    grid = figure.subplots(2, 2)
    _hourly_panel(grid[0][0], report)
    _barh_panel(grid[0][1], report.keys, "key", "top keys", "(no key)")
    _lag_panel(grid[1][0], report)
    _barh_panel(grid[1][1], report.producers, "producer_name", "producers", "(unnamed)")
    out = Path(path)
    figure.savefig(out, format="png")
    return out


def lag_chart(report: LagReport, path: str | Path, title: str) -> Path:
    figure = _figure(12, 6)
    total = sum(report.partitions.column("unacked_messages").to_pylist())
    figure.suptitle(f"{title}: {total:,} unacked messages")
    counts, ages = figure.subplots(2, 1, sharex=True)
    counts.set_title(f"unacked messages per {report.bucket_s} s of publish time")
    ages.set_title("age of the oldest unacked message in the bucket (s)")
    rows = report.buckets.to_pylist()
    if not rows:
        _empty(counts, "unacked messages")
    for partition in sorted({r["partition"] for r in rows}):
        mine = [r for r in rows if r["partition"] == partition]
        name = "topic" if partition < 0 else f"partition {partition}"
        starts = [r["bucket_start"] for r in mine]
        counts.plot(starts, [r["unacked_messages"] for r in mine], marker="o", drawstyle="steps-post", label=name)
        ages.plot(starts, [r["oldest_age_s"] for r in mine], marker=".", label=name)
    if rows:
        counts.legend(loc="upper right")
    ages.set_xlabel("publish time (UTC)")
    ages.tick_params(axis="x", labelrotation=30)
    out = Path(path)
    figure.savefig(out, format="png")
    return out
