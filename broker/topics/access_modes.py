"""Producer access modes (Pulsar's PIP-68 and PIP-161) and the topic epoch.

A PRODUCER names its mode (`CommandProducer.producer_access_mode`):
- Shared (0): any number of producers. Refused with ProducerBusy while an exclusive producer
  holds the topic or exclusive ones wait for it.
- Exclusive (1): the only producer. Refused with ProducerFenced while any producer is attached
  or waiting (Pulsar's current answer; the client then stops retrying).
- WaitForExclusive (2): like Exclusive, but while the topic is busy the broker queues it,
  first come first served: it answers PRODUCER_SUCCESS with producer_ready=false at once (the
  client then waits without a timeout) and a second PRODUCER_SUCCESS for the same request once
  the producer holds the topic. At most `broker_exclusive_producer_waiters_max` wait per topic.
- ExclusiveWithFencing (3): takes the topic from everyone. Attached producers are fenced: SENDs
  from then on are dropped (never stored behind the new holder's), those in flight get their
  receipts, then CLOSE_PRODUCER (their reconnection is refused, ProducerFenced for an exclusive
  one that shows its old epoch, ProducerBusy for a shared one) and waiting ones are refused
  with ProducerFenced.

Topic epoch: each time an exclusive producer takes the topic the epoch goes up by one (the first
is 0). It is stored in the managed ledger's record (property `EPOCH_PROPERTY`, written by
compare-and-set before the producer is answered: `LedgerEpoch`), so it survives restarts and
moves between brokers, and a broker that lost the topic cannot write it. A non-persistent topic
keeps it in memory (`MemoryEpoch`, as Pulsar's NonPersistentTopic): it goes with the topic.
PRODUCER_SUCCESS carries it (`topic_epoch`, for shared producers too once set); an exclusive
producer sends it back when it reconnects (`CommandProducer.topic_epoch`). If the topic's
epoch moved past it meanwhile another exclusive producer had the topic: ProducerFenced;
otherwise the epoch stays as it is.

One difference from Pulsar: a WaitForExclusive producer queued behind Shared producers gets the
topic once the last of them leaves (Pulsar promotes only when an exclusive producer leaves, so
such a producer waits forever: apache/pulsar#18380).

What must hold: at most one holder per topic (`holder`, set before its epoch is written, so two
exclusive producers never interleave their claims); while a holder is set, `topic.producers` has
no one else; the queue is bounded; a waiter whose request is gone (connection closed, client
closed the producer) leaves the queue and never keeps the topic.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from common.errors import NotAllowed, ProducerBusy, ProducerFenced, ServiceNotReady, TopicTerminated

if TYPE_CHECKING:
    from broker.topics.producer import Producer
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)

EPOCH_PROPERTY = "strata.topic.epoch"   # managed ledger record property: the topic epoch (decimal)
FENCE_SETTLE_S = 5.0   # fencing: how long a fenced producer's appends in flight may take to get receipts


class AccessMode(enum.IntEnum):
    SHARED = 0                    # many producers
    EXCLUSIVE = 1                 # one producer; fail if the topic is busy
    WAIT_FOR_EXCLUSIVE = 2        # one producer; queue while the topic is busy
    EXCLUSIVE_WITH_FENCING = 3    # one producer; close everyone else


# Pulsar's ProducerAccessMode names, as its PublisherStats show them (`accessMode`)
_MODE_NAMES: dict[int, str] = {AccessMode.SHARED: "Shared", AccessMode.EXCLUSIVE: "Exclusive",
                               AccessMode.WAIT_FOR_EXCLUSIVE: "WaitForExclusive",
                               AccessMode.EXCLUSIVE_WITH_FENCING: "ExclusiveWithFencing"}


@dataclass(frozen=True)
class Admission:
    """A producer was attached; `epoch` is what PRODUCER_SUCCESS.topic_epoch says (None: unset)."""
    epoch: int | None


class _Waiter:
    __slots__ = ("name", "turn")

    def __init__(self, name: str, turn: asyncio.Future) -> None:
        self.name = name
        self.turn = turn    # result None: this producer now holds the topic; an exception: refused


class EpochStore(Protocol):
    """Where a topic's epoch is kept."""

    def get(self) -> int | None: ...

    async def set(self, epoch: int) -> None: ...


