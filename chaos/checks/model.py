"""The history indexed for checking: what the checks look up, built once from the records.

Names. A send names its partition (`persistent://t/ns/x-partition-1`, or the topic itself when it
is not partitioned); a `topic` record names the base topic; deliveries, acks, reads and `final`
records may name either, so every record is mapped to its partition (`part`: the name, with the
partition index taken from the message id `ledger:entry:partition:batch` when the record names
the base) and to its base topic (`base`). A subscription is `(base, sub)`: on a partitioned topic
it spans every partition.

The log. The final read-back (`read` records with reader "final") is kept per partition in the
order it was read, one row per distinct message id (a reader that reconnects and reads an entry
again does not make a copy); a row's `rank` is its position in that partition's log.

What must hold: building the index never drops a record silently: a record the checks cannot
place (an unparsable message id on a read) is still kept where wrong bytes and duplicates are
counted, with rank None.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Record = dict[str, Any]
SubKey = tuple[str, str]          # (base topic, subscription name)

FINAL_READER = "final"
_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<index>\d+)$")


def base_of(topic: str) -> str:
    """The base topic of a partition's name (the name itself when it is not a partition)."""
    match = _PARTITION.match(topic)
    return match.group("base") if match else topic


@dataclass(frozen=True, order=True)
class MsgId:
    """A message id as the workload writes it: "ledger:entry:partition:batch" (batch -1 or
    absent: not batched; partition -1: not a partitioned topic)."""

    ledger: int
    entry: int
    partition: int
    batch: int

    @classmethod
    def parse(cls, text: object) -> MsgId | None:
        if not isinstance(text, str):
            return None
        parts = text.split(":")
        if len(parts) not in (3, 4):
            return None
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            return None
        return cls(numbers[0], numbers[1], numbers[2], numbers[3] if len(numbers) == 4 else -1)


def part_of(topic: str, msg_id: object) -> str:
    """The partition a record is about: its topic if that names a partition, else the partition
    its message id says (the topic itself when the id says -1 or cannot be parsed)."""
    if _PARTITION.match(topic):
        return topic
    parsed = MsgId.parse(msg_id)
    if parsed is not None and parsed.partition >= 0:
        return f"{topic}-partition-{parsed.partition}"
    return topic


@dataclass(frozen=True)
class Send:
    part: str                 # the partition it went to
    producer: str
    seq: int
    key: str | None
    value: str
    outcome: str              # "ok" | "failed" | "unknown"
    t0: float                 # invoked
    t1: float | None          # completed; None: never (unknown at the end of the run)
    msg_id: str | None        # as the broker's receipt said, when ok

    @property
    def base(self) -> str:
        return base_of(self.part)


@dataclass(frozen=True)
class Stored:
    """One row of a partition's final read-back."""

    part: str
    rank: int | None          # position in the partition's log (read order); None: unplaceable id
    msg_id: str
    value: str
    key: str | None


@dataclass(frozen=True)
class Fault:
    id: str
    kind: str                 # e.g. "broker-kill9"
    role: str                 # "broker" | "bookie" | "metadata" | "s3" | "network" | ...
    target: str
    start: float
    heal: float | None        # None: never healed (the run ended first)
    combined: bool = False    # started while another fault was active

    def end(self, t_end: float) -> float:
        return self.heal if self.heal is not None else t_end


@dataclass
class TopicSpec:
    base: str
    partitions: int = 0                                  # 0: not partitioned
    subs: dict[str, str] = field(default_factory=dict)   # name -> subtype

    @property
    def parts(self) -> list[str]:
        if self.partitions <= 0:
            return [self.base]
        return [f"{self.base}-partition-{i}" for i in range(self.partitions)]


