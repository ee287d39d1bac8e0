"""Tenant routes of the admin API (Pulsar's TenantsBase paths, JSON and status codes).

- `GET    /admin/v2/tenants` → `["public", ...]` (sorted).
- `GET    /admin/v2/tenants/{tenant}` → TenantInfo `{"adminRoles": [...], "allowedClusters": [...]}`;
  404 "Tenant does not exist".
- `PUT    /admin/v2/tenants/{tenant}` body TenantInfo → 204; 409 "Tenant already exists"; 412
  "Clusters can not be empty" (no allowedClusters) or "Clusters do not exist" (a cluster that is not
  this one, `cluster_name`); 400 a bad name or a body of the wrong shape.
- `POST   /admin/v2/tenants/{tenant}` body TenantInfo → 204: replaces it; 404 "Tenant does not
  exist"; 412 as for PUT.
- `DELETE /admin/v2/tenants/{tenant}[?force=true]` → 204; 404 "Tenant does not exist"; 409 "The
  tenant still has active namespaces" unless forced: then every namespace is force-deleted first
  (`broker.admin.namespaces.delete_namespace`: its topics and all they store). Pulsar also asks
  `forceDeleteTenantAllowed` of its broker config; Strata has no such switch.

Admin roles are stored and answered as given (Strata has no authorization). Storage:
`broker.records.tenancy`. Errors: `broker.admin.http`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import body_json, flag
from broker.admin.namespaces import delete_namespace
from broker.records import tenancy
from common.topic_names import parse_namespace

if TYPE_CHECKING:
    from broker.service import BrokerService


def register(app: web.Application, service: BrokerService) -> None:
    r = _TenantRoutes(service)
    app.router.add_get("/admin/v2/tenants", r.list_tenants)
    tenant = "/admin/v2/tenants/{tenant}"
    app.router.add_get(tenant, r.get_tenant)
    app.router.add_put(tenant, r.create_tenant)
    app.router.add_post(tenant, r.update_tenant)
    app.router.add_delete(tenant, r.delete_tenant)


def _tenant_of(request: web.Request) -> str:
    return tenancy.check_tenant_name(request.match_info["tenant"])


class _TenantRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def list_tenants(self, request: web.Request) -> web.Response:
        return web.json_response(await tenancy.list_tenants(self.service.astore))

    async def get_tenant(self, request: web.Request) -> web.Response:
        return web.json_response(await tenancy.get_tenant(self.service.astore, _tenant_of(request)))

    async def create_tenant(self, request: web.Request) -> web.Response:
        tenant = _tenant_of(request)
        info = tenancy.tenant_info(await body_json(request), self.service.config.cluster_name)
        await tenancy.create_tenant(self.service.astore, tenant, info)
        return web.Response(status=204)

    async def update_tenant(self, request: web.Request) -> web.Response:
        tenant = _tenant_of(request)
        info = tenancy.tenant_info(await body_json(request), self.service.config.cluster_name)
        await tenancy.update_tenant(self.service.astore, tenant, info)
        return web.Response(status=204)

    async def delete_tenant(self, request: web.Request) -> web.Response:
        tenant = _tenant_of(request)
        astore = self.service.astore
        await tenancy.get_tenant(astore, tenant)          # TenantNotFound (404)
        if flag(request, "force"):
            for full in await tenancy.list_namespaces(astore, tenant):
                await delete_namespace(self.service, *parse_namespace(full), force=True)
        await tenancy.delete_tenant(astore, tenant)
        return web.Response(status=204)
