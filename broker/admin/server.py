"""The admin HTTP server (aiohttp): Pulsar's admin REST API, one module per resource, plus `/metrics`.

Resources (each module's docstring lists its routes):
- `broker.admin.tenants`: tenants; `broker.admin.namespaces`: namespaces, their bundles and
  policies; `broker.admin.topics`: topics, partitions, stats, topic policies;
  `broker.admin.subscriptions`: subscription operations; `broker.admin.offload`: offload and
  internalStats; `broker.admin.lookup`: HTTP lookup, topic unload, and the 307 to a topic's owner;
  `broker.admin.brokers`: brokers, health, leader, clusters; `broker.admin.broker_stats`: every
  loaded topic's stats (`strata top`); `broker.admin.explain`: `explain-storage`;
  `broker.admin.schemas`: the schema registry and the schema policies.
- `GET /metrics` → Prometheus text (`broker.metrics`).

Middlewares, outermost first: `broker.admin.http.errors` (typed errors → `{"reason": ...}` with
Pulsar's status codes), then `broker.admin.lookup.owner_redirect` (a topic's call runs on its
owner). Request bodies are bounded by `broker_admin_body_bytes_max`; the port listens on
`broker_admin_bind_host`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiohttp import web

from broker import metrics
from broker.admin import (
    backlog_quota,
    broker_stats,
    brokers,
    compaction,
    explain,
    lookup,
    namespaces,
    non_persistent,
    offload,
    schemas,
    subscriptions,
    tenants,
    terminate,
    topics,
)
from broker.admin.http import BODY_BYTES_MAX, errors

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

# every resource module, each with `register(app, service)`
_RESOURCES = (topics, namespaces, tenants, offload, lookup, brokers, broker_stats, explain, subscriptions, terminate,
              non_persistent, backlog_quota, schemas, compaction)


class AdminServer:
    def __init__(self, service: BrokerService, port: int) -> None:
        self.service = service
        self.port = port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        body_bytes_max = self.service.config.broker_admin_body_bytes_max
        app = web.Application(middlewares=[errors, lookup.owner_redirect], client_max_size=body_bytes_max)
        app[BODY_BYTES_MAX] = body_bytes_max
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/metrics/", self.metrics)
        for resource in _RESOURCES:
            resource.register(app, self.service)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.service.config.broker_admin_bind_host, self.port,
                           reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the real port when 0 was asked

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def metrics(self, request: web.Request) -> web.Response:
        text = await metrics.render_async(self.service)    # formatted off the event loop
        return web.Response(body=text.encode(), headers={"Content-Type": metrics.CONTENT_TYPE})
