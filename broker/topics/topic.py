"""A persistent topic (or one partition): its managed ledger, producers and subscriptions.

The topic is the append path: `publish` appends an entry's bytes verbatim to the managed ledger
and, once durable, the producer writes the receipt and then wakes every subscription's dispatcher
(`notify_appended`). Subscriptions are durable (a cursor
persisted through `cursor.cursor_store.CursorStore`, loaded again when the topic is opened) or
non-durable (readers: an in-memory cursor, dropped with its last consumer). `dedup`
(`broker.topics.dedup.Deduplication`) is restored before the topic is served, so the first PRODUCER
already sees the right `last_sequence_id`.

Counters (cumulative, as Pulsar's; `broker.stats.topic_stats` reports them):
- `msg_in_counter`/`bytes_in_counter`: messages and entry bytes ever stored in the topic. On load
  they start at what the managed ledger holds plus what it trimmed (`ml.trimmed_totals`,
  persisted), then grow with every append confirmed. Pulsar's restart at 0 on every load; these
  keep "topic in = messages ever stored" true across restarts, unloads and trims.
- `msg_out_counter`/`bytes_out_counter`: the sum over the subscriptions' out counters plus what
  subscriptions since removed (unsubscribed, or a reader's gone with its last consumer) had
  counted (Pulsar's msgOutFromRemovedSubscriptions), plus what clients of another protocol read
  outside any subscription (Kafka fetches by offset). In memory: 0 on every load, as Pulsar's.

Terminating (`terminate`, Pulsar's PersistentTopic.terminate): producers are quiesced (SENDs
arriving now are dropped unanswered: the client resends them after reconnecting, where they fail
with TopicTerminated), the managed ledger is terminated (appends in flight complete and get their
receipts), then every producer is closed with CLOSE_PRODUCER: its reconnection is refused with
TopicTerminated, which the client reports for every pending and later send. New producers are
refused from the start. The dispatchers are kicked so consumers that have everything learn the
end of the topic (`broker.topics.dispatch.base`).

What must hold: a producer name is attached at most once per topic (ProducerBusy); a
subscription name maps to one `Subscription`; once `close()` has begun, nothing new attaches.
`msg_in_counter == ml.trimmed_totals.messages + sum(ledger messages)` whenever no append is in
flight (both move on the same confirmations); no counter ever goes down.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.compaction.topic_compaction import TopicCompaction
from broker.limits.topic_caps import TopicCaps
from broker.records import policies
from broker.topics.access_modes import ProducerAccess
from broker.topics.dedup import Deduplication
from broker.topics.entry_facts import FactsCache
from broker.topics.producer import Producer
from broker.topics.rate_limits import TopicRates
from broker.topics.rates import rates
from broker.topics.storage_policies import TopicStorage
from broker.topics.subscription import Subscription
from common.completion import Completion
from common.errors import (
    NotAllowed,
    ProducerBusy,
    ServiceNotReady,
    StrataError,
    SubscriptionNotFound,
    TopicTerminated,
)
from common.topic_names import TopicName
from cursor.cursor_store import CursorStore
from cursor.managed_cursor import ManagedCursor
from ledger.ml_metadata import LedgerTotals
from ledger.position import Position

if TYPE_CHECKING:
    from broker.context import BrokerContext

log = logging.getLogger(__name__)

HANDOVER_SETTLE_S = 5.0   # closing: how long appends in flight may take to get their receipts


class PersistentTopic:
    def __init__(self, ctx: BrokerContext, name: TopicName, ml, cursor_store: CursorStore) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.name = name
        self.ml = ml
        self.cursor_store = cursor_store
        self.producers: dict[str, Producer] = {}          # producer name -> producer
        self.subscriptions: dict[str, Subscription] = {}  # subscription name -> subscription
        # subscription name -> the one open of its cursor under way (concurrent SUBSCRIBEs share it)
        self._opening: dict[str, asyncio.Task] = {}
        self.closing = False
        self.terminating = False      # terminate() is under way: no new producer
        self.dedup = Deduplication(ml, ctx.astore, ctx.config, ctx.clock, ctx.spawn)
        # Pulsar's max* caps in force: the broker's until broker.topics.caps_keeper resolves them
        self.caps = TopicCaps.of_config(ctx.config)
        # storage policies (persistence, dedup snapshots, delayed delivery) as last applied
        self.storage = TopicStorage.defaults(ctx.config)   # by broker.topics.storage_policies
        stored = ml.trimmed_totals + LedgerTotals.of(ml.ledgers())
        self.msg_in_counter = stored.messages      # messages ever stored (trimmed ones included)
        self.bytes_in_counter = stored.size_bytes  # entry bytes ever stored (trimmed ones included)
        self.msg_out_from_removed_subscriptions = 0     # out counts of subscriptions since removed
        self.bytes_out_from_removed_subscriptions = 0
        # read by clients of another protocol outside any subscription (Kafka fetches by offset)
        self.msg_out_outside_subscriptions = 0
        self.bytes_out_outside_subscriptions = 0
        # other front ends' clients of this topic, for stats: protocol -> a report
        # {"publishers": [publisher stats...], "consumers": [consumer stats...]} (broker.kafka.stats)
        self.protocol_clients: dict[str, Callable[[], dict]] = {}
        self.entry_facts = FactsCache()   # parsed once, shared by every subscription
        self.access = ProducerAccess(self)   # exclusive producer, its waiters, the topic epoch
        self.compaction = TopicCompaction(self)   # compacted view, runs, status (broker.compaction)
        # state other front ends keep per topic (the Kafka producer state): closed with the topic,
        # after its appends settled and before the managed ledger closes
        self.close_hooks: list[Callable[[], Awaitable[None]]] = []
        # rate policies (publish, dispatch, subscribe): set by rate_limits.apply when loaded
        self.rates = TopicRates(ctx.clock, functools.partial(rates, self))

    @classmethod
    async def open(cls, ctx: BrokerContext, name: TopicName, ml) -> PersistentTopic:
        store = CursorStore(ctx.astore, name.managed_ledger_name, ctx.cursor_writer)
        topic = cls(ctx, name, ml, store)
        cursors = await store.load_all(ml, clock=ctx.clock, config=ctx.config)
        for cursor_name, cursor in cursors.items():
            topic.subscriptions[cursor_name] = Subscription(topic, cursor_name, cursor, durable=True)
        await topic.dedup.load(await policies.dedup_enabled(ctx.astore, name))
        await topic.compaction.load()
        return topic

    # --- append path ----------------------------------------------------------------------------

    def publish(self, entry: bytes, messages: int, publish_time_ms: int) -> asyncio.Future:
        """Append `entry`; the future gives its position once durable. The entry is assigned
        its place now (no task per entry); a refusal raises at once."""
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        self.ctx.activity.touch(self)
        appended = self.ml.append_future(entry, messages=messages, publish_time_ms=publish_time_ms)
        appended.add_done_callback(functools.partial(self._count_in, messages, len(entry)))
        return appended

    def publish_then(self, entry: bytes, messages: int, publish_time_ms: int,
                     on_done: Callable[[Completion], Any]) -> Completion:
        """`publish` for the producer: `on_done(completion)` runs in the turn the bookies' answers
        make the entry durable (its result is the position), not a turn later."""
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        self.ctx.activity.touch(self)
        appended = self.ml.append_then(entry, on_done, messages=messages, publish_time_ms=publish_time_ms)
        appended.add_done_callback(functools.partial(self._count_in, messages, len(entry)))
        return appended

    def _count_in(self, messages: int, size: int, appended: asyncio.Future | Completion) -> None:
        if not appended.cancelled() and appended.exception() is None:
            self.msg_in_counter += messages
            self.bytes_in_counter += size

    def notify_appended(self) -> None:
        """Wake the dispatchers: new durable entries exist. The producer calls this after it has
        written the SEND_RECEIPT, so a client never sees a message dispatched before its own
        producer's receipt for it (the C++ client's dead-letter producer relies on that order: a
        consumer closed between the two crashed pulsar-client 3.13.0)."""
        for sub in list(self.subscriptions.values()):
            sub.on_appended()

    @property
    def msg_out_counter(self) -> int:
        """Messages sent to consumers of every subscription, removed subscriptions included."""
        return (self.msg_out_from_removed_subscriptions + self.msg_out_outside_subscriptions
                + sum(s.msg_out_counter for s in self.subscriptions.values()))

    @property
    def bytes_out_counter(self) -> int:
        """Entry bytes sent to consumers of every subscription, removed subscriptions included."""
        return (self.bytes_out_from_removed_subscriptions + self.bytes_out_outside_subscriptions
                + sum(s.bytes_out_counter for s in self.subscriptions.values()))

    def _keep_out_counts(self, sub: Subscription) -> None:
        """`sub` is leaving `subscriptions`: its out counts stay in the topic's (Pulsar's rule)."""
        self.msg_out_from_removed_subscriptions += sub.msg_out_counter
        self.bytes_out_from_removed_subscriptions += sub.bytes_out_counter

    # --- producers --------------------------------------------------------------------------------

    def add_producer(self, producer: Producer) -> None:
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        if self.terminating or self.terminated:
            raise TopicTerminated("Topic was already terminated", topic=str(self.name))
        self.caps.check_producer(len(self.producers))      # maxProducers: ProducerBusy
        if producer.name in self.producers:
            raise ProducerBusy("a producer with this name is already connected",
                               topic=str(self.name), producer=producer.name)
        self.producers[producer.name] = producer

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
            self.access.on_removed(producer)      # the next WaitForExclusive producer may take it
        producer.close()

    def last_sequence_id(self, producer_name: str) -> int:
        """PRODUCER_SUCCESS.last_sequence_id: the persisted dedup mark, -1 if none or dedup off."""
        return self.dedup.last_sequence_id(producer_name)

    def has_clients(self) -> bool:
        """Producers or consumers are attached (a delete without force is refused then)."""
        return bool(self.producers) or any(s.consumers for s in self.subscriptions.values())

    # --- subscriptions ------------------------------------------------------------------------------

    async def subscription(self, name: str, *, durable: bool, start: Position) -> Subscription:
        """The subscription `name`, created if needed with its cursor reading from `start`."""
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        sub = self.subscriptions.get(name)
        if sub is not None:
            return sub
        if self.caps.subscriptions_max and name not in self._opening:   # maxSubscriptionsPerTopic
            self.caps.check_subscription(self.name, len(self.subscriptions) + len(self._opening))
        # One open per name at a time. Two SUBSCRIBEs opening the same durable cursor at once
        # opened it twice: the second open took the cursor's ownership over, the first cursor
        # object was the one kept, and its next persist found itself fenced (logged as an
        # ERROR, every ack after refused). Shielded: a SUBSCRIBE whose connection closes does
        # not cancel the open the others wait for.
        opening = self._opening.get(name)
        if opening is None:
            opening = asyncio.get_running_loop().create_task(self._open_subscription(name, durable, start))
            self._opening[name] = opening
            opening.add_done_callback(functools.partial(self._opened, name))
        return await asyncio.shield(opening)

    async def _open_subscription(self, name: str, durable: bool, start: Position) -> Subscription:
        if durable:
            cursor = await self.cursor_store.open_cursor(self.ml, name, start=start,
                                                         clock=self.ctx.clock, config=self.config)
        else:
            cursor = ManagedCursor.starting_at(name, self.ml, start, durable=False, clock=self.ctx.clock)
        sub = self.subscriptions.get(name)   # created meanwhile by other means (never two opens)
        if sub is None:
            sub = Subscription(self, name, cursor, durable)
            self.subscriptions[name] = sub
        return sub

    def _opened(self, name: str, task: asyncio.Task) -> None:
        """An open ended: forget it; its failure is retrieved (its waiters may all be gone)."""
        if self._opening.get(name) is task:
            del self._opening[name]
        if not task.cancelled():
            task.exception()

    def check_consumer_room(self, sub: Subscription, sub_type: int) -> None:
        """A consumer of type `sub_type` may join `sub` under maxConsumers and
        maxConsumersPerSubscription (ConsumerBusy if not); called right before it is attached."""
        self.caps.check_consumer(sum(len(s.consumers) for s in self.subscriptions.values()),
                                 len(sub.consumers), exclusive=sub_type == 0)

    async def unsubscribe(self, sub: Subscription, consumer) -> None:
        """Delete a subscription whose only consumer is `consumer` (Pulsar refuses otherwise)."""
        others = [c for c in sub.consumers if c is not consumer]
        if others:
            raise NotAllowed("subscription has other consumers", subscription=sub.name)
        if self.subscriptions.get(sub.name) is not sub:
            raise SubscriptionNotFound("no such subscription", subscription=sub.name)
        if consumer is not None:
            sub.remove_consumer(consumer)
        self.drop_subscription(sub)     # (already done if it was a reader's, by remove_consumer)
        if sub.durable:
            await self.cursor_store.delete_cursor(sub.cursor)

    def drop_subscription(self, sub: Subscription) -> None:
        """Forget `sub` (unsubscribed, or a non-durable one lost its last consumer); its out
        counts stay in the topic's."""
        if self.subscriptions.get(sub.name) is sub:
            self._keep_out_counts(sub)
            del self.subscriptions[sub.name]
            sub.closed = True
            if sub.dispatcher is not None:
                sub.dispatcher.close()

    # --- termination ----------------------------------------------------------------------------------

    @property
    def terminated(self) -> bool:
        """terminate() completed (now or by an earlier owner): the last position is final."""
        return self.ml.terminated_position is not None

    @property
    def terminated_position(self) -> Position | None:
        return self.ml.terminated_position

    async def terminate(self) -> Position:
        """Terminate the topic (see the module docstring); returns its last position. Again on a
        terminated topic: the same position."""
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        if self.terminated:
            return Position(*self.ml.terminated_position)
        self.terminating = True
        producers = list(self.producers.values())
        for producer in producers:
            producer.quiesce()
        try:
            last = await self.ml.terminate()
            try:
                await asyncio.wait_for(asyncio.gather(*(p.settled() for p in producers)), HANDOVER_SETTLE_S)
            except TimeoutError:
                log.warning("terminating %s: receipts still pending after %.1f s", self.name, HANDOVER_SETTLE_S)
        finally:
            self.terminating = False
            for producer in list(self.producers.values()):
                del self.producers[producer.name]
                producer.close_by_broker()
        self.access.on_terminated()  # WaitForExclusive producers are refused: TopicTerminated
        log.info("%s: terminated at %s", self.name, last)
        self.notify_appended()       # consumers that have everything learn the end of the topic
        return last

    # --- lifecycle ------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Flush every cursor and close the managed ledger; clients are asked to reconnect.
        Producers are quiesced first: appends in flight get their receipts (at most
        `HANDOVER_SETTLE_S`), later SENDs are resent by the client to the next owner."""
        self.closing = True
        self.ctx.activity.discard(self)
        self.access.close()               # WaitForExclusive producers retry with the next owner
        await self.compaction.close()      # a run in progress stops (its new ledger is deleted)
        producers = list(self.producers.values())
        for producer in producers:
            producer.quiesce()
        self.rates.close()                 # paused producers' connections read on (SENDs now dropped)
        try:
            await asyncio.wait_for(asyncio.gather(*(p.settled() for p in producers)), HANDOVER_SETTLE_S)
        except TimeoutError:
            log.warning("closing %s: appends still in flight after %.1f s", self.name, HANDOVER_SETTLE_S)
        for producer in list(self.producers.values()):
            producer.close_by_broker()
        for sub in list(self.subscriptions.values()):
            sub.disconnect_all()
            try:
                await sub.close()
            except StrataError as exc:
                log.warning("closing subscription %s of %s: %s", sub.name, self.name, exc)
        await self.dedup.close()
        for hook in self.close_hooks:
            try:
                await hook()
            except StrataError as exc:
                log.warning("closing %s: %s", self.name, exc)
        try:
            await self.ml.close()
        except StrataError as exc:
            log.warning("closing managed ledger of %s: %s", self.name, exc)

    async def delete(self) -> None:
        """Close, then remove everything stored: ledgers, cursors, dedup snapshot (all under the
        managed ledger's metadata)."""
        if not self.closing:
            await self.close()
        await self.compaction.delete()
        await self.ml.delete()
