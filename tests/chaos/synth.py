"""Synthetic chaos histories for the checker's tests: a clean one from a seed, and the records
to break it with.

`clean_history(seed)` is what a correct run looks like: two topics (one plain, one with two
partitions), a producer on each sending keyed and unkeyed messages, every send acknowledged and
read back in order, and the four subscription types delivering everything in log order and
acking it (individually, or cumulatively on Exclusive and Failover). Faults, when asked for,
are short and sends go on through them. Records carry wall-clock-like times and come sorted by
time, as `chaos.history.merge` leaves them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from chaos.history import payload

T0 = 1_700_000_000.0
PLAIN = "persistent://chaos/ns/plain"
PARTED = "persistent://chaos/ns/parted"
SUBS = [("ex", "Exclusive"), ("fo", "Failover"), ("sh", "Shared"), ("ks", "Key_Shared")]
KEYS = ["a", "b", "c", None]
SEND_GAP_S = 0.1
Record = dict[str, Any]


def rec(op: str, t: float, proc: str = "test", **fields: Any) -> Record:
    return {"t": t, "proc": proc, "op": op, **fields}


@dataclass
class Built:
    records: list[Record]
    sends: list[Record] = field(default_factory=list)        # the send records, in send order

    def find(self, op: str, **match: Any) -> list[Record]:
        return [r for r in self.records if r["op"] == op and all(r.get(k) == v for k, v in match.items())]

    def one(self, op: str, **match: Any) -> Record:
        found = self.find(op, **match)
        assert len(found) == 1, (op, match, found)
        return found[0]

    def drop(self, record: Record) -> None:
        self.records.remove(record)

    def add(self, record: Record) -> None:
        self.records.append(record)
        self.records.sort(key=lambda r: r["t"])

    def values_of(self, producer: str) -> list[str]:
        return [s["value"] for s in self.sends if s["producer"] == producer]


def _part(base: str, partitions: int, key: str | None, seq: int) -> tuple[str, int]:
    if partitions == 0:
        return base, -1
    index = (seq if key is None else "abc".index(key)) % partitions
    return f"{base}-partition-{index}", index


def clean_history(seed: int, *, sends_min: int = 20, sends_max: int = 40, faults: bool = False) -> Built:
    rng = random.Random(seed)
    built = Built([])
    records = built.records
    records.append(rec("phase", T0 - 2, "runner", phase="run"))
    for base, partitions in ((PLAIN, 0), (PARTED, 2)):
        records.append(rec("topic", T0 - 2, "runner", topic=base, partitions=partitions, subs=[list(s) for s in SUBS]))
        for sub, _ in SUBS:
            records.append(rec("consumer", T0 - 1, f"c-{sub}", topic=base, sub=sub, consumer=f"{sub}-1", event="open"))
    t = T0
    entries: dict[str, int] = {}
    plan = [(base, partitions, producer, seq) for base, partitions, producer in
            ((PLAIN, 0, "p-plain"), (PARTED, 2, "p-parted")) for seq in range(rng.randint(sends_min, sends_max))]
    plan.sort(key=lambda step: (step[3] * 2 + rng.random()))     # the producers take turns, each in order
    for base, partitions, producer, seq in plan:
        key = rng.choice(KEYS)
        part, index = _part(base, partitions, key, seq)
        entry = entries.get(part, 0)
        entries[part] = entry + 1
        msg_id = f"{10 + 100 * (index + 1) + entry // 10}:{entry % 10}:{index}:-1"
        t += SEND_GAP_S
        send = rec("send", t + 0.01, producer, topic=part, producer=producer, seq=seq, key=key,
                   value=payload(producer, seq), outcome="ok", t0=t, t1=t + 0.01, msg_id=msg_id)
        records.append(send)
        built.sends.append(send)
        _deliver_and_ack(records, rng, base, send)
    t_end = t + 5
    for send in built.sends:
        records.append(rec("read", t_end + 0.001 * send["seq"], "final", topic=send["topic"], reader="final",
                           value=send["value"], key=send["key"], msg_id=send["msg_id"]))
    for part in sorted(entries):
        records.append(rec("final", t_end + 1, "final", topic=part, count=entries[part], complete=True, error=None))
    for base in (PLAIN, PARTED):
        for sub, _ in SUBS:
            records.append(rec("consumer", t_end + 2, f"c-{sub}", topic=base, sub=sub, consumer=f"{sub}-1",
                               event="closed"))
    if faults:
        _add_faults(records, rng, T0, t)
    records.sort(key=lambda r: r["t"])
    return built


def _deliver_and_ack(records: list[Record], rng: random.Random, base: str, send: Record) -> None:
    for i, (sub, subtype) in enumerate(SUBS):
        t = send["t1"] + 0.02 + 0.001 * i
        common = dict(topic=send["topic"], sub=sub, consumer=f"{sub}-1", value=send["value"], msg_id=send["msg_id"])
        records.append(rec("deliver", t, f"c-{sub}", subtype=subtype, key=send["key"], redelivery=0, **common))
        mode = rng.choice(["individual", "cumulative"]) if subtype in ("Exclusive", "Failover") else "individual"
        records.append(rec("ack", t + 0.0005, f"c-{sub}", mode=mode, **common))


def _add_faults(records: list[Record], rng: random.Random, start: float, end: float) -> None:
    roles = [("broker", "broker-kill9"), ("bookie", "bookie-sigstop"), ("metadata", "pg-sigstop"),
             ("s3", "s3-slowdown"), ("network", "partition-broker-bookie")]
    t = start + 0.5
    for n, (role, kind) in enumerate(rng.sample(roles, len(roles))):
        if t + 1 >= end:
            break
        records.append(rec("fault", t, "nemesis", fault=kind, role=role, target=f"{role}-0", id=f"f{n}"))
        records.append(rec("heal", t + 0.5, "nemesis", fault=kind, role=role, target=f"{role}-0", id=f"f{n}"))
        t += 1.0
