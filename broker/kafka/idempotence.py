"""Kafka's idempotent producer state of one partition: pure, no IO (KIP-98, KIP-360).

Kafka's rules differ from Pulsar dedup (`broker.topics.dedup`: one high mark per producer name,
gaps never refused). Here, per (partition, producer id), for a batch of sequences
`first_seq..last_seq` (31-bit, wrapping from SEQUENCE_MAX to 0) sent with `epoch`:

- the same (first_seq, last_seq) as one of the last `batches_kept` durable batches of that pid
  and epoch -> DUPLICATE, answered with that batch's original offsets and timestamp; as a batch
  accepted but not yet durable -> IN_FLIGHT, with the `token` its caller gave at accept time
  (e.g. an asyncio.Future of the first append's outcome, which a retry can await);
- else epoch < the pid's epoch -> INVALID_EPOCH (Kafka error 47), nothing appended;
- epoch > the pid's epoch (a bump) -> APPEND if first_seq is 0, else OUT_OF_ORDER (45);
- the same epoch -> APPEND if first_seq follows the last *accepted* sequence (clients pipeline
  up to 5 batches, so a batch is checked against the ones still in flight), else OUT_OF_ORDER;
- a pid with no state -> APPEND if first_seq is 0. A later sequence is accepted only from a pid
  this partition expired or evicted (`expire`, the `producers_max` bound): every batch it sent
  before was durable and acknowledged, so Kafka's rule today (any sequence) is safe for it. From a
  pid never seen here, or rolled back to nothing by a failed first batch, a later sequence is
  OUT_OF_ORDER: its earlier batches are not stored. Accepting it would lose them silently, since
  librdkafka takes a later batch's success as proof that earlier batches whose outcome it did not
  know were stored ("implicit ack"). That happens when the first batch fails on a partition's
  old owner, or is refused while the new owner is still loading, and the next batch arrives at
  the new owner. librdkafka answers this OUT_OF_ORDER by draining, bumping its epoch and
  retrying from sequence 0, because the refused batch is not its oldest unacknowledged one.

Lifecycle of a batch: `check` -> `accept` (before the append is submitted) -> `on_appended`
(durable: its offsets are known) or `on_failed`. A failed append rolls the pid back to what it
had before that batch: the failed batch and every batch accepted after it are forgotten (the
managed ledger fails every append behind a failed one), so the client's retry of the failed
batch is accepted, and a later batch arriving before that retry is OUT_OF_ORDER, as Kafka needs.
Appended batches are folded into the durable state in accept order per pid (an append reported
before an earlier one of the same pid waits for it), so the kept batches stay in log order.

`replay` folds a batch read back from the log (restart: snapshot + replay, see
`broker.kafka.producer_state`). Folding is idempotent: a batch at or before the pid's last
durable batch (by first offset, which only grows along the log) changes nothing, so a replay
that starts before entries a snapshot already reflects is harmless.

Limits: at most `producers_max` pids per partition (PRODUCER_IDS_MAX by default); a new pid
when full evicts the least recently used pid with nothing in flight (it then has no state and is
remembered as expired: its next batch is accepted whatever its sequence); if every pid has batches in
flight, `accept` raises LimitExceeded. At most IN_FLIGHT_BATCHES_MAX batches in flight per pid
(clients send at most 5), else LimitExceeded. Pids idle for `expiry_ms` (Kafka's
producer.id.expiration.ms) go at `expire()`, never while a batch is in flight. At most
`producers_max` expired or evicted pids are remembered (the oldest is forgotten first); the
durable state keeps them.

What must hold: the durable state (`to_doc`) reflects only appended batches, in log order per
pid; a DUPLICATE verdict names a batch that was appended; an accepted batch is resolved exactly
once (appended or failed, or dropped by the failure of an earlier one).
"""

from __future__ import annotations

import collections
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.errors import InvalidArgument, LimitExceeded
from common.invariant import invariant, present

log = logging.getLogger(__name__)

# Outer MessageMetadata properties of an entry the Kafka front end stores for a batch of an
# idempotent producer (decimal strings); absent for other batches. `kafka.seq` is the base sequence.
PID_PROPERTY = "kafka.pid"
EPOCH_PROPERTY = "kafka.epoch"
SEQ_PROPERTY = "kafka.seq"

