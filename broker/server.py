"""The broker process, and the composition root: the one place that wires the layers together.

`Broker.start()` binds every port first (the broker's `BrokerIdentity` names their real numbers),
then builds the `BrokerContext` every layer below is handed, the `BrokerService` over it, the
topic-list watcher registry and the permission re-check, and the `FrontEnd` each binary-protocol
connection gets. Nothing is served before all of it exists.

Ports: `broker_port` (Pulsar binary protocol, on `broker_bind_host`), `broker_tls_port` (the same protocol over TLS,
pulsar+ssl://; -1: not served, 0: any free port) and `broker_admin_port` (admin HTTP + /metrics, on
`broker_admin_bind_host`), and tells clients `broker_advertised_host`; `Broker.stop()` undoes it
in reverse: stop accepting, close connections, close topics (cursors flushed, ledgers closed),
close the cold tier, close the ledger client, close the metadata session (its ephemeral ownership
keys go at once).

Cold tier: `offload.open_cold_storage` (None when `offload_driver` is empty; its Iceberg tables
are kept in this broker's metadata database unless `offload_iceberg_catalog_uri` says otherwise),
checked at start.
Wrong credentials or a missing bucket log one ERROR line and the broker serves without offload
(offload-status answers ERROR with that reason); S3 merely unreachable at start logs a warning
and keeps the tier (offloads and cold reads retry until it answers); so does a check that takes
longer than twice `offload_s3_connect_timeout_ms`, which is all start-up waits for it.
The event loop is uvloop; the process entry (`cli`) installs it before starting the loop.

TLS: the port's context (`auth.tls.server_context`) is built before any port is bound and the
authentication service before any serves, so unreadable key material stops the start with a
KeyMaterialError naming the file. A TLS handshake not done within `tls_handshake_timeout_ms` is
dropped; the connection's own clock (`authentication_connect_timeout_ms`, `broker.protocol.auth`)
starts once it is. With `broker_port` -1 the broker's service URL and id are the TLS port's
(`pulsar+ssl://host:port`).

What must hold: after `start()` returns, every configured port accepts connections; `stop()` is idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

import offload
from auth import tls
from broker import memdebug
from broker.admin.server import AdminServer
from broker.cluster import listeners
from broker.cluster.identity import BrokerIdentity
from broker.context import BackgroundTasks, BrokerContext
from broker.kafka.service import KafkaService
from broker.protocol.connection import ServerConnection
from broker.protocol.frontend import FrontEnd
from broker.protocol.revocation import AuthzRecheck
from broker.protocol.topic_lists import TopicListRegistry
from broker.service import BrokerService
from broker.topics.rates import StatsSampler
from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config
from common.errors import ColdTierError, ColdTierUnavailable, ServiceNotReady, StrataError
from common.invariant import present
from common.tls_reads import BufferedReads
from cursor.cursor_writer import CursorWriter
from ledger.auditor import start_auditor
from ledger.client import LedgerClient
from ledger.cold import ColdStorage
from metadata import open_store_waiting
from metadata.aio import AsyncMetadataStore
from metadata.api import MetadataStore

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: Config, metadata_url: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.metadata_url = metadata_url
        self.clock = clock
        self.store: MetadataStore | None = None
        self.astore: AsyncMetadataStore | None = None
        self.ledger_client: LedgerClient | None = None
        self.service: BrokerService | None = None
        self.front: FrontEnd | None = None         # what connections are served with (once started)
        self.tasks = BackgroundTasks()             # the broker's background work (ctx.spawn)
        self.cold: ColdStorage | None = None
        self.admin: AdminServer | None = None
        self._server: asyncio.base_events.Server | None = None        # broker_port (None: -1, not served)
        self._tls_server: asyncio.base_events.Server | None = None    # broker_tls_port (None: not served)
        self._listener_servers: list[asyncio.Server] = []   # advertised listeners' own ports
        self.connections: set[ServerConnection] = set()
        self.port = config.broker_port            # the bound ports once started (-1: not served)
        self.tls_port = config.broker_tls_port
        self.admin_port = config.broker_admin_port
        self.listeners = listeners.from_config(config)   # ConfigError before anything starts
        self.kafka = KafkaService(config)                 # Kafka's wire protocol (kafka_port; off: -1)
        self._stopped = False

    @property
    def service_url(self) -> str:
        """The broker's own URL (its id in ownership records): the plain port's, else the TLS port's."""
        internal = self.listeners.internal   # with advertised listeners, the internal one's URL
        if internal is not None:
            return internal.pulsar_url
        if self.port == -1:
            return self.service_url_tls
        return f"pulsar://{self.config.broker_advertised_host}:{self.port}"

    @property
    def service_url_tls(self) -> str:
        """pulsar+ssl://host:port of the TLS port ('' : not served)."""
        internal = self.listeners.internal
        if internal is not None and internal.pulsar_tls_url:
            return internal.pulsar_tls_url
        return "" if self.tls_port == -1 else f"pulsar+ssl://{self.config.broker_advertised_host}:{self.tls_port}"

    @property
    def admin_url(self) -> str:
        scheme = self.admin.scheme if self.admin is not None else "http"   # https when only the TLS port serves
        return f"{scheme}://{self.config.broker_advertised_host}:{self.admin_port}"

    @property
    def admin_url_tls(self) -> str:
        """https://host:port of the admin TLS port ('' : not served)."""
        if self.admin is None or self.admin.tls_port == -1:
            return ""
        return f"https://{self.config.broker_advertised_host}:{self.admin.tls_port}"

    async def start(self) -> None:
        c = self.config
        memdebug.install_from_env(asyncio.get_running_loop())   # off unless STRATA_TRACEMALLOC
        self.store = await asyncio.to_thread(open_store_waiting, self.metadata_url, config=c, clock=self.clock)
        self.astore = AsyncMetadataStore(self.store, config=c)
        self.ledger_client = LedgerClient(self.astore, c, self.clock)
        await self.ledger_client.check_credentials()   # a wrong bookie_auth_secret stops the start here
        self.cold, cold_error = await open_cold_tier(c, self.metadata_url)
        loop = asyncio.get_running_loop()
        tls_context = tls.server_context(c) if c.broker_tls_port != -1 else None   # KeyMaterialError first
        # bound first (a port may be 0: the service's id needs the real one), served only once
        # the service exists, so no connection is ever made without it
        if c.broker_port != -1:
            self._server = await loop.create_server(self._new_connection, host=c.broker_bind_host, port=c.broker_port,
                                                    reuse_address=True, backlog=1024, start_serving=False)
            self.port = self._server.sockets[0].getsockname()[1]
        if tls_context is not None:
            self._tls_server = await self._bind_tls(tls_context)
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]
        self._listener_servers = await listeners.bind_listener_ports(self.listeners, self.port, self._new_connection)
        await self.kafka.bind()
        self.admin = AdminServer(c, c.broker_admin_port)
        await self.admin.bind()              # its real ports name this broker: bound before the service exists
        self.admin_port = self.admin.port
        identity = BrokerIdentity(
            broker_id=f"{c.broker_advertised_host}:{self.port if self.port != -1 else self.tls_port}",
            service_url=self.service_url, service_url_tls=self.service_url_tls, web_url=self.admin_url,
            web_url_tls=self.admin_url_tls, registry_key=f"{c.broker_advertised_host}:{self.admin_port}",
            listeners=self.listeners, kafka_listeners=self.kafka.listeners.to_json())
        self.service = service = self._compose(identity, cold_error)
        log.info("authentication %s", service.authentication.methods
                 if service.authentication.enabled else "off")   # built now: bad key material fails here
        await self.admin.serve(service)
        # registered (BrokerAddressInUse if a live broker has our address) before serving clients
        await service.start_cluster()
        self.tasks.spawn(AuthzRecheck(self._front()).run())   # revoked producers/consumers closed (authorization on)
        for server in (self._server, self._tls_server, *self._listener_servers):
            if server is not None:
                await server.start_serving()
        await self.kafka.serve(service)
        await start_auditor(self.ledger_client, c, self.clock, owner=identity.broker_id)  # stops with the client
        log.info("broker serving %s, admin %s", " and ".join(u for u in (
            self.service_url if self.port != -1 else "", self.service_url_tls) if u), self.admin_url)

    def _compose(self, identity: BrokerIdentity, cold_error: str | None) -> BrokerService:
        """The composition root: the context every layer is handed, and the service over it."""
        c = self.config
        store = present(self.store, "the metadata store opens first")
        astore = present(self.astore, "the metadata store opens first")
        ledger_client = present(self.ledger_client, "the ledger client opens first")
        sampler = StatsSampler(c, self.clock)
        ctx = BrokerContext(config=c, clock=self.clock, astore=astore, ledger_client=ledger_client,
                            cursor_writer=CursorWriter(astore, config=c), cold=self.cold,
                            spawn=self.tasks.spawn, activity=sampler)
        return BrokerService(ctx, identity, store, sampler=sampler,
                             connection_count=lambda: len(self.connections), cold_error=cold_error)

    def _front(self) -> FrontEnd:
        """The Pulsar front end's collaborators (built once, after the service)."""
        if self.front is None:
            service = present(self.service, "the front end is built after the service")
            self.front = FrontEnd(ctx=service.ctx, service=service, non_persistent=service.non_persistent,
                                  ownership=service.ownership, namespaces=service.namespaces,
                                  authentication=service.authentication, authorization=service.authorization,
                                  topic_lists=TopicListRegistry(service.ctx.astore))
        return self.front

    async def _bind_tls(self, context: ssl.SSLContext) -> asyncio.base_events.Server:
        c = self.config
        return await asyncio.get_running_loop().create_server(
            lambda: BufferedReads(self._new_connection()),   # uvloop's cheap TLS read path (common.tls_reads)
            host=c.broker_bind_host, port=c.broker_tls_port, ssl=context,
            ssl_handshake_timeout=c.tls_handshake_timeout_ms / 1000, reuse_address=True, backlog=1024,
            start_serving=False)

    def _new_connection(self) -> ServerConnection:
        if self.service is None:
            raise ServiceNotReady("the broker accepted a connection before its service exists")
        conn = _TrackedConnection(self._front(), self.connections)
        self.connections.add(conn)
        return conn

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for server in (self._server, self._tls_server, *self._listener_servers):
            if server is not None:
                server.close()
        await self.kafka.stop()
        if self.admin is not None:
            await self.admin.stop()
        if self.service is not None:
            await self.service.close()
        if self.front is not None:
            self.front.topic_lists.stop()
        self.tasks.cancel_all()
        for conn in list(self.connections):
            conn.close()
        if self.cold is not None:
            await _close_cold(self.cold)
            self.cold = None
        if self.ledger_client is not None:
            await self.ledger_client.close()
        if self.astore is not None:
            await self.astore.close()


