"""The producer role: one client, the plan's producers of one process, paced async sends.

Each producer sends `payload(name, seq)` with an explicit `sequence_id=seq` (deduplication is on
in the namespace), `send_timeout_millis=0` (the client retries across reconnects for ever, so a
send ends only with the broker's receipt or the producer's close) and at most `pending_max`
sends in flight: when that many are pending the producer skips its slot, so an outage slows it
instead of growing a queue. Keyed producers pick a key from the plan's KEYS with their own
seeded random.Random.

Every send is recorded once, when it is settled: `ok` with the receipt's id and the partition's
full name, `failed` when the client refused it before it could reach a broker (FAILED_RESULTS),
else `unknown` with the error: a send the client gave up on after handing it over may still be
stored. At exit every send still pending is recorded `unknown` (error null) before the producers
close (after SIGTERM, only the client is closed, within TERMINATE_CLOSE_S); a receipt that
arrives after that is ignored (the pending map is the single owner: a send is recorded by
whoever pops it).

Sequence ids continue across restarts of the process: each producer starts after both the
broker's last sequence id for its name and the highest seq in this process's own history file,
so no seq is ever reused for a second send. A duplicate the broker drops answers with the
receipt -1:-1 (Pulsar's behaviour), recorded `ok` with that id.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar

from chaos.history import HISTORY_DIR, HistoryWriter, payload
from chaos.workload.plan import ProducerPlan, WorkloadPlan
from chaos.workload.runtime import (
    RETRY_PAUSE_S,
    STOP_PRODUCERS,
    Stop,
    bounded,
    error_text,
    exit_process,
    format_msg_id,
    make_client,
    partition_name,
)

# results the client gives before the message could reach a broker: definitely not stored
FAILED_RESULTS = frozenset({pulsar.Result.ProducerQueueIsFull, pulsar.Result.MessageTooBig,
                            pulsar.Result.InvalidMessage, pulsar.Result.ProducerBlockedQuotaExceededError,
                            pulsar.Result.ProducerBlockedQuotaExceededException})
TICK_S = 0.005              # pacing resolution
CATCH_UP_S = 1.0            # after a stall, slots older than this are dropped, not sent in a burst
DRAIN_POLL_S = 0.1
TERMINATE_CLOSE_S = 3.0     # after SIGTERM: the bound on closing (pending sends are recorded first)


@dataclass
class _Pending:
    t0: float
    key: str | None
    value: str


@dataclass
class _Producer:
    """One producer's live state; `pending` is shared with the client's callback thread."""
    plan: ProducerPlan
    rng: random.Random
    handle: Any = None                     # pulsar.Producer once created
    next_seq: int = 0                      # the seq of the next send
    next_due_s: float = 0.0                # time.monotonic() of its next slot
    pending: dict[int, _Pending] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ProducerProcess:
    def __init__(self, plan: WorkloadPlan, proc: str, service_url: str, out_dir: str, drain_s: float) -> None:
        self.out_dir = out_dir
        self.drain_s = drain_s
        self.stop = Stop(out_dir, STOP_PRODUCERS).install()
        self.writer = HistoryWriter(out_dir, proc)
        self.client = make_client(service_url)
        seqs = _history_seqs(out_dir, proc)
        self.producers = [_Producer(p, random.Random(f"{plan.seed}:{p.name}"), next_seq=seqs.get(p.name, -1) + 1)
                          for p in plan.producers if p.proc == proc]
        self.keys = plan.keys

    def run(self) -> int:
        for st in self.producers:
            if not self._open(st):
                break
        now = time.monotonic()
        for st in self.producers:
            st.next_due_s = now
        while not self.stop.requested():
            self._tick(time.monotonic())
            time.sleep(TICK_S)
        if not self.stop.terminated:
            self._drain()
        self._finish()
        return 0

    def _open(self, st: _Producer) -> bool:
        """Create the producer, retrying until it exists or a stop comes; whether it exists."""
        p = st.plan
        # a keyed batch must hold one key (Key_Shared dispatches a batch by its key)
        batching_type = pulsar.BatchingType.KeyBased if p.keyed else pulsar.BatchingType.Default
        while not self.stop.requested():
            try:
                st.handle = self.client.create_producer(
                    p.topic, producer_name=p.name, send_timeout_millis=0, batching_enabled=p.batching,
                    batching_type=batching_type,
                    max_pending_messages=p.pending_max, max_pending_messages_across_partitions=p.pending_max,
                    block_if_queue_full=False)
            except Exception as exc:
                self.writer.write("open-failed", kind="producer", topic=p.topic, name=p.name, error=error_text(exc))
                self.stop.wait(RETRY_PAUSE_S)
                continue
            st.next_seq = max(st.next_seq, st.handle.last_sequence_id() + 1)
            self.writer.write("producer", topic=p.topic, producer=p.name, event="open", seq=st.next_seq)
            return True
        return False

    def _tick(self, now: float) -> None:
        for st in self.producers:
            if st.handle is None:
                continue
            if st.next_due_s < now - CATCH_UP_S:
                st.next_due_s = now
            while st.next_due_s <= now:
                st.next_due_s += 1.0 / st.plan.rate_per_s
                if len(st.pending) < st.plan.pending_max:
                    self._send(st)

    def _send(self, st: _Producer) -> None:
        seq = st.next_seq
        st.next_seq += 1
        key = st.rng.choice(self.keys) if st.plan.keyed else None
        entry = _Pending(time.time(), key, payload(st.plan.name, seq))
        with st.lock:
            st.pending[seq] = entry

        def done(result: Any, msg_id: Any) -> None:
            self._settled(st, seq, result, msg_id)
        try:
            st.handle.send_async(entry.value.encode(), done, partition_key=key, sequence_id=seq)
        except Exception as exc:
            self._record(st, seq, "failed", time.time(), error=error_text(exc))

    def _settled(self, st: _Producer, seq: int, result: Any, msg_id: Any) -> None:
        """The client's callback (its own thread): record the outcome once."""
        t1 = time.time()
        if result == pulsar.Result.Ok:
            self._record(st, seq, "ok", t1, msg_id=msg_id)
        else:
            self._record(st, seq, "failed" if result in FAILED_RESULTS else "unknown", t1, error=str(result))

    def _record(self, st: _Producer, seq: int, outcome: str, t1: float | None,
                *, msg_id: Any = None, error: str | None = None) -> None:
        """Write the send record of `seq` unless it was written already (t1 None: never settled)."""
        with st.lock:
            entry = st.pending.pop(seq, None)
        if entry is None:
            return                          # already recorded (unknown at exit)
        fields: dict[str, Any] = {"topic": st.plan.topic, "producer": st.plan.name, "seq": seq, "key": entry.key,
                                  "value": entry.value, "outcome": outcome, "t0": entry.t0, "t1": t1}
        if msg_id is not None:
            fields.update(topic=partition_name(st.plan.topic, msg_id), msg_id=format_msg_id(msg_id))
        if error is not None:
            fields["error"] = error
        self.writer.write("send", **fields)

    def _drain(self) -> None:
        deadline = time.monotonic() + self.drain_s
        while time.monotonic() < deadline and any(st.pending for st in self.producers):
            if self.stop.terminated:
                return
            time.sleep(DRAIN_POLL_S)

    def _finish(self) -> None:
        """Record every pending send unknown, then close (bounded) and exit."""
        for st in self.producers:
            with st.lock:
                left = sorted(st.pending)
            for seq in left:
                self._record(st, seq, "unknown", None)
        if self.stop.terminated:        # now: one short bounded close of the whole client
            error = bounded(self.client.close, TERMINATE_CLOSE_S)
            for st in self.producers:
                self.writer.write("producer", topic=st.plan.topic, producer=st.plan.name, event="closed", error=error)
        else:
            for st in self.producers:
                if st.handle is not None:
                    error = bounded(st.handle.close)
                    self.writer.write("producer", topic=st.plan.topic, producer=st.plan.name, event="closed",
                                      error=error)
            bounded(self.client.close)
        self.writer.close()


def _history_seqs(out_dir: str, proc: str) -> dict[str, int]:
    """The highest seq each producer of `proc` used in an earlier life of this process."""
    path = Path(out_dir) / HISTORY_DIR / f"{proc}.jsonl"
    highest: dict[str, int] = {}
    if not path.exists():
        return highest
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue                      # a torn last line
            if record.get("op") == "send":
                highest[record["producer"]] = max(highest.get(record["producer"], -1), record["seq"])
    return highest


def main(plan: WorkloadPlan, proc: str, service_url: str, out_dir: str, drain_s: float) -> None:
    code = ProducerProcess(plan, proc, service_url, out_dir, drain_s).run()
    exit_process(code)
