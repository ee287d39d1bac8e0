"""Checks of the Kafka workload (chaos.workload.kafka): its idempotent producers, its consumer group,
and the final read of every partition from offset 0.

Categories, all named `kafka_*` (violations make the history invalid):

- kafka_incomplete_readback (violation): a partition with no `kafka-final`, or whose final read
  did not reach its high watermark: its missing records cannot be judged (`kafka_unverified`).
- kafka_lost (violation): an acknowledged record (its delivery report had no error) the group
  never consumed, by the end of the drain.
- kafka_lost_in_storage (violation): an acknowledged record missing from its partition's complete
  final read.
- kafka_duplicated_in_storage (violation): one producer's seq stored at two offsets: an idempotent
  producer's retries must leave exactly one copy.
- kafka_offset_mismatch (violation): an offset holding a different record than a client was told
  or shown: an acknowledged record stored elsewhere than its delivery report's offset, or a record
  the group consumed at an offset that holds another one (or none) in the final read.
- kafka_nonmonotonic (violation): in one partition's final read, a producer's seq stored after a
  higher seq of its own (an idempotent producer's records stay in order within a partition).
- kafka_wrong_bytes (violation): a consumed or read value that fails its checksum.
- kafka_fatal (violation): a fatal client error (librdkafka gives an idempotent producer up when
  the broker's sequence state and its own disagree).
- kafka_redelivered (informational): records the group consumed more than once. A rebalance hands
  a partition over from its last commit, so records consumed but not yet committed come again:
  at-least-once, not an error.
- kafka_unknown, kafka_unknown_present, kafka_unrecorded, kafka_commit_failed, kafka_gaps
  (informational): sends never acknowledged, those of them stored, stored records no send names,
  commits that failed (a rebalance, a coordinator moving), offsets a final read skipped.

Recovery (reported beside the verdict, like liveness; never a failure): for every fault, and per
partition in use across it (the group consumed it before the fault began, and a send to it was
made after), the time from the fault's start and from its heal to the group's next consumption
of that partition (the worst partition is the fault's figure), and from the heal to the group's
next successful commit. A partition in use that was never consumed again is listed.

What must hold: a pure function of the records (no clock, no I/O), as the other checks.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.checks.findings import EXAMPLES_MAX, Category
from chaos.checks.model import Fault, Record
from chaos.history import parse_payload, payload_ok

SPECS = [
    ("kafka_incomplete_readback", True, "Kafka partitions whose final read is missing or did not reach the end"),
    ("kafka_lost", True, "acknowledged Kafka records the group never consumed"),
    ("kafka_lost_in_storage", True, "acknowledged Kafka records missing from a complete final read"),
    ("kafka_unverified", False, "acknowledged Kafka records not found in an incomplete final read"),
    ("kafka_duplicated_in_storage", True, "a Kafka producer's seq stored at two or more offsets"),
    ("kafka_offset_mismatch", True, "offsets holding another record than a delivery report or the group saw"),
    ("kafka_nonmonotonic", True, "a Kafka producer's seq stored after a higher seq of its own in a partition"),
    ("kafka_wrong_bytes", True, "Kafka values consumed or read that fail their checksum"),
    ("kafka_fatal", True, "fatal errors of a Kafka client (an idempotent producer given up)"),
    ("kafka_redelivered", False, "records the group consumed again (at-least-once after a rebalance)"),
    ("kafka_unknown", False, "Kafka sends never acknowledged"),
    ("kafka_unknown_present", False, "Kafka sends never acknowledged, found stored"),
    ("kafka_unrecorded", False, "stored Kafka values no send record names"),
    ("kafka_commit_failed", False, "the group's synchronous commits that failed"),
    ("kafka_gaps", False, "offsets a Kafka final read skipped"),
]


def kafka_categories(examples_max: int = EXAMPLES_MAX) -> dict[str, Category]:
    return {name: Category(name, violation, doc, examples_max=examples_max) for name, violation, doc in SPECS}


@dataclass
class KafkaRecovery:
    fault: Fault
    from_start_s: float | None          # worst partition: start -> next consumption
    from_heal_s: float | None           # worst partition: heal -> next consumption
    commit_from_heal_s: float | None    # heal -> the group's next successful commit
    never: list[int] = field(default_factory=list)   # partitions not consumed again after the heal

    def to_json(self) -> dict[str, Any]:
        f = self.fault
        return {"id": f.id, "kind": f.kind, "role": f.role, "target": f.target, "start": f.start, "heal": f.heal,
                "from_start_s": self.from_start_s, "from_heal_s": self.from_heal_s,
                "commit_from_heal_s": self.commit_from_heal_s, "never": self.never}


@dataclass
class KafkaVerdict:
    stats: dict[str, Any]
    recovery: list[KafkaRecovery]

    def by_kind(self) -> list[dict[str, Any]]:
        kinds: dict[tuple[str, str], list[KafkaRecovery]] = defaultdict(list)
        for row in self.recovery:
            kinds[(row.fault.role, row.fault.kind)].append(row)
        out = []
        for (role, kind), rows in sorted(kinds.items()):
            starts = [r.from_start_s for r in rows if r.from_start_s is not None]
            heals = [r.from_heal_s for r in rows if r.from_heal_s is not None]
            out.append({"role": role, "kind": kind, "count": len(rows),
                        "median_from_start_s": statistics.median(starts) if starts else None,
                        "max_from_start_s": max(starts, default=None),
                        "median_from_heal_s": statistics.median(heals) if heals else None,
                        "max_from_heal_s": max(heals, default=None),
                        "never": sum(1 for r in rows if r.never)})
        return out

    def to_json(self) -> dict[str, Any]:
        return {"stats": self.stats, "recovery_by_kind": self.by_kind(),
                "recovery": [r.to_json() for r in self.recovery]}

    def summary_lines(self) -> list[str]:
        s = self.stats
        lines = [f"kafka: topic {s['topic']} ({s['partitions']} partitions), group {s['group']}: sends {s['sends']} "
                 f"(acknowledged {s['sends_ok']}, unknown {s['sends_unknown']}, failed {s['sends_failed']}), consumed "
                 f"{s['consumed']} ({s['consumed_distinct']} distinct, {s['redelivered']} again), read back "
                 f"{s['read_back']}, commits {s['commits_ok']} ok / {s['commits_failed']} failed, assignments "
                 f"{s['assignments']}, lag at the end {s['lag_at_end']}",
                 "  recovery of the group (to its next consumption of every partition it was consuming):",
                 f"  {'role':<10} {'kind':<28} {'n':>4} {'median start->consume s':>24} "
                 f"{'max start s':>12} {'median heal s':>14} {'max heal s':>11} {'never':>6}"]
        for k in self.by_kind():
            lines.append(f"  {k['role']:<10} {k['kind']:<28} {k['count']:>4} {_fmt(k['median_from_start_s']):>24} "
                         f"{_fmt(k['max_from_start_s']):>12} {_fmt(k['median_from_heal_s']):>14} "
                         f"{_fmt(k['max_from_heal_s']):>11} {k['never']:>6}")
        for row in self.recovery:
            if row.never:
                lines.append(f"  never consumed again after fault {row.fault.id} ({row.fault.kind}): "
                             f"partitions {row.never}")
        return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@dataclass
class _KafkaHistory:
    topic: Record | None = None
    sends: list[Record] = field(default_factory=list)
    consumes: list[Record] = field(default_factory=list)
    commits: list[Record] = field(default_factory=list)
    members: list[Record] = field(default_factory=list)
    errors: list[Record] = field(default_factory=list)
    lags: list[Record] = field(default_factory=list)
    reads: dict[int, dict[int, Record]] = field(default_factory=lambda: defaultdict(dict))   # p -> offset -> read
    finals: dict[int, Record] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[Record]) -> _KafkaHistory | None:
        h = cls()
        seen = False
        for r in records:
            op = str(r.get("op", ""))
            if not op.startswith("kafka-"):
                continue
            seen = True
            if op == "kafka-topic":
                h.topic = r
            elif op == "kafka-send":
                h.sends.append(r)
            elif op == "kafka-consume":
                h.consumes.append(r)
            elif op == "kafka-commit":
                h.commits.append(r)
            elif op == "kafka-member":
                h.members.append(r)
            elif op == "kafka-error":
                h.errors.append(r)
            elif op == "kafka-lag":
                h.lags.append(r)
            elif op == "kafka-read":
                h.reads[int(r["partition"])].setdefault(int(r["offset"]), r)
            elif op == "kafka-final":
                h.finals[int(r["partition"])] = r
        return h if seen else None

    @property
    def partitions(self) -> int:
        if self.topic is not None:
            return int(self.topic.get("partitions") or 0)
        found = {int(r["partition"]) for r in self.sends if r.get("partition") is not None}
        return max(found, default=-1) + 1


def check_kafka(records: Iterable[Record], faults: list[Fault], cats: dict[str, Category],
                examples_max: int = EXAMPLES_MAX) -> KafkaVerdict | None:
    """Fill the Kafka categories (`kafka_categories`, added to `cats`) and judge recovery; None
    (and no category added) when the history has no Kafka record."""
    h = _KafkaHistory.of(records)
    if h is None:
        return None
    cats.update(kafka_categories(examples_max))
    complete = _readback(h, cats["kafka_incomplete_readback"])
    stored: dict[str, list[tuple[int, int]]] = defaultdict(list)          # value -> [(partition, offset)]
    for p, rows in h.reads.items():
        for offset, row in sorted(rows.items()):
            stored[str(row["value"])].append((p, offset))
    consumed = Counter(str(r["value"]) for r in h.consumes)
    _sends(h, complete, stored, consumed, cats)
    _storage(h, complete, stored, cats)
    _consumption(h, complete, consumed, cats)
    for r in h.errors:
        if r.get("fatal"):
            cats["kafka_fatal"].add({"who": r.get("who"), "error": r.get("error"), "t": r.get("t")})
    for r in h.commits:
        if not r.get("ok"):
            cats["kafka_commit_failed"].add({"member": r.get("member"), "offsets": r.get("offsets"),
                                             "error": r.get("error")})
    return KafkaVerdict(_stats(h, consumed), _recovery(h, faults))


def _readback(h: _KafkaHistory, cat: Category) -> set[int]:
    complete: set[int] = set()
    for p in range(h.partitions):
        final = h.finals.get(p)
        if final is None:
            cat.add({"partition": p, "reason": "no final read"})
        elif not final.get("complete"):
            cat.add({"partition": p, "reason": "incomplete", "count": final.get("count"), "high": final.get("high"),
                     "error": final.get("error")})
        else:
            complete.add(p)
    return complete


def _example(send: Record) -> dict[str, Any]:
    return {"value": send.get("value"), "producer": send.get("producer"), "seq": send.get("seq"),
            "partition": send.get("partition"), "offset": send.get("offset"), "t1": send.get("t1")}


def _sends(h: _KafkaHistory, complete: set[int], stored: dict[str, list[tuple[int, int]]],
           consumed: Counter[str], cats: dict[str, Category]) -> None:
    for send in h.sends:
        value = str(send["value"])
        where = stored.get(value, [])
        if send.get("outcome") != "ok":
            cats["kafka_unknown"].add(_example(send) | {"outcome": send.get("outcome"), "error": send.get("error")})
            if where:
                cats["kafka_unknown_present"].add(_example(send) | {"stored": where})
            continue
        if not consumed.get(value):
            cats["kafka_lost"].add(_example(send) | {"stored": where})
        p, offset = send.get("partition"), send.get("offset")
        if not where:
            if p in complete:
                held = h.reads.get(int(p), {}).get(int(offset)) if offset is not None else None
                cats["kafka_lost_in_storage"].add(_example(send) | {"held": held and held.get("value")})
            else:
                cats["kafka_unverified"].add(_example(send))
        elif p is not None and offset is not None and (int(p), int(offset)) not in where:
            cats["kafka_offset_mismatch"].add({"source": "delivery report", **_example(send), "stored": where})


def _storage(h: _KafkaHistory, complete: set[int], stored: dict[str, list[tuple[int, int]]],
             cats: dict[str, Category]) -> None:
    sent = {str(s["value"]) for s in h.sends}
    for value, where in stored.items():
        if len(where) > 1:
            cats["kafka_duplicated_in_storage"].add({"value": value, "copies": where})
        if value not in sent and payload_ok(value):
            cats["kafka_unrecorded"].add({"value": value, "stored": where})
    for p, rows in sorted(h.reads.items()):
        last: dict[str, tuple[int, int]] = {}      # producer -> (seq, offset) stored last
        final = h.finals.get(p) or {}
        expected = int(final.get("low") or 0)
        for offset, row in sorted(rows.items()):
            value = str(row["value"])
            if not payload_ok(value):
                cats["kafka_wrong_bytes"].add({"source": "final read", "partition": p, "offset": offset,
                                               "value": value})
            if offset > expected:
                cats["kafka_gaps"].add({"partition": p, "from": expected, "to": offset - 1})
            expected = offset + 1
            parsed = parse_payload(value)
            if parsed is None:
                continue
            producer, seq = parsed
            before = last.get(producer)
            if before is not None and seq < before[0]:
                cats["kafka_nonmonotonic"].add({"partition": p, "producer": producer,
                                                "earlier": {"seq": before[0], "offset": before[1]},
                                                "later": {"seq": seq, "offset": offset}})
            last[producer] = (seq, offset)


def _consumption(h: _KafkaHistory, complete: set[int], consumed: Counter[str], cats: dict[str, Category]) -> None:
    again: Counter[str] = Counter()
    for r in h.consumes:
        value, p, offset = str(r["value"]), int(r["partition"]), int(r["offset"])
        if not payload_ok(value):
            cats["kafka_wrong_bytes"].add({"source": f"group member {r.get('member')}", "partition": p,
                                           "offset": offset, "value": value})
        if p in complete:
            held = h.reads.get(p, {}).get(offset)
            if held is None or str(held["value"]) != value:
                cats["kafka_offset_mismatch"].add({"source": f"group member {r.get('member')}", "partition": p,
                                                   "offset": offset, "consumed": value,
                                                   "stored": held and held.get("value")})
        again[value] += 1
        if again[value] > 1:
            cats["kafka_redelivered"].add({"value": value, "partition": p, "offset": offset, "member": r.get("member"),
                                           "t": r.get("t"), "times": again[value]})


def _stats(h: _KafkaHistory, consumed: Counter[str]) -> dict[str, Any]:
    outcomes = Counter(str(s.get("outcome")) for s in h.sends)
    topic = h.topic or {}
    last_lag = next((r.get("total") for r in reversed(h.lags) if r.get("total") is not None), None)
    return {"topic": topic.get("topic"), "group": topic.get("group"), "partitions": h.partitions,
            "sends": len(h.sends), "sends_ok": outcomes["ok"], "sends_unknown": outcomes["unknown"],
            "sends_failed": outcomes["failed"], "consumed": len(h.consumes), "consumed_distinct": len(consumed),
            "redelivered": len(h.consumes) - len(consumed),
            "read_back": sum(len(rows) for rows in h.reads.values()),
            "commits_ok": sum(1 for r in h.commits if r.get("ok")),
            "commits_failed": sum(1 for r in h.commits if not r.get("ok")),
            "assignments": sum(1 for r in h.members if r.get("event") == "assign"),
            "fatal_errors": sum(1 for r in h.errors if r.get("fatal")), "lag_at_end": last_lag}


def _first_after(times: list[float], t: float) -> float | None:
    i = bisect.bisect_right(times, t)
    return times[i] if i < len(times) else None


def _recovery(h: _KafkaHistory, faults: list[Fault]) -> list[KafkaRecovery]:
    by_part: dict[int, list[float]] = defaultdict(list)
    for r in h.consumes:
        by_part[int(r["partition"])].append(float(r["t"]))
    for times in by_part.values():
        times.sort()
    last_send: dict[int, float] = {}
    for r in h.sends:
        if r.get("partition") is not None:
            p = int(r["partition"])
            last_send[p] = max(last_send.get(p, 0.0), float(r["t0"]))
    commits = sorted(float(r["t"]) for r in h.commits if r.get("ok"))
    t_end = max((float(r["t"]) for r in [*h.consumes, *h.commits, *h.sends]), default=0.0)
    rows = []
    for fault in faults:
        heal = fault.end(t_end)
        row = KafkaRecovery(fault, None, None, None)
        for p, times in sorted(by_part.items()):
            if not times or times[0] > fault.start or last_send.get(p, 0.0) <= fault.start:
                continue                    # not in use across the fault: nothing to wait for
            after_start, after_heal = _first_after(times, fault.start), _first_after(times, heal)
            if after_heal is None:
                row.never.append(p)
            if after_start is not None:
                row.from_start_s = max(row.from_start_s or 0.0, after_start - fault.start)
            if after_heal is not None:
                row.from_heal_s = max(row.from_heal_s or 0.0, after_heal - heal)
        commit = _first_after(commits, heal)
        row.commit_from_heal_s = None if commit is None else commit - heal
        rows.append(row)
    return rows
