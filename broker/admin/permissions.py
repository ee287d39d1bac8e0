"""Permissions over the admin API (Pulsar's paths, bodies and status codes; `broker.security.permissions`).

Namespace (`/admin/v2/namespaces/{t}/{ns}`):
- `POST   .../permissions/{role}` body a JSON array of actions (`["produce","consume"]`) → 204;
  the role's grant is replaced by these actions.
- `DELETE .../permissions/{role}` → 204 (nothing to revoke is not an error, as Pulsar).
- `GET    .../permissions` → `{role: [actions]}`.
- `POST   .../permissions/subscription/{subscription}` body a JSON array of roles → 204: only
  these roles may consume on that subscription (`subscription_auth_roles`);
  `DELETE .../permissions/{subscription}/{role}` → 204.
Topic (`/admin/v2/persistent|non-persistent/{t}/{ns}/{topic}`):
- `POST   .../permissions/{role}` body actions → 204; a partition's permissions are its
  partitioned topic's (a grant naming a partition is 400).
- `DELETE .../permissions/{role}` → 204; 412 "Permissions are not set at the topic level".
- `GET    .../permissions` → `{role: [actions]}`: the namespace's grants merged with the topic's.
Errors: 400 a bad role, a body that is not a JSON array of known actions (produce, consume,
functions, sources, sinks, packages) or roles; 404 an unknown namespace. Who may call these
(the tenant's admins, superusers) is `broker.admin.access`'s rule.

What must hold: every change is one compare-and-set of the namespace's policies key; nothing
here creates a namespace or a topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import body_json, namespace_of
from broker.security import permissions
from common.topic_names import TopicName, parse_topic

if TYPE_CHECKING:
    from broker.service import BrokerService

NAMESPACE_ROUTE = "/admin/v2/namespaces/{tenant}/{ns}"
TOPIC_ROUTES = {domain: f"/admin/v2/{domain}/{{tenant}}/{{ns}}/{{topic}}"
                for domain in ("persistent", "non-persistent")}


def register(app: web.Application, service: BrokerService) -> None:
    r = _PermissionRoutes(service)
    app.router.add_get(NAMESPACE_ROUTE + "/permissions", r.namespace_list)
    app.router.add_post(NAMESPACE_ROUTE + "/permissions/{role}", r.namespace_grant)
    app.router.add_delete(NAMESPACE_ROUTE + "/permissions/{role}", r.namespace_revoke)
    app.router.add_post(NAMESPACE_ROUTE + "/permissions/subscription/{subscription}", r.subscription_grant)
    app.router.add_delete(NAMESPACE_ROUTE + "/permissions/{subscription}/{role}", r.subscription_revoke)
    for route in TOPIC_ROUTES.values():
        app.router.add_get(route + "/permissions", r.topic_list)
        app.router.add_post(route + "/permissions/{role}", r.topic_grant)
        app.router.add_delete(route + "/permissions/{role}", r.topic_revoke)


def _topic(request: web.Request) -> TopicName:
    """The topic of a persistent or non-persistent topic route; InvalidTopicName (400)."""
    m = request.match_info
    domain = request.path.split("/")[3]      # /admin/v2/<domain>/...
    return parse_topic(f"{domain}://{m['tenant']}/{m['ns']}/{m['topic']}")


class _PermissionRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.astore = service.astore

    async def namespace_list(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        return web.json_response(await permissions.namespace_permissions(self.astore, tenant, ns))

    async def namespace_grant(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await permissions.grant_namespace(self.astore, tenant, ns, request.match_info["role"],
                                          await body_json(request))
        return self._changed(tenant, ns)

    async def namespace_revoke(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await permissions.revoke_namespace(self.astore, tenant, ns, request.match_info["role"])
        return self._changed(tenant, ns)

    async def subscription_grant(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await permissions.grant_subscription(self.astore, tenant, ns, request.match_info["subscription"],
                                             await body_json(request))
        return self._changed(tenant, ns)

    async def subscription_revoke(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        await permissions.revoke_subscription(self.astore, tenant, ns, request.match_info["subscription"],
                                              request.match_info["role"])
        return self._changed(tenant, ns)

    async def topic_list(self, request: web.Request) -> web.Response:
        return web.json_response(await permissions.topic_permissions(self.astore, _topic(request)))

    async def topic_grant(self, request: web.Request) -> web.Response:
        topic = _topic(request)
        await permissions.grant_topic(self.astore, topic, request.match_info["role"], await body_json(request))
        return self._changed(topic.tenant, topic.namespace)

    async def topic_revoke(self, request: web.Request) -> web.Response:
        topic = _topic(request)
        await permissions.revoke_topic(self.astore, topic, request.match_info["role"])
        return self._changed(topic.tenant, topic.namespace)

    def _changed(self, tenant: str, ns: str) -> web.Response:
        self.service.authorization.forget(tenant, ns)   # remembered grants go at once (on this broker)
        return web.Response(status=204)
