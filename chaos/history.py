"""The history of a chaos run: one JSON object per line, appended, never rewritten.

Every process of a run (each workload process, the nemesis, the runner) appends to its own file
under `<out>/history/`, one line per write; `merge` joins them into `<out>/history.jsonl`, ordered
by time. A record is a dict with at least:

    t      wall-clock seconds (time.time()) when the record was written
    proc   the writing process's name ("producer-1", "consumer-shared-2", "nemesis", "runner")
    op     what it records (below)

Records, by `op`:

    send       one send, written once it completed or the run ended:
               topic (the partition's full name, e.g. persistent://chaos/ns/t-p-partition-1),
               producer (the producer name), seq (that producer's sequence id, from 0),
               key (or null), value (the payload as text: unique per send, see `payload`),
               outcome ("ok" | "failed" | "unknown"), t0 (invoked), t1 (completed, or null),
               msg_id ("ledger:entry:partition:batch", when ok), error (text, when failed)
    deliver    a consumer received a message: topic, sub, subtype (Exclusive|Failover|Shared|
               Key_Shared), consumer (its name), value, key, msg_id, redelivery (the count)
    ack        a consumer acknowledged: topic, sub, consumer, value, msg_id,
               mode ("individual" | "cumulative": every message up to msg_id)
    nack       a consumer negatively acknowledged: topic, sub, consumer, value, msg_id
    consumer   a consumer's life: topic, sub, consumer, event ("open" | "closed" | "crashed")
    read       a reader (or the final read-back) got a message: topic, reader, value, key, msg_id
    final      the final read-back of one topic ended: topic, count, complete (true when the read
               reached the topic's end), error (text, or null)
    fault      a fault began: fault (its kind, e.g. "broker-kill9"), role, target, id (unique)
    heal       that fault ended: fault, role, target, id
    phase      the run moved on: phase ("setup" | "run" | "heal" | "drain" | "check")
    topic      a topic the workload uses: topic (base name), partitions, subs ([name, subtype]...)

Optional fields the checker (chaos.checker) reads when present (additions; absent means as said):

    consumer   ack_timeout_ms on an "open" record: the consumer's ack timeout (absent or 0: none);
               a redelivery of a value it acked later than that after receiving it is allowed
    fault      role is one of "broker", "bookie", "metadata", "s3", "network" (others are judged
               as "network"): liveness bounds and which faults can lose an unpersisted ack
               follow it (chaos.checks.liveness, chaos.checks.subs)
    send       t0/t1 are wall-clock (time.time()), like `t`, so they compare with fault times

Added by the workload (chaos.workload), on top of the above:

    send       `failed` only when the client refused the send before it could reach a broker
               (queue full, too big, invalid, quota); any other error the client ends a send
               with is `unknown` and carries `error` (it may have been stored). `unknown` with
               t1 null and no error: still pending when the producer process ended. A msg_id
               "-1:-1:..." is the broker's receipt for a duplicate it dropped (Pulsar's).
               The `topic` of deliver, ack, nack and read is the partition's full name too.
    consumer   closed and crashed carry `error` (why, or null) and `close_error` (the close's
               own failure, or null); the consumer is opened again after either, unless stopping
    producer   a producer's life: topic (base name), producer, event ("open" | "closed"),
               seq (open: the first sequence id it will use), error (closed: null or the failure)
    reader     a reader's read failed and it is reopened after its last read: topic, reader,
               event ("crashed"), error
    open-failed  creating a producer, consumer or reader failed (it is retried): kind
               ("producer" | "consumer" | "reader"), topic, name, sub (consumers), error
    ack-failed a consumer's ack call raised (the message stays unacked): the `ack` fields, error
    topic      also: acks ({sub: "individual" | "cumulative"}), keyed (bool), producers (names)

The Kafka workload (chaos.workload.kafka, which lists its records) writes records whose `op`
starts with `kafka-`; chaos.checks.kafka judges them, and the Pulsar checks ignore them.

Payloads are self-checking: `payload(producer, seq)` gives `<producer>:<seq>:<crc32c hex>`, so a
client that received wrong bytes can tell (`payload_ok`).

What must hold: a line is written whole (one write of one line) and flushed; `read` skips a torn
last line of a killed process (and counts it), and never reorders records within one file.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HISTORY_DIR = "history"
MERGED = "history.jsonl"


def payload(producer: str, seq: int) -> str:
    """The value of send number `seq` of `producer`: unique, and carrying its own checksum."""
    body = f"{producer}:{seq}"
    return f"{body}:{zlib.crc32(body.encode()):08x}"


def payload_ok(value: str) -> bool:
    """Do these bytes match their own checksum (false for anything not made by `payload`)?"""
    body, _, crc = value.rpartition(":")
    return bool(body) and f"{zlib.crc32(body.encode()):08x}" == crc


def parse_payload(value: str) -> tuple[str, int] | None:
    """(producer, seq) of a valid payload, else None."""
    if not payload_ok(value):
        return None
    producer, _, rest = value.rpartition(":")[0].rpartition(":")
    try:
        return producer, int(rest)
    except ValueError:
        return None


class HistoryWriter:
    """Appends records to one process's file; each record is one write of one line, flushed."""

    def __init__(self, out_dir: str | Path, proc: str) -> None:
        self.proc = proc
        directory = Path(out_dir) / HISTORY_DIR
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(directory / f"{proc}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, op: str, **fields: Any) -> dict[str, Any]:
        record = {"t": time.time(), "proc": self.proc, "op": op, **fields}
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        return record

    def write_at(self, t: float, op: str, **fields: Any) -> dict[str, Any]:
        """A record of something that happened at `t` (learned later, e.g. from a node's log)."""
        record = {"t": t, "proc": self.proc, "op": op, **fields}
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        return record

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_file(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The records of one file in order, and how many torn lines were skipped."""
    records: list[dict[str, Any]] = []
    torn = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                torn += 1
    return records, torn


def merge(out_dir: str | Path) -> tuple[Path, int]:
    """Join every file under `<out>/history/` into `<out>/history.jsonl`, by time (stable within
    a file); returns its path and the count of torn lines skipped."""
    directory = Path(out_dir) / HISTORY_DIR
    records: list[dict[str, Any]] = []
    torn = 0
    for path in sorted(directory.glob("*.jsonl")):
        got, bad = read_file(path)
        records.extend(got)
        torn += bad
    records.sort(key=lambda r: r["t"])
    target = Path(out_dir) / MERGED
    with open(target, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return target, torn


def records(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a merged history, in order."""
    got, _ = read_file(path)
    yield from got
