"""The Kafka listener of a broker: its ports, its front end, and their start and stop.

`KafkaService.bind()` binds `kafka_port` and `kafka_tls_port` (not served: -1) before the broker's
identity is made, so the identity (and through it the load report every broker reads) names the
real ports; `serve(service)` builds the `KafkaFrontEnd` over the broker's service and starts
accepting; `stop()` stops accepting, closes the connections and snapshots the producer states.

Security: the TLS port uses the broker's TLS context (`auth.tls.server_context`); with
authentication on, both listeners are SASL (SASL_PLAINTEXT, SASL_SSL) and take PLAIN with a Strata
token as the password (`broker.kafka.sasl`).

What must hold: no connection is accepted before the front end exists; `stop()` is idempotent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING

from auth import tls
from broker.kafka import listeners as kl
from broker.kafka.appends import AppendWaiters
from broker.kafka.connection import KafkaConnection
from broker.kafka.frontend import KafkaFrontEnd
from broker.kafka.groups.coordinator import GroupCoordinator
from broker.kafka.producer_ids import ProducerIdAllocator
from broker.kafka.producer_states import ProducerStates
from broker.kafka.stats import KafkaStats
from broker.kafka.stats import families as stats_families
from broker.kafka.topics import Catalog
from common.config import Config
from common.errors import ServiceNotReady

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)


class KafkaService:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.listeners = kl.KafkaListeners(None, None)
        self.front: KafkaFrontEnd | None = None
        self._plain: asyncio.base_events.Server | None = None
        self._tls: asyncio.base_events.Server | None = None
        self._stopped = False

    @property
    def enabled(self) -> bool:
        return self.config.kafka_port != -1 or self.config.kafka_tls_port != -1

    async def bind(self) -> None:
        c = self.config
        if not self.enabled:
            return
        loop = asyncio.get_running_loop()
        host = c.kafka_bind_host or c.broker_bind_host
        plain_port = tls_port = -1
        if c.kafka_port != -1:
            self._plain = await loop.create_server(lambda: self._connection(False), host=host, port=c.kafka_port,
                                                   reuse_address=True, backlog=1024, start_serving=False)
            plain_port = self._plain.sockets[0].getsockname()[1]
        if c.kafka_tls_port != -1:
            context = tls.server_context(c)
            self._tls = await loop.create_server(lambda: self._connection(True), host=host, port=c.kafka_tls_port,
                                                 ssl=context, ssl_handshake_timeout=c.tls_handshake_timeout_ms / 1000,
                                                 reuse_address=True, backlog=1024, start_serving=False)
            tls_port = self._tls.sockets[0].getsockname()[1]
        self.listeners = kl.build(c, plain_port, tls_port, sasl=c.authentication_enabled)

    async def serve(self, service: BrokerService) -> None:
        if not self.enabled:
            return
        ctx = service.ctx
        self.front = KafkaFrontEnd(
            ctx=ctx, service=service, ownership=service.ownership, registry=service.registry,
            authentication=service.authentication, authorization=service.authorization,
            listeners=self.listeners, catalog=Catalog(service, ctx.clock),
            producer_ids=ProducerIdAllocator(ctx.astore), producer_states=ProducerStates(ctx),
            appends=AppendWaiters(), stats=KafkaStats(ctx.clock, lambda: self._connections()),
            groups=GroupCoordinator(service))
        service.protocol_metrics.append(functools.partial(stats_families, self.front.stats))
        for server in (self._plain, self._tls):
            if server is not None:
                await server.start_serving()
        log.info("kafka listeners %s", ", ".join(f"{x.name}://{x.host}:{x.port}" for x in self.listeners.all()))

    def _connections(self) -> set:
        return self.front.connections if self.front is not None else set()

    def _connection(self, tls_port: bool) -> KafkaConnection:
        listener = self.listeners.tls if tls_port else self.listeners.plain
        if self.front is None or listener is None:
            raise ServiceNotReady("a Kafka connection was accepted before the front end exists")
        return KafkaConnection(self.front, listener)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for server in (self._plain, self._tls):
            if server is not None:
                server.close()
        if self.front is not None:
            for conn in list(self.front.connections):
                conn.close()
            await self.front.producer_states.close()
            await self.front.groups.stop()
