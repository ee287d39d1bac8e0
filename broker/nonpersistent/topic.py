"""Non-persistent topics (`non-persistent://tenant/ns/topic`): in-memory fan-out, nothing stored.

Pulsar's meaning (NonPersistentTopic): a SEND is answered at once with the message id (0, 0) —
Pulsar's receipt and every MESSAGE it fans out carry ledger 0, entry 0 — and then handed to
every subscription: the consumer its router picks (`broker.nonpersistent.dispatch`, one router
per subscription type) gets it now, or, when no consumer can take it (no permits, connection not
writable, no owner of its key), it is dropped for that subscription and counted (`msgDropRate`,
and Strata's cumulative `msgDropCount`). A subscriber therefore sees only what is published while
it is connected. Acks and redelivery requests are accepted and ignored (nothing to keep or send
again); there is no backlog, no cursor, no retention, no dedup. Seek, GET_LAST_MESSAGE_ID and
read_compacted are refused with NotOnNonPersistent (NotAllowed), as Pulsar refuses them.

Lifetime: a topic exists only in this broker's memory. It is created by the first PRODUCER or
SUBSCRIBE naming it (after the same namespace and bundle-ownership checks as a persistent topic:
a lookup hashes the full name, domain included, into a bundle), and forgotten once it has had no
producer and no consumer for `broker_non_persistent_idle_ms`, or when its bundle is unloaded or
the broker stops (its clients then reconnect, to the new owner, and find a new empty topic).
A restart loses nothing but messages in flight. Subscriptions: a durable one stays while the
topic lives (no data is kept for it); a non-durable one (a reader's) goes with its last consumer.

Producers: `NonPersistentProducer` is the persistent `Producer` (same checks on every SEND:
checksum, size, chunk fields, metadata a consumer could not use; same receipt ordering and
backpressure) whose store step answers at once and fans out instead of appending. As in Pulsar,
a producer's and a consumer's schema go through the topic's schema registry (`broker.protocol.schemas`:
the registry is keyed by tenant/ns/topic, so `persistent://` and `non-persistent://` topics of one
name share their schemas, as Pulsar's schema ids do) and producers have access modes
(`broker.topics.access_modes`: Exclusive, WaitForExclusive, ExclusiveWithFencing), with a topic epoch
kept in memory only (`MemoryEpoch`): it starts again at 0 when the topic is created again. Publisher
`msgDropRate` is Pulsar's field; it counts SENDs dropped before fan-out, which Strata never does
(fan-out is synchronous: nothing waits in flight), so it stays 0.0.

Rates: the registry samples every live topic's counters each `broker_stats_sample_interval_ms`
into `broker.topics.rates.TrafficMeter`s (the persistent topics' sampler is not used: it reads
managed ledgers). `NonPersistentTopics.names(tenant, ns)` lists the live topics (topic lists,
admin). The PRODUCER and SUBSCRIBE commands that reach these topics are
`broker.protocol.producer_commands` and `broker.protocol.consumer_commands`.

Admission: the registry creates a topic only while the broker serves and owns the topic's bundle;
it asks a `TopicAdmission` (the service), the same checks a persistent topic's load makes.

What must hold: no message byte outlives the write that sends it (nothing is queued or kept); a
message goes to at most one consumer per subscription; every message that reaches no consumer of
a subscription with a router is counted in that subscription's drop counter; drop and out counters
never go down (a removed consumer's counts stay in its subscription, a removed subscription's in
its topic); at most one `NonPersistentTopic` per name per process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from broker.limits.topic_caps import TopicCaps
from broker.nonpersistent.dispatch import KeySharedRouter, Router, SharedRouter, SingleActiveRouter
from broker.topics.access_modes import MemoryEpoch, ProducerAccess
from broker.topics.consumer import Consumer
from broker.topics.entry_facts import EntryFacts, facts_of_info
from broker.topics.producer import Producer, ProducerLink, _Slot
from broker.topics.rate_limits import TopicRates
from broker.topics.rates import TrafficMeter
from broker.topics.storage_policies import TopicStorage
from broker.topics.subscription import SUB_TYPE_NAMES, AckedId, KeySharedSpec, Subscription, SubType
from common.errors import (
    ConsumerBusy,
    NotAllowed,
    NotOnNonPersistent,
    ProducerBusy,
    ServiceNotReady,
    StrataError,
    SubscriptionNotFound,
)
from common.human import iso_ms
from common.topic_names import TopicName
from entries.entry import EntryInfo
from ledger.position import Position

if TYPE_CHECKING:
    from broker.context import BrokerContext

log = logging.getLogger(__name__)

# Pulsar's NonPersistentTopic answers every receipt, and sends every message, as (0, 0).
NON_PERSISTENT_POSITION = Position(0, 0)


class TopicAdmission(Protocol):
    """Whether this broker may serve a topic now (the service answers)."""

    def check_serving(self, name: TopicName) -> None:
        """ShuttingDown or BundleNotOwned (lease lapsed) when this broker serves nothing now."""
        ...

    async def check_owned(self, name: TopicName) -> None:
        """NamespaceNotFound, OwnedElsewhere or BundleNotOwned unless this broker may serve `name`."""
        ...


def _meter(ctx: BrokerContext) -> TrafficMeter:
    """A meter whose first sample is now, at zero: counts made before the next tick show in rates."""
    config = ctx.config
    window_s = config.broker_stats_rate_window_ms / 1000
    samples_max = config.broker_stats_rate_window_ms // config.broker_stats_sample_interval_ms + 2
    meter = TrafficMeter(window_s, samples_max, with_events=True)
    meter.sample(ctx.clock.monotonic_s(), 0, 0, 0)
    return meter


def _rates(meter: TrafficMeter) -> tuple[float, float, float]:
    """(messages/s, bytes/s, events/s) of a meter."""
    events = meter.events.rate() if meter.events is not None else 0.0
    return meter.messages.rate(), meter.bytes.rate(), events


# --- producers ----------------------------------------------------------------------------------

class NonPersistentProducer(Producer):
    """The persistent producer with a store step that answers at once and fans out."""

    def __init__(self, link: ProducerLink, topic: NonPersistentTopic, producer_id: int, name: str,
                 pending_max: int, max_message_bytes: int) -> None:
        # Producer reads only `name` and `terminated` of its topic and calls `notify_appended`
        # outside the store step overridden here; NonPersistentTopic offers those three.
        super().__init__(link, topic, producer_id, name, pending_max, max_message_bytes)  # type: ignore[arg-type]
        self.np_topic = topic
        self.meter = _meter(topic.ctx)

    def _store(self, slot: _Slot, entry: bytes, meta: EntryInfo) -> None:
        messages = max(1, meta.num_messages)
        slot.position = NON_PERSISTENT_POSITION
        slot.done = True
        self.msg_in_counter += messages
        self.bytes_in_counter += len(entry)
        self._drain()                  # the receipt first, as Pulsar answers before it fans out
        self.np_topic.fan_out(entry, facts_of_info(meta), messages)


# --- subscriptions ------------------------------------------------------------------------------

class NonPersistentSubscription(Subscription):
    """A subscription without a cursor: a router and its consumers (see the module docstring)."""

    def __init__(self, topic: NonPersistentTopic, name: str, durable: bool) -> None:
        super().__init__(topic, name, None, durable)  # type: ignore[arg-type]
        self.np_topic = topic
        self.router: Router | None = None   # None until the first consumer; by the first one's type
        self.msg_drop_counter = 0           # messages no consumer of this subscription could take
        self.meter = _meter(topic.ctx)
        self.consumer_meters: dict[Consumer, TrafficMeter] = {}

    @property
    def ml(self):
        raise NotOnNonPersistent("a non-persistent topic stores no messages", topic=str(self.np_topic.name))

    @property
    def consumers(self) -> list[Consumer]:
        return self.router.consumers if self.router is not None else []

    def add_consumer(self, consumer: Consumer, key_shared: KeySharedSpec | None) -> None:
        sub_type = SubType(consumer.sub_type)
        if self.router is not None and self.router.consumers and sub_type != self.sub_type:
            raise ConsumerBusy("subscription has consumers of another type", subscription=self.name,
                               current=SUB_TYPE_NAMES[SubType(self.sub_type or 0)], asked=SUB_TYPE_NAMES[sub_type])
        sticky = key_shared is not None and key_shared.sticky
        if sticky and key_shared is not None:
            consumer.key_ranges = list(key_shared.ranges)
        if self.router is None or not self.router.consumers:
            self.router = self._new_router(sub_type, sticky)
            self.sub_type = sub_type
        if isinstance(self.router, KeySharedRouter):
            self.router.add(consumer, sticky)
        else:
            self.router.add(consumer)
        self.consumer_meters[consumer] = _meter(self.np_topic.ctx)
        self.np_topic.idle_since_s = None

    def _new_router(self, sub_type: SubType, sticky: bool) -> Router:
        name = self.np_topic.name
        if sub_type in (SubType.EXCLUSIVE, SubType.FAILOVER):
            return SingleActiveRouter(self.name, str(name), name.partition_index, sub_type == SubType.FAILOVER)
        if sub_type == SubType.SHARED:
            return SharedRouter(self.name)
        return KeySharedRouter(self.name, sticky)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        self._detach(consumer)
        if not self.durable and not self.consumers:
            self.np_topic.drop_subscription(self)
        self.np_topic.check_idle()

    def _detach(self, consumer: Consumer) -> None:
        if self.router is None or consumer not in self.router.consumers:
            return
        self.msg_out_from_removed_consumers += consumer.msg_out_counter
        self.bytes_out_from_removed_consumers += consumer.bytes_out_counter
        self.router.remove(consumer)
        self.consumer_meters.pop(consumer, None)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits      # nothing waits to be sent: the next message may use them

    def on_appended(self) -> None:
        return None

    def ack(self, consumer: Consumer, ids: Sequence[AckedId], *, cumulative: bool = False,
            corrupt: bool = False) -> None:
        return None                      # accepted and ignored: nothing is kept to acknowledge

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        return None                      # nothing is kept to send again

    def seek(self, position: Position | None, publish_time_ms: int | None) -> None:
        raise NotOnNonPersistent("Seek on a non-persistent topic is not allowed", subscription=self.name)

    def on_cursor_moved(self) -> None:
        return None

    def disconnect_all(self) -> None:
        for consumer in list(self.consumers):
            consumer.close_by_broker()
            self._detach(consumer)

    async def close(self) -> None:
        self.closed = True

    def dispatch(self, entry: bytes, facts: EntryFacts, messages: int) -> None:
        """Send one message to the consumer the router picks, or count it dropped."""
        router = self.router
        if router is None or not router.consumers:
            return                       # nobody attached: nothing to drop for (Pulsar's rule)
        consumer = router.pick(facts)
        if consumer is None:
            self.msg_drop_counter += messages
            return
        consumer.send_entry(NON_PERSISTENT_POSITION, entry, messages, 0, None)
        consumer.forget(NON_PERSISTENT_POSITION)   # no ack will come back for it

    def sample(self, now_s: float) -> None:
        self.meter.sample(now_s, self.msg_out_counter, self.bytes_out_counter, self.msg_drop_counter)
        for consumer, meter in list(self.consumer_meters.items()):
            meter.sample(now_s, consumer.msg_out_counter, consumer.bytes_out_counter, 0)


# --- the topic ----------------------------------------------------------------------------------

class NonPersistentTopic:
    def __init__(self, ctx: BrokerContext, name: TopicName) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.name = name
        # What the shared producer code reads of a topic's policies: the broker's values, as the
        # namespace and topic policies (broker.limits) apply to persistent topics only.
        self.caps = TopicCaps.of_config(ctx.config)
        self.storage = TopicStorage.defaults(ctx.config)
        self.rates = TopicRates(ctx.clock, lambda: (0.0, 0.0))
        self.producers: dict[str, NonPersistentProducer] = {}
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.closing = False
        self.msg_in_counter = 0              # messages ever published here (since created)
        self.entries_added_counter = 0       # SENDs (entries) ever published here
        self.bytes_in_counter = 0
        self.msg_out_from_removed_subscriptions = 0
        self.bytes_out_from_removed_subscriptions = 0
        self.msg_drop_from_removed_subscriptions = 0
        self.idle_since_s: float | None = ctx.clock.monotonic_s()   # None: has clients
        self.meter = _meter(ctx)       # messages/bytes in; events: drops of every subscription
        self.out_meter = _meter(ctx)   # messages/bytes out
        # access modes read name, config and producers of the topic; the epoch lives in memory
        self.access = ProducerAccess(self, MemoryEpoch())  # type: ignore[arg-type]
        self.terminating = False              # what access_modes.admit reads: never terminated

    # what the Producer reads of its topic
    @property
    def terminated(self) -> bool:
        return False                          # a non-persistent topic cannot be terminated

    def notify_appended(self) -> None:
        return None                           # fan-out happens in `fan_out`, right after the receipt

    def last_sequence_id(self, producer_name: str) -> int:
        return -1                             # no dedup on a non-persistent topic

    # --- counters ---------------------------------------------------------------------------

    @property
    def msg_out_counter(self) -> int:
        return self.msg_out_from_removed_subscriptions + sum(s.msg_out_counter for s in self.subscriptions.values())

    @property
    def bytes_out_counter(self) -> int:
        return self.bytes_out_from_removed_subscriptions + sum(s.bytes_out_counter
                                                               for s in self.subscriptions.values())

    @property
    def msg_drop_counter(self) -> int:
        return self.msg_drop_from_removed_subscriptions + sum(s.msg_drop_counter
                                                              for s in self.subscriptions.values())

    def fan_out(self, entry: bytes, facts: EntryFacts, messages: int) -> None:
        self.msg_in_counter += messages
        self.entries_added_counter += 1
        self.bytes_in_counter += len(entry)
        for sub in list(self.subscriptions.values()):
            sub.dispatch(entry, facts, messages)

    # --- producers ----------------------------------------------------------------------------

    def add_producer(self, producer: NonPersistentProducer) -> None:
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        if producer.name in self.producers:
            raise ProducerBusy("a producer with this name is already connected",
                               topic=str(self.name), producer=producer.name)
        self.producers[producer.name] = producer
        self.idle_since_s = None

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
            self.access.on_removed(producer)      # the next WaitForExclusive producer may take it
        producer.close()
        self.check_idle()

    def has_clients(self) -> bool:
        """Producers (attached, or holding or waiting for exclusive access) or consumers."""
        return self.access.busy() or any(s.consumers for s in self.subscriptions.values())

    def check_idle(self) -> None:
        """Start the idle clock when the last producer or consumer has gone."""
        if self.idle_since_s is None and not self.has_clients():
            self.idle_since_s = self.ctx.clock.monotonic_s()

    # --- subscriptions ------------------------------------------------------------------------

    async def subscription(self, name: str, *, durable: bool, start: Position) -> NonPersistentSubscription:
        """The subscription `name`, created if needed (`start` has no meaning: nothing is kept)."""
        if self.closing:
            raise ServiceNotReady("topic is closing", topic=str(self.name))
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = self.subscriptions[name] = NonPersistentSubscription(self, name, durable)
        return sub

    async def unsubscribe(self, sub: Subscription, consumer: Consumer | None) -> None:
        if [c for c in sub.consumers if c is not consumer]:
            raise NotAllowed("subscription has other consumers", subscription=sub.name)
        if self.subscriptions.get(sub.name) is not sub:
            raise SubscriptionNotFound("no such subscription", subscription=sub.name)
        if consumer is not None:
            sub.remove_consumer(consumer)
        self.drop_subscription(sub)

    def drop_subscription(self, sub: Subscription) -> None:
        if not isinstance(sub, NonPersistentSubscription) or self.subscriptions.get(sub.name) is not sub:
            return
        self.msg_out_from_removed_subscriptions += sub.msg_out_counter
        self.bytes_out_from_removed_subscriptions += sub.bytes_out_counter
        self.msg_drop_from_removed_subscriptions += sub.msg_drop_counter
        del self.subscriptions[sub.name]
        sub.closed = True

    # --- lifecycle ------------------------------------------------------------------------------

    def sample(self, now_s: float) -> None:
        self.meter.sample(now_s, self.msg_in_counter, self.bytes_in_counter, self.msg_drop_counter)
        self.out_meter.sample(now_s, self.msg_out_counter, self.bytes_out_counter, 0)
        for producer in list(self.producers.values()):
            producer.meter.sample(now_s, producer.msg_in_counter, producer.bytes_in_counter, 0)
        for sub in list(self.subscriptions.values()):
            sub.sample(now_s)

    async def close(self) -> None:
        """Ask every client to reconnect (CLOSE_PRODUCER / CLOSE_CONSUMER); forget everything."""
        self.closing = True
        self.access.close()               # WaitForExclusive producers retry with the next owner
        for producer in list(self.producers.values()):
            producer.close_by_broker()
        self.producers.clear()
        for sub in list(self.subscriptions.values()):
            sub.disconnect_all()
            await sub.close()


# --- the broker's non-persistent topics ---------------------------------------------------------

class NonPersistentTopics:
    """Every live non-persistent topic of this broker, by full name; the sampler and idle reaper."""

    def __init__(self, ctx: BrokerContext, admission: TopicAdmission) -> None:
        self.ctx = ctx
        self._admission = admission
        self.topics: dict[str, NonPersistentTopic] = {}
        self._task: asyncio.Task | None = None   # the sampling / idle-reaping loop, once started
        self._stopped = False                    # the broker is stopping

    async def get(self, name: TopicName) -> NonPersistentTopic:
        """The live topic, created if needed, once the namespace exists and this broker owns
        its bundle (NamespaceNotFound, OwnedElsewhere, BundleNotOwned otherwise)."""
        self._admission.check_serving(name)
        topic = self.topics.get(str(name))
        if topic is not None and not topic.closing:
            return topic
        await self._admission.check_owned(name)
        self._admission.check_serving(name)
        topic = self.topics.get(str(name))    # another caller may have created it meanwhile
        if topic is None or topic.closing:
            topic = self.topics[str(name)] = NonPersistentTopic(self.ctx, name)
            self._start()
        return topic

    def find(self, name: TopicName) -> NonPersistentTopic | None:
        return self.topics.get(str(name))

    def names(self, tenant: str, namespace: str) -> list[str]:
        return sorted(key for key, t in self.topics.items() if (t.name.tenant, t.name.namespace) == (tenant, namespace))

    async def close_topic(self, topic: NonPersistentTopic) -> None:
        if self.topics.get(str(topic.name)) is topic:
            del self.topics[str(topic.name)]
        await topic.close()

    async def close_where(self, holds) -> None:
        """Close every topic whose name `holds(name)` (a bundle unloaded, the lease lost, a stop)."""
        for topic in [t for t in self.topics.values() if holds(t.name)]:
            try:
                await self.close_topic(topic)
            except StrataError as exc:
                log.warning("closing %s: %s", topic.name, exc)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = self.ctx.spawn(self._run())

    async def _run(self) -> None:
        """Sample the live topics' counters; forget those idle past broker_non_persistent_idle_ms."""
        config, clock = self.ctx.config, self.ctx.clock
        interval_s = config.broker_stats_sample_interval_ms / 1000
        while not self._stopped and self.topics:
            now_s = clock.monotonic_s()
            for topic in list(self.topics.values()):
                idle = topic.idle_since_s
                if idle is not None and now_s - idle >= config.broker_non_persistent_idle_ms / 1000:
                    await self.close_topic(topic)
                else:
                    topic.sample(now_s)
            await asyncio.sleep(interval_s)

    async def stop(self) -> None:
        self._stopped = True
        await self.close_where(lambda _name: True)
        if self._task is not None:
            self._task.cancel()


