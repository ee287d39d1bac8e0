"""Admin HTTP API (aiohttp) with Pulsar's paths and JSON field names, plus `/metrics`.

Routes:
- `PUT  /admin/v2/persistent/{tenant}/{ns}/{topic}/partitions` body N → 204; 409 if it exists.
- `GET  /admin/v2/persistent/{tenant}/{ns}/{topic}/partitions` → `{"partitions": N}`.
- `GET  /admin/v2/persistent/{tenant}/{ns}/{topic}/stats` → topic stats (Pulsar's names).
- `GET  /admin/v2/persistent/{tenant}/{ns}` → `["persistent://t/ns/x", ...]`.
- `GET  /admin/v2/persistent/{tenant}/{ns}/partitioned` → partitioned topic names.
- `POST /admin/v2/namespaces/{tenant}/{ns}/deduplication` body true/false → 204; `GET` → bool.
- `GET  /metrics` → Prometheus text (`broker.metrics`).

Errors are JSON `{"reason": ...}` with Pulsar's status codes: 400 bad input, 404 unknown topic,
409 conflict, 412 bad partition count, 503 not ready.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from broker import metrics, policies
from broker.names import TopicName, parse_namespace, parse_topic
from broker.topic_stats import topic_stats
from common.errors import (AlreadyExists, InvalidArgument, InvalidTopicName, NotFound,
                           ServiceNotReady, ShuttingDown, StrataError)

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

BODY_BYTES_MAX = 64 * 1024


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def _topic(request: web.Request) -> TopicName:
    m = request.match_info
    return parse_topic(f"persistent://{m['tenant']}/{m['ns']}/{m['topic']}")


async def _body_json(request: web.Request) -> object:
    raw = await request.content.read(BODY_BYTES_MAX + 1)
    if len(raw) > BODY_BYTES_MAX:
        raise InvalidArgument("request body too large")
    try:
        return json.loads(raw.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InvalidArgument("request body is not JSON") from None


@web.middleware
async def _errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except InvalidTopicName as exc:
        return _error(400, str(exc))
    except AlreadyExists as exc:
        return _error(409, str(exc))
    except NotFound as exc:
        return _error(404, str(exc))
    except (ServiceNotReady, ShuttingDown) as exc:
        return _error(503, str(exc))
    except InvalidArgument as exc:
        return _error(412 if "partition" in str(exc) else 400, str(exc))
    except StrataError as exc:
        log.warning("admin %s %s failed: %s", request.method, request.path, exc)
        return _error(500, str(exc))


class AdminServer:
    def __init__(self, service: "BrokerService", port: int) -> None:
        self.service = service
        self.port = port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_errors], client_max_size=BODY_BYTES_MAX)
        base = "/admin/v2/persistent/{tenant}/{ns}"
        app.router.add_put(base + "/{topic}/partitions", self.create_partitions)
        app.router.add_get(base + "/{topic}/partitions", self.get_partitions)
        app.router.add_get(base + "/{topic}/stats", self.stats)
        app.router.add_get(base + "/partitioned", self.list_partitioned)
        app.router.add_get(base, self.list_topics)
        app.router.add_post("/admin/v2/namespaces/{tenant}/{ns}/deduplication", self.set_dedup)
        app.router.add_get("/admin/v2/namespaces/{tenant}/{ns}/deduplication", self.get_dedup)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/metrics/", self.metrics)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "0.0.0.0", self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # the real port when 0 was asked

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- handlers ----------------------------------------------------------------------------------

    async def create_partitions(self, request: web.Request) -> web.Response:
        name = _topic(request)
        count = await _body_json(request)
        if isinstance(count, bool) or not isinstance(count, int):
            raise InvalidArgument("partition count must be an integer")
        await policies.create_partitioned(self.service.astore, name, count,
                                          self.service.config.broker_partitions_max)
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = _topic(request)
        return web.json_response({"partitions": await self.service.partitions(name)})

    async def stats(self, request: web.Request) -> web.Response:
        name = _topic(request)
        known = {str(n) for n in await policies.topics_of_namespace(
            self.service.astore, name.tenant, name.namespace)}
        if str(name) not in known and str(name) not in self.service.topics:
            raise NotFound("topic not found", topic=str(name))
        topic = await self.service.get_topic(name)
        return web.json_response(topic_stats(topic))

    async def list_topics(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        return web.json_response(await self.service.topics_of_namespace(tenant, ns))

    async def list_partitioned(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        names = await policies.partitioned_topics(self.service.astore, tenant, ns)
        return web.json_response([f"persistent://{tenant}/{ns}/{n}" for n in names])

    async def set_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        enabled = await _body_json(request)
        if not isinstance(enabled, bool):
            raise InvalidArgument("deduplication body must be true or false")
        await policies.set_namespace_policy(self.service.astore, tenant, ns, "deduplicationEnabled", enabled)
        return web.Response(status=204)

    async def get_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        return web.json_response(bool(found.get("deduplicationEnabled", False)))

    async def metrics(self, request: web.Request) -> web.Response:
        text = metrics.render(self.service)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")
