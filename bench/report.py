"""The one table, the JSON and the PNG chart of a benchmark run.

Ratios: every row gets `Strata/this` for its workload, with Strata = the 1-bookie standalone
driven by the native driver (`REFERENCE`): msg/s of Strata ÷ msg/s of the row for throughput
workloads (above 1: Strata is faster), p99 of the row ÷ p99 of Strata for `e2e-5k` (above 1:
Strata's tail is lower), RSS growth per topic of the row ÷ Strata's for `topics-1000` (above 1:
Strata needs less memory per topic). The disk line gives each produce row's MB/s ÷ the disk's group-commit
bandwidth (bench/disk.py): how close a durable log gets to the physical limit. A second table
puts each `e2e-5k` row's publish latency (send → ack, from the row's `extra`) next to its
end-to-end latency; "–" where a driver cannot measure it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

REFERENCE_PREFIX = "strata 1/1/1 (native"
THROUGHPUT = ("produce-1x1", "produce-1x16", "consume-backlog")


def _reference(rows: list[dict], workload: str) -> dict | None:
    for row in rows:
        if row["system"].startswith(REFERENCE_PREFIX) and row["workload"] == workload and not row["error"]:
            return row
    return None


def ratio(rows: list[dict], row: dict) -> float | None:
    ref = _reference(rows, row["workload"])
    if ref is None or row["error"]:
        return None
    if row["workload"] == "e2e-5k":
        return row["p99_ms"] / ref["p99_ms"] if row["p99_ms"] and ref["p99_ms"] else None
    if row["workload"] == "topics-1000":
        mine, theirs = ref["extra"]["rss_kb_per_topic"], row["extra"]["rss_kb_per_topic"]
        return theirs / mine if mine > 0 else None
    return ref["msgs_per_s"] / row["msgs_per_s"] if row["msgs_per_s"] else None


def _f(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(result: dict) -> str:
    rows = result["rows"]
    disk_mb = result["disk"]["mb_per_s"]
    lines = [f"Strata benchmark {result['started']} (commit {result.get('commit')}), scale {result['scale']}, "
             f"{result['machine']['cpus']} cores ({result['machine']['cpu_model']}), "
             f"{result['machine']['note']}",
             f"Disk limit (fsync, group commit): {disk_mb:.0f} MB/s = {disk_mb * 1e6 / 1024:,.0f} msg/s of 1 KiB; "
             f"{result['disk']['fsyncs_per_s']:,.0f} fsyncs/s at 4 KiB", "",
             "| system | workload | msg/s | MB/s | p50 ms | p99 ms | p99.9 ms | server RSS MB | server CPU µs/msg "
             "| Strata/this | MB/s ÷ disk |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        if row["error"]:
            lines.append(f"| {row['system']} | {row['workload']} | error: {row['error'][:120]} "
                         "| | | | | | | | |")
            continue
        r = ratio(rows, row)
        vs_disk = row["mb_per_s"] / disk_mb if row["workload"].startswith("produce") and disk_mb else None
        lines.append(f"| {row['system']} | {row['workload']} | {_f(row['msgs_per_s'], 0)} | {_f(row['mb_per_s'])} "
                     f"| {_f(row['p50_ms'], 2)} | {_f(row['p99_ms'], 2)} | {_f(row['p999_ms'], 2)} "
                     f"| {_f(row['server_rss_mb'], 0)} | {_f(row['server_cpu_us_per_msg'])} "
                     f"| {_f(r, 2)} | {_f(vs_disk, 2)} |")
    lines += _latency_table(rows)
    lines += _topics_table(rows)
    lines += [f"Note: {note}" for note in result.get("notes", [])]
    skipped = {k: v["skipped"] for k, v in result["systems"].items() if "skipped" in v}
    if skipped:
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())]
    return "\n".join(lines)


def _latency_table(rows: list[dict]) -> list[str]:
    """e2e-5k side by side: publish (send → ack) and end-to-end (send → receive) percentiles."""
    e2e = [r for r in rows if r["workload"] == "e2e-5k" and not r["error"]]
    if not e2e:
        return []
    out = ["", "| system | at msg/s | publish p50 ms | publish p99 ms | publish p99.9 ms "
               "| e2e p50 ms | e2e p99 ms | e2e p99.9 ms |",
           "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in e2e:
        e = r["extra"]
        out.append(f"| {r['system']} | {_f(r['msgs_per_s'], 0)} | {_f(e.get('publish_p50_ms'), 2)} "
                   f"| {_f(e.get('publish_p99_ms'), 2)} | {_f(e.get('publish_p999_ms'), 2)} "
                   f"| {_f(r['p50_ms'], 2)} | {_f(r['p99_ms'], 2)} | {_f(r['p999_ms'], 2)} |")
    return out


def _topics_table(rows: list[dict]) -> list[str]:
    many = [r for r in rows if r["workload"] == "topics-1000" and not r["error"]]
    if not many:
        return []
    out = ["", "| system | topics | setup s | server RSS growth KiB/topic | server CPU ms/s per topic |",
           "|---|--:|--:|--:|--:|"]
    for r in many:
        e = r["extra"]
        out.append(f"| {r['system']} | {e['topics']} | {_f(e['setup_s'])} | {_f(e['rss_kb_per_topic'])} "
                   f"| {_f(e['cpu_ms_per_s_per_topic'], 3)} |")
    return out


def draw_chart(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if not r["error"]]
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(18, 6))
    _bars(axes[0], rows, systems, THROUGHPUT, "msgs_per_s", "msg/s (1 KiB)")
    axes[0].axhline(result["disk"]["mb_per_s"] * 1e6 / 1024, color="red", linestyle="--", label="disk limit (produce)")
    axes[0].legend(fontsize=7)
    _bars(axes[1], rows, systems, ("e2e-5k",), "p99_ms", "end-to-end p99 ms at 5k msg/s", log=True)
    _bars(axes[2], rows, systems, ("produce-1x1", "consume-backlog"), "server_cpu_us_per_msg",
          "server CPU µs/msg")
    fig.suptitle(f"Strata vs peers, {result['started']}, {result['machine']['cpus']} shared cores, "
                 f"scale {result['scale']}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _bars(ax, rows: list[dict], systems: list[str], workloads: tuple, key: str, title: str, log: bool = False) -> None:
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        values = []
        for w in workloads:
            match = [r[key] for r in rows if r["system"] == system and r["workload"] == w and r[key] is not None]
            values.append(match[0] if match else 0)
        ax.bar([j + i * width for j in range(len(workloads))], values, width, label=system)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(workloads))], workloads)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    if len(workloads) > 1 or log:
        ax.legend(fontsize=7)


def write(result: dict, out_dir: Path, chart: bool = True) -> list[Path]:
    """bench-<time>.json/.md/.png plus latest.* copies; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = json.dumps(result, indent=2)
    md = table(result) + "\n"
    paths = []
    for base in (f"bench-{stamp}", "latest"):
        (out_dir / f"{base}.json").write_text(text)
        (out_dir / f"{base}.md").write_text(md)
        paths += [out_dir / f"{base}.json", out_dir / f"{base}.md"]
        if chart:
            draw_chart(result, out_dir / f"{base}.png")
            paths.append(out_dir / f"{base}.png")
    return paths
