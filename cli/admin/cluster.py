"""`strata admin` cluster commands (pulsar-admin's names) over `broker.admin.lookup` / `brokers`.

    strata admin topics lookup TOPIC                            the owner's service URL
    strata admin topics bundle-range TOPIC                      "0x00000000_0x40000000"
    strata admin topics unload TOPIC
    strata admin brokers list [CLUSTER]                         ["host:webPort", ...]
    strata admin brokers leader-broker                          {"brokerId", "serviceUrl"}
    strata admin brokers healthcheck                            "ok"
    strata admin clusters list
    strata admin clusters get-cluster-name
    strata admin clusters get CLUSTER                           {"serviceUrl", "brokerServiceUrl", ...}
    strata admin clusters create CLUSTER [--url U] [--url-secure U] [--broker-url U] [--broker-url-secure U]
                                      Pulsar's answers: 409 for this cluster (it exists), 412 for another
    strata admin broker-stats load-report                       this broker's LocalBrokerData

Every command works against any broker of a cluster: the client follows a 307 to the owner.
"""

from __future__ import annotations

import argparse

from cli.admin.commands import Groups, command, routed
from cli.admin.console import AdminConsole
from common.topic_names import parse_topic


def add_parsers(groups: Groups) -> None:
    topics = groups["topics"]
    command(topics, "lookup", _lookup, "the service URL of the broker that serves the topic").add_argument("topic")
    command(topics, "bundle-range", routed(
        lambda a: ("GET", f"/lookup/v2/topic/persistent/{parse_topic(a.topic).path}/bundle", None)),
        ).add_argument("topic")
    command(topics, "unload", routed(
        lambda a: ("PUT", f"/admin/v2/persistent/{parse_topic(a.topic).path}/unload", None)),
        ).add_argument("topic")
    brokers = groups["brokers"]
    command(brokers, "list", routed(
        lambda a: ("GET", "/admin/v2/brokers" + (f"/{a.cluster}" if a.cluster else ""), None)),
        ).add_argument("cluster", nargs="?", default=None)
    command(brokers, "leader-broker", routed(lambda a: ("GET", "/admin/v2/brokers/leaderBroker", None)))
    command(brokers, "healthcheck", routed(lambda a: ("GET", "/admin/v2/brokers/health", None)))
    command(groups["clusters"], "list", routed(lambda a: ("GET", "/admin/v2/clusters", None)))
    command(groups["clusters"], "get-cluster-name", _cluster_name)
    command(groups["clusters"], "get", routed(lambda a: ("GET", f"/admin/v2/clusters/{a.cluster}", None)),
            ).add_argument("cluster")
    create = command(groups["clusters"], "create", routed(
        lambda a: ("PUT", f"/admin/v2/clusters/{a.cluster}", _cluster_data(a))), "create a cluster (ClusterData)")
    create.add_argument("cluster")
    for flag in CLUSTER_URL_FLAGS:
        create.add_argument(flag, default=None)
    command(groups["broker-stats"], "load-report", routed(lambda a: ("GET", "/admin/v2/broker-stats/load-report",
                                                                     None)))


CLUSTER_URL_FLAGS = {"--url": "serviceUrl", "--url-secure": "serviceUrlTls", "--broker-url": "brokerServiceUrl",
                     "--broker-url-secure": "brokerServiceUrlTls"}   # pulsar-admin's flag -> ClusterData field


def _cluster_data(args: argparse.Namespace) -> dict[str, str]:
    given = {field: getattr(args, flag[2:].replace("-", "_")) for flag, field in CLUSTER_URL_FLAGS.items()}
    return {field: url for field, url in given.items() if url is not None}


def _lookup(args: argparse.Namespace, client: AdminConsole) -> int:
    """As pulsar-admin prints it: the owner's service URL."""
    result = client.call("GET", f"/lookup/v2/topic/persistent/{parse_topic(args.topic).path}")
    client.show(result.get("brokerUrl") if isinstance(result, dict) else result)
    return 0


def _cluster_name(args: argparse.Namespace, client: AdminConsole) -> int:
    names = client.call("GET", "/admin/v2/clusters")
    client.show(names[0] if isinstance(names, list) and names else names)
    return 0