@dataclass
class History:
    """The records, indexed. Build with `History.of(records)`."""

    sends: list[Send] = field(default_factory=list)
    send_by_value: dict[str, Send] = field(default_factory=dict)
    topics: dict[str, TopicSpec] = field(default_factory=dict)
    log: dict[str, list[Stored]] = field(default_factory=lambda: defaultdict(list))
    copies: dict[str, list[Stored]] = field(default_factory=lambda: defaultdict(list))  # value -> rows
    finals: dict[str, Record] = field(default_factory=dict)      # topic or partition -> final record
    other_reads: list[Record] = field(default_factory=list)      # reads by readers other than "final"
    deliveries: list[Record] = field(default_factory=list)
    acks: list[Record] = field(default_factory=list)
    nacks: list[Record] = field(default_factory=list)
    consumer_events: list[Record] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)       # phase -> first time it began
    t_begin: float = 0.0
    t_end: float = 0.0
    _seen_ids: set[tuple[str, str]] = field(default_factory=set)
    _by_entry: dict[str, list[str]] | None = None      # "ledger:entry" -> values (entry_values)
    _ids: dict[str, dict[str, int]] | None = None                # part -> msg_id -> rank, built on use

    @classmethod
    def of(cls, records: Iterable[Record]) -> History:
        history = cls()
        fault_starts: dict[str, Record] = {}
        heals: dict[str, float] = {}
        times: list[float] = []
        for record in records:
            times.append(float(record["t"]))
            history._add(record, fault_starts, heals)
        if times:
            history.t_begin, history.t_end = min(times), max(times)
        history._pair_faults(fault_starts, heals)
        return history

    def _add(self, record: Record, fault_starts: dict[str, Record], heals: dict[str, float]) -> None:
        op = record.get("op")
        if op == "send":
            self._add_send(record)
        elif op == "read":
            self._add_read(record)
        elif op == "final":
            self.finals[record["topic"]] = record
        elif op == "deliver":
            self.deliveries.append(record)
        elif op == "ack":
            self.acks.append(record)
        elif op == "nack":
            self.nacks.append(record)
        elif op == "consumer":
            self.consumer_events.append(record)
        elif op == "fault":
            fault_starts.setdefault(str(record["id"]), record)
        elif op == "heal":
            heals.setdefault(str(record["id"]), float(record["t"]))
        elif op == "phase":
            self.phases.setdefault(str(record["phase"]), float(record["t"]))
        elif op == "topic":
            spec = self.topics.setdefault(record["topic"], TopicSpec(record["topic"]))
            spec.partitions = int(record.get("partitions") or 0)
            for name, subtype in record.get("subs") or ():
                spec.subs[name] = subtype

    def _add_send(self, record: Record) -> None:
        send = Send(part_of(record["topic"], record.get("msg_id")), str(record["producer"]), int(record["seq"]),
                    record.get("key"), str(record["value"]), str(record["outcome"]), float(record["t0"]),
                    None if record.get("t1") is None else float(record["t1"]), record.get("msg_id"))
        self.sends.append(send)
        self.send_by_value.setdefault(send.value, send)

    def _add_read(self, record: Record) -> None:
        if record.get("reader") != FINAL_READER:
            self.other_reads.append(record)
            return
        part = part_of(record["topic"], record.get("msg_id"))
        msg_id = str(record.get("msg_id"))
        if (part, msg_id) in self._seen_ids:
            return                      # the same entry read again (a reconnect): not a copy
        self._seen_ids.add((part, msg_id))
        rank = len(self.log[part]) if MsgId.parse(msg_id) is not None else None
        row = Stored(part, rank, msg_id, str(record["value"]), record.get("key"))
        if rank is not None:
            self.log[part].append(row)
        self.copies[row.value].append(row)

    def _pair_faults(self, starts: dict[str, Record], heals: dict[str, float]) -> None:
        ordered = sorted(starts.items(), key=lambda item: float(item[1]["t"]))
        for fault_id, record in ordered:
            start = float(record["t"])
            combined = any(f.start <= start < f.end(self.t_end) for f in self.faults)
            self.faults.append(Fault(fault_id, str(record.get("fault", "?")), str(record.get("role", "?")),
                                     str(record.get("target", "")), start, heals.get(fault_id), combined))

    # ---- look-ups -----------------------------------------------------------------------------

    def rank_of(self, value: str) -> tuple[str, int] | None:
        """(partition, rank) of a value's first copy in the final read-back, or None."""
        for row in self.copies.get(value, ()):
            if row.rank is not None:
                return row.part, row.rank
        return None

    def rank_of_id(self, part: str, msg_id: str) -> int | None:
        """The rank of a message id in its partition's read-back (None: not read back)."""
        index = self._id_index().get(part)
        return index.get(msg_id) if index is not None else None

    def _id_index(self) -> dict[str, dict[str, int]]:
        if self._ids is None:
            self._ids = {part: {row.msg_id: row.rank for row in rows if row.rank is not None}
                         for part, rows in self.log.items()}
        return self._ids

    def subscriptions(self) -> dict[SubKey, str]:
        """Every subscription, (base, sub) -> subtype: those the topic records declare, and any
        other a delivery names."""
        subs: dict[SubKey, str] = {}
        for spec in self.topics.values():
            for name, subtype in spec.subs.items():
                subs[(spec.base, name)] = subtype
        for record in self.deliveries:
            subs.setdefault((base_of(record["topic"]), record["sub"]), str(record.get("subtype", "?")))
        return subs

    def parts(self) -> list[str]:
        """Every partition the run used: those the topic records declare, and any a send names
        (a send that never reached a partition names its partitioned topic: not a partition)."""
        found = {part for spec in self.topics.values() for part in spec.parts}
        partitioned = {base for base, spec in self.topics.items() if spec.partitions > 0}
        found.update(send.part for send in self.sends if send.part not in partitioned)
        return sorted(found)

    def entry_values(self, entry: str) -> list[str]:
        """The values stored in one entry ("ledger:entry"), in any partition: a batch's messages."""
        if self._by_entry is None:
            self._by_entry = defaultdict(list)
            for rows in self.log.values():
                for row in rows:
                    ledger, entry_id = (row.msg_id.split(":") + [""])[:2]
                    self._by_entry[f"{ledger}:{entry_id}"].append(row.value)
        return list(self._by_entry.get(entry, []))

    def final_of(self, part: str) -> Record | None:
        """The `final` record covering a partition: its own, else its base topic's."""
        return self.finals.get(part) or self.finals.get(base_of(part))

    def present(self, value: str) -> bool:
        return bool(self.copies.get(value))
