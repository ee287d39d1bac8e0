"""`strata admin` cluster commands (pulsar-admin's names), and the HTTP client every admin command uses.

    strata admin namespaces create TENANT/NS [-b N]             N bundles (default: the broker's setting)
    strata admin namespaces bundles TENANT/NS                   {"boundaries": [...], "numBundles": N}
    strata admin namespaces unload TENANT/NS [-b BUNDLE] [-d host:webPort]
    strata admin namespaces split-bundle TENANT/NS -b BUNDLE [--unload]
    strata admin topics lookup TOPIC                            the owner's service URL
    strata admin topics bundle-range TOPIC                      "0x00000000_0x40000000"
    strata admin topics unload TOPIC
    strata admin brokers list [CLUSTER]                         ["host:webPort", ...]
    strata admin brokers leader-broker                          {"brokerId", "serviceUrl"}
    strata admin brokers healthcheck                            "ok"
    strata admin clusters list
    strata admin broker-stats load-report                       this broker's LocalBrokerData

A BUNDLE is written `0xLLLLLLLL_0xHHHHHHHH` (as `namespaces bundles` and `topics bundle-range`
show them); `-d/--destination-broker` names a broker as `brokers list` does.

`request_json` is the client: a call answered 307/308 (the broker that owns a topic or bundle is
another one) is sent again, same method and body, to the `Location`, at most `REDIRECTS_MAX`
times; GET and PUT/POST/DELETE alike (urllib follows only GET by itself). So every command works
against any broker of a cluster and prints the same answer.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from collections.abc import Callable
from typing import IO

from common.errors import InvalidArgument
from common.topic_names import parse_namespace, parse_topic

# (method, path, body) -> the decoded JSON answer (None for an empty one); raises on HTTP errors
Request = Callable[[str, str, object], object]

TIMEOUT_S = 30.0
REDIRECTS_MAX = 5

GROUPS = frozenset({"brokers", "clusters", "broker-stats"})
TOPIC_ACTIONS = frozenset({"lookup", "bundle-range", "unload"})
NAMESPACE_ACTIONS = frozenset({"create", "bundles", "unload", "split-bundle"})


class _RedirectEveryMethod(urllib.request.HTTPRedirectHandler):
    """307/308 followed for every method with the same body; 301-303 as urllib does."""

    max_redirections = REDIRECTS_MAX
    max_repeats = REDIRECTS_MAX

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers, newurl: str) -> urllib.request.Request | None:
        if code not in (307, 308):
            return super().redirect_request(req, fp, code, msg, headers, newurl)
        return urllib.request.Request(newurl, data=req.data, method=req.get_method(),
                                      headers=dict(req.headers), origin_req_host=req.origin_req_host,
                                      unverifiable=True)


_OPENER = urllib.request.build_opener(_RedirectEveryMethod)


def request_json(url: str, method: str = "GET", body: object = None, timeout_s: float = TIMEOUT_S) -> object:
    """One admin call, redirects followed; the decoded JSON answer, None for an empty one.
    Raises urllib.error.HTTPError on an error status (or too many redirects), URLError/OSError
    when the broker cannot be reached, ValueError on an answer that is not JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with _OPENER.open(request, timeout=timeout_s) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def add_parsers(groups: argparse._SubParsersAction, topics: argparse._SubParsersAction,
                namespaces: argparse._SubParsersAction) -> None:
    """The cluster commands, added to `strata admin`'s parser."""
    create = namespaces.add_parser("create", help="create a namespace with its bundles")
    create.add_argument("namespace")
    create.add_argument("-b", "--bundles", type=int, default=None, help="number of bundles (1..128)")
    namespaces.add_parser("bundles", help="the namespace's bundle boundaries").add_argument("namespace")
    unload = namespaces.add_parser("unload", help="unload every bundle of a namespace, or one")
    unload.add_argument("namespace")
    unload.add_argument("-b", "--bundle", default=None, help="0xLLLLLLLL_0xHHHHHHHH")
    unload.add_argument("-d", "--destination-broker", "--destinationBroker", dest="destination_broker",
                        default=None, help="host:webPort of the broker to move the bundle to")
    split = namespaces.add_parser("split-bundle", help="split a bundle in two (range_equally_divide)")
    split.add_argument("namespace")
    split.add_argument("-b", "--bundle", required=True, help="0xLLLLLLLL_0xHHHHHHHH")
    split.add_argument("-u", "--unload", action="store_true", help="unload the two halves after the split")
    for action in sorted(TOPIC_ACTIONS):
        topics.add_parser(action).add_argument("topic")
    brokers = groups.add_parser("brokers").add_subparsers(dest="action", required=True)
    brokers.add_parser("list").add_argument("cluster", nargs="?", default=None)
    brokers.add_parser("leader-broker")
    brokers.add_parser("healthcheck")
    groups.add_parser("clusters").add_subparsers(dest="action", required=True).add_parser("list")
    groups.add_parser("broker-stats").add_subparsers(dest="action", required=True).add_parser("load-report")


