"""One producer on a topic: SEND → durable append → SEND_RECEIPT, strictly in send order.

Every SEND becomes an append to the topic's managed ledger; the receipt goes out only after the
append completed (the entry is on Qa bookies). Appends may complete in any order, but the client
matches each receipt against the head of its pending queue, so `pending` keeps one slot per SEND
in arrival order and `_drain` writes replies from the head only, as far as they are complete.
A SEND that is refused up front (checksum mismatch, oversize) takes a slot too, already
completed with its error, so SEND_ERROR is ordered like any receipt.

`pending` is bounded by `broker_pending_sends_max`: past it the connection stops reading (TCP
backpressure reaches the client) until the producer has drained below half.

What must hold: a SEND_RECEIPT implies its entry is durable; replies leave in SEND order.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import TYPE_CHECKING, Protocol

from broker.codec import encode_send_error, encode_send_receipt
from broker.entry_format import parse_entry
from common.errors import ChecksumError, MessageTooLarge, PulsarServerError, StrataError
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topic import PersistentTopic

log = logging.getLogger(__name__)

# Headers a full-size message may carry on top of max_message_size (PROTOCOL.md §1.2).
ENTRY_HEADER_SLACK_BYTES = 10 * 1024


class ProducerLink(Protocol):
    def write(self, data: bytes) -> None: ...

    def producer_backlogged(self, producer: "Producer", backlogged: bool) -> None: ...


class _Slot:
    """One SEND awaiting its reply."""

    __slots__ = ("sequence_id", "position", "error", "done")

    def __init__(self, sequence_id: int) -> None:
        self.sequence_id = sequence_id
        self.position: Position | None = None      # where the entry was stored, once durable
        self.error: StrataError | None = None      # why it failed, once it failed
        self.done = False


class Producer:
    def __init__(self, link: ProducerLink, topic: "PersistentTopic", producer_id: int, name: str,
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
        self.msg_in_counter = 0
        self.bytes_in_counter = 0

    def send(self, sequence_id: int, entry: bytes, checksum_ok: bool) -> None:
        slot = _Slot(sequence_id)
        self.pending.append(slot)
        if not checksum_ok:
            self._fail(slot, ChecksumError("checksum mismatch in SEND", sequence_id=sequence_id))
        elif len(entry) > self.entry_bytes_max:
            self._fail(slot, MessageTooLarge("entry exceeds max_message_size", size=len(entry)))
        else:
            try:
                meta = parse_entry(entry)
            except StrataError as exc:
                self._fail(slot, exc)
            else:
                task = asyncio.ensure_future(self.topic.publish(
                    entry, max(1, meta.num_messages), meta.publish_time_ms))
                task.add_done_callback(lambda t, s=slot, n=max(1, meta.num_messages), b=len(entry):
                                       self._appended(s, t, n, b))
        if len(self.pending) >= self.pending_max and not self.backlogged:
            self.backlogged = True
            self.link.producer_backlogged(self, True)

    def _fail(self, slot: _Slot, error: StrataError) -> None:
        slot.error = error
        slot.done = True
        self._drain()

    def _appended(self, slot: _Slot, task: asyncio.Future, messages: int, size: int) -> None:
        if task.cancelled():
            slot.error = StrataError("append cancelled")
        elif task.exception() is not None:
            exc = task.exception()
            slot.error = exc if isinstance(exc, StrataError) else StrataError(str(exc))
            log.warning("append to %s failed: %s", self.topic.name, exc)
        else:
            slot.position = task.result()
            self.msg_in_counter += messages
            self.bytes_in_counter += size
        slot.done = True
        self._drain()

    def _drain(self) -> None:
        pending = self.pending
        while pending and pending[0].done:
            slot = pending.popleft()
            if self.closed:
                continue
            if slot.error is None:
                ledger_id, entry_id = slot.position
                self.link.write(encode_send_receipt(self.producer_id, slot.sequence_id, ledger_id, entry_id))
            else:
                code = slot.error.server_error
                if code is None:
                    code = PulsarServerError.UnknownError
                self.link.write(encode_send_error(self.producer_id, slot.sequence_id, code, str(slot.error)))
        if self.backlogged and len(pending) <= self.pending_max // 2:
            self.backlogged = False
            self.link.producer_backlogged(self, False)

    def close(self) -> None:
        """Stop replying; appends in flight still complete (their entries stay stored)."""
        self.closed = True
        if self.backlogged:
            self.backlogged = False
            self.link.producer_backlogged(self, False)
