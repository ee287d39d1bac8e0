"""What every dispatcher shares: the read position, the dispatch loop, and reading entries.

A dispatcher moves entries from the managed ledger to the consumers of one subscription. It owns
`read_position` (the next entry never yet read for this subscription; replays are kept apart by
the subclasses) and runs at most one dispatch pass at a time: `kick()` starts a pass or, if one
is running, asks it to run once more, so any number of triggers (FLOW, new entry, ack, consumer
change) coalesce into at most one pending pass.

Reads are asynchronous; while one is in flight the subscription may be rewound (failover switch,
redelivery, seek, a full replay set handing entries back to the unread range). `_epoch` counts
rewinds: a read that comes back after the epoch moved is dropped, so an entry is never delivered
from a stale position.

Read failures. A storage error (`StrataError`) ends the pass; the next one runs after a backoff
that doubles from `READ_RETRY_DELAY_MIN_S` to `READ_RETRY_DELAY_MAX_S` and resets after a pass
that completes. While a retry is scheduled, other triggers wait for it (a failing bookie is not
hammered by every FLOW and ack). Nothing is dropped on an error: `read_one` raises instead of
answering "gone", and callers keep the entry for the retry.

End of topic (Pulsar's reachedEndOfTopic): after a pass, when the topic is terminated and the
subscription has everything up to its last position — acknowledged for a durable one, read for a
reader's — every consumer is told once (`Consumer.reached_end_of_topic`). Any pass re-checks, and
acks, FLOW, a new consumer and the termination itself each start one.

Dispatch rate limits (dispatchRate, subscriptionDispatchRate: `broker.topics.rate_limits`): while
one is dry `any_can_take` (and the single-active pass) answer no, and `rate_allows` schedules one
pass for when it refills (`_rate_wake`, one timer per dispatcher); a read asks for no more entries
than the limit lets go now, and each entry sent takes its messages and bytes.

What must hold: `read_position` only moves forward except through `rewind()`; a pass never sends
to a consumer without permits (the last entry may take permits below zero).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import TYPE_CHECKING

from broker.topics.consumer import Consumer
from broker.topics.entry_facts import EntryFacts
from common.eager import start_eager
from common.errors import StrataError
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.dispatch.compacted import CompactedReads
    from broker.topics.subscription import Subscription

log = logging.getLogger(__name__)

READ_RETRY_DELAY_MIN_S = 0.1
READ_RETRY_DELAY_MAX_S = 5.0


class Dispatcher(abc.ABC):
    """Base class; subclasses implement `_dispatch_pass`, consumer add/remove and redelivery."""

    def __init__(self, sub: Subscription, read_position: Position, batch_entries_max: int) -> None:
        self.sub = sub
        self.consumers: list[Consumer] = []
        self.read_position = read_position
        self.batch_entries_max = batch_entries_max
        self._epoch = 0            # bumped by rewind(); reads from an older epoch are dropped
        self._running = False      # a pass task is alive
        self._again = False        # a trigger arrived during the running pass
        self._closed = False
        self._task: asyncio.Task | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None   # set on the first kick
        self._retry: asyncio.TimerHandle | None = None   # pending retry after a failed pass
        self._retry_delay_s = READ_RETRY_DELAY_MIN_S       # wait before the next retry
        self.compacted: CompactedReads | None = None       # read_compacted: view first (broker.compaction)
        self._rate_wake: asyncio.TimerHandle | None = None  # a pass when a dispatch rate limit refills

    @property
    def reading(self) -> bool:
        """A dispatch pass (reading entries and sending them) is running."""
        return self._running

    # --- the loop -------------------------------------------------------------------------

    def kick(self, *, now: bool = False) -> None:
        """Make sure a dispatch pass runs soon (coalesces with one already running). `now`: run
        it in this call until it must wait (entries in the cache never make it wait), with a
        Task only past that point: the append path, where the producer's receipt is already
        written, asks for it (no Task and loop turn per entry)."""
        if self._closed or self._retry is not None:
            return      # a scheduled retry runs the pass (backoff after a storage error)
        if self._running:
            self._again = True
            return
        self._running = True
        loop = self._event_loop
        if loop is None:   # asked once: asyncio.get_running_loop() costs a getpid() per call
            loop = self._event_loop = asyncio.get_running_loop()
        if now:
            task = start_eager(loop, self._loop())
            if self._running:    # still under way (a finished pass cleared both)
                self._task = task
        else:
            self._task = loop.create_task(self._loop())

    async def _loop(self) -> None:
        try:
            while not self._closed:
                self._again = False
                await self._dispatch_pass()
                self._retry_delay_s = READ_RETRY_DELAY_MIN_S
                if not self._again:
                    break
            self._maybe_end_of_topic()
        except StrataError as exc:
            log.warning("dispatch on %s failed, retrying: %s: %s", self.sub.name, type(exc).__name__, exc)
            self._schedule_retry()
        except Exception:
            log.exception("dispatch on %s crashed, retrying", self.sub.name)
            self._schedule_retry()
        finally:
            self._running = False
            self._task = None        # a finished pass holds nothing: idle subscriptions keep no task

    def _maybe_end_of_topic(self) -> None:
        last = self.sub.ml.terminated_position
        if last is None or self._closed or not self.consumers:
            return
        if self.sub.durable:
            everything = self.sub.cursor.mark_delete_position >= last
        else:
            everything = not self.has_unread()
        if everything:
            for consumer in list(self.consumers):
                consumer.reached_end_of_topic()

    def _schedule_retry(self) -> None:
        if self._closed or self._retry is not None:
            return

        def fire() -> None:
            self._retry = None
            self.kick()

        delay_s = self._retry_delay_s
        self._retry_delay_s = min(READ_RETRY_DELAY_MAX_S, delay_s * 2)
        self._retry = asyncio.get_running_loop().call_later(delay_s, fire)

    @abc.abstractmethod
    async def _dispatch_pass(self) -> None:
        """Send what can be sent now; return when no consumer can take more or nothing is left."""

    def close(self) -> None:
        self._closed = True
        if self._rate_wake is not None:
            self._rate_wake.cancel()
            self._rate_wake = None
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    # --- reading ----------------------------------------------------------------------------

    def has_unread(self) -> bool:
        return self.read_position <= self.sub.ml.last_confirmed

    async def read_new(self, max_entries: int) -> list | None:
        """Entries from `read_position` on; [] at the end; None if rewound while reading."""
        if self.compacted is not None:
            from_view = await self.compacted.read(max_entries)
            if from_view is None or from_view:
                return from_view
        if not self.has_unread():
            return []
        rates = self.sub.topic.rates
        if rates.dispatch_limited:    # read no more than the dispatch rate lets go now
            max_entries = rates.dispatch_budget(self.sub, max_entries)
        epoch = self._epoch
        entries = await self.sub.ml.read(self.read_position, max(1, max_entries))
        if epoch != self._epoch or self._closed:
            return None
        return entries

    async def read_one(self, position: Position) -> bytes | None:
        """The stored bytes of one entry, or None if it is no longer kept (trimmed).

        A storage error propagates: the entry may well still exist, so it must not be taken
        for gone (an unacked entry would never be sent again)."""
        entries = await self.sub.ml.read(position, 1)
        if not entries or entries[0].position != position:
            return None
        return entries[0].data

    def is_gone(self, position: Position) -> bool:
        """True if `position` will never need sending again: acked, or no longer kept."""
        return self.sub.cursor.is_acked(position) or position < self.sub.ml.first_position

    def rewind(self) -> None:
        """Restart reading right after the mark-delete position (acked holes are skipped on read)."""
        self._epoch += 1
        cursor = self.sub.cursor
        self.read_position = cursor.next_unacked_from(self.sub.ml.next_position(cursor.mark_delete_position))
        if self.compacted is not None:
            self.read_position = self.compacted.rewind_position(self.read_position)

    def next_after(self, position: Position) -> Position:
        """The read position once the entry at `position` has been read."""
        if self.compacted is not None:
            return self.compacted.next_after(position)
        return self.sub.ml.next_position(position)

    def is_acked(self, position: Position) -> bool:
        if self.compacted is not None:
            return self.compacted.is_acked(position)
        return self.sub.cursor.is_acked(position)

    def seek(self, position: Position) -> None:
        """Restart reading at `position` exactly."""
        self._epoch += 1
        self.read_position = position

    def reread_from(self, position: Position) -> None:
        """Move the read position back to `position` if it is ahead of it (entries handed back
        to the unread range); a read in flight from the later position is then dropped."""
        if position < self.read_position:
            self.seek(position)

    # --- delivery helpers -------------------------------------------------------------------

    def facts(self, position: Position, data: bytes) -> EntryFacts:
        """The entry's facts, parsed once per topic and shared by its subscriptions."""
        return self.sub.topic.entry_facts.get(position, data)

    def deliver(self, consumer: Consumer, position: Position, data: bytes, facts: EntryFacts) -> None:
        """Send one entry to `consumer` with its redelivery count and remaining batch ack set."""
        topic = self.sub.topic
        topic.ctx.activity.touch(topic)     # before the consumer's counters move (rates)
        if topic.rates.dispatch_limited:
            topic.rates.on_dispatch(self.sub, facts.messages, len(data))
        ack_set = self.sub.cursor.batch_ack_set(position) if facts.is_batch else None
        if self.compacted is not None and facts.is_batch:
            ack_set = self.compacted.ack_set(position, ack_set)
        consumer.send_entry(position, data, facts.messages, self.sub.cursor.redelivery_count(position),
                            ack_set or None)

    def count_redelivery(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """The client asked for some (None: all) of its pending entries again: count them
        (the consumer's msgRateRedeliver) before they go back."""
        topic = self.sub.topic
        topic.ctx.activity.touch(topic)     # before the consumer's counter moves (rates)
        consumer.count_redelivery(positions)

    def any_can_take(self) -> bool:
        if self.sub.topic.rates.dispatch_limited and not self.rate_allows():
            return False
        return any(c.can_take() for c in self.consumers)

    def rate_allows(self) -> bool:
        """True unless a dispatch rate limit is dry; then one pass is scheduled for when it
        refills (broker.topics.rate_limits) and the throttled event counted."""
        rates = self.sub.topic.rates
        if not rates.dispatch_limited:
            return True
        delay_s = rates.dispatch_delay_s(self.sub)
        if delay_s <= 0:
            return True
        if self._rate_wake is None and not self._closed:
            self._rate_wake = asyncio.get_running_loop().call_later(delay_s, self._rate_refilled)
        return False

    def _rate_refilled(self) -> None:
        self._rate_wake = None
        self.kick()

    def permits_entries(self, consumer: Consumer) -> int:
        """How many entries to read for a consumer with these permits (at least one)."""
        return max(1, min(self.batch_entries_max, consumer.permits))

    # --- interface used by the subscription -------------------------------------------------

    @abc.abstractmethod
    def add_consumer(self, consumer: Consumer) -> None:
        """Attach a consumer; raise ConsumerBusy/ConsumerAssignError to refuse it."""

    @abc.abstractmethod
    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; its pending entries go back for redelivery."""

    @abc.abstractmethod
    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Give back some (or, with None, all) of a consumer's pending entries."""

    def on_acked(self, positions: list[Position]) -> None:
        """Entries were acknowledged: drop them from whoever holds them."""
        for consumer in self.consumers:
            for position in positions:
                consumer.forget(position)

    def on_acked_upto(self, position: Position) -> None:
        """Everything at or before `position` was acknowledged."""
        for consumer in self.consumers:
            consumer.forget_through(position)

    def on_flow(self, consumer: Consumer) -> None:
        self.kick()
