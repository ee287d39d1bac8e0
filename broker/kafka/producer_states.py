"""The Kafka producer state of each partition this broker serves, loaded once per topic load.

The first idempotent batch for a partition loads its state (`ProducerStateStore.load`: snapshot,
then a replay of the entries after it); batches that arrive meanwhile wait for the same load. A
partition that never had an idempotent batch (its managed ledger lacks the property
`kafka.idempotent-since-ms`, set durably before the first one is stored) starts empty at once: a
long Pulsar topic's first idempotent Kafka producer does not wait for its whole log to be read. The
state lives as long as that topic object: when the topic closes (unload, bundle move, shutdown),
its close hook snapshots it; the next owner loads it again from the snapshot and the log, so a
producer keeps its sequences across restarts and moves (librdkafka treats a forgotten sequence as
fatal).

`PartitionState.accepted` ties one batch's append to the state: the batch is accepted (checked
against batches still in flight) before the append is submitted, and folded in once it is durable
(its offsets known) or rolled back if it fails.

What must hold: one state per loaded topic object; a batch's verdict is given against a state
that reflects every durable idempotent entry of the partition.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

from broker.kafka.idempotence import PartitionProducers
from broker.kafka.producer_state import ProducerStateStore
from common.errors import ServiceNotReady

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.topics.topic import PersistentTopic
    from wire.kafka.records import RecordBatch


# a managed-ledger property, set before the partition's first idempotent Kafka batch is stored: a
# partition without it has no idempotent entry, so its first load replays nothing
IDEMPOTENT_USED_PROPERTY = "kafka.idempotent-since-ms"


class PartitionState:
    def __init__(self, topic: PersistentTopic, store: ProducerStateStore, producers: PartitionProducers,
                 ctx: BrokerContext) -> None:
        self.topic = topic
        self.store = store
        self.producers = producers
        self._ctx = ctx

    def accepted(self, batch: RecordBatch, appended: asyncio.Future, last_seq: int, messages: int) -> None:
        pid, epoch, first_seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        self.producers.accept(pid, epoch, first_seq, last_seq, appended)
        ml = self.topic.ml
        timestamp = batch.max_timestamp

        def done(fut: asyncio.Future) -> None:
            if fut.cancelled() or fut.exception() is not None:
                self.producers.on_failed(pid, epoch, first_seq)
                return
            first = ml.offset_of(fut.result())
            self.producers.on_appended(pid, epoch, first_seq, last_seq, first, first + messages - 1,
                                       timestamp, self._ctx.clock.wall_ms())

        appended.add_done_callback(done)


class ProducerStates:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._states: weakref.WeakKeyDictionary[PersistentTopic, asyncio.Future] = weakref.WeakKeyDictionary()

    async def of(self, topic: PersistentTopic) -> PartitionState:
        """The partition's state, loaded on first use (ServiceNotReady once the topic closes)."""
        if topic.closing:
            raise ServiceNotReady("the topic is closing", topic=str(topic.name))
        loading = self._states.get(topic)
        if loading is None:
            loading = asyncio.ensure_future(self._load(topic))
            self._states[topic] = loading
            loading.add_done_callback(lambda f: self._forget_failed(topic, f))
        return await asyncio.shield(loading)

    def _forget_failed(self, topic: PersistentTopic, loading: asyncio.Future) -> None:
        if (loading.cancelled() or loading.exception() is not None) and self._states.get(topic) is loading:
            del self._states[topic]

    async def _load(self, topic: PersistentTopic) -> PartitionState:
        store = ProducerStateStore(self._ctx.config, self._ctx.clock)
        ml = topic.ml
        first_use = ml.get_property(IDEMPOTENT_USED_PROPERTY) is None
        if first_use:   # recorded before any idempotent entry can be stored: later loads replay
            await ml.set_property(IDEMPOTENT_USED_PROPERTY, str(self._ctx.clock.wall_ms()))
        producers = await store.load(ml, self._ctx.astore, none_stored=first_use)
        topic.close_hooks.append(store.close)
        return PartitionState(topic, store, producers, self._ctx)

    async def close(self) -> None:
        """Snapshot every loaded state (the broker stops; its topics close too, which does the same)."""
        for loading in list(self._states.values()):
            if loading.done() and not loading.cancelled() and loading.exception() is None:
                await loading.result().store.close()