def handles(args: argparse.Namespace) -> bool:
    """Whether the parsed command is one of this module's."""
    return (args.group in GROUPS or (args.group == "topics" and args.action in TOPIC_ACTIONS)
            or (args.group == "namespaces" and args.action in NAMESPACE_ACTIONS))


def route(args: argparse.Namespace) -> tuple[str, str, object]:
    """(method, path, body) of a cluster command; InvalidTopicName for a bad name."""
    if args.group == "topics":
        name = parse_topic(args.topic)
        lookup = f"/lookup/v2/topic/persistent/{name.path}"
        return {"lookup": ("GET", lookup, None), "bundle-range": ("GET", lookup + "/bundle", None),
                "unload": ("PUT", f"/admin/v2/persistent/{name.path}/unload", None)}[args.action]
    if args.group == "namespaces":
        return _namespace_route(args)
    if args.group == "brokers":
        if args.action == "list":
            return "GET", "/admin/v2/brokers" + (f"/{args.cluster}" if args.cluster else ""), None
        return "GET", {"leader-broker": "/admin/v2/brokers/leaderBroker",
                       "healthcheck": "/admin/v2/brokers/health"}[args.action], None
    if args.group == "clusters":
        return "GET", "/admin/v2/clusters", None
    return "GET", "/admin/v2/broker-stats/load-report", None


def _namespace_route(args: argparse.Namespace) -> tuple[str, str, object]:
    tenant, ns = parse_namespace(args.namespace)
    path = f"/admin/v2/namespaces/{tenant}/{ns}"
    if args.action == "create":
        return "PUT", path, ({"bundles": {"numBundles": args.bundles}} if args.bundles is not None else None)
    if args.action == "bundles":
        return "GET", path + "/bundles", None
    if args.action == "split-bundle":
        return "PUT", f"{path}/{args.bundle}/split?unload={'true' if args.unload else 'false'}", None
    if args.bundle is None:
        if args.destination_broker:
            raise InvalidArgument("--destination-broker moves one bundle: give it with -b")
        return "PUT", path + "/unload", None
    query = f"?destinationBroker={args.destination_broker}" if args.destination_broker else ""
    return "PUT", f"{path}/{args.bundle}/unload{query}", None


def run(args: argparse.Namespace, request: Request) -> int:
    """Send the command and print the answer as JSON (`topics lookup`: the owner's service URL,
    as pulsar-admin prints it). HTTP errors propagate to the caller."""
    method, path, body = route(args)
    result = request(method, path, body)
    if args.group == "topics" and args.action == "lookup" and isinstance(result, dict):
        result = result.get("brokerUrl")
    if result is not None:
        print(json.dumps(result, indent=2, sort_keys=True))
    return 0
