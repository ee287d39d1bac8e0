"""Backlog quotas over the admin API (Pulsar's paths, bodies and status codes).

Namespace (`/admin/v2/namespaces/{t}/{ns}`):
- `POST .../backlogQuota?backlogQuotaType=destination_storage|message_age` (default
  destination_storage), body `{"limitSize": bytes, "limitTime": seconds, "policy":
  "producer_request_hold"|"producer_exception"|"consumer_backlog_eviction"}` (`limit` is accepted
  for `limitSize`; an absent limit is -1, none) → 204. 400 a malformed body or unknown type; 404
  an unknown namespace; 412 "Backlog Quota exceeds configured retention quota for namespace.
  Please increase retention quota and retry" when its limit is at or over the namespace's
  retention (size in bytes, time in seconds), as Pulsar refuses it.
- `DELETE .../backlogQuota?backlogQuotaType=` → 204 (the broker default applies again).
- `GET .../backlogQuotaMap` → `{type: {"limit", "limitSize", "limitTime", "policy"}}` of the
  namespace's own quotas ({} when none); `GET .../backlogQuota?backlogQuotaType=` → one (null).
Topic (`/admin/v2/persistent/{t}/{ns}/{topic}`): the same routes; the retention checked is the
topic's, else the namespace's ("... for topic. ..."); `GET .../backlogQuotaMap?applied=true`
answers the effective quotas (the topic's, else the namespace's, else the broker default, for
each type). A partitioned topic's quota applies to each partition.

Setting a retention at or under a quota in force is refused the same way ("Retention Quota must
exceed configured backlog quota for namespace.", `broker.retention.backlog_quota.refuse_retention_under_quotas`,
called by the retention routes).

A change is applied at once to the topics loaded here (their cached quotas are read again before
the answer) and, through each broker's policy watch, to those loaded elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin import lookup
from broker.admin.http import body_json, flag, namespace_of, topic_of
from broker.records import policies
from broker.retention import backlog_quota as bq
from common.errors import NotAllowed
from common.topic_names import TopicName

if TYPE_CHECKING:
    from broker.service import BrokerService

NAMESPACE_ROUTE = "/admin/v2/namespaces/{tenant}/{ns}"


def register(app: web.Application, service: BrokerService) -> None:
    r = _QuotaRoutes(service)
    for base, scope in ((NAMESPACE_ROUTE, r.namespace), (lookup.TOPIC_ROUTE, r.topic)):
        app.router.add_post(base + "/backlogQuota", scope(r.set_quota))
        app.router.add_delete(base + "/backlogQuota", scope(r.remove_quota))
        app.router.add_get(base + "/backlogQuota", scope(r.get_quota))
        app.router.add_get(base + "/backlogQuotaMap", scope(r.get_map))


class _Scope:
    """Where a quota is stored: a namespace's policies or a topic's."""

    def __init__(self, service: BrokerService, tenant: str, ns: str, name: TopicName | None) -> None:
        self.service = service
        self.tenant, self.ns, self.name = tenant, ns, name
        self.word = "topic" if name is not None else "namespace"

    async def own(self) -> dict:
        if self.name is not None:
            return await policies.topic_policies(self.service.astore, self.name)
        return await policies.existing_namespace_policies(self.service.astore, self.tenant, self.ns)

    async def retention(self) -> dict | None:
        found = (await self.own()).get(policies.RETENTION_KEY)
        if found is None and self.name is not None:
            ns_policies = await policies.namespace_policies(self.service.astore, self.tenant, self.ns)
            found = ns_policies.get(policies.RETENTION_KEY)
        return found

    async def store(self, quotas: dict) -> None:
        value = quotas or None
        if self.name is not None:
            await policies.set_topic_policy(self.service.astore, self.name, bq.QUOTA_KEY, value)
        else:
            await policies.set_namespace_policy(self.service.astore, self.tenant, self.ns, bq.QUOTA_KEY, value)
        await bq.reload_matching(self.service.ctx, self.service, lambda n: (
            (n.tenant, n.namespace) == (self.tenant, self.ns)
            and (self.name is None or n.base.path == self.name.base.path)))


class _QuotaRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    def namespace(self, handler):
        async def route(request: web.Request) -> web.StreamResponse:
            tenant, ns = namespace_of(request)
            await self.service.namespaces.require(tenant, ns)
            return await handler(request, _Scope(self.service, tenant, ns, None))
        return route

    def topic(self, handler):
        async def route(request: web.Request) -> web.StreamResponse:
            name = topic_of(request)
            await self.service.namespaces.require(name.tenant, name.namespace)
            return await handler(request, _Scope(self.service, name.tenant, name.namespace, name))
        return route

    async def set_quota(self, request: web.Request, scope: _Scope) -> web.Response:
        kind = bq.quota_type(request.query.get("backlogQuotaType"))
        quota = bq.quota_from_body(await body_json(request))
        if bq.conflicts_with_retention(quota, await scope.retention()):
            raise NotAllowed(f"Backlog Quota exceeds configured retention quota for {scope.word}. "
                             "Please increase retention quota and retry")
        quotas = dict((await scope.own()).get(bq.QUOTA_KEY, {}))
        quotas[kind] = quota.to_json()
        await scope.store(quotas)
        return web.Response(status=204)

    async def remove_quota(self, request: web.Request, scope: _Scope) -> web.Response:
        kind = bq.quota_type(request.query.get("backlogQuotaType"))
        quotas = dict((await scope.own()).get(bq.QUOTA_KEY, {}))
        quotas.pop(kind, None)
        await scope.store(quotas)
        return web.Response(status=204)

    async def get_quota(self, request: web.Request, scope: _Scope) -> web.Response:
        kind = bq.quota_type(request.query.get("backlogQuotaType"))
        return web.json_response((await scope.own()).get(bq.QUOTA_KEY, {}).get(kind))

    async def get_map(self, request: web.Request, scope: _Scope) -> web.Response:
        if scope.name is not None and flag(request, "applied"):
            ns_policies = await policies.namespace_policies(self.service.astore, scope.tenant, scope.ns)
            found = bq.effective(ns_policies, await scope.own(), self.service.config)
            return web.json_response({kind: quota.to_json() for kind, quota in found.items()})
        return web.json_response((await scope.own()).get(bq.QUOTA_KEY, {}))
