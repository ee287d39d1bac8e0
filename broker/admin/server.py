"""The admin HTTP server (aiohttp): Pulsar's admin REST API, one module per resource, plus `/metrics`.

Resources (each module's docstring lists its routes):
- `broker.admin.tenants`: tenants; `broker.admin.namespaces`: namespaces, their bundles and
  policies; `broker.admin.topics`: topics, partitions, stats, topic policies;
  `broker.admin.subscriptions`: subscription operations; `broker.admin.offload`: offload and
  internalStats; `broker.admin.lookup`: HTTP lookup, topic unload, and the 307 to a topic's owner;
  `broker.admin.brokers`: brokers, health, leader, clusters; `broker.admin.broker_stats`: every
  loaded topic's stats (`strata top`); `broker.admin.explain`: `explain-storage`;
  `broker.admin.schemas`: the schema registry and the schema policies; `broker.admin.groups`:
  Kafka consumer groups (their stored records, and the peer call on a partition's committed offsets).
- `broker.admin.messages`: the console's message browse (`.../messages`: filters, schema decoding);
  `broker.admin.tail`: its live tail of a topic (`.../tail`, Server-Sent Events).
- The web console (with `console_enabled`): `broker.admin.console_site` its static files at
  `/console/`; `broker.admin.console_api` whoami and the cluster page; `broker.admin.bookies`
  `/admin/v2/bookies/all`; `broker.admin.audit` the audit log (recorded as answers go out, on the
  application's `on_response_prepare` signal) and `/admin/v2/console/audit`.
- `GET /metrics` → Prometheus text (`broker.stats.metrics`).

Middlewares, outermost first: `broker.admin.http.errors` (typed errors → `{"reason": ...}` with
Pulsar's status codes), then `broker.admin.access.access` (authentication and authorization of
every route, before anything is looked up or redirected), then
`broker.admin.forward.follow_owner` (the console's calls follow a 307 through this broker), then
`broker.admin.lookup.owner_redirect` (a topic's call runs on its owner). Request bodies are
bounded by `broker_admin_body_bytes_max`.

Start in two steps: `bind()` takes the ports (the broker's identity names them, so they are bound
before the service exists), `serve(service)` builds the routes over the service and answers.

Ports, both on `broker_admin_bind_host`: `broker_admin_port` (http; -1: not served) and
`broker_admin_tls_port` (https with `auth.tls.server_context`: `tls_cert_file`/`tls_key_file`, a
client certificate asked for when `tls_trust_certs_file` is set and required only with
`tls_require_trusted_client_cert_on_connect`; -1: not served). A TLS handshake not finished within
`tls_handshake_timeout_ms` is dropped. `port`/`scheme` name what the broker advertises and
registers: the plain port when served, else the TLS one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from auth import tls
from broker.admin import (
    access,
    audit,
    backlog_quota,
    bookies,
    broker_stats,
    brokers,
    compaction,
    console_api,
    console_site,
    explain,
    forward,
    groups,
    limits,
    lookup,
    messages,
    namespaces,
    non_persistent,
    offload,
    permissions,
    schemas,
    subscriptions,
    tail,
    tenants,
    terminate,
    topics,
)
from broker.admin.http import BODY_BYTES_MAX, errors
from broker.stats import metrics
from common.config import Config
from common.invariant import present

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

# every resource module, each with `register(app, service)`
_RESOURCES = (topics, namespaces, tenants, offload, lookup, brokers, broker_stats, explain, subscriptions, terminate,
              non_persistent, backlog_quota, schemas, compaction, permissions, groups, messages, tail, limits)
# the web console's API (its static files: console_site, registered apart: they need only the settings)
_CONSOLE_RESOURCES = (console_api, bookies, audit)


class AdminServer:
    def __init__(self, config: Config, port: int, tls_port: int | None = None) -> None:
        self.config = config
        self.service: BrokerService | None = None   # set by serve()
        self.plain_port = port                 # -1: not served
        self.tls_port = config.broker_admin_tls_port if tls_port is None else tls_port
        self.port = port if port != -1 else self.tls_port    # what is advertised (the real one once bound)
        self._runner: web.AppRunner | None = None
        self._plain_server: asyncio.AbstractServer | None = None   # bound by bind(), served by serve()
        self._tls_server: asyncio.AbstractServer | None = None

    @property
    def scheme(self) -> str:
        """"http" when the plain port is served, else "https"."""
        return "http" if self.plain_port != -1 else "https"

    def app(self, service: BrokerService) -> web.Application:
        body_bytes_max = self.config.broker_admin_body_bytes_max
        app = web.Application(middlewares=[errors, access.access, forward.follow_owner, lookup.owner_redirect],
                              client_max_size=body_bytes_max)
        app[BODY_BYTES_MAX] = body_bytes_max
        access.install(app, service)
        audit.install(app, self.config)
        forward.install(app, self.config)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/metrics/", self.metrics)
        for resource in _RESOURCES:
            resource.register(app, service)
        for resource in _CONSOLE_RESOURCES:
            resource.register(app, service)
        console_site.register(app, self.config)
        return app

    async def bind(self) -> None:
        """Take the ports (a port 0 becomes a free one); nothing is answered before `serve`."""
        c = self.config
        ssl_ctx = tls.server_context(c) if self.tls_port != -1 else None   # KeyMaterialError before binding
        loop = asyncio.get_running_loop()
        if self.plain_port != -1:   # as aiohttp's TCPSite binds: every address the host resolves to
            self._plain_server = await loop.create_server(
                self._request_handler, c.broker_admin_bind_host, self.plain_port, reuse_address=True,
                backlog=128, start_serving=False)
            self.plain_port = self._plain_server.sockets[0].getsockname()[1]   # the real one when 0 was asked
        if ssl_ctx is not None:     # TLS handshakes bounded (aiohttp's TCPSite has no handshake timeout)
            self._tls_server = await loop.create_server(
                self._request_handler, c.broker_admin_bind_host, self.tls_port, ssl=ssl_ctx, reuse_address=True,
                backlog=128, ssl_handshake_timeout=c.tls_handshake_timeout_ms / 1000, start_serving=False)
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]
        self.port = self.plain_port if self.plain_port != -1 else self.tls_port

    async def serve(self, service: BrokerService) -> None:
        """Answer on the bound ports with the routes over `service`."""
        self.service = service
        self._runner = web.AppRunner(self.app(service), access_log=None)
        await self._runner.setup()
        for server in (self._plain_server, self._tls_server):
            if server is not None:
                await server.start_serving()

    async def start(self, service: BrokerService) -> None:
        """`bind` then `serve`, for a service that exists already."""
        await self.bind()
        await self.serve(service)

    def _request_handler(self) -> asyncio.BaseProtocol:
        """A connection's protocol: the runner's own request handler (ports serve only once it exists)."""
        runner = present(self._runner, "the admin ports serve only after serve()")
        return present(runner.server, "the runner is set up")()

    async def stop(self) -> None:
        for server in (self._plain_server, self._tls_server):
            if server is not None:
                server.close()
        self._plain_server = self._tls_server = None
        if self._runner is not None:
            await self._runner.cleanup()     # the open connections are shut down
            self._runner = None

    async def metrics(self, request: web.Request) -> web.Response:
        text = await metrics.render_async(present(self.service, "routes exist once serving"))   # off the loop
        text = await access.metrics_visible_to(request, text)   # only the caller's series, when secured
        return web.Response(body=text.encode(), headers={"Content-Type": metrics.CONTENT_TYPE})