class LedgerEpoch:
    """A persistent topic's epoch: the managed ledger record's property EPOCH_PROPERTY."""

    def __init__(self, topic: PersistentTopic) -> None:
        self.topic = topic

    def get(self) -> int | None:
        raw = self.topic.ml.get_property(EPOCH_PROPERTY)
        return int(raw) if raw is not None else None

    async def set(self, epoch: int) -> None:
        await self.topic.ml.set_property(EPOCH_PROPERTY, str(epoch))


class MemoryEpoch:
    """A non-persistent topic's epoch: in memory, gone with the topic."""

    def __init__(self) -> None:
        self.value: int | None = None

    def get(self) -> int | None:
        return self.value

    async def set(self, epoch: int) -> None:
        self.value = epoch


class ProducerAccess:
    """One topic's exclusive holder, its waiting queue and its epoch (in `epochs`: the managed
    ledger record by default)."""

    def __init__(self, topic: PersistentTopic, epochs: EpochStore | None = None) -> None:
        self.topic = topic
        self._epochs: EpochStore = epochs if epochs is not None else LedgerEpoch(topic)
        self.holder: str | None = None     # name of the exclusive producer holding the topic; None: none
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._waiters_max = topic.config.broker_exclusive_producer_waiters_max

    @property
    def epoch(self) -> int | None:
        """The topic epoch as stored (None: no exclusive producer ever had the topic)."""
        return self._epochs.get()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def busy(self) -> bool:
        return self.holder is not None or bool(self.topic.producers) or bool(self._waiting)

    # --- the modes --------------------------------------------------------------------------------

    def refuse_shared(self) -> None:
        if self.holder is not None or self._waiting:
            raise ProducerBusy(f"Topic has an existing exclusive producer: {self.holder or self._waiting[0].name}",
                               topic=str(self.topic.name))

    def refuse_exclusive(self) -> None:
        if self.holder is not None or self._waiting:
            raise ProducerFenced(f"Topic has an existing exclusive producer: {self.holder or self._waiting[0].name}",
                                 topic=str(self.topic.name))
        if self.topic.producers:
            raise ProducerFenced("Topic has existing shared producers", topic=str(self.topic.name))

    def check_epoch(self, client_epoch: int | None) -> None:
        current = self.epoch
        if client_epoch is not None and current is not None and client_epoch < current:
            raise ProducerFenced(f"Topic epoch has already moved. Current epoch: {current}, "
                                 f"Producer epoch: {client_epoch}", topic=str(self.topic.name))

    def fence_all(self) -> None:
        """ExclusiveWithFencing: refuse every waiter, close every attached producer."""
        waiting, self._waiting = list(self._waiting), collections.deque()
        for waiter in waiting:
            if not waiter.turn.done():
                waiter.turn.set_exception(ProducerFenced("Fenced out", topic=str(self.topic.name)))
        for producer in list(self.topic.producers.values()):
            log.info("%s: fencing out producer %s", self.topic.name, producer.name)
            del self.topic.producers[producer.name]
            producer.quiesce()     # later SENDs are dropped: stored, they would follow the new holder's
            self.topic.ctx.spawn(_close_when_settled(producer))
        self.holder = None

    async def wait_turn(self, name: str, on_queued: Callable[[], None]) -> None:
        """Queue until this producer holds the topic (`holder` is then `name`)."""
        if len(self._waiting) >= self._waiters_max:
            raise ProducerBusy("too many producers wait for this topic", topic=str(self.topic.name),
                               waiting=len(self._waiting))
        waiter = _Waiter(name, asyncio.get_running_loop().create_future())
        self._waiting.append(waiter)
        log.info("%s: producer %s queued for exclusive access", self.topic.name, name)
        on_queued()
        try:
            await waiter.turn
        except BaseException:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            elif waiter.turn.done() and not waiter.turn.cancelled() and waiter.turn.exception() is None:
                self.release(name)     # given the topic, but its request is gone
            raise

    async def take(self, name: str, client_epoch: int | None) -> int:
        """Hold the topic for `name` (claimed by the caller) and store the new epoch; returns it."""
        self.check_epoch(client_epoch)
        current = self.epoch
        epoch = client_epoch if client_epoch is not None else (current if current is not None else -1) + 1
        await self._epochs.set(epoch)
        if self.holder != name:
            raise ProducerFenced("Fenced out while taking the topic", topic=str(self.topic.name))
        return epoch

    # --- leaving ----------------------------------------------------------------------------------

    def release(self, name: str) -> None:
        if self.holder == name:
            self.holder = None
        self._promote()

    def on_removed(self, producer: Producer) -> None:
        """A producer left the topic: the next waiter gets it once nobody is attached."""
        self.release(producer.name)

    def _promote(self) -> None:
        while self.holder is None and not self.topic.producers and self._waiting:
            waiter = self._waiting.popleft()
            if waiter.turn.done():          # its request was cancelled
                continue
            self.holder = waiter.name
            waiter.turn.set_result(None)

    def close(self) -> None:
        """The topic is closing: waiters are answered ServiceNotReady (the client looks the
        topic up again and retries with its next owner)."""
        self._refuse_waiters(lambda: ServiceNotReady("topic is closing", topic=str(self.topic.name)))

    def on_terminated(self) -> None:
        """The topic was terminated (its producers closed): nobody holds it any more, and each
        waiter is refused with TopicTerminated at once, as Pulsar's addProducer refuses the
        waiter it promotes (it could never publish; left queued, it waited until its client's
        timeout, or for ever)."""
        self.holder = None
        self._refuse_waiters(lambda: TopicTerminated("Topic was already terminated", topic=str(self.topic.name)))

    def _refuse_waiters(self, error: Callable[[], Exception]) -> None:
        waiting, self._waiting = list(self._waiting), collections.deque()
        for waiter in waiting:
            if not waiter.turn.done():
                waiter.turn.set_exception(error())


