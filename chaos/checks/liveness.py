"""Liveness: how long sends stalled after each fault, and subscriptions that stopped moving.

Per fault (a `fault` record and the `heal` with its id; never healed: the end of the history)
and per partition, the time from the fault's start, and from its heal, to the next acknowledged
send (the first ok send completing, by t1, after that instant). The issue's targets decide
which one is judged, and against what bound (`rule_of`):

    broker   from the start: lease + 2 s (the topics of a dead or frozen broker move)
    bookie   from the start: 2 s (an ensemble change, no wait for the bookie)
    others   from the heal:  lease + 2 s (metadata store, S3, network, data faults)

A partition is judged only if it was in use across the instant (a send invoked before it, and
one invoked after it or one never completed); one with no ack after the instant is late. A
topic the workload starts using after the instant is not held to that fault's bound. Combined faults:
a fault whose recovery window overlaps another's (started before this one's deadline, with its
own deadline after this one's start) extends the deadline to the other's, to a fixed point, so
a fault is never blamed for the stall another caused. The worst partition is what the table
shows.

Stuck subscriptions: after the last heal (or from the history's start when there was no fault),
a subscription with at least one consumer open and a backlog (acknowledged sends on its topic it
has not delivered yet) that delivers nothing for longer than `stuck_s`.

What must hold: every fault gets a row; a partition with no ack after a fault it was sending
through is reported late, never skipped.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaos.checks.findings import EXAMPLES_MAX, Category
from chaos.checks.model import Fault, History, SubKey, base_of

BOOKIE_BOUND_S = 2.0
LEASE_SLACK_S = 2.0


def rule_of(role: str, lease_s: float) -> tuple[str, float]:
    """(what the bound counts from: "start" | "heal", the bound in seconds) for a fault's role."""
    if role == "broker":
        return "start", lease_s + LEASE_SLACK_S
    if role == "bookie":
        return "start", BOOKIE_BOUND_S
    return "heal", lease_s + LEASE_SLACK_S


@dataclass
class FaultLiveness:
    fault: Fault
    rule: str                       # "start" | "heal": what the bound counts from
    bound_s: float
    deadline: float                 # latest time of the first ack allowed (combined faults included)
    from_start_s: float | None      # worst partition: start -> next ack (None: no partition judged)
    from_heal_s: float | None       # worst partition: heal -> next ack
    late: list[dict[str, Any]] = field(default_factory=list)   # partitions past the deadline

    def to_json(self) -> dict[str, Any]:
        f = self.fault
        return {"id": f.id, "kind": f.kind, "role": f.role, "target": f.target, "start": f.start, "heal": f.heal,
                "combined": f.combined, "rule": self.rule, "bound_s": self.bound_s, "deadline": self.deadline,
                "from_start_s": self.from_start_s, "from_heal_s": self.from_heal_s, "late": self.late}


@dataclass
class KindLiveness:
    kind: str
    role: str
    count: int
    rule: str
    bound_s: float
    max_from_start_s: float | None
    max_from_heal_s: float | None
    late: int                       # faults of this kind with a late partition

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Liveness:
    faults: list[FaultLiveness]
    kinds: list[KindLiveness]
    stuck: Category

    @property
    def ok(self) -> bool:
        return not self.stuck.count and not any(f.late for f in self.faults)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "kinds": [k.to_json() for k in self.kinds],
                "faults": [f.to_json() for f in self.faults], "stuck": self.stuck.to_json()}


def check_liveness(history: History, lease_s: float, stuck_s: float,
                   examples_max: int = EXAMPLES_MAX) -> Liveness:
    acks = _ack_times(history)
    tried = _tried(history)
    own = {f.id: _own_deadline(f, lease_s, history.t_end) for f in history.faults}
    rows = [_fault_row(history, f, lease_s, _combined_deadline(history, f, own), acks, tried)
            for f in history.faults]
    stuck = Category("stuck", False, f"subscriptions with backlog and consumers, no delivery for > {stuck_s:g} s "
                     "after the last heal", examples_max=examples_max)
    _check_stuck(history, stuck_s, stuck)
    return Liveness(rows, _by_kind(rows), stuck)


def _ack_times(history: History) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for send in history.sends:
        if send.outcome == "ok" and send.t1 is not None:
            times[send.part].append(send.t1)
    for values in times.values():
        values.sort()
    return times


def _tried(history: History) -> dict[str, tuple[list[float], bool]]:
    """Per partition: the sorted invocation times, and whether a send never completed."""
    invoked: dict[str, list[float]] = defaultdict(list)
    hanging: dict[str, bool] = defaultdict(bool)
    partitioned = {base for base, spec in history.topics.items() if spec.partitions > 0}
    for send in history.sends:
        if send.part in partitioned:    # refused before it reached a partition: no partition's liveness
            continue
        invoked[send.part].append(send.t0)
        hanging[send.part] |= send.t1 is None
    return {part: (sorted(times), hanging[part]) for part, times in invoked.items()}


