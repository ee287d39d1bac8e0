"""One producer on a topic: SEND → durable append → SEND_RECEIPT, strictly in send order.

Every SEND becomes an append to the topic's managed ledger; the receipt goes out only after the
append completed (the entry is on Qa bookies). Appends may complete in any order, but the client
matches each receipt against the head of its pending queue, so `pending` keeps one slot per SEND
in arrival order and `_drain` writes replies from the head only, as far as they are complete.
A SEND that is refused up front (checksum mismatch, oversize, metadata no consumer could use:
a negative deliver_at_time, an unknown compression codec, chunk fields that lie, see
`broker.topics.chunk_check`) takes a slot too, already completed with its error, so SEND_ERROR is
ordered like any receipt; such a refusal leaves the producer usable.

`pending` is bounded by `broker_pending_sends_max`: past it the connection stops reading (TCP
backpressure reaches the client) until the producer has drained below half.

Deduplication (`broker.topics.dedup`, when enabled for the topic): a SEND is checked before it is
appended. A duplicate takes a slot completed at once with position (-1, -1) — a receipt, nothing
stored; one whose sequence id is still in flight takes a slot completed with a retriable
ServiceNotReady (SEND_ERROR: the C++ client reconnects and resends, as with Pulsar). The topic
records a high mark only once its entry is durable.

No entry is stored after an earlier one of the same producer failed (else dedup would drop the
failed one's retry, apache/pulsar#5218). The managed ledger fails every append accepted behind a
failed one until its `append_failures` count moves; so `_publish` reads that count in the same
synchronous step in which the managed ledger accepts the append, and refuses the SEND when the
count moved while any earlier append of this producer was outstanding (its failure may not have
reached us yet). From the first failure or refusal on (`failed_write`, set in that same step, not
one loop turn later in a done-callback), every later SEND is refused with SEND_ERROR until the
client reconnects and resends them all, in order.

Handing a topic over (`quiesce`, then `settled`, used when a topic closes for an unload or a
stop): SENDs that arrive from then on are dropped unanswered — the client keeps them pending and
resends them after the CLOSE_PRODUCER that follows, to the new owner — while the appends already
in flight complete and get their receipts. So nothing is stored twice and nothing is refused:
the application sees neither a duplicate nor an error.

A SEND on a terminated topic gets SEND_ERROR TopicTerminatedError (the topic normally closes its
producers first, `PersistentTopic.terminate`, so this only meets a SEND already on its way).

What must hold: a SEND_RECEIPT implies its entry is durable (or, for a duplicate, that an entry
with that sequence id is); replies leave in SEND order.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.limits.persistence import DELAYED_DELIVERY
from broker.topics.chunk_check import ChunkCheck
from broker.topics.dedup import Verdict
from broker.topics.entry_facts import facts_of_info
from common.completion import Completion
from common.errors import (
    ChecksumError,
    InvalidArgument,
    MessageTooLarge,
    ServiceNotReady,
    StrataError,
    TopicTerminated,
)
from common.invariant import present
from common.ratelimited_log import RateLimitedLog
from entries.entry import EntryInfo, parse_entry
from ledger.managed_ledger import PUBLISH_TIME_MS_MAX
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)
_APPEND_WARN = RateLimitedLog(log, interval_s=5.0)   # per topic: every append fails while no quorum is live

# Headers a full-size message may carry on top of max_message_size (docs/protocol.md §1.2).
ENTRY_HEADER_SLACK_BYTES = 10 * 1024
# Where a duplicate's receipt points (docs/protocol.md §8.2).
DUPLICATE_POSITION = Position(-1, -1)


class ProducerLink(Protocol):
    """What a producer needs from its client's connection (a protocol front end implements it)."""

    def send_receipt(self, producer_id: int, sequence_id: int, ledger_id: int, entry_id: int) -> None:
        """The message `sequence_id` is stored at (ledger_id, entry_id) (-1, -1: a duplicate)."""
        ...

    def send_failed(self, producer_id: int, sequence_id: int, error: StrataError) -> None:
        """The message `sequence_id` was not stored, for `error`; the producer stays usable."""
        ...

    def producer_closed(self, producer_id: int) -> None:
        """The broker closed the producer: the client reconnects (topic closed, fenced, quota)."""
        ...

    def producer_backlogged(self, producer: Producer, backlogged: bool) -> None:
        """Stop (True) or resume (False) reading the client's messages."""
        ...

    def producer_rate_limited(self, producer: Producer, limited: bool) -> None:
        """A publish rate limit paused (True) or resumed (False) the producer: stop or resume
        reading, as `producer_backlogged` (each True is followed by exactly one False)."""
        ...


class _Slot:
    """One SEND awaiting its reply."""

    __slots__ = ("done", "error", "position", "sequence_id")

    def __init__(self, sequence_id: int) -> None:
        self.sequence_id = sequence_id
        self.position: Position | None = None      # where the entry was stored, once durable
        self.error: StrataError | None = None      # why it failed, once it failed
        self.done = False


