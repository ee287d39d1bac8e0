"""The report of a chaos run: `report.txt`, `timeline.png` and `verdict.json` under the output dir.

    paths = write_report(out_dir, verdict, records, seed=42, cluster={"brokers": 2, "bookies": 3})

The text gives the seed first (so a run can be repeated), the cluster's shape, the duration,
the faults by role and kind, every check's count and examples, the liveness table and stuck
subscriptions, and ends with one line: `VALID` or `INVALID (...)`. The timeline plots the
acknowledged sends per second of each topic (base topics: partitions summed) and draws every
fault as a band from its start to its heal, coloured by role and labelled by kind.

Charts are drawn on matplotlib's Agg canvas with `Figure` directly (no pyplot, no global
state), as analytics/pipelines/chart.py does. What must hold: the report only reads the verdict
and the records; the last line of report.txt is the verdict.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chaos.checker import Verdict
from chaos.checks.model import Fault, History, Record, base_of

REPORT_TXT = "report.txt"
TIMELINE_PNG = "timeline.png"
VERDICT_JSON = "verdict.json"
ROLE_COLOURS = {"broker": "tab:red", "bookie": "tab:blue", "metadata": "tab:purple", "postgres": "tab:purple",
                "s3": "tab:orange", "network": "tab:green", "data": "tab:brown"}
OTHER_COLOUR = "tab:gray"
LINES_MAX = 20            # topics drawn; the rest are summed into one "others" line


def write_report(out_dir: str | Path, verdict: Verdict, records: Iterable[Record], *, seed: int,
                 cluster: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Write report.txt, timeline.png and verdict.json under `out_dir`; their paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    history = History.of(records)
    paths = {"report": out / REPORT_TXT, "timeline": out / TIMELINE_PNG, "verdict": out / VERDICT_JSON}
    doc = {"seed": seed, "cluster": dict(cluster or {}), **verdict.to_json()}
    paths["verdict"].write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    paths["report"].write_text(summary(verdict, history, seed=seed, cluster=cluster), encoding="utf-8")
    draw_timeline(history, paths["timeline"], title=f"strata chaos, seed {seed}")
    return paths


def summary(verdict: Verdict, history: History, *, seed: int, cluster: Mapping[str, Any] | None = None) -> str:
    lines = [f"strata chaos report: seed {seed}", ""]
    shape = ", ".join(f"{k}={v}" for k, v in (cluster or {}).items()) or "(not given)"
    stats = verdict.stats
    lines.append(f"cluster: {shape}")
    lines.append(f"duration: {stats.get('duration_s', 0.0):.1f} s of history; sends {stats.get('sends', 0)} "
                 f"(ok {stats.get('sends_ok', 0)}, failed {stats.get('sends_failed', 0)}, unknown "
                 f"{stats.get('sends_unknown', 0)}), read back {stats.get('read_back', 0)}, deliveries "
                 f"{stats.get('deliveries', 0)}, acks {stats.get('acks', 0)}, nacks {stats.get('nacks', 0)}")
    lines += ["", *_faults_section(history.faults), "", "checks:"]
    for name, cat in verdict.categories.items():
        mark = "VIOLATION" if cat.failed else ("" if cat.violation else "info")
        count = str(cat.count) if cat.checked else "not checked"
        lines.append(f"  {name:<28} {count:>8}  {mark:<9} {cat.doc}")
        lines += [f"      e.g. {json.dumps(example, default=str)}" for example in cat.examples]
    lines += ["", *_liveness_section(verdict), ""]
    if verdict.kafka is not None:
        lines += [*verdict.kafka.summary_lines(), ""]
    lines.append("VALID" if verdict.valid else f"INVALID ({', '.join(verdict.violations)})")
    return "\n".join(lines) + "\n"


def _faults_section(faults: list[Fault]) -> list[str]:
    counts = Counter((f.role, f.kind) for f in faults)
    lines = [f"faults: {len(faults)} ({sum(1 for f in faults if f.combined)} combined with another, "
             f"{sum(1 for f in faults if f.heal is None)} never healed)"]
    lines += [f"  {role:<10} {kind:<28} {n:>4}" for (role, kind), n in sorted(counts.items())]
    return lines


def _fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _liveness_section(verdict: Verdict) -> list[str]:
    live = verdict.liveness
    lines = [f"liveness: {'targets met' if live.ok else 'TARGETS MISSED'} (lease {verdict.params.get('lease_s')} s)",
             f"  {'role':<10} {'kind':<28} {'n':>4} {'from':>5} {'bound s':>8} {'max start->ack s':>17} "
             f"{'max heal->ack s':>16} {'late':>5}"]
    for k in live.kinds:
        lines.append(f"  {k.role:<10} {k.kind:<28} {k.count:>4} {k.rule:>5} {k.bound_s:>8.1f} "
                     f"{_fmt_s(k.max_from_start_s):>17} {_fmt_s(k.max_from_heal_s):>16} {k.late:>5}")
    for row in live.faults:
        for late in row.late[:3]:
            lines.append(f"  late: fault {row.fault.id} ({row.fault.kind}) {json.dumps(late, default=str)}")
    lines.append(f"  stuck subscriptions: {live.stuck.count}")
    lines += [f"      e.g. {json.dumps(example, default=str)}" for example in live.stuck.examples]
    return lines


def acks_per_second(history: History) -> tuple[float, dict[str, list[int]]]:
    """(time zero, topic -> acknowledged sends in each second from it): base topics, partitions summed."""
    t0 = history.t_begin
    seconds = max(1, math.ceil(history.t_end - t0) + 1)
    series: dict[str, list[int]] = defaultdict(lambda: [0] * seconds)
    for send in history.sends:
        if send.outcome == "ok" and send.t1 is not None:
            series[base_of(send.part)][min(seconds - 1, max(0, int(send.t1 - t0)))] += 1
    ranked = sorted(series, key=lambda topic: -sum(series[topic]))
    if len(ranked) > LINES_MAX:
        others = [sum(column) for column in zip(*(series[t] for t in ranked[LINES_MAX:]))]
        series = {t: series[t] for t in ranked[:LINES_MAX]} | {"others": others}
    return t0, dict(series)


def draw_timeline(history: History, path: Path, *, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    t0, series = acks_per_second(history)
    fig = Figure(figsize=(14, 6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for topic, counts in sorted(series.items()):
        ax.plot(range(len(counts)), counts, linewidth=0.9, label=topic.rsplit("/", 1)[-1])
    top = max([max(c) for c in series.values() if c] or [1])
    for i, fault in enumerate(history.faults):
        start, end = fault.start - t0, fault.end(history.t_end) - t0
        colour = ROLE_COLOURS.get(fault.role, OTHER_COLOUR)
        ax.axvspan(start, max(end, start + 0.2), color=colour, alpha=0.18, linewidth=0)
        ax.text(start, top * (1.02 + 0.06 * (i % 4)), fault.kind, fontsize=6, color=colour, rotation=0)
    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=ROLE_COLOURS.get(role, OTHER_COLOUR), alpha=0.3, label=f"fault: {role}")
                for role in sorted({f.role for f in history.faults})]
    ax.set_ylim(0, top * 1.3)
    ax.set_xlabel("seconds since the history's first record")
    ax.set_ylabel("acknowledged sends per second")
    ax.set_title(title)
    if handles:
        ax.legend(handles=handles, loc="upper right", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, format="png")