# --- stats (Pulsar's NonPersistentTopicStats) --------------------------------------------------

def _address(link: object) -> str:
    peer = getattr(link, "peer", "")
    return f"/{peer}" if peer and peer != "?" else ""


def _consumer_json(consumer: Consumer, meter: TrafficMeter | None) -> dict:
    rate_out, throughput_out, _ = _rates(meter) if meter is not None else (0.0, 0.0, 0.0)
    return {"consumerName": consumer.name, "availablePermits": consumer.permits, "unackedMessages": 0,
            "blockedConsumerOnUnackedMsgs": False, "msgOutCounter": consumer.msg_out_counter,
            "bytesOutCounter": consumer.bytes_out_counter, "msgRateOut": rate_out,
            "msgThroughputOut": throughput_out, "msgRateRedeliver": 0.0, "priorityLevel": consumer.priority,
            "address": _address(consumer.link), "connectedSince": iso_ms(consumer.connected_since_ms),
            "clientVersion": getattr(consumer.link, "client_version", "")}


def subscription_json(sub: NonPersistentSubscription) -> dict:
    rate_out, throughput_out, drop_rate = _rates(sub.meter)
    sub_type = SUB_TYPE_NAMES[SubType(sub.sub_type)] if sub.sub_type is not None else SUB_TYPE_NAMES[SubType.EXCLUSIVE]
    return {"msgBacklog": 0, "msgBacklogNoDelayed": 0, "backlogSize": 0, "unackedMessages": 0,
            "type": sub_type, "isDurable": sub.durable, "msgRateOut": rate_out,
            "msgThroughputOut": throughput_out, "msgOutCounter": sub.msg_out_counter,
            "bytesOutCounter": sub.bytes_out_counter, "msgRateRedeliver": 0.0, "msgRateExpired": 0.0,
            "totalMsgExpired": 0, "lastExpireTimestamp": 0, "earliestMsgPublishTimeInBacklog": 0,
            "msgDropRate": drop_rate, "msgDropCount": sub.msg_drop_counter,
            "consumers": [_consumer_json(c, sub.consumer_meters.get(c)) for c in sub.consumers]}


