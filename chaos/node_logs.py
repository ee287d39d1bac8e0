"""What the nodes' own logs say happened, as history records: lease lapses nobody injected, and
bundles the load manager moved.

A broker or bookie whose metadata lease lapses stops writing (that is the fencing that keeps a
frozen owner harmless) and may lose acks it had not persisted yet, exactly as when the nemesis
cuts it from PostgreSQL. On a loaded 2-core machine that also happens with no fault at all:
a renewal comes late. Such a lapse is an event of the run, so it goes into the history as a
`fault` record (`fault` "lease-lapse", `spontaneous` true, the node's role) with its `heal`
when the node writes again: the checker then judges it like any fault of that role (liveness
bounds, acks it may lose), and the report counts it, so it is never hidden either way.

    records = spontaneous_lapses(cluster, nemesis_windows, slack_s)
    records += bundle_moves(cluster, nemesis_windows, slack_s)

A bundle unloaded by the load manager (shedding, a split) closes its topics' consumers; acks
still in flight on those connections are lost, as in Pulsar, and the messages come again. So an
unload is an event too (`fault` "bundle-unload", `spontaneous` true, role broker, healed at once).

What must hold: only lapses that begin outside every nemesis fault (from its start to its heal
plus `slack_s`) are reported; a lapse with no recovery line in the log heals at the log's end.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
LAPSED = "lease lapsed by the local clock"
UNLOADED = "unloaded bundle "
RECOVERED = ("lease renewed again", "registered again under a new metadata session", "replaces ")


def _time_of(line: str) -> float | None:
    match = _STAMP.match(line)
    if not match:
        return None
    return datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def lapses(log_path: Path) -> list[tuple[float, float | None]]:
    """(start, end) of every lease lapse in one node's log, end None when it never recovered."""
    out: list[tuple[float, float | None]] = []
    start: float | None = None
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        t = _time_of(line)
        if t is None:
            continue
        if LAPSED in line and start is None:
            start = t
        elif start is not None and any(marker in line for marker in RECOVERED):
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, None))
    return out


def spontaneous_lapses(nodes: Iterable[tuple[str, str, Path]], windows: list[tuple[float, float]],
                       slack_s: float, end_t: float) -> list[dict[str, Any]]:
    """`fault`/`heal` record fields for each lapse of each (name, role, log) outside `windows`
    (nemesis faults as (start, heal)), each widened by `slack_s` after the heal."""
    records: list[dict[str, Any]] = []
    for name, role, log_path in nodes:
        for n, (start, end) in enumerate(lapses(log_path), 1):
            if any(a <= start <= b + slack_s for a, b in windows):
                continue
            fault_id = f"lease-{name}-{n}"
            common = {"fault": "lease-lapse", "role": role, "target": name, "id": fault_id, "spontaneous": True}
            records.append({"op": "fault", "t": start, **common})
            records.append({"op": "heal", "t": end if end is not None else end_t, **common})
    return records


def unloads(log_path: Path) -> list[tuple[float, str]]:
    """(time, bundle) of every bundle a broker's log says it unloaded."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        t = _time_of(line)
        if t is not None and UNLOADED in line:
            out.append((t, line.split(UNLOADED, 1)[1].strip()))
    return out


def bundle_moves(nodes: Iterable[tuple[str, str, Path]], windows: list[tuple[float, float]],
                 slack_s: float) -> list[dict[str, Any]]:
    """`fault`/`heal` record fields for each bundle unload outside `windows` (see the module)."""
    records: list[dict[str, Any]] = []
    for name, role, log_path in nodes:
        if role != "broker":
            continue
        for n, (t, bundle) in enumerate(unloads(log_path), 1):
            if any(a <= t <= b + slack_s for a, b in windows):
                continue
            common = {"fault": "bundle-unload", "role": role, "target": name, "id": f"unload-{name}-{n}",
                      "spontaneous": True, "bundle": bundle}
            records.append({"op": "fault", "t": t, **common})
            records.append({"op": "heal", "t": t, **common})
    return records