SEQUENCE_MAX = 2**31 - 1          # sequences wrap from here to 0
EPOCH_MAX = 2**15 - 1             # int16 on the wire
PRODUCER_ID_MAX = 2**63 - 1       # int64 on the wire; negative = not idempotent
NO_EPOCH = -1
BATCHES_KEPT = 5                  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
PRODUCER_ID_EXPIRY_MS = 86_400_000
PRODUCER_IDS_MAX = 10_000         # pids tracked per partition; the least recently used idle one goes
IN_FLIGHT_BATCHES_MAX = 64        # batches accepted and not yet resolved, per pid
DOC_VERSION = 1


class Verdict(enum.Enum):
    APPEND = "append"                  # store it (call accept first)
    DUPLICATE = "duplicate"            # already stored: answer success with `mark`'s offsets
    IN_FLIGHT = "in_flight"            # being stored: await `token` for the original's outcome
    OUT_OF_ORDER = "out_of_order"      # OUT_OF_ORDER_SEQUENCE_NUMBER (45), nothing stored
    INVALID_EPOCH = "invalid_epoch"    # INVALID_PRODUCER_EPOCH (47), nothing stored


@dataclass(frozen=True)
class BatchMark:
    """A durable batch: its sequences, the offsets of its first and last record, its timestamp."""
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class Check:
    verdict: Verdict
    mark: BatchMark | None = None      # DUPLICATE: the original batch
    token: object | None = None        # IN_FLIGHT: what the original's caller gave to accept


def next_seq(seq: int) -> int:
    """The sequence after `seq` (after SEQUENCE_MAX comes 0)."""
    return 0 if seq == SEQUENCE_MAX else seq + 1


def last_seq_of(first_seq: int, records: int) -> int:
    """The last sequence of a batch of `records` records starting at `first_seq` (wrapping)."""
    return (first_seq + records - 1) % (SEQUENCE_MAX + 1)


@dataclass
class _InFlight:
    """A batch accepted and not yet folded into the durable state."""
    serial: int                        # accept order in the partition (the snapshot barrier)
    epoch: int
    first_seq: int
    last_seq: int
    token: object
    mark: BatchMark | None = None      # set once appended; None = its append is still running
    wall_ms: int = 0                   # when it was appended (valid once mark is set)


@dataclass
class _Producer:
    epoch: int = NO_EPOCH              # epoch of `batches`; NO_EPOCH = nothing durable yet
    # The last `batches_kept` durable batches, oldest first, all of `epoch`; empty = none.
    batches: collections.deque[BatchMark] = field(default_factory=collections.deque)
    wall_ms: int = 0                   # wall time of the latest durable batch (for expiry)
    in_flight: list[_InFlight] = field(default_factory=list)   # accept order

    def accepted(self) -> tuple[int, int | None]:
        """(epoch, last sequence) of the newest accepted batch, in flight or durable."""
        if self.in_flight:
            newest = self.in_flight[-1]
            return newest.epoch, newest.last_seq
        if self.batches:
            return self.epoch, self.batches[-1].last_seq
        return NO_EPOCH, None