def _publisher_json(producer: NonPersistentProducer) -> dict:
    rate_in, throughput_in, _ = _rates(producer.meter)
    return {"producerName": producer.name, "producerId": producer.producer_id, "msgRateIn": rate_in,
            "msgThroughputIn": throughput_in, "averageMsgSize": throughput_in / rate_in if rate_in > 0 else 0.0,
            "msgInCounter": producer.msg_in_counter, "bytesInCounter": producer.bytes_in_counter,
            "msgDropRate": 0.0, "address": _address(producer.link),
            "connectedSince": iso_ms(producer.connected_since_ms),
            "clientVersion": getattr(producer.link, "client_version", "")}


def topic_json(topic: NonPersistentTopic) -> dict:
    """Pulsar's NonPersistentTopicStats, with the persistent fields a partitioned sum reads (all 0)."""
    rate_in, throughput_in, drop_rate = _rates(topic.meter)
    rate_out, throughput_out, _ = _rates(topic.out_meter)
    return {"msgRateIn": rate_in, "msgThroughputIn": throughput_in, "msgRateOut": rate_out,
            "msgThroughputOut": throughput_out,
            "averageMsgSize": throughput_in / rate_in if rate_in > 0 else 0.0,
            "msgInCounter": topic.msg_in_counter, "bytesInCounter": topic.bytes_in_counter,
            "msgOutCounter": topic.msg_out_counter, "bytesOutCounter": topic.bytes_out_counter,
            "msgDropRate": drop_rate, "msgDropCount": topic.msg_drop_counter,
            "msgBacklog": 0, "backlogSize": 0, "earliestMsgPublishTimeInBacklogs": 0, "storageSize": 0,
            "offloadedStorageSize": 0, "lastOffloadLedgerId": 0, "lastOffloadSuccessTimeStamp": 0,
            "lastOffloadFailureTimeStamp": 0,
            "publishers": [_publisher_json(p) for p in topic.producers.values()],
            "subscriptions": {name: subscription_json(s) for name, s in topic.subscriptions.items()},
            "replication": {}}


