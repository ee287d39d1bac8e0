"""Broker and cluster routes of the admin API (Pulsar's paths and JSON).

- `GET /admin/v2/brokers[/{cluster}]` → `["host:webPort", ...]` (the live registrations; 404 for
  another cluster).
- `GET /admin/v2/brokers/health` (and `.../ready`) → `"ok"`; 503 while this broker starts or shuts
  down, or its metadata lease has lapsed, or it is not registered.
- `GET /admin/v2/brokers/leaderBroker` → `{"serviceUrl", "brokerId"}` (404 with no leader).
- `GET /admin/v2/clusters` → `[cluster_name]`; `GET /admin/v2/clusters/{cluster}` → ClusterData
  `{"serviceUrl", "brokerServiceUrl", ...}` (this broker's URLs; 404 for another cluster).
- `PUT /admin/v2/clusters/{cluster}` with Pulsar's ClusterData (`serviceUrl`, `serviceUrlTls`,
  `brokerServiceUrl`, `brokerServiceUrlTls`, strings): a Strata cluster is the brokers sharing one
  metadata store under `cluster_name`, so it exists as soon as a broker serves: 409 "Cluster already
  exists" for it (as Pulsar answers for its standalone cluster), 412 for any other name (Strata does
  not replicate between clusters), 400 for a body that is not ClusterData.
- `GET /admin/v2/broker-stats/load-report` → this broker's last load report (LocalBrokerData).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import body_json, error

if TYPE_CHECKING:
    from broker.service import BrokerService

BROKERS_ROOT = "/loadbalance/brokers"
LEADER_PATH = "/loadbalance/leader"
CLUSTER_DATA_URLS = ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls")


def register(app: web.Application, service: BrokerService) -> None:
    r = _BrokerRoutes(service)
    app.router.add_get("/admin/v2/brokers/health", r.health)
    app.router.add_get("/admin/v2/brokers/ready", r.health)
    app.router.add_get("/admin/v2/brokers/leaderBroker", r.leader_broker)
    app.router.add_get("/admin/v2/brokers", r.brokers)
    app.router.add_get("/admin/v2/brokers/{cluster}", r.brokers)
    app.router.add_get("/admin/v2/clusters", r.clusters)
    app.router.add_get("/admin/v2/clusters/{cluster}", r.cluster)
    app.router.add_put("/admin/v2/clusters/{cluster}", r.create_cluster)
    app.router.add_get("/admin/v2/broker-stats/load-report", r.load_report)


def _my_key(service: BrokerService) -> str:
    """This broker's registry key, host:webPort."""
    return service.registry.key


class _BrokerRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    def _check_cluster(self, request: web.Request) -> web.Response | None:
        cluster = request.match_info.get("cluster")
        if cluster is not None and cluster != self.service.config.cluster_name:
            return error(404, f"Cluster {cluster} does not exist")
        return None

    async def brokers(self, request: web.Request) -> web.Response:
        missing = self._check_cluster(request)
        if missing is not None:
            return missing
        found = await self.service.astore.list_prefix(BROKERS_ROOT)
        return web.json_response(sorted(path.rsplit("/", 1)[-1] for path, _ in found))

    async def health(self, request: web.Request) -> web.Response:
        if self.service.closing:
            return error(503, "broker is shutting down")
        if not self.service.identity.web_url:
            return error(503, "the broker is starting: not registered in the cluster yet")
        if not self.service.astore.lease_valid():
            return error(503, "this broker's metadata lease has lapsed")
        if await self.service.astore.get(f"{BROKERS_ROOT}/{_my_key(self.service)}") is None:
            return error(503, "this broker is not registered")
        return web.json_response("ok")

    async def leader_broker(self, request: web.Request) -> web.Response:
        found = await self.service.astore.get(LEADER_PATH)
        try:
            data = json.loads(found.value.decode()) if found is not None else None
            leader = {"serviceUrl": str(data["webServiceUrl"]), "brokerId": str(data["brokerId"])} if data else None
        except (ValueError, KeyError, TypeError):
            leader = None
        if leader is None:
            return error(404, "Couldn't find leader broker")
        return web.json_response(leader)

    async def clusters(self, request: web.Request) -> web.Response:
        return web.json_response([self.service.config.cluster_name])

    async def cluster(self, request: web.Request) -> web.Response:
        """ClusterData of this cluster: the URLs clients and tools reach it by (this broker's)."""
        missing = self._check_cluster(request)
        if missing is not None:
            return missing
        me = self.service.identity
        return web.json_response({"serviceUrl": me.web_url, "serviceUrlTls": me.web_url_tls,
                                  "brokerServiceUrl": me.service_url, "brokerServiceUrlTls": me.service_url_tls})

    async def create_cluster(self, request: web.Request) -> web.Response:
        """Pulsar's createCluster: this cluster already exists; Strata has no other."""
        body = await body_json(request)
        if not isinstance(body, dict) or any(not isinstance(body.get(k, ""), str) for k in CLUSTER_DATA_URLS):
            return error(400, "a cluster is ClusterData: {" + ", ".join(f'"{k}": "<url>"' for k in CLUSTER_DATA_URLS)
                         + "}")
        cluster = request.match_info["cluster"]
        if cluster == self.service.config.cluster_name:
            return error(409, "Cluster already exists")
        return error(412, f"Strata serves one cluster, {self.service.config.cluster_name!r} (cluster_name), and "
                          f"does not replicate to others: cluster {cluster!r} cannot be created")

    async def load_report(self, request: web.Request) -> web.Response:
        if not self.service.identity.web_url:
            return error(503, "the broker is starting: not registered in the cluster yet")
        found = await self.service.astore.get(f"{BROKERS_ROOT}/{_my_key(self.service)}")
        if found is None:
            return error(503, "this broker is not registered")
        return web.json_response(json.loads(found.value.decode()))