class PartitionProducers:
    """The idempotent-producer state of one partition (see the module docstring)."""

    def __init__(self, *, batches_kept: int = BATCHES_KEPT, expiry_ms: int = PRODUCER_ID_EXPIRY_MS,
                 producers_max: int = PRODUCER_IDS_MAX) -> None:
        invariant(batches_kept >= 1 and producers_max >= 1, "room for one batch of one producer",
                  batches_kept=batches_kept, producers_max=producers_max)
        self.batches_kept = batches_kept
        self.expiry_ms = expiry_ms
        self.producers_max = producers_max
        # pid -> its state, least recently used first (accept, append and replay move it last)
        self._producers: collections.OrderedDict[int, _Producer] = collections.OrderedDict()
        self._serial = 0                 # serial of the newest accepted batch; 0 = none yet
        # serial -> pid of every batch accepted and not yet resolved, oldest first
        self._unresolved: dict[int, int] = {}
        # pids expired or evicted here, oldest first (at most producers_max): their next batch
        # may carry any sequence
        self._expired: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.appended_batches = 0        # batches folded by on_appended since this object exists
        self.evicted = 0                 # pids dropped because the partition was full
        # Called after on_appended and on_failed (durability: `broker.kafka.producer_state`);
        # None = nobody listens. Must not call back into this object's mutators.
        self.listener: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self._producers)

    # --- the produce path ------------------------------------------------------------------------

    def check(self, pid: int, epoch: int, first_seq: int, last_seq: int) -> Check:
        _check_batch(pid, epoch, first_seq, last_seq)
        p = self._producers.get(pid)
        if p is None:
            known_before = first_seq == 0 or pid in self._expired
            return Check(Verdict.APPEND if known_before else Verdict.OUT_OF_ORDER)
        epoch_now, last = p.accepted()
        if epoch == epoch_now:
            for r in p.in_flight:
                if r.epoch == epoch and r.first_seq == first_seq and r.last_seq == last_seq:
                    if r.mark is not None:
                        return Check(Verdict.DUPLICATE, mark=r.mark)
                    return Check(Verdict.IN_FLIGHT, token=r.token)
            if p.epoch == epoch:
                for b in p.batches:
                    if b.first_seq == first_seq and b.last_seq == last_seq:
                        return Check(Verdict.DUPLICATE, mark=b)
        if epoch < epoch_now:
            return Check(Verdict.INVALID_EPOCH)
        expected = 0 if epoch > epoch_now or last is None else next_seq(last)
        return Check(Verdict.APPEND if first_seq == expected else Verdict.OUT_OF_ORDER)

    def accept(self, pid: int, epoch: int, first_seq: int, last_seq: int, token: object) -> None:
        """The batch `check` said APPEND for is about to be submitted."""
        verdict = self.check(pid, epoch, first_seq, last_seq).verdict
        invariant(verdict is Verdict.APPEND, "accept follows a check that said APPEND",
                  pid=pid, epoch=epoch, first_seq=first_seq, verdict=verdict.value)
        p = self._producers.get(pid)
        if p is None:
            p = self._admit(pid)
        elif len(p.in_flight) >= IN_FLIGHT_BATCHES_MAX:
            raise LimitExceeded("too many batches of one producer in flight", pid=pid,
                                in_flight_max=IN_FLIGHT_BATCHES_MAX)
        self._serial += 1
        p.in_flight.append(_InFlight(self._serial, epoch, first_seq, last_seq, token))
        self._unresolved[self._serial] = pid
        self._producers.move_to_end(pid)

    def on_appended(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                    last_offset: int, timestamp_ms: int, wall_ms: int) -> None:
        """The accepted batch is durable at `first_offset..last_offset`."""
        mark = BatchMark(first_seq, last_seq, first_offset, last_offset, timestamp_ms)
        p = self._producers.get(pid)
        r = None if p is None else _find(p, epoch, first_seq, last_seq)
        if p is None or r is None:
            log.warning("kafka producer %d: batch %d..%d (epoch %d) appended without being in flight "
                        "(rolled back by an earlier failure?); recording it as the log has it",
                        pid, first_seq, last_seq, epoch)
            self.replay(pid, epoch, first_seq, last_seq, first_offset, last_offset, timestamp_ms, wall_ms)
        else:
            r.mark, r.wall_ms = mark, wall_ms
            while p.in_flight and p.in_flight[0].mark is not None:
                done = p.in_flight.pop(0)
                del self._unresolved[done.serial]
                self._fold(p, done.epoch, present(done.mark, "a folded batch has its mark"), done.wall_ms)
            self._producers.move_to_end(pid)
        self.appended_batches += 1
        self._notify()

    def on_failed(self, pid: int, epoch: int, first_seq: int) -> None:
        """The accepted batch's append failed: forget it and every batch of `pid` accepted after
        it, so the client's retry is accepted. Nothing in flight matching: nothing to do (an
        earlier failure already dropped it)."""
        p = self._producers.get(pid)
        at = None if p is None else next((i for i, r in enumerate(p.in_flight) if r.mark is None
                                          and r.epoch == epoch and r.first_seq == first_seq), None)
        if p is None or at is None:
            return
        dropped, p.in_flight = p.in_flight[at:], p.in_flight[:at]
        for r in dropped:
            del self._unresolved[r.serial]
            if r.mark is not None:
                log.error("kafka producer %d: batch %d..%d was reported appended after batch %d "
                          "failed; the state forgets it (the log may hold it twice after the retry)",
                          pid, r.first_seq, r.last_seq, first_seq)
        if not p.in_flight and not p.batches:
            del self._producers[pid]     # nothing durable: the pid has no state again
        self._notify()

    # --- durable state ---------------------------------------------------------------------------

    def replay(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
               last_offset: int, timestamp_ms: int, wall_ms: int) -> None:
        """A batch stored in the log (read back at load): fold it, no accept needed."""
        p = self._producers.get(pid)
        if p is None:
            p = self._admit(pid)
        self._fold(p, epoch, BatchMark(first_seq, last_seq, first_offset, last_offset, timestamp_ms), wall_ms)
        self._producers.move_to_end(pid)

    def expire(self, now_ms: int) -> int:
        """Drop pids whose latest durable batch is `expiry_ms` old or older and that have nothing
        in flight; returns how many went."""
        gone = [pid for pid, p in self._producers.items()
                if not p.in_flight and now_ms - p.wall_ms >= self.expiry_ms]
        for pid in gone:
            del self._producers[pid]
            self._remember_expired(pid)
        return len(gone)

    def to_doc(self) -> dict[str, Any]:
        """The durable state (nothing in flight), least recently used pid first."""
        return {"version": DOC_VERSION, "producers": [
            [pid, p.epoch, p.wall_ms, [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms]
                                       for b in p.batches]]
            for pid, p in self._producers.items() if p.batches],
            "expired": list(self._expired)}

    @classmethod
    def from_doc(cls, doc: dict[str, Any], **kw: Any) -> PartitionProducers:
        state = cls(**kw)
        if doc.get("version") != DOC_VERSION:
            raise InvalidArgument("unknown kafka producer state version", version=doc.get("version"))
        producers = doc["producers"]
        for pid, *_ in producers[:-state.producers_max]:    # over the bound: as if evicted
            state._remember_expired(int(pid))
        for pid, epoch, wall_ms, batches in producers[-state.producers_max:]:
            p = _Producer(int(epoch), collections.deque(maxlen=state.batches_kept), int(wall_ms))
            p.batches.extend(BatchMark(*map(int, b)) for b in batches)
            if p.batches:
                state._producers[int(pid)] = p
        for pid in doc.get("expired", [])[-state.producers_max:]:   # absent from older snapshots
            if int(pid) not in state._producers:
                state._remember_expired(int(pid))
        return state

    # --- for the durability layer ----------------------------------------------------------------

    @property
    def accepted_serial(self) -> int:
        """Serial of the newest accepted batch (0: none yet). Every batch accepted so far has a
        serial at or below it."""
        return self._serial

    def unresolved_serial_min(self) -> int | None:
        """Serial of the oldest accepted batch not yet folded or dropped; None if none."""
        return next(iter(self._unresolved), None)

    def in_flight(self) -> int:
        """Batches accepted and not yet resolved, in the whole partition."""
        return len(self._unresolved)

    # --- inside ----------------------------------------------------------------------------------

    def _admit(self, pid: int) -> _Producer:
        """A new pid's state; when full, the least recently used pid with nothing in flight goes."""
        if len(self._producers) >= self.producers_max:
            idle = next((q for q, p in self._producers.items() if not p.in_flight), None)
            if idle is None:
                raise LimitExceeded("every tracked kafka producer has batches in flight",
                                    producers_max=self.producers_max)
            del self._producers[idle]
            self._remember_expired(idle)
            self.evicted += 1
        p = _Producer(batches=collections.deque(maxlen=self.batches_kept))
        self._producers[pid] = p
        self._expired.pop(pid, None)
        return p

    def _remember_expired(self, pid: int) -> None:
        self._expired[pid] = None
        self._expired.move_to_end(pid)
        while len(self._expired) > self.producers_max:
            self._expired.popitem(last=False)

    def _fold(self, p: _Producer, epoch: int, mark: BatchMark, wall_ms: int) -> None:
        """Make `mark` the newest durable batch of `p` (no-op if the log has it before the newest)."""
        if p.batches and mark.first_offset <= p.batches[-1].first_offset:
            return                       # already reflected (a replay over a newer snapshot)
        if epoch != p.epoch:
            p.batches.clear()            # a new epoch: the old epoch's batches are no duplicates
            p.epoch = epoch
        p.batches.append(mark)
        p.wall_ms = max(p.wall_ms, wall_ms)

    def _notify(self) -> None:
        if self.listener is not None:
            self.listener()


def _find(p: _Producer, epoch: int, first_seq: int, last_seq: int) -> _InFlight | None:
    for r in p.in_flight:
        if r.mark is None and r.epoch == epoch and r.first_seq == first_seq and r.last_seq == last_seq:
            return r
    return None


def _check_batch(pid: int, epoch: int, first_seq: int, last_seq: int) -> None:
    if not (0 <= pid <= PRODUCER_ID_MAX and 0 <= epoch <= EPOCH_MAX
            and 0 <= first_seq <= SEQUENCE_MAX and 0 <= last_seq <= SEQUENCE_MAX):
        raise InvalidArgument("kafka producer batch out of range", pid=pid, epoch=epoch,
                              first_seq=first_seq, last_seq=last_seq)