def _own_deadline(fault: Fault, lease_s: float, t_end: float) -> float:
    rule, bound_s = rule_of(fault.role, lease_s)
    return (fault.start if rule == "start" else fault.end(t_end)) + bound_s


def _combined_deadline(history: History, fault: Fault, own: dict[str, float]) -> float:
    deadline = own[fault.id]
    changed = True
    while changed:
        changed = False
        for other in history.faults:
            if other.start <= deadline and own[other.id] >= fault.start and own[other.id] > deadline:
                deadline, changed = own[other.id], True
    return deadline


def _first_after(times: list[float], t: float) -> float | None:
    i = bisect.bisect_right(times, t)
    return times[i] if i < len(times) else None


def _fault_row(history: History, fault: Fault, lease_s: float, deadline: float,
               acks: dict[str, list[float]], tried: dict[str, tuple[list[float], bool]]) -> FaultLiveness:
    rule, bound_s = rule_of(fault.role, lease_s)
    heal = fault.end(history.t_end)
    ref = fault.start if rule == "start" else heal
    row = FaultLiveness(fault, rule, bound_s, deadline, None, None)
    for part, (invoked, hanging) in sorted(tried.items()):
        i = bisect.bisect_left(invoked, ref)
        if i == 0 or (i == len(invoked) and not hanging):
            continue                    # not in use across the instant: nothing to wait for
        first = _first_after(acks.get(part, []), ref)
        after_start = _first_after(acks.get(part, []), fault.start)
        after_heal = _first_after(acks.get(part, []), heal)
        if after_start is not None:
            row.from_start_s = max(row.from_start_s or 0.0, after_start - fault.start)
        if after_heal is not None:
            row.from_heal_s = max(row.from_heal_s or 0.0, after_heal - heal)
        if first is None or first > deadline:
            row.late.append({"topic": part, "first_ack_t": first, "deadline": deadline,
                             "waited_s": None if first is None else first - ref})
    return row


def _by_kind(rows: list[FaultLiveness]) -> list[KindLiveness]:
    kinds: dict[str, KindLiveness] = {}
    for row in rows:
        kind = kinds.setdefault(row.fault.kind, KindLiveness(row.fault.kind, row.fault.role, 0, row.rule,
                                                             row.bound_s, None, None, 0))
        kind.count += 1
        kind.late += 1 if row.late else 0
        if row.from_start_s is not None:
            kind.max_from_start_s = max(kind.max_from_start_s or 0.0, row.from_start_s)
        if row.from_heal_s is not None:
            kind.max_from_heal_s = max(kind.max_from_heal_s or 0.0, row.from_heal_s)
    return sorted(kinds.values(), key=lambda k: (k.role, k.kind))


def _check_stuck(history: History, stuck_s: float, cat: Category) -> None:
    heals = [f.end(history.t_end) for f in history.faults]
    since_t = max(heals) if heals else history.t_begin
    events: dict[SubKey, list[tuple[float, int, str]]] = defaultdict(list)
    subs = history.subscriptions()
    for send in history.sends:
        if send.outcome == "ok" and send.t1 is not None:
            for sub in subs:
                if sub[0] == send.base:
                    events[sub].append((send.t1, 0, send.value))
    for record in history.deliveries:
        events[(base_of(record["topic"]), record["sub"])].append((float(record["t"]), 1, record["value"]))
    for record in history.consumer_events:
        opened = record.get("event") == "open"
        events[(base_of(record["topic"]), record["sub"])].append((float(record["t"]), 2 if opened else 3,
                                                                  str(record["consumer"])))
    for sub in sorted(subs):
        _stalls(sub, sorted(events.get(sub, [])), since_t, history.t_end, stuck_s, cat)


def _stalls(sub: SubKey, events: list[tuple[float, int, str]], since_t: float, t_end: float,
            stuck_s: float, cat: Category) -> None:
    """Walk one subscription's events: 0 send acked, 1 delivered, 2 consumer open, 3 closed."""
    delivered: set[str] = set()
    backlog: set[str] = set()
    connected: set[str] = set()
    stall_t: float | None = None

    def judge(t: float) -> None:
        if stall_t is not None and t - max(stall_t, since_t) > stuck_s:
            cat.add({"topic": sub[0], "sub": sub[1], "from_t": max(stall_t, since_t), "to_t": t,
                     "stalled_s": t - max(stall_t, since_t), "backlog": len(backlog),
                     "consumers": sorted(connected)})

    for t, kind, what in events:
        if kind == 0 and what not in delivered:
            backlog.add(what)
        elif kind == 1:
            delivered.add(what)
            backlog.discard(what)
        elif kind == 2:
            connected.add(what)
        elif kind == 3:
            connected.discard(what)
        stalled = bool(backlog and connected)
        if stall_t is not None and (kind == 1 or not stalled):
            judge(t)                    # the stall ends here: a delivery, or nothing to wait for
            stall_t = None
        if stalled and stall_t is None:
            stall_t = t
    judge(t_end)