async def _close_when_settled(producer: Producer) -> None:
    """A fenced producer: its appends in flight get their receipts (as Pulsar's Producer.close
    waits for pending publishes), at most FENCE_SETTLE_S, then CLOSE_PRODUCER; its client
    reconnects and is refused (ProducerFenced), failing the SENDs the broker dropped."""
    try:
        await asyncio.wait_for(producer.settled(), FENCE_SETTLE_S)
    except TimeoutError:
        log.warning("fenced producer %s: receipts still pending after %.1f s", producer.name, FENCE_SETTLE_S)
    producer.close_by_broker()


async def admit(topic: PersistentTopic, producer: Producer, mode: int, client_epoch: int | None,
                on_queued: Callable[[], None], wanted: Callable[[], bool]) -> Admission | None:
    """Attach `producer` to `topic` under its access `mode` (`client_epoch`: the topic epoch the
    client shows, None: none); None if its request was abandoned meanwhile (`wanted()` turned
    false: nothing is attached). A WaitForExclusive producer that must queue calls `on_queued`
    first (the front end tells the client it waits). Raises ProducerBusy, ProducerFenced, or what
    `topic.add_producer` raises."""
    access: ProducerAccess = topic.access
    producer.access_mode = _MODE_NAMES.get(int(mode), "Shared")
    if topic.closing:
        raise ServiceNotReady("topic is closing", topic=str(topic.name))
    if topic.terminating or topic.terminated:
        raise TopicTerminated("Topic was already terminated", topic=str(topic.name))
    if mode == AccessMode.SHARED:
        access.refuse_shared()
        topic.add_producer(producer)
        return Admission(access.epoch)
    if mode == AccessMode.EXCLUSIVE:
        access.refuse_exclusive()
        access.check_epoch(client_epoch)
    elif mode == AccessMode.EXCLUSIVE_WITH_FENCING:
        access.check_epoch(client_epoch)
        access.fence_all()
    elif mode != AccessMode.WAIT_FOR_EXCLUSIVE:
        raise NotAllowed(f"Invalid producer access mode: {mode}")
    if mode == AccessMode.WAIT_FOR_EXCLUSIVE and access.busy():
        await access.wait_turn(producer.name, on_queued)
    else:
        access.holder = producer.name
    try:
        epoch = await access.take(producer.name, client_epoch)
        if topic.terminating or topic.terminated:     # terminated while it waited or took the topic
            raise TopicTerminated("Topic was already terminated", topic=str(topic.name))
        if not wanted():
            access.release(producer.name)
            return None
        topic.add_producer(producer)
    except BaseException:
        access.release(producer.name)
        raise
    log.info("%s: producer %s holds the topic (%s, epoch %d)", topic.name, producer.name,
             AccessMode(mode).name, epoch)
    return Admission(epoch)