def metrics_json(topic: NonPersistentTopic) -> dict:
    """`topic_json` with the persistent-only fields `/metrics` reads (`broker.stats.metrics_topics`) at
    their empty values: no backlog quota (-1), no backlog age, no evictions, no cursor state."""
    stats = topic_json(topic)
    stats.update(backlogQuotaLimitSize=-1, backlogQuotaLimitTime=-1, oldestBacklogMessageAgeSeconds=0,
                 backlogQuotaEvictions={})
    for sub in stats["subscriptions"].values():
        sub.update(cursorStateBytes=0, cursorStateError=None)
    return stats


def metrics_stats(registry: NonPersistentTopics) -> dict[str, dict]:
    """{full name: `metrics_json`} of this broker's live non-persistent topics."""
    return {name: metrics_json(topic) for name, topic in sorted(registry.topics.items())
            if not topic.closing}


def internal_json(topic: NonPersistentTopic) -> dict:
    """Pulsar's NonPersistentTopic.getInternalStats: nothing stored, one empty cursor per subscription."""
    return {"entriesAddedCounter": topic.entries_added_counter, "numberOfEntries": 0, "totalSize": 0,
            "currentLedgerEntries": 0, "currentLedgerSize": 0, "ledgers": [],
            "cursors": {name: {} for name in topic.subscriptions}}
