"""BrokerService: the topics this broker serves, and the shared things they need.

Topics are loaded lazily, the first time a PRODUCER, SUBSCRIBE or admin call names them, and only
while this broker owns the topic's namespace bundle (`broker.cluster.ownership`: an unowned bundle is
acquired then; one owned elsewhere raises OwnedElsewhere, which the client answers with a fresh
lookup and the admin API with a 307). A topic of a namespace that was never created is not loaded
(NamespaceNotFound; `broker.records.tenancy`, whose `ensure_defaults` creates `public/default` at
`start_cluster`). Loading records the topic in the topic list, opens its
managed ledger (which fences any previous writer) and loads its cursors. Concurrent callers share
one load; each waits at most `broker_topic_load_timeout_ms` and then gets ServiceNotReady, which
the client retries.

Cluster membership (`start_cluster`): the broker registers itself (`broker.cluster.registry`) under
its `BrokerIdentity`, keeps the ownership view, follows its metadata lease
(`broker.cluster.lease_watch`: a lapsed lease stops all serving at once) and rewrites its load
report. `close()` unloads every bundle first, so clients move to the other brokers before this one
lets go of anything else. Ownership closes topics through this service's `release` (the service
is the `LoadedTopics` the cluster package is typed against), never by reaching into it.

Policies: the dedup switch of loaded topics follows the namespace and topic policies. The admin
API applies a change to this broker's topics at once (`apply_dedup_policy`); a watch on
`/admin` applies changes made through any other broker within about a second.

Retention: `broker.retention.task.RetentionTask` applies TTL and retention to every loaded topic
every `broker_retention_check_interval_ms` (started with the other background work).

Cold tier: the broker's `ColdStorage` (`ctx.cold`; None without a usable one, `cold_error` then
says why, and offload-status reports it) is handed to every managed ledger it opens; each closed
ledger triggers the automatic offload check (`broker.retention.offload.on_ledger_closed`).

Stats: every `broker_stats_sample_interval_ms` the counters of the topics with recent traffic
are sampled (`broker.topics.rates.StatsSampler`, the context's `activity`) so the admin API can
report rates; an idle topic is not visited at all.

Collaborators: the service is built by the composition root (`broker.server`) from a
`BrokerContext` (settings, clock, stores, task spawner) and the broker's `BrokerIdentity`. Below
it, nothing is handed the service: topics get the context, broker-wide machinery the context and
the narrow `LoadedTopics` view. The front ends (`broker.protocol`, `broker.admin`) sit above it.

What must hold: at most one `PersistentTopic` per name per process; a topic is served only while
this broker holds its bundle's ownership key under a valid lease.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from auth.service import AuthenticationService
from broker.cluster.identity import BrokerIdentity
from broker.cluster.lease_watch import LeaseWatch
from broker.cluster.load_manager import LoadManager
from broker.cluster.load_report import LoadMeter
from broker.cluster.ownership import Ownership
from broker.cluster.registry import BrokerRegistry
from broker.context import BrokerContext
from broker.limits import topic_count
from broker.limits.persistence import StorageCounters
from broker.limits.view import PolicyView
from broker.nonpersistent.topic import NonPersistentTopics
from broker.records import policies, tenancy
from broker.retention import backlog_quota
from broker.retention import offload as offload_policy
from broker.retention.backlog_quota import BacklogQuotaChecker
from broker.retention.lifecycle import LifecycleTask
from broker.retention.task import RetentionTask
from broker.security.authorization import AuthorizationService
from broker.stats import metrics_lifecycle, metrics_storage_policies
from broker.stats.metrics_caps import families as caps_families
from broker.topics import dedup, rate_limits, storage_policies
from broker.topics.auto_create import AutoCreation
from broker.topics.caps_keeper import CapsKeeper
from broker.topics.rates import StatsSampler
from broker.topics.topic import PersistentTopic
from common import security_records
from common.errors import (
    BundleNotOwned,
    NotAllowed,
    NotFound,
    NotOnNonPersistent,
    ServiceNotReady,
    ShuttingDown,
    StrataError,
)
from common.topic_names import TopicName
from entries.entry import parse_entry
from ledger.managed_ledger import ManagedLedger
from metadata.api import MetadataStore, Watch, WatchEvent

log = logging.getLogger(__name__)

_SLOW_LOAD_S = 0.5   # a topic load this slow is logged (a takeover reads the last ledger back)


class BrokerService:
    def __init__(self, ctx: BrokerContext, identity: BrokerIdentity, store: MetadataStore, *,
                 sampler: StatsSampler, connection_count: Callable[[], int],
                 cold_error: str | None = None) -> None:
        self.ctx = ctx
        # read by the front ends above (admin, protocol); the layers below get `ctx` itself
        self.config, self.clock, self.astore, self.cold = ctx.config, ctx.clock, ctx.astore, ctx.cold
        self.cold_error = cold_error        # why there is no cold tier (its start-up check failed); None: not asked
        self.identity = identity
        self.store = store                  # synchronous MetadataStore (the managed ledger's; new sessions)
        self._sampler = sampler             # rates of topics with traffic (ctx.activity)
        self._connection_count = connection_count   # the server's live connections, for the load report
        self.namespaces = tenancy.NamespaceCache(ctx.astore)   # which namespaces exist (lookups, loads)
        self.topics: dict[str, PersistentTopic] = {}
        self.non_persistent = NonPersistentTopics(ctx, self)   # live non-persistent topics (in memory only)
        self.registry = BrokerRegistry(ctx.astore, ctx.config, identity.registry_key)
        self.ownership = Ownership(ctx, identity, self.registry, self.namespaces, self, self.non_persistent)
        self.lease = LeaseWatch(ctx, store, self.registry, self.ownership, self.load_report)
        self.load_manager = LoadManager(ctx, identity, self.registry, self.ownership)
        self._load_meter = LoadMeter()
        self._loading: dict[str, asyncio.Task] = {}
        self._loading_names: dict[str, TopicName] = {}
        self._background_started = False   # policy watch and stats sampler (started lazily)
        self._policy_watch: Watch | None = None
        self.retention = RetentionTask(ctx, self)   # TTL + retention; runs once background work starts
        self.limits = PolicyView(ctx.astore, ctx.config)        # multi-tenant policies, cached (broker.limits)
        self.caps = CapsKeeper(self.limits, ctx.config, self.topics, ctx.spawn)   # loaded topics' max* caps
        # inactive topics and expired subscriptions (a periodic task), topics/subscriptions created by naming them
        self.lifecycle = LifecycleTask(ctx, self, self.limits, self.delete_idle)
        self.auto_create = AutoCreation(ctx.astore, self.limits, ctx.config, ctx.clock, self.lifecycle.counters)
        # the broker-wide publish limit (None: unset), shared by every topic's rate limits
        self.broker_publish = rate_limits.broker_publish_throttle(ctx.config, ctx.clock)
        self.limits.listen(self._rate_policies_changed)
        self.limits.listen(self._storage_policies_changed)
        self.backlog_quotas = BacklogQuotaChecker(ctx, self)   # periodic backlog quota check, likewise
        self.storage_counters = StorageCounters()   # what the storage policies did (dedup snapshots)
        self.closing = False
        # metric families other front ends add to /metrics (the Kafka listener's requests and traffic):
        # each is called with the cluster name at scrape time
        self.protocol_metrics: list[Callable[[str], Iterable[Any]]] = []
        self.protocol_metrics.append(functools.partial(caps_families, self.caps))
        self.protocol_metrics.append(functools.partial(metrics_lifecycle.families, self.lifecycle.counters))
        self.protocol_metrics.append(functools.partial(metrics_storage_policies.families, self.storage_counters))

    # --- security (built on first use; Broker.start touches both so bad key material fails the start) ---

    @functools.cached_property
    def authentication(self) -> AuthenticationService:
        """Who a client is (auth.service): CONNECT, AUTH_RESPONSE and the admin HTTP API ask it."""
        return AuthenticationService.from_config(self.config)

    @functools.cached_property
    def authorization(self) -> AuthorizationService:
        """What a role may do (broker.security.authorization)."""
        return AuthorizationService(self.config, self.astore)

    async def next_producer_name(self) -> str:
        """A producer name unique across brokers and restarts (an id from the metadata store)."""
        broker_id = self.identity.broker_id.replace(":", "-")
        return f"strata-{broker_id}-{await self.astore.next_id('producer-name')}"

    # --- cluster ------------------------------------------------------------------------------------

    async def start_cluster(self) -> None:
        """Register this broker, start the ownership view and follow the lease (once serving)."""
        await tenancy.ensure_defaults(self.astore, self.config.cluster_name,
                                      self.config.broker_default_namespace_bundles)
        await security_records.publish(self.astore, self.config)   # for readers of the store (Spark source)
        await self.namespaces.start()
        await self.registry.register(self.load_report())
        await self.ownership.start()
        self.lease.start()
        await self.load_manager.start()

    def load_report(self) -> dict:
        bundles = [f"{t}/{ns}/{b.key}" for t, ns, b in self.ownership.owned()]
        return self._load_meter.report(self.identity, list(self.topics.values()), self._connection_count(),
                                       bundles)

    # --- admission: may this broker serve a topic now (also `TopicAdmission` of non-persistent topics) ---

    def check_serving(self, name: TopicName) -> None:
        if self.closing:
            raise ShuttingDown("broker is shutting down")
        if not self.astore.lease_valid():
            raise BundleNotOwned("this broker's metadata lease has lapsed", topic=str(name))

    async def check_owned(self, name: TopicName) -> None:
        await self.namespaces.require(name.tenant, name.namespace)   # NamespaceNotFound: not created
        await self.ownership.check_owned(name)

    # --- topics ---------------------------------------------------------------------------------------

    async def get_topic(self, name: TopicName) -> PersistentTopic:
        """The loaded topic, loading (and creating) it if needed; ServiceNotReady if slow."""
        if not name.persistent:   # `self.non_persistent` serves it: a managed ledger would store it
            raise NotOnNonPersistent("a non-persistent topic has no managed ledger", topic=str(name))
        self.check_serving(name)
        if not self._background_started:
            self._background_started = True
            self.ctx.spawn(self._start_background())
        key = str(name)
        topic = self.topics.get(key)
        if topic is not None:
            return topic
        task = self._loading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(name))
            self._loading[key] = task
            self._loading_names[key] = name
            task.add_done_callback(functools.partial(self._loaded, key))
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.config.broker_topic_load_timeout_ms / 1000)
        except TimeoutError:
            raise ServiceNotReady("topic is still loading", topic=key) from None

    async def get_or_create(self, name: TopicName, *, create: bool = True) -> PersistentTopic:
        """`get_topic` for a PRODUCER or SUBSCRIBE: a topic that does not exist is created only
        as autoTopicCreation allows (`broker.topics.auto_create`), else TopicNotFound."""
        topic = self.topics.get(str(name))
        if topic is not None:
            return topic
        await self.auto_create.admit(name, create=create)
        return await self.get_topic(name)

    def _loaded(self, key: str, task: asyncio.Task) -> None:
        """A load ended. Its exception is retrieved here: every caller that awaited it got it,
        and when they were all cancelled first (their connection closed) nobody else would, and
        asyncio would log "Task exception was never retrieved" for an ordinary refusal."""
        self._loading.pop(key, None)
        self._loading_names.pop(key, None)
        if not task.cancelled():
            task.exception()

    async def _load(self, name: TopicName) -> PersistentTopic:
        await self.check_owned(name)
        started_s = self.clock.monotonic_s()
        # a new topic must fit its namespace's maxTopicsPerNamespace (auto-creation, REST create)
        await topic_count.register_new(self.astore, self.limits, name, self.clock.wall_ms(), self.caps.refusals)
        c, ctx = self.config, self.ctx
        e, qw, qa = await storage_policies.quorum(self.limits, name)   # its persistence policy
        ml = await ManagedLedger.open(name.managed_ledger_name, self.astore, ctx.ledger_client, c,
                                      self.clock, ensemble_size=e, write_quorum=qw, ack_quorum=qa,
                                      meta_from_entry=_entry_meta, cold=ctx.cold)
        try:
            topic = await PersistentTopic.open(ctx, name, ml)
            await backlog_quota.load(ctx, topic)     # its quotas, for stats from the start
            await self.caps.on_load(topic)           # its max* caps, before any client attaches
            await storage_policies.apply(topic, self.limits, self.storage_counters)   # before any client
            await rate_limits.apply(topic, self.limits, self.broker_publish)   # before any client
        except BaseException:
            await _close_ml(ml)
            raise
        ml.add_ledger_closed_listener(lambda _ledger_id: offload_policy.on_ledger_closed(ctx, topic))
        if self.closing:
            await topic.close()
            raise ShuttingDown("broker is shutting down")
        if not await self.ownership.serving(name):
            # its bundle was unloaded (or the lease lapsed) while it loaded: serving it now would
            # make two owners (strata chaos found it after a load-shedding move)
            await topic.close()
            raise BundleNotOwned("the bundle was released while the topic loaded", topic=str(name))
        self.topics[str(name)] = topic
        took_s = self.clock.monotonic_s() - started_s
        if took_s >= _SLOW_LOAD_S:
            log.info("loaded %s in %.2f s", name, took_s)
        return topic

    def _rate_policies_changed(self, match: Callable[[TopicName], bool]) -> None:
        """A policy changed: the matching loaded topics re-read their rate limits."""
        for topic in list(self.topics.values()):
            if match(topic.name) and not topic.closing:
                self.ctx.spawn(rate_limits.apply(topic, self.limits, self.broker_publish))

    def _storage_policies_changed(self, match: Callable[[TopicName], bool]) -> None:
        """A policy changed: the matching loaded topics re-read their storage policies (the
        quorums of their next ledger, mark-delete rate, dedup snapshots, delayed delivery)."""
        for topic in list(self.topics.values()):
            if match(topic.name) and not topic.closing:
                self.ctx.spawn(storage_policies.apply(topic, self.limits, self.storage_counters))

    async def settle_loads(self, match: Callable[[TopicName], bool], timeout_s: float) -> None:
        """Wait (bounded) until no load of a topic `match` picks is in flight; their outcome is
        theirs (a load that finds its bundle released closes itself)."""
        tasks = [task for key, task in self._loading.items()
                 if (name := self._loading_names.get(key)) is not None and match(name)]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    async def release(self, topic: PersistentTopic) -> None:
        """Close a topic (its clients look up again); its bundle's ownership is not touched."""
        key = str(topic.name)
        if self.topics.get(key) is topic:
            del self.topics[key]
        await topic.close()

    async def delete_topic(self, name: TopicName, *, force: bool) -> None:
        """Delete a (partition) topic and everything it stores. Without `force`, NotAllowed while
        producers or consumers are attached; with it, they are told to go (CLOSE_*)."""
        known = {str(n) for n in await policies.topics_of_namespace(self.astore, name.tenant, name.namespace)}
        if str(name) not in known and str(name) not in self.topics:
            raise NotFound("topic not found", topic=str(name))
        topic = await self.get_topic(name)
        if topic.has_clients() and not force:
            raise NotAllowed("topic has connected producers or consumers", topic=str(name))
        if self.topics.get(str(name)) is topic:
            del self.topics[str(name)]
        await topic.delete()
        await policies.unregister_topic(self.astore, name)

    async def delete_idle(self, topic: PersistentTopic, still_idle: Callable[[], bool]) -> bool:
        """Delete a loaded topic the lifecycle task found inactive, if `still_idle()` holds as it
        is taken out of service (checked with no wait in between); False if not deleted."""
        key = str(topic.name)
        if self.topics.get(key) is not topic or topic.closing or not still_idle():
            return False
        del self.topics[key]
        await topic.delete()        # closing from its first step: nothing attaches any more
        await policies.unregister_topic(self.astore, topic.name)
        return True

    async def apply_dedup_policy(self, match: Callable[[TopicName], bool]) -> None:
        """Re-read the dedup switch of every loaded topic for which `match(name)` holds."""
        for topic in list(self.topics.values()):
            if match(topic.name) and not topic.closing:
                topic.dedup.set_enabled(await policies.dedup_enabled(self.astore, topic.name))

    async def drop_unloaded_dedup_snapshots(self, tenant: str, namespace: str,
                                            match: Callable[[TopicName], bool]) -> None:
        """Dedup went off for topics nobody has loaded: delete their snapshots now, so switching
        on again later starts afresh at the end instead of replaying from a stale snapshot."""
        for name in await policies.topics_of_namespace(self.astore, tenant, namespace):
            if not match(name) or str(name) in self.topics:
                continue
            if await policies.dedup_enabled(self.astore, name):
                continue
            try:
                await self.astore.delete(dedup.snapshot_path(name.managed_ledger_name))
            except NotFound:
                pass

    async def _start_background(self) -> None:
        self.ctx.spawn(self._sample_stats())
        self.retention.start()
        self.lifecycle.start()
        self.backlog_quotas.start()
        self._policy_watch = await self.astore.watch("/admin", self._policy_changed)

    def _policy_changed(self, event: WatchEvent) -> None:
        path = event.path
        self.limits.changed(path)
        if path.startswith(policies.POLICIES_ROOT + "/"):
            tenant, _, ns = path[len(policies.POLICIES_ROOT) + 1:].partition("/")
            self.ctx.spawn(self.apply_dedup_policy(lambda n: (n.tenant, n.namespace) == (tenant, ns)))
            self.ctx.spawn(self.backlog_quotas.reload(lambda n: (n.tenant, n.namespace) == (tenant, ns)))
        elif path.startswith(policies.TOPIC_POLICIES_ROOT + "/"):
            base = path[len(policies.TOPIC_POLICIES_ROOT) + 1:]
            self.ctx.spawn(self.apply_dedup_policy(lambda n: n.base.path == base))
            self.ctx.spawn(self.backlog_quotas.reload(lambda n: n.base.path == base))

    async def _sample_stats(self) -> None:
        interval_s = self.config.broker_stats_sample_interval_ms / 1000
        while not self.closing:
            self._sampler.tick()
            await asyncio.sleep(interval_s)

    async def partitions(self, name: TopicName) -> int:
        """Partitions of `name` (0: not partitioned); NamespaceNotFound if its namespace does not exist."""
        await self.namespaces.require(name.tenant, name.namespace)
        return await policies.partition_count(self.astore, name)

    def non_persistent_topics(self, tenant: str, namespace: str) -> list[str]:
        """The namespace's live non-persistent topics on this broker (`broker.nonpersistent.topic`)."""
        return self.non_persistent.names(tenant, namespace)

    async def topics_of_namespace(self, tenant: str, namespace: str) -> list[str]:
        await self.namespaces.require(tenant, namespace)
        names = await policies.topics_of_namespace(self.astore, tenant, namespace)
        return sorted(str(n) for n in names)

    async def close(self) -> None:
        """Close every topic (flushing cursors); stop background work."""
        self.ownership.draining = True   # acquire nothing more; lookups send clients elsewhere
        await self.registry.unregister()
        try:   # clients move to the other brokers first (topics closed, then keys deleted)
            await self.ownership.unload_all()
        except StrataError as exc:
            log.warning("unloading bundles at stop: %s", exc)
        self.closing = True
        self.lease.stop()
        self.ownership.stop()
        self.load_manager.stop()
        self.registry.stop_view()
        await self.retention.stop()
        await self.lifecycle.stop()
        await self.backlog_quotas.stop()
        await self.non_persistent.stop()
        for task in list(self._loading.values()):
            try:
                await asyncio.wait_for(asyncio.shield(task), self.config.broker_topic_load_timeout_ms / 1000)
            except BaseException:
                pass
        for topic in list(self.topics.values()):
            try:
                await self.release(topic)
            except StrataError as exc:
                log.warning("closing topic %s: %s", topic.name, exc)
        if self._policy_watch is not None:
            self._policy_watch.cancel()
        self.namespaces.stop()   # the background tasks (ctx.spawn) are the server's to cancel, after this


def _entry_meta(data: bytes) -> tuple[int, int]:
    """(messages, publish_time_ms) of a stored entry, for indexes rebuilt after a crash."""
    info = parse_entry(data)
    return max(1, info.num_messages), info.publish_time_ms


async def _close_ml(ml: ManagedLedger) -> None:
    try:
        await ml.close()
    except StrataError as exc:
        log.warning("closing managed ledger %s: %s", getattr(ml, "name", "?"), exc)