async def open_cold_tier(config: Config, metadata_url: str | None = None) -> tuple[ColdStorage | None, str | None]:
    """(the cold tier, None) when usable or merely unreachable now; (None, reason) when it cannot
    work (wrong credentials, missing bucket, bad settings); (None, None) when none is configured.
    `metadata_url` is the Iceberg catalog's database unless `offload_iceberg_catalog_uri` is set."""
    try:
        cold = offload.open_cold_storage(config, metadata_url=metadata_url)
    except StrataError as exc:
        reason = f"cold tier not usable, offload disabled: {exc}"
        log.error("%s", reason)
        return None, reason
    if cold is None:
        return None, None
    check_s = 2 * config.offload_s3_connect_timeout_ms / 1000   # start-up is not held longer
    try:
        await asyncio.wait_for(cold.check(), check_s)
    except (ColdTierUnavailable, TimeoutError) as exc:
        log.warning("cold tier unreachable at start (offloads and cold reads retry): %s",
                    exc if isinstance(exc, ColdTierUnavailable) else f"no answer within {check_s:.1f} s")
    except ColdTierError as exc:
        reason = f"cold tier not usable, offload disabled: {exc}"
        log.error("%s", reason)
        await _close_cold(cold)
        return None, reason
    return cold, None


async def _close_cold(cold: ColdStorage) -> None:
    try:
        await cold.close()
    except StrataError as exc:
        log.warning("closing the cold tier: %s", exc)


class _TrackedConnection(ServerConnection):
    """A connection that leaves the broker's set when it closes."""

    def __init__(self, front: FrontEnd, registry: set) -> None:
        super().__init__(front)
        self._registry = registry

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        super().connection_lost(exc)
