"""Admin HTTP API (aiohttp) with Pulsar's paths and JSON field names, plus `/metrics`.

Routes (`{t}/{ns}` = tenant/namespace, `{topic}` = local name):
- `PUT    /admin/v2/persistent/{t}/{ns}/{topic}/partitions` body N → 204; 409 if it exists.
- `POST   /admin/v2/persistent/{t}/{ns}/{topic}/partitions` body N → 204: raise the count
  (409 if not larger, 404 if not partitioned).
- `GET    /admin/v2/persistent/{t}/{ns}/{topic}/partitions` → `{"partitions": N}`.
- `DELETE /admin/v2/persistent/{t}/{ns}/{topic}/partitions[?force=true]` → 204: delete a
  partitioned topic and every partition's data (each on the broker that serves it); 412 while
  clients are attached (unless force).
- `DELETE /admin/v2/persistent/{t}/{ns}/{topic}[?force=true]` → 204: delete a topic.
- `GET    /admin/v2/persistent/{t}/{ns}/{topic}/stats` → topic stats (Pulsar's names).
- `GET    /admin/v2/persistent/{t}/{ns}/{topic}/partitioned-stats[?perPartition=false]` →
  the partitions' stats (each from the broker that serves it) summed, plus `metadata.partitions`
  and `partitions.{name}`.
- `GET    /admin/v2/persistent/{t}/{ns}` → `["persistent://t/ns/x", ...]`.
- `GET    /admin/v2/persistent/{t}/{ns}/partitioned` → partitioned topic names.
- `POST   /admin/v2/namespaces/{t}/{ns}/deduplication` body true/false → 204; `GET` → bool.
- `POST   /admin/v2/persistent/{t}/{ns}/{topic}/deduplicationEnabled` body true/false → 204;
  `GET` → the topic's own setting (null if unset; `?applied=true`: the effective one);
  `DELETE` → 204, the namespace's setting applies again.
- `POST   /admin/v2/namespaces/{t}/{ns}/retention` body `{"retentionTimeInMinutes": m,
  "retentionSizeInMB": s}` → 204 (412 if invalid: below -1, or 0 paired with a positive value); `GET` →
  the same object (the config's default when the namespace has none).
- `POST   /admin/v2/namespaces/{t}/{ns}/messageTTL` body seconds (int >= 0, 0 = off) → 204 (412
  if negative); `GET` → the namespace's TTL (the config's default when unset). The retention task
  (`broker.retention_task`) applies both on its next pass.
- `POST   /admin/v2/persistent/{t}/{ns}/{topic}/retention` (same body as the namespace's) and
  `POST .../{topic}/messageTTL?messageTTL=n` (or the seconds as the body) → 204: topic-level
  policies, which override the namespace's (a partitioned topic's apply to every partition);
  `GET` → the topic's own value (null if unset; `?applied=true`: the effective one); `DELETE` →
  204, the namespace's value applies again.
- Offload (`PUT|GET .../{topic}/offload`), offload policies (topic `offloadPolicies`, namespace
  `offloadThreshold`, `offloadThresholdInSeconds`, `offloadDeletionLagMs`) and
  `GET .../{topic}/internalStats`: `broker.admin_offload`.
- Namespace create and bundles, HTTP lookup, unload, split, brokers, clusters, load report, and
  the 307 of a topic's call to the broker that owns it (`owner_redirect`): `broker.admin_cluster`.
- `GET    /metrics` → Prometheus text (`broker.metrics`).

A dedup switch is applied to the topics loaded on this broker before the reply (other brokers
follow through their policy watch). Errors are JSON `{"reason": ...}` with Pulsar's status
codes: 400 bad input (a body of the wrong type), 404 unknown topic, 409 conflict, 412 a
partition count out of range, an invalid retention or TTL, or a delete refused while clients are
attached, 503 not ready. Request bodies are bounded by `broker_admin_body_bytes_max`; the port
listens on `broker_admin_bind_host`.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from broker import admin_cluster, admin_offload, metrics, policies
from broker.topic_stats import partitioned_stats, topic_stats
from common.errors import (
    AlreadyExists,
    BadRequestBody,
    InvalidArgument,
    InvalidRetention,
    InvalidTopicName,
    NotAllowed,
    NotFound,
    ServiceNotReady,
    ShuttingDown,
    StrataError,
)
from common.topic_names import TopicName, parse_namespace, parse_topic
from cursor.retention import RetentionPolicy

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

# The largest request body (`broker_admin_body_bytes_max`), kept on the application.
_BODY_BYTES_MAX = web.AppKey("body_bytes_max", int)


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def _topic(request: web.Request) -> TopicName:
    m = request.match_info
    return parse_topic(f"persistent://{m['tenant']}/{m['ns']}/{m['topic']}")


async def _body_json(request: web.Request) -> object:
    body_bytes_max = request.app[_BODY_BYTES_MAX]
    raw = await request.content.read(body_bytes_max + 1)
    if len(raw) > body_bytes_max:
        raise InvalidArgument("request body too large")
    try:
        return json.loads(raw.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadRequestBody("request body is not JSON") from None


async def _body_bool(request: web.Request, what: str) -> bool:
    value = await _body_json(request)
    if not isinstance(value, bool):
        raise BadRequestBody(f"{what} body must be true or false")
    return value


async def _body_partitions(request: web.Request) -> int:
    count = await _body_json(request)
    if isinstance(count, bool) or not isinstance(count, int):
        raise BadRequestBody("partition count must be an integer")
    return count


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


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
    except BadRequestBody as exc:
        return _error(400, str(exc))
    except InvalidArgument as exc:
        return _error(412 if "partition" in str(exc) else 400, str(exc))
    except (NotAllowed, InvalidRetention) as exc:
        return _error(412, str(exc))
    except StrataError as exc:
        log.warning("admin %s %s failed: %s", request.method, request.path, exc)
        return _error(500, str(exc))


class AdminServer:
    def __init__(self, service: BrokerService, port: int) -> None:
        self.service = service
        self.port = port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        body_bytes_max = self.service.config.broker_admin_body_bytes_max
        app = web.Application(middlewares=[_errors, admin_cluster.owner_redirect], client_max_size=body_bytes_max)
        app[_BODY_BYTES_MAX] = body_bytes_max
        base = "/admin/v2/persistent/{tenant}/{ns}"
        app.router.add_put(base + "/{topic}/partitions", self.create_partitions)
        app.router.add_post(base + "/{topic}/partitions", self.update_partitions)
        app.router.add_get(base + "/{topic}/partitions", self.get_partitions)
        app.router.add_delete(base + "/{topic}/partitions", self.delete_partitioned)
        app.router.add_get(base + "/{topic}/stats", self.stats)
        app.router.add_get(base + "/{topic}/partitioned-stats", self.stats_partitioned)
        app.router.add_post(base + "/{topic}/deduplicationEnabled", self.set_topic_dedup)
        app.router.add_get(base + "/{topic}/deduplicationEnabled", self.get_topic_dedup)
        app.router.add_delete(base + "/{topic}/deduplicationEnabled", self.remove_topic_dedup)
        app.router.add_get(base + "/partitioned", self.list_partitioned)
        app.router.add_get(base, self.list_topics)
        app.router.add_delete(base + "/{topic}", self.delete_topic)
        app.router.add_post("/admin/v2/namespaces/{tenant}/{ns}/deduplication", self.set_dedup)
        app.router.add_get("/admin/v2/namespaces/{tenant}/{ns}/deduplication", self.get_dedup)
        app.router.add_post("/admin/v2/namespaces/{tenant}/{ns}/retention", self.set_retention)
        app.router.add_get("/admin/v2/namespaces/{tenant}/{ns}/retention", self.get_retention)
        app.router.add_post("/admin/v2/namespaces/{tenant}/{ns}/messageTTL", self.set_ttl)
        app.router.add_get("/admin/v2/namespaces/{tenant}/{ns}/messageTTL", self.get_ttl)
        app.router.add_post(base + "/{topic}/retention", self.set_topic_retention)
        app.router.add_get(base + "/{topic}/retention", self.get_topic_retention)
        app.router.add_delete(base + "/{topic}/retention", self.remove_topic_retention)
        app.router.add_post(base + "/{topic}/messageTTL", self.set_topic_ttl)
        app.router.add_get(base + "/{topic}/messageTTL", self.get_topic_ttl)
        app.router.add_delete(base + "/{topic}/messageTTL", self.remove_topic_ttl)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/metrics/", self.metrics)
        admin_offload.register(app, self.service)   # offload, offload policies, internalStats
        admin_cluster.register(app, self.service)   # namespaces/bundles, lookup, unload, brokers; 307 to owners
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

    # --- handlers ----------------------------------------------------------------------------------

    async def create_partitions(self, request: web.Request) -> web.Response:
        name = _topic(request)
        count = await _body_partitions(request)
        await policies.create_partitioned(self.service.astore, name, count,
                                          self.service.config.broker_partitions_max)
        return web.Response(status=204)

    async def update_partitions(self, request: web.Request) -> web.Response:
        name = _topic(request)
        count = await _body_partitions(request)
        await policies.update_partitioned(self.service.astore, name, count,
                                          self.service.config.broker_partitions_max)
        return web.Response(status=204)

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        name = _topic(request)
        count = await self.service.partitions(name)
        if count == 0:
            raise NotFound("partitioned topic not found", topic=str(name))
        force = _flag(request, "force")
        if not force:   # each partition asked on the broker that serves it
            for i in range(count):
                if await admin_cluster.partition_has_clients(self.service, name.partition(i)):
                    raise NotAllowed("partitioned topic has connected producers or consumers",
                                     topic=str(name))
        for i in range(count):   # on its owner; a partition nobody ever used has nothing stored
            await admin_cluster.delete_partition(self.service, name.partition(i), force=force)
        await policies.delete_partitioned(self.service.astore, name)
        await policies.delete_topic_policies(self.service.astore, name)
        return web.Response(status=204)

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = _topic(request)
        if await self.service.partitions(name) > 0:
            raise NotAllowed("a partitioned topic is deleted through .../partitions", topic=str(name))
        await self.service.delete_topic(name, force=_flag(request, "force"))
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = _topic(request)
        return web.json_response({"partitions": await self.service.partitions(name)})

    async def stats(self, request: web.Request) -> web.Response:
        name = _topic(request)
        known = {str(n) for n in await policies.topics_of_namespace(
            self.service.astore, name.tenant, name.namespace)}
        if str(name) not in known and str(name) not in self.service.topics \
                and not await admin_cluster.is_partition_of_existing(self.service, name):
            raise NotFound("topic not found", topic=str(name))
        topic = await self.service.get_topic(name)
        return web.json_response(topic_stats(topic))

    async def stats_partitioned(self, request: web.Request) -> web.Response:
        name = _topic(request)
        count = await self.service.partitions(name)
        if count == 0:
            raise NotFound("partitioned topic not found", topic=str(name))
        per_partition = {}
        for i in range(count):
            partition = name.partition(i)
            per_partition[str(partition)] = await admin_cluster.partition_stats(self.service, partition)
        include = request.query.get("perPartition", "true").lower() != "false"
        return web.json_response(partitioned_stats(count, per_partition, include))

    async def list_topics(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        return web.json_response(await self.service.topics_of_namespace(tenant, ns))

    async def list_partitioned(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        names = await policies.partitioned_topics(self.service.astore, tenant, ns)
        return web.json_response([f"persistent://{tenant}/{ns}/{n}" for n in names])

    async def set_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        enabled = await _body_bool(request, "deduplication")
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.DEDUP_KEY, enabled)
        await self.service.apply_dedup_policy(lambda n: (n.tenant, n.namespace) == (tenant, ns))
        if not enabled:
            await self.service.drop_unloaded_dedup_snapshots(tenant, ns, lambda n: True)
        return web.Response(status=204)

    async def get_dedup(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        return web.json_response(bool(found.get(policies.DEDUP_KEY, False)))

    async def set_topic_dedup(self, request: web.Request) -> web.Response:
        name = _topic(request)
        enabled = await _body_bool(request, "deduplicationEnabled")
        await self._set_topic_dedup(name, enabled)
        return web.Response(status=204)

    async def remove_topic_dedup(self, request: web.Request) -> web.Response:
        await self._set_topic_dedup(_topic(request), None)
        return web.Response(status=204)

    async def _set_topic_dedup(self, name: TopicName, enabled: bool | None) -> None:
        await policies.set_topic_policy(self.service.astore, name, policies.DEDUP_KEY, enabled)
        base = name.base.path
        await self.service.apply_dedup_policy(lambda n: n.base.path == base)
        if not enabled:
            await self.service.drop_unloaded_dedup_snapshots(name.tenant, name.namespace,
                                                             lambda n: n.base.path == base)

    async def get_topic_dedup(self, request: web.Request) -> web.Response:
        name = _topic(request)
        if _flag(request, "applied"):
            return web.json_response(await policies.dedup_enabled(self.service.astore, name))
        return web.json_response((await policies.topic_policies(self.service.astore, name)).get(policies.DEDUP_KEY))

    async def set_retention(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.RETENTION_KEY,
                                            await _body_retention(request))
        return web.Response(status=204)

    async def set_topic_retention(self, request: web.Request) -> web.Response:
        await policies.set_topic_policy(self.service.astore, _topic(request), policies.RETENTION_KEY,
                                        await _body_retention(request))
        return web.Response(status=204)

    async def get_topic_retention(self, request: web.Request) -> web.Response:
        name = _topic(request)
        own = await policies.topic_policies(self.service.astore, name)
        if not _flag(request, "applied"):
            return web.json_response(own.get(policies.RETENTION_KEY))
        ns_policies = await policies.namespace_policies(self.service.astore, name.tenant, name.namespace)
        policy = policies.retention_of(ns_policies, self.service.config, own)
        return web.json_response({"retentionTimeInMinutes": policy.time_minutes,
                                  "retentionSizeInMB": policy.size_mb})

    async def remove_topic_retention(self, request: web.Request) -> web.Response:
        await policies.set_topic_policy(self.service.astore, _topic(request), policies.RETENTION_KEY, None)
        return web.Response(status=204)

    async def set_topic_ttl(self, request: web.Request) -> web.Response:
        name = _topic(request)
        if "messageTTL" in request.query:          # what pulsar-admin sends
            try:
                seconds: object = int(request.query["messageTTL"])
            except ValueError:
                raise BadRequestBody("messageTTL must be an integer number of seconds") from None
        else:
            seconds = await _body_json(request)
        await policies.set_topic_policy(self.service.astore, name, policies.TTL_KEY, _ttl_seconds(seconds))
        return web.Response(status=204)

    async def get_topic_ttl(self, request: web.Request) -> web.Response:
        name = _topic(request)
        own = await policies.topic_policies(self.service.astore, name)
        if not _flag(request, "applied"):
            return web.json_response(own.get(policies.TTL_KEY))
        ns_policies = await policies.namespace_policies(self.service.astore, name.tenant, name.namespace)
        return web.json_response(policies.ttl_seconds_of(ns_policies, self.service.config, own))

    async def remove_topic_ttl(self, request: web.Request) -> web.Response:
        await policies.set_topic_policy(self.service.astore, _topic(request), policies.TTL_KEY, None)
        return web.Response(status=204)

    async def get_retention(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        policy = policies.retention_of(found, self.service.config)
        return web.json_response({"retentionTimeInMinutes": policy.time_minutes,
                                  "retentionSizeInMB": policy.size_mb})

    async def set_ttl(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        seconds = _ttl_seconds(await _body_json(request))
        await policies.set_namespace_policy(self.service.astore, tenant, ns, policies.TTL_KEY, seconds)
        return web.Response(status=204)

    async def get_ttl(self, request: web.Request) -> web.Response:
        tenant, ns = parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
        found = await policies.namespace_policies(self.service.astore, tenant, ns)
        return web.json_response(policies.ttl_seconds_of(found, self.service.config))

    async def metrics(self, request: web.Request) -> web.Response:
        text = metrics.render(self.service)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")


async def _body_retention(request: web.Request) -> dict:
    """A retention body, checked (400 wrong types, 412 an invalid pair), as stored."""
    body = await _body_json(request)
    fields = ("retentionTimeInMinutes", "retentionSizeInMB")
    if not isinstance(body, dict) or not all(k in body for k in fields):
        raise BadRequestBody('retention body must be {"retentionTimeInMinutes": m, "retentionSizeInMB": s}')
    values = [body[k] for k in fields]
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise BadRequestBody("retentionTimeInMinutes and retentionSizeInMB must be integers")
    policy = RetentionPolicy(*values)     # InvalidRetention (412) if the pair is invalid
    return {fields[0]: policy.time_minutes, fields[1]: policy.size_mb}


def _ttl_seconds(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise BadRequestBody("messageTTL must be an integer number of seconds")
    if seconds < 0:
        raise NotAllowed("invalid messageTTL: must be >= 0 seconds (0 = off)", seconds=seconds)
    return seconds
