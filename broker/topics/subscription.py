"""A subscription: a managed cursor, a dispatcher chosen by subscription type, and consumers.

The cursor (`cursor.managed_cursor.ManagedCursor`) holds what is acknowledged and persists it;
the dispatcher decides who gets which entry. The dispatcher is created for the type of the first
consumer and replaced only when the subscription has no consumer left, so a consumer asking for
another type while consumers are attached is refused with ConsumerBusy (Pulsar's rule).

Acks (docs/protocol.md §8.4, §7): individual (with optional batch `ack_set`, merged by AND),
cumulative (Exclusive/Failover), and `validation_error` (the client discarded a corrupt entry:
treated as an ack). A batch-index ack is read against the entry's real member count when a
consumer holds the entry, whatever batch_size the client claims; an id the cursor refuses
(batch_size out of range) does not stop the other ids of the ACK. Non-durable subscriptions
(readers) ignore acks. The cursor persists itself,
coalesced per `cursor_persist_interval_ms`; closing a consumer flushes at once. A cursor whose
state is at `cursor_state_bytes_max` refuses acks that would add ack holes
(`CursorStateTooLarge`): the other acks of the command are still taken and reach the dispatcher,
then the error goes back to the connection (an ACK_RESPONSE when the client asked for one).

Redelivery (docs/protocol.md §8.5): REDELIVER_UNACKNOWLEDGED_MESSAGES goes to the dispatcher; ids the
consumer does not hold (unknown, acked, another consumer's, garbage) are ignored, each id costs
O(1), and the per-entry redelivery counts live in the cursor only for unacked entries after
mark-delete, so a nack storm is bounded by the backlog, not by the number of nacks. Seek
(§8.8): every consumer is disconnected, the cursor reset (a position or publish time past the end
means "at the end": no error, nothing deleted), and the dispatcher dropped; the next consumer gets
a fresh one reading from the new position, which also rebuilds the delayed-delivery index.

Out counters (Pulsar's PersistentSubscription): `msg_out_counter`/`bytes_out_counter` are the
messages and entry bytes ever sent to this subscription's consumers while this broker serves the
topic: those still attached plus those that have left (`*_from_removed_consumers`, added when a
consumer is detached: close, seek, unload, unsubscribe). Redeliveries count again, as in Pulsar.
They are in memory: a new owner (restart, unload) starts them at 0, as Pulsar does.

What must hold: an ack reaches the cursor before the dispatcher forgets the entry, so a crash
between the two can only cause a redelivery, never a loss. The out counters never go down: a
consumer's counts move into `*_from_removed_consumers` exactly once, when it leaves the dispatcher.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from broker.topics.consumer import Consumer
from broker.topics.dispatch.base import Dispatcher
from broker.topics.dispatch.key_shared import KeySharedDispatcher
from broker.topics.dispatch.shared import SharedDispatcher
from broker.topics.dispatch.single_active import SingleActiveDispatcher
from common.errors import ConsumerBusy, CursorStateTooLarge, InvalidArgument, NotAllowed, StrataError
from common.invariant import present
from ledger.position import Position

if TYPE_CHECKING:
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

class SubType(enum.IntEnum):
    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3


SUB_TYPE_NAMES = {SubType.EXCLUSIVE: "Exclusive", SubType.SHARED: "Shared",
                  SubType.FAILOVER: "Failover", SubType.KEY_SHARED: "Key_Shared"}


@dataclass(frozen=True)
class KeySharedSpec:
    """What a Key_Shared consumer asked for when it subscribed."""

    sticky: bool = False                          # its own hash ranges; False: auto-split
    ranges: tuple[tuple[int, int], ...] = ()      # the sticky ranges (inclusive slot bounds)
    allow_out_of_order: bool = False              # deliver a key's new messages before older ones are acked


class AckedId(NamedTuple):
    """One acknowledged id: an entry, or members of a batch entry."""

    position: Position
    ack_set: Sequence[int] = ()   # batch members still unacked, as bits in 64-bit words; empty: the whole entry
    batch_size: int = 0           # members in the batch as the client says (0: not said)


class Subscription:
    def __init__(self, topic: PersistentTopic, name: str, cursor, durable: bool) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self.durable = durable
        self.dispatcher: Dispatcher | None = None   # None until the first consumer arrives
        self.sub_type: SubType | None = None        # type of the current dispatcher
        self.closed = False
        self.msg_out_from_removed_consumers = 0     # messages sent to consumers since detached
        self.bytes_out_from_removed_consumers = 0   # their entry bytes
        if durable and cursor is not None:   # managedLedgerMaxMarkDeleteRate (storage_policies)
            cursor.persistence.set_persist_interval_ms(topic.storage.cursor_persist_interval_ms)

    @property
    def ml(self):
        return self.topic.ml

    @property
    def consumers(self) -> list[Consumer]:
        return self.dispatcher.consumers if self.dispatcher is not None else []

    @property
    def msg_out_counter(self) -> int:
        """Messages ever sent to this subscription's consumers, those gone included."""
        return self.msg_out_from_removed_consumers + sum(c.msg_out_counter for c in self.consumers)

    @property
    def bytes_out_counter(self) -> int:
        """Entry bytes ever sent to this subscription's consumers, those gone included."""
        return self.bytes_out_from_removed_consumers + sum(c.bytes_out_counter for c in self.consumers)

    @property
    def _active(self) -> Dispatcher:
        """The dispatcher, which exists while a consumer is attached (as it is for every caller)."""
        return present(self.dispatcher, "a subscription with consumers has a dispatcher", subscription=self.name)

    # --- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer, key_shared: KeySharedSpec | None) -> None:
        sub_type = SubType(consumer.sub_type)
        if self.dispatcher is not None and self.dispatcher.consumers and sub_type != self.sub_type:
            raise ConsumerBusy("subscription has consumers of another type", subscription=self.name,
                               current=SUB_TYPE_NAMES[present(self.sub_type, "a dispatcher has a type")],
                               asked=SUB_TYPE_NAMES[sub_type])
        sticky = key_shared is not None and key_shared.sticky
        if sticky and key_shared is not None:
            consumer.key_ranges = list(key_shared.ranges)
        if self.dispatcher is None or not self.dispatcher.consumers:
            self._new_dispatcher(sub_type, key_shared, sticky)
        dispatcher = self._active
        if isinstance(dispatcher, KeySharedDispatcher):
            dispatcher.add_consumer(consumer, sticky)
        else:
            dispatcher.add_consumer(consumer)

    def _new_dispatcher(self, sub_type: SubType, key_shared: KeySharedSpec | None, sticky: bool) -> None:
        if self.dispatcher is not None:
            self.dispatcher.close()
        self.cursor.rewind()
        start = self.cursor.read_position
        batch = self.topic.config.broker_dispatch_batch_entries_max
        if sub_type in (SubType.EXCLUSIVE, SubType.FAILOVER):
            self.dispatcher = SingleActiveDispatcher(self, start, batch, sub_type == SubType.FAILOVER,
                                                     self.topic.name.partition_index)
        elif sub_type == SubType.SHARED:
            self.dispatcher = SharedDispatcher(self, start, batch)
        else:
            allow = key_shared is not None and key_shared.allow_out_of_order
            self.dispatcher = KeySharedDispatcher(self, start, batch, sticky, allow)
        self.sub_type = sub_type

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        self._detach(consumer)
        self.topic.ctx.spawn(self._flush_quietly())
        if not self.durable and not self.consumers:
            self.topic.drop_subscription(self)

    def _detach(self, consumer: Consumer) -> None:
        """Take `consumer` out of the dispatcher; what it was sent stays in the out counters."""
        if self.dispatcher is None:
            return
        if consumer in self.dispatcher.consumers:
            self.msg_out_from_removed_consumers += consumer.msg_out_counter
            self.bytes_out_from_removed_consumers += consumer.bytes_out_counter
        self.dispatcher.remove_consumer(consumer)

    async def _flush_quietly(self) -> None:
        try:
            await self.cursor.flush()
        except StrataError as exc:
            log.warning("flush of subscription %s failed: %s", self.name, exc)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits
        if self.dispatcher is not None:
            self.dispatcher.on_flow(consumer)

    def on_appended(self) -> None:
        """New entries exist; dispatch if anyone can take them."""
        dispatcher = self.dispatcher
        if dispatcher is not None and dispatcher.consumers:
            dispatcher.kick(now=True)

    # --- acks and redelivery --------------------------------------------------------------------

    def ack(self, consumer: Consumer, ids: Sequence[AckedId], *, cumulative: bool = False,
            corrupt: bool = False) -> None:
        """Acknowledge `ids` (cumulative: everything up to the first; `corrupt`: the client
        discarded them as corrupt, which acks the whole entries)."""
        if not self.durable or self.dispatcher is None or self.closed:
            return
        try:
            if cumulative:
                if ids:
                    self._ack_cumulative(consumer, ids[0])
            else:
                self._ack_individual(consumer, ids, corrupt)
        finally:
            if self.dispatcher is not None:
                self.dispatcher.kick()

    def _ack_cumulative(self, consumer: Consumer, mid: AckedId) -> None:
        if self.sub_type in (SubType.SHARED, SubType.KEY_SHARED):
            raise NotAllowed("cumulative ack on a shared subscription", subscription=self.name)
        position = mid.position
        if any(mid.ack_set):
            # A member of a partly acked batch: everything before the entry, plus those members.
            upto = Position(position.ledger_id, position.entry_id - 1)
            self.cursor.ack_cumulative(upto)
            self._ack_batch(consumer, position, mid)
        else:
            upto = position
            self.cursor.ack_cumulative(upto)
        self._active.on_acked_upto(upto)

    def _ack_individual(self, consumer: Consumer, ids: Sequence[AckedId], corrupt: bool) -> None:
        whole: list[Position] = []
        refused: StrataError | None = None  # why one id was refused; the others were taken
        for mid in ids:
            position = mid.position
            if any(mid.ack_set) and not corrupt:
                try:
                    if self._ack_batch(consumer, position, mid):
                        whole.append(position)
                except (CursorStateTooLarge, InvalidArgument) as exc:
                    refused = exc
            else:
                whole.append(position)
        if whole:
            try:
                self.cursor.ack(whole)
            except CursorStateTooLarge as exc:
                refused = exc
                whole = [p for p in whole if self.cursor.is_acked(p)]
            self._active.on_acked(whole)
        if refused is not None:
            raise refused

    def _ack_batch(self, consumer: Consumer, position: Position, mid: AckedId) -> bool:
        """Merge a batch-index ack; True if the whole entry is now acked."""
        self.cursor.ack_batch_indexes(position, list(mid.ack_set), self._batch_size(consumer, position, mid))
        if self.cursor.is_acked(position):
            self._active.on_acked([position])
            return True
        return False

    def _batch_size(self, consumer: Consumer, position: Position, mid: AckedId) -> int:
        """Members of the entry a batch-index ack is about. The broker's own count wins when a
        consumer holds the entry (it was read from the entry): a client's batch_size that is
        too small would ack members it says are unacked, one too large would leave the entry
        partly acked for good, every later delivery hiding all its members. Otherwise (never
        delivered, or given back since) the client's word, else what its ack_set covers."""
        for holder in (consumer, *self.consumers):
            messages = holder.pending.get(position)
            if messages:
                return messages
        if mid.batch_size > 0:
            return mid.batch_size
        return 64 * len(mid.ack_set)

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Send `positions` (None: all the consumer holds) again, to whoever may take them."""
        if self.dispatcher is None or consumer not in self.dispatcher.consumers:
            return
        self.dispatcher.redeliver(consumer, positions)

    # --- seek and lifecycle ---------------------------------------------------------------------

    def seek(self, position: Position | None, publish_time_ms: int | None) -> None:
        """docs/protocol.md §8.8: disconnect every consumer, then reset the cursor."""
        for consumer in list(self.consumers):
            consumer.close_by_broker()
            self._detach(consumer)
        if publish_time_ms is not None:
            self.cursor.reset_to_publish_time(publish_time_ms)
        else:
            self.cursor.seek(position)
        if self.dispatcher is not None:
            self.dispatcher.close()
            self.dispatcher = None
        self.topic.ctx.spawn(self._flush_quietly())

    def on_cursor_moved(self) -> None:
        """The cursor's mark-delete moved forward outside an ACK (admin skip, clear-backlog,
        expire): consumers keep their connection; what they hold up to mark-delete is dropped,
        and the dispatcher reads on after it instead of re-reading acked entries."""
        dispatcher = self.dispatcher
        if dispatcher is None:
            return
        md = self.cursor.mark_delete_position
        dispatcher.on_acked_upto(md)
        if dispatcher.read_position <= md:
            dispatcher.seek(self.cursor.next_unacked_from(self.ml.next_position(md)))
        dispatcher.kick()

    def disconnect_all(self) -> None:
        for consumer in list(self.consumers):
            consumer.close_by_broker()
            self._detach(consumer)

    async def close(self) -> None:
        self.closed = True
        if self.dispatcher is not None:
            self.dispatcher.close()
        await self.cursor.close()
