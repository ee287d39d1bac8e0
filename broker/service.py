"""BrokerService: the topics this broker serves, and the shared things they need.

Topics are loaded lazily, the first time a PRODUCER, SUBSCRIBE or admin call names them. Loading
claims ownership (an ephemeral key `/ownership/<tenant>/<ns>/<topic>` bound to this broker's
metadata session), records the topic in the topic list, opens its managed ledger (which fences
any previous writer) and loads its cursors. Concurrent callers share one load; each waits at most
`TOPIC_LOAD_WAIT_S` and then gets ServiceNotReady, which the client retries.

A broker restarted at the same advertised address takes over ownership keys its previous
incarnation left behind (their session has not expired yet); a key held by a different broker is
respected (ServiceNotReady).

What must hold: at most one `PersistentTopic` per name per process; a topic is served only while
this broker holds its ownership key.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine

from broker import policies
from broker.entry_format import parse_entry
from broker.names import TopicName
from broker.topic import PersistentTopic
from common.clock import Clock
from common.config import Config
from common.errors import AlreadyExists, NotFound, ServiceNotReady, ShuttingDown, StrataError
from ledger.managed_ledger import ManagedLedger

log = logging.getLogger(__name__)

TOPIC_LOAD_WAIT_S = 10.0
OWNERSHIP_ROOT = "/ownership"


class BrokerService:
    def __init__(self, config: Config, store: Any, astore: Any, ledger_client: Any, clock: Clock,
                 advertised_url: str, broker_id: str) -> None:
        self.config = config
        self.store = store                  # synchronous MetadataStore (the managed ledger's)
        self.astore = astore                # AsyncMetadataStore over the same store
        self.ledger_client = ledger_client
        self.clock = clock
        self.advertised_url = advertised_url
        self.broker_id = broker_id          # e.g. "127.0.0.1:6650"; names generated producers
        self.topics: dict[str, PersistentTopic] = {}
        self._loading: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self.closing = False

    # --- background work --------------------------------------------------------------------------

    def spawn(self, coro: Coroutine) -> asyncio.Task:
        """Run `coro` in the background, keeping a reference and logging its failure."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if isinstance(exc, StrataError):
                log.warning("background task failed: %s", exc)
            else:
                log.error("background task crashed", exc_info=exc)

    async def next_producer_name(self) -> str:
        """A producer name unique across brokers and restarts (an id from the metadata store)."""
        return f"strata-{self.broker_id.replace(':', '-')}-{await self.astore.next_id('producer-name')}"

    # --- topics ---------------------------------------------------------------------------------------

    async def get_topic(self, name: TopicName) -> PersistentTopic:
        """The loaded topic, loading (and creating) it if needed; ServiceNotReady if slow."""
        if self.closing:
            raise ShuttingDown("broker is shutting down")
        key = str(name)
        topic = self.topics.get(key)
        if topic is not None:
            return topic
        task = self._loading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(name))
            self._loading[key] = task
            task.add_done_callback(lambda t, k=key: self._loading.pop(k, None))
        try:
            return await asyncio.wait_for(asyncio.shield(task), TOPIC_LOAD_WAIT_S)
        except asyncio.TimeoutError:
            raise ServiceNotReady("topic is still loading", topic=key) from None

    async def _load(self, name: TopicName) -> PersistentTopic:
        await self._claim(name)
        await policies.register_topic(self.astore, name, self.clock.wall_ms())
        c = self.config
        ml = await ManagedLedger.open(name.managed_ledger_name, self.astore, self.ledger_client, c,
                                      self.clock, ensemble_size=c.ledger_ensemble_size,
                                      write_quorum=c.ledger_write_quorum, ack_quorum=c.ledger_ack_quorum,
                                      meta_from_entry=_entry_meta)
        try:
            topic = await PersistentTopic.open(self, name, ml)
        except BaseException:
            await _close_ml(ml)
            raise
        if self.closing:
            await topic.close()
            raise ShuttingDown("broker is shutting down")
        self.topics[str(name)] = topic
        return topic

    async def _claim(self, name: TopicName) -> None:
        path = f"{OWNERSHIP_ROOT}/{name.path}"
        value = self.advertised_url.encode()
        for _ in range(3):
            try:
                await self.astore.create(path, value, ephemeral=True)
                return
            except AlreadyExists:
                found = await self.astore.get(path)
            if found is None:
                continue
            if found.ephemeral_owner == self.astore.session_id:
                return
            if found.value != value:
                raise ServiceNotReady("topic is owned by another broker", topic=str(name),
                                      owner=found.value.decode(errors="replace"))
            try:  # our own previous incarnation's key: take it over
                await self.astore.delete(path, expected_version=found.version)
            except (NotFound, StrataError):
                pass
        raise ServiceNotReady("could not claim topic ownership", topic=str(name))

    async def release(self, topic: PersistentTopic) -> None:
        """Close a topic and give up its ownership."""
        key = str(topic.name)
        if self.topics.get(key) is topic:
            del self.topics[key]
        await topic.close()
        try:
            await self.astore.delete(f"{OWNERSHIP_ROOT}/{topic.name.path}")
        except StrataError:
            pass

    async def partitions(self, name: TopicName) -> int:
        return await policies.partition_count(self.astore, name)

    async def topics_of_namespace(self, tenant: str, namespace: str) -> list[str]:
        names = await policies.topics_of_namespace(self.astore, tenant, namespace)
        return sorted(str(n) for n in names)

    async def close(self) -> None:
        """Close every topic (flushing cursors); stop background work."""
        self.closing = True
        for task in list(self._loading.values()):
            try:
                await asyncio.wait_for(asyncio.shield(task), TOPIC_LOAD_WAIT_S)
            except BaseException:
                pass
        for topic in list(self.topics.values()):
            try:
                await self.release(topic)
            except StrataError as exc:
                log.warning("closing topic %s: %s", topic.name, exc)
        for task in list(self._tasks):
            task.cancel()


def _entry_meta(data: bytes) -> tuple[int, int]:
    """(messages, publish_time_ms) of a stored entry, for indexes rebuilt after a crash."""
    info = parse_entry(data)
    return max(1, info.num_messages), info.publish_time_ms


async def _close_ml(ml: Any) -> None:
    try:
        await ml.close()
    except StrataError as exc:
        log.warning("closing managed ledger %s: %s", getattr(ml, "name", "?"), exc)