class Producer:
    def __init__(self, link: ProducerLink, topic: PersistentTopic, producer_id: int, name: str,
                 pending_max: int, max_message_bytes: int) -> None:
        self.link = link
        self.topic = topic
        self.producer_id = producer_id
        self.name = name
        self.pending: collections.deque[_Slot] = collections.deque()
        self.pending_max = pending_max
        self.entry_bytes_max = max_message_bytes + ENTRY_HEADER_SLACK_BYTES
        self.backlogged = False     # the connection paused reading because of this producer
        self.closed = False
        self.quiesced = False       # handing over: new SENDs are dropped (the client resends them)
        self._settled: asyncio.Event | None = None   # set once `pending` is empty after quiesce()
        self.failed_write: str | None = None   # why an append failed; later SENDs are refused
        # The managed ledger's `append_failures` when each outstanding append (accepted, its
        # outcome not yet seen by `_publish`) was accepted: epoch -> how many. Empty = none.
        self._outstanding_epochs: collections.Counter[int] = collections.Counter()
        self.chunks = ChunkCheck()   # the chunked message under way (broker.topics.chunk_check)
        self.msg_in_counter = 0
        self.bytes_in_counter = 0
        self.connected_since_ms = int(time.time() * 1000)   # wall time it was created (stats)
        self.schema_version = b""   # the version PRODUCER_SUCCESS named (broker.schemas); b"": none
        self.access_mode = "Shared"  # Pulsar's ProducerAccessMode name (set by broker.topics.access_modes; stats)

    def send(self, sequence_id: int, entry: bytes, checksum_ok: bool) -> None:
        if self.quiesced:
            return   # the client resends it after CLOSE_PRODUCER (see the module docstring)
        slot = _Slot(sequence_id)
        self.pending.append(slot)
        if not checksum_ok:
            self._fail(slot, ChecksumError("checksum mismatch in SEND", sequence_id=sequence_id))
        elif len(entry) > self.entry_bytes_max:
            self._fail(slot, MessageTooLarge("entry exceeds max_message_size", size=len(entry),
                                             max=self.entry_bytes_max))
        elif self.topic.terminated:
            self._fail(slot, TopicTerminated("Topic was already terminated", topic=str(self.topic.name)))
        elif self.failed_write is not None:
            self._fail(slot, ServiceNotReady("an earlier write of this producer failed; reconnect",
                                             reason=self.failed_write))
        else:
            try:
                meta = parse_entry(entry)
                refusal = self._refusal(entry, meta)
            except StrataError as exc:
                self._fail(slot, exc)
            else:
                if refusal is not None:
                    self._fail(slot, refusal)
                else:
                    if self.topic.rates.publish_limited:   # broker.topics.rate_limits: may pause reads
                        self.topic.rates.on_publish(self, max(1, meta.num_messages), len(entry))
                    self._store(slot, entry, meta)
        if len(self.pending) >= self.pending_max and not self.backlogged:
            self.backlogged = True
            self.link.producer_backlogged(self, True)

    def _refusal(self, entry: bytes, meta: EntryInfo) -> StrataError | None:
        """Why metadata no consumer could use, or the topic's policy refuses, must not be stored
        (a SEND_ERROR, the producer stays usable), or None. Checked before dedup, so a refused
        SEND records nothing."""
        if meta.deliver_at_time_ms is not None and meta.deliver_at_time_ms < 0:
            # not a time at all (the official client refuses it; a deliver_at in the past is
            # fine and means "now")
            return InvalidArgument("deliver_at_time is negative", deliver_at_time=meta.deliver_at_time_ms)
        too_late = self.topic.storage.delayed.refusal(meta.deliver_at_time_ms, meta.publish_time_ms)
        if too_late is not None:        # the topic's delayedDelivery maxDeliveryDelayInMillis
            self.topic.caps.refusals[DELAYED_DELIVERY.name] += 1
            return too_late
        if meta.publish_time_ms > PUBLISH_TIME_MS_MAX:
            # a uint64 on the wire, ms since the epoch; past 2^63 it is no time, and the
            # managed ledger (whose index holds int64) refuses it
            return InvalidArgument("publish_time out of range", publish_time=meta.publish_time_ms)
        too_big = self.topic.caps.message_refusal(len(entry), meta.metadata.num_chunks_from_msg > 1)
        if too_big is not None:         # the topic's maxMessageSize (broker.limits.topic_caps)
            return too_big
        compression = meta.unknown_compression
        if compression is not None:
            # no consumer can decode it; the official one takes it for uncompressed and hands
            # the raw bytes to the application
            return InvalidArgument("unknown compression codec", compression=compression)
        return self.chunks.refusal(meta, len(entry) - meta.payload_offset)

    def _store(self, slot: _Slot, entry: bytes, meta: EntryInfo) -> None:
        verdict = self.topic.dedup.check(meta)
        if verdict is Verdict.DUPLICATE:
            slot.position = DUPLICATE_POSITION
            slot.done = True
            self._drain()
            return
        if verdict is Verdict.IN_FLIGHT:
            self._fail(slot, ServiceNotReady("a message with this sequence id is still being stored",
                                             producer=self.name, sequence_id=meta.sequence_id))
            return
        messages = max(1, meta.num_messages)
        try:
            self._publish(entry, messages, meta.publish_time_ms,
                          functools.partial(self._appended, slot, meta, messages, len(entry)))
        except Exception as exc:  # refused before it was assigned: as a failed append
            _APPEND_WARN.warning(self.topic.name, "append to %s failed: %s", self.topic.name, exc)
            self.topic.dedup.on_failed(meta)
            self._fail(slot, exc if isinstance(exc, StrataError) else StrataError(str(exc)))
            return

    def _publish(self, entry: bytes, messages: int, publish_time_ms: int,
                 on_done: Callable[[Completion], Any]) -> None:
        """Append, unless an earlier append of this producer failed or may have failed;
        `on_done(completion)` gets the position in the turn the entry becomes durable. No task
        or future per entry: the check and the managed ledger's acceptance run in one step
        (`Topic.publish_then` assigns the entry synchronously), so no failure can slip in
        between them. A refusal raises (and marks the producer failed)."""
        if self.failed_write is not None:
            raise ServiceNotReady("an earlier write of this producer failed; reconnect",
                                  reason=self.failed_write)
        epoch = self.topic.ml.append_failures
        if any(e != epoch for e in self._outstanding_epochs):
            self.failed_write = "appends failed while earlier ones of this producer were in flight"
            raise ServiceNotReady("an earlier write of this producer may have failed; reconnect",
                                  producer=self.name)
        self._outstanding_epochs[epoch] += 1
        try:
            # `_append_settled` runs before `on_done` (as a finally did)
            self.topic.publish_then(entry, messages, publish_time_ms,
                                    functools.partial(self._append_settled, epoch, on_done))
        except BaseException as exc:
            self._outstanding_epochs[epoch] -= 1
            if not self._outstanding_epochs[epoch]:
                del self._outstanding_epochs[epoch]
            if self.failed_write is None:    # now, before any later SEND of ours is accepted
                self.failed_write = str(exc) or type(exc).__name__
            raise

    def _append_settled(self, epoch: int, on_done: Callable[[Completion], Any], appended: Completion) -> None:
        if (appended.cancelled() or appended.exception() is not None) and self.failed_write is None:
            exc = None if appended.cancelled() else appended.exception()
            self.failed_write = (str(exc) or type(exc).__name__) if exc is not None else "append cancelled"
        self._outstanding_epochs[epoch] -= 1
        if not self._outstanding_epochs[epoch]:
            del self._outstanding_epochs[epoch]
        on_done(appended)

    def _fail(self, slot: _Slot, error: StrataError) -> None:
        slot.error = error
        slot.done = True
        self._drain()

    def _appended(self, slot: _Slot, meta: EntryInfo, messages: int, size: int, task: Completion) -> None:
        if task.cancelled():
            slot.error = StrataError("append cancelled")
        elif task.exception() is not None:
            exc = task.exception()
            slot.error = exc if isinstance(exc, StrataError) else StrataError(str(exc))
            _APPEND_WARN.warning(self.topic.name, "append to %s failed: %s", self.topic.name, exc)
        else:
            slot.position = task.result()
            self.topic.dedup.on_stored(meta, slot.position)
            if self.topic.subscriptions:   # parsed already: the dispatchers need not parse it again
                self.topic.entry_facts.put(slot.position, facts_of_info(meta))
            self.msg_in_counter += messages
            self.bytes_in_counter += size
        if slot.error is not None:
            if self.failed_write is None:
                self.failed_write = str(slot.error)
            self.topic.dedup.on_failed(meta)
        slot.done = True
        self._drain()

    def _drain(self) -> None:
        pending = self.pending
        stored = False
        while pending and pending[0].done:
            slot = pending.popleft()
            if slot.error is None and slot.position != DUPLICATE_POSITION:
                stored = True
            if self.closed:
                continue
            if slot.error is None:
                ledger_id, entry_id = present(slot.position, "a slot stored without error has its position")
                self.link.send_receipt(self.producer_id, slot.sequence_id, ledger_id, entry_id)
            else:
                self.link.send_failed(self.producer_id, slot.sequence_id, slot.error)
        if stored:
            # Receipts first, then dispatch: see Topic.notify_appended.
            self.topic.notify_appended()
        if self.backlogged and len(pending) <= self.pending_max // 2:
            self.backlogged = False
            self.link.producer_backlogged(self, False)
        if not pending and self._settled is not None:
            self._settled.set()

    def quiesce(self) -> None:
        """Drop SENDs from now on; those in flight still complete (see the module docstring)."""
        self.quiesced = True
        self._settled = asyncio.Event()
        if not self.pending:
            self._settled.set()

    async def settled(self) -> None:
        """Wait until every SEND accepted before `quiesce()` has its reply written."""
        if self._settled is not None:
            await self._settled.wait()

    def close_by_broker(self) -> None:
        """Close, and tell the client to reconnect."""
        self.close()
        self.link.producer_closed(self.producer_id)

    def close(self) -> None:
        """Stop replying; appends in flight still complete (their entries stay stored)."""
        self.closed = True
        if self.backlogged:
            self.backlogged = False
            self.link.producer_backlogged(self, False)
