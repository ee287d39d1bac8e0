"""The REST routes of the multi-tenant policies (`broker.limits.registry`), as Pulsar's admin API:

    POST|GET|DELETE /admin/v2/namespaces/{tenant}/{ns}/<route>            e.g. maxProducersPerTopic
    POST|GET|DELETE /admin/v2/persistent/{tenant}/{ns}/{topic}/<topic_route>   e.g. maxProducers
    GET .../{topic}/<topic_route>?applied=true      the effective value: topic, namespace, broker
    POST .../replicatorDispatchRate                 412: Strata does not replicate between clusters

POST checks the whole body first (400 a wrong type, 412 a value out of range, with Pulsar's text)
and stores nothing when it is refused; a namespace must exist (404). GET answers the level's own
value, `null` when it has none (as Pulsar); DELETE unsets it, so the next level applies. Each
change reaches the brokers through the metadata store's watch (`broker.limits.view`).

What must hold: a refused POST changes nothing; GET with applied=true answers what the enforcing
code applies.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import body_json, flag, namespace_of, topic_of
from broker.limits import registry
from broker.limits.spec import PolicySpec
from broker.records import policies
from common.errors import NotAllowed

if TYPE_CHECKING:
    from broker.service import BrokerService

NAMESPACE = "/admin/v2/namespaces/{tenant}/{ns}/"
TOPIC = "/admin/v2/persistent/{tenant}/{ns}/{topic}/"


def register(app: web.Application, service: BrokerService) -> None:
    for spec in registry.ALL:
        if spec.route:
            path = NAMESPACE + spec.route
            app.router.add_post(path, functools.partial(_set_namespace, service, spec))
            app.router.add_get(path, functools.partial(_get_namespace, service, spec))
            app.router.add_delete(path, functools.partial(_remove_namespace, service, spec))
        if spec.topic_route:
            path = TOPIC + spec.topic_route
            app.router.add_post(path, functools.partial(_set_topic, service, spec))
            app.router.add_get(path, functools.partial(_get_topic, service, spec))
            app.router.add_delete(path, functools.partial(_remove_topic, service, spec))
    for path in (NAMESPACE + REPLICATOR_ROUTE, TOPIC + REPLICATOR_ROUTE):   # refused: see REPLICATOR_REFUSED
        app.router.add_post(path, _replicator_refused)


REPLICATOR_ROUTE = "replicatorDispatchRate"
REPLICATOR_REFUSED = "replicatorDispatchRate is not supported by Strata: Strata does not replicate between clusters"


async def _replicator_refused(request: web.Request) -> web.Response:
    """Pulsar's replicatorDispatchRate shapes geo-replication, which Strata does not have: 412,
    nothing stored (as the namespace create body refuses it)."""
    raise NotAllowed(REPLICATOR_REFUSED)


async def _set_namespace(service: BrokerService, spec: PolicySpec, request: web.Request) -> web.Response:
    tenant, ns = namespace_of(request)
    value = spec.checked(await body_json(request), service.config)
    await policies.set_namespace_policy(service.astore, tenant, ns, spec.key, value)
    return web.Response(status=204)


async def _get_namespace(service: BrokerService, spec: PolicySpec, request: web.Request) -> web.Response:
    tenant, ns = namespace_of(request)
    stored = await policies.existing_namespace_policies(service.astore, tenant, ns)
    return web.json_response(stored.get(spec.key))


async def _remove_namespace(service: BrokerService, spec: PolicySpec, request: web.Request) -> web.Response:
    tenant, ns = namespace_of(request)
    await policies.set_namespace_policy(service.astore, tenant, ns, spec.key, None)
    return web.Response(status=204)


async def _set_topic(service: BrokerService, spec: PolicySpec, request: web.Request) -> web.Response:
    name = topic_of(request)
    value = spec.checked(await body_json(request), service.config)
    await policies.existing_namespace_policies(service.astore, name.tenant, name.namespace)
    await policies.set_topic_policy(service.astore, name, spec.key, value)
    return web.Response(status=204)


async def _get_topic(service: BrokerService, spec: PolicySpec, request: web.Request) -> web.Response:
    name = topic_of(request)
    if flag(request, "applied"):
        await policies.existing_namespace_policies(service.astore, name.tenant, name.namespace)
        own = (await policies.topic_policies(service.astore, name)).get(spec.key)
        if own is not None:
            return web.json_response(own)
        ns_value = (await policies.namespace_policies(service.astore, name.tenant, name.namespace)).get(spec.key) \
            if spec.route else None
        return web.json_response(ns_value if ns_value is not None else spec.default(service.config))
    return web.json_response((await policies.topic_policies(service.astore, name)).get(spec.key))


async def _remove_topic(service: BrokerService, spec: PolicySpec, request: web.Request) -> web.Response:
    name = topic_of(request)
    await policies.set_topic_policy(service.astore, name, spec.key, None)
    return web.Response(status=204)
