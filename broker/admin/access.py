"""Who may call which admin route: authentication, then authorization, before anything is looked up.

`access` is the admin application's middleware, inside `broker.admin.http.errors` and outside
`broker.admin.lookup.owner_redirect`, so a refusal is answered before any redirect, lookup or
handler runs: it says nothing about whether a tenant, namespace or topic exists, or who owns it.

Authentication (`authentication_enabled`): the request's `Authorization` header (`Bearer <jwt>`,
`Basic <b64(user:password)>`) and the CN of a client certificate the HTTPS handshake verified
(`auth.tls.peer_common_name`) go to `service.authentication` (`credentials_from_http`,
`authenticate_async`); no valid credentials → 401 `{"reason"}` (a client without credentials, or
whose `Authorization` scheme no configured provider takes, has `anonymous_user_role` when one is set,
as in Pulsar; one naming an unknown method in `X-Pulsar-Auth-Method-Name` is 401 regardless).
Off: every caller has `anonymous_user_role`.
The identity is kept on the request (`request[IDENTITY]`).

Authorization (`authorization_enabled`): every route of the application has a rule in `ROUTES`
(method + canonical path, `request.match_info.route.resource.canonical`; HEAD as GET), following
Pulsar's PulsarAuthorizationProvider:
- SUPERUSER: `super_user_roles` only (tenants, brokers, broker-stats, bundle unload/split, Kafka
  consumer groups and their coordinators' peer calls);
- TENANT_ADMIN: the tenant's adminRoles (or a superuser), tenant from the path: namespaces and
  their policies and permissions, and topic administration (create, delete, partitions, topic
  policies, unload, offload, compaction, terminate, permissions, schema upload/delete);
- NAMESPACE: any grant in the namespace (or tenant admin): listing its topics and bundles;
- TOPIC_LOOKUP: produce or consume on the topic: lookup, stats, partition metadata, schema reads;
- TOPIC_CONSUME: consume (on that subscription, where the path names one; on every subscription
  the namespace restricts, for `/all_subscription/`): peek, examine, get-message-by-id, last
  message id, internalStats, subscriptions and their operations, the web console's message
  browse and live tail (`/messages`, `/tail`);
- TOPIC_PRODUCE: produce on the topic;
- AUTHENTICATED: any authenticated role (the cluster list, broker readiness, the console's whoami);
- METRICS: `/metrics`, see below;
- PUBLIC: no authentication and no authorization, for the web console's static files only
  (`/console`, `/console/`, `/console/{path}`: the single-page app carries no data; everything it
  shows comes from the admin routes it calls with the user's credentials). No other route may be
  PUBLIC: `tests/broker/admin/test_console_site.py` checks it.
A route without a rule is SUPERUSER; `tests/broker/admin/test_admin_access_routes.py` fails on any
registered route missing from `ROUTES`, so a new route gets a rule by construction.
Refusals are 403 `{"reason"}` naming the operation and the resource as asked, the same for an
existing and a missing one ("Unauthorized to validateTopicOperation for operation [PEEK_MESSAGES]
on topic [persistent://b/ns/t]").

`/metrics` (`metrics_require_auth`, with authentication on): credentials are needed (401
otherwise); a superuser (or anyone, with authorization off) sees every series; another role sees
the broker-level series and only the series whose `namespace`/`topic` (or `tenant`) label is one
it may see: a namespace of a tenant it administers or where it has a grant, a topic it may look
up. The rendered text is filtered (`filter_metrics`); HELP/TYPE lines stay. Filtering a 4 MB
scrape (1,000 topics) takes ~0.3 s, on worker threads, never on the event loop. Prometheus scrapes a
secured broker with a bearer token (a superuser's, or a tenant admin's for its own tenants):

    scrape_configs:
      - job_name: strata
        scheme: https                      # the broker_admin_tls_port
        tls_config: {ca_file: /etc/strata/ca.cert.pem}
        authorization: {type: Bearer, credentials_file: /etc/strata/prometheus.token}
        static_configs: [{targets: ["broker-1:8443"]}]

What must hold: no handler runs for a request that is not authenticated (when on) or not
authorized (when on); a refusal's body depends only on the request, never on what exists; every
route has a rule; the broker's own peer calls (`broker.security.peer_auth`) carry its token.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler

from auth.api import NO_METHOD, Identity
from auth.service import HTTP_METHOD_HEADER
from auth.tls import peer_common_name
from broker.admin import lookup
from broker.cluster import peers
from broker.limits import registry
from broker.security.authorization import SUBSCRIPTION_AUTH, Action, AuthorizationService
from common.errors import AuthorizationDenied, InvalidTopicName
from common.topic_names import TopicName, parse_topic

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

IDENTITY = "strata.identity"     # request key: the caller's auth.api.Identity
SERVICE: web.AppKey[BrokerService] = web.AppKey("access_service")


# the web console's static files (broker.admin.console_site), the only PUBLIC routes
CONSOLE_STATIC_ROUTES = ("/console", "/console/", "/console/{path}")


class Rule(enum.Enum):
    SUPERUSER = "superuser"
    TENANT_ADMIN = "tenant admin"
    NAMESPACE = "namespace"
    TOPIC_LOOKUP = "topic lookup"
    TOPIC_CONSUME = "topic consume"
    TOPIC_PRODUCE = "topic produce"
    AUTHENTICATED = "authenticated"
    METRICS = "metrics"
    PUBLIC = "public"                  # no credentials asked, nothing authorized: the console's static files only


@dataclass(frozen=True)
class Access:
    rule: Rule
    operation: str     # Pulsar's operation name, for the refusal's reason


def _topic_rules() -> dict[tuple[str, str], Access]:
    """(method, suffix after .../{topic}) → rule, for both domains."""
    su, ta, lk, co = Rule.SUPERUSER, Rule.TENANT_ADMIN, Rule.TOPIC_LOOKUP, Rule.TOPIC_CONSUME
    sub = "/subscription/{sub}"
    rules = {
        ("PUT", ""): Access(ta, "CREATE_TOPIC"), ("DELETE", ""): Access(ta, "DELETE_TOPIC"),
        ("GET", "/partitions"): Access(lk, "GET_METADATA"),
        ("PUT", "/partitions"): Access(ta, "CREATE_TOPIC"), ("POST", "/partitions"): Access(ta, "UPDATE_METADATA"),
        ("DELETE", "/partitions"): Access(ta, "DELETE_TOPIC"),
        ("GET", "/stats"): Access(lk, "GET_STATS"), ("GET", "/partitioned-stats"): Access(lk, "GET_STATS"),
        ("GET", "/internalStats"): Access(co, "GET_STATS"), ("GET", "/explain-storage"): Access(co, "GET_STATS"),
        ("GET", "/lastMessageId"): Access(co, "PEEK_MESSAGES"),
        ("GET", "/examinemessage"): Access(co, "PEEK_MESSAGES"),
        ("GET", "/ledger/{ledger}/entry/{entry}"): Access(co, "PEEK_MESSAGES"),
        ("GET", "/messages"): Access(co, "PEEK_MESSAGES"), ("GET", "/tail"): Access(co, "PEEK_MESSAGES"),
        ("GET", sub + "/position/{count}"): Access(co, "PEEK_MESSAGES"),
        ("GET", sub + "/position/{n}"): Access(co, "PEEK_MESSAGES"),
        ("GET", "/subscriptions"): Access(co, "GET_SUBSCRIPTIONS"),
        ("PUT", sub): Access(co, "SUBSCRIBE"), ("DELETE", sub): Access(co, "UNSUBSCRIBE"),
        ("POST", sub + "/skip/{count}"): Access(co, "SKIP"), ("POST", sub + "/skip_all"): Access(co, "SKIP"),
        ("POST", sub + "/resetcursor"): Access(co, "RESET_CURSOR"),
        ("POST", sub + "/resetcursor/{timestamp}"): Access(co, "RESET_CURSOR"),
        ("POST", sub + "/expireMessages"): Access(co, "EXPIRE_MESSAGES"),
        ("POST", sub + "/expireMessages/{seconds}"): Access(co, "EXPIRE_MESSAGES"),
        ("POST", "/all_subscription/expireMessages/{seconds}"): Access(co, "EXPIRE_MESSAGES"),
        ("POST", sub + "/analyzeBacklog"): Access(co, "CONSUME"),
        ("PUT", "/backlogSize"): Access(co, "GET_BACKLOG_SIZE"),
        ("GET", "/compaction"): Access(ta, "COMPACT"), ("PUT", "/compaction"): Access(ta, "COMPACT"),
        ("GET", "/offload"): Access(ta, "OFFLOAD"), ("PUT", "/offload"): Access(ta, "OFFLOAD"),
        ("POST", "/terminate"): Access(ta, "TERMINATE"), ("POST", "/terminate/partitions"): Access(ta, "TERMINATE"),
        ("PUT", "/unload"): Access(ta, "UNLOAD"),
        ("GET", "/permissions"): Access(ta, "GET_PERMISSION"),
        ("POST", "/permissions/{role}"): Access(ta, "GRANT_PERMISSION"),
        ("DELETE", "/permissions/{role}"): Access(ta, "REVOKE_PERMISSION"),
        ("PUT", "/subscriptionTypesEnabled"): Access(su, "SUBSCRIPTION_TYPES"),
    }
    for policy in ("backlogQuota", "backlogQuotaMap", "compactionThreshold", "deduplicationEnabled", "messageTTL",
                   "offloadPolicies", "retention", "schemaCompatibilityStrategy",
                   "replicatorDispatchRate", *registry.BY_TOPIC_ROUTE):
        for method in ("GET", "POST", "PUT", "DELETE"):
            rules[(method, "/" + policy)] = Access(ta, f"{'READ' if method == 'GET' else 'WRITE'} {policy}")
    return rules


def _namespace_rules() -> dict[tuple[str, str], Access]:
    """(method, suffix after /admin/v2/namespaces/{tenant}/{ns}) → rule."""
    ta, ns_rule, su = Rule.TENANT_ADMIN, Rule.NAMESPACE, Rule.SUPERUSER
    rules = {
        ("PUT", ""): Access(ta, "CREATE_NAMESPACE"), ("DELETE", ""): Access(ta, "DELETE_NAMESPACE"),
        ("GET", ""): Access(ta, "GET_POLICIES"), ("POST", ""): Access(ta, "UPDATE_POLICIES"),
        ("GET", "/topics"): Access(ns_rule, "GET_TOPICS"), ("GET", "/bundles"): Access(ns_rule, "GET_BUNDLE"),
        ("PUT", "/unload"): Access(ta, "UNLOAD"),
        ("PUT", "/{bundle}/unload"): Access(su, "UNLOAD_BUNDLE"),
        ("PUT", "/{bundle}/split"): Access(su, "SPLIT_BUNDLE"),
        ("GET", "/permissions"): Access(ta, "GET_PERMISSION"),
        ("POST", "/permissions/{role}"): Access(ta, "GRANT_PERMISSION"),
        ("DELETE", "/permissions/{role}"): Access(ta, "REVOKE_PERMISSION"),
        ("POST", "/permissions/subscription/{subscription}"): Access(ta, "GRANT_PERMISSION"),
        ("DELETE", "/permissions/{subscription}/{role}"): Access(ta, "REVOKE_PERMISSION"),
    }
    for policy in ("backlogQuota", "backlogQuotaMap", "compactionThreshold", "deduplication",
                   "isAllowAutoUpdateSchema", "messageTTL", "offloadDeletionLagMs", "offloadPolicies",
                   "offloadThreshold", "offloadThresholdInSeconds", "retention", "schemaCompatibilityStrategy",
                   "schemaValidationEnforced", "replication", "replicatorDispatchRate", *registry.BY_ROUTE):
        for method in ("GET", "POST", "PUT", "DELETE"):
            rules[(method, "/" + policy)] = Access(ta, f"{'READ' if method == 'GET' else 'WRITE'} {policy}")
    return rules


def _build_routes() -> dict[tuple[str, str], Access]:
    su, ta, ns_rule, lk, auth = (Rule.SUPERUSER, Rule.TENANT_ADMIN, Rule.NAMESPACE, Rule.TOPIC_LOOKUP,
                                 Rule.AUTHENTICATED)
    routes: dict[tuple[str, str], Access] = {
        ("GET", "/metrics"): Access(Rule.METRICS, "METRICS"), ("GET", "/metrics/"): Access(Rule.METRICS, "METRICS"),
        ("GET", "/admin/v2/tenants"): Access(su, "LIST_TENANTS"),
        ("GET", "/admin/v2/clusters"): Access(auth, "LIST_CLUSTERS"),
        ("GET", "/admin/v2/brokers/ready"): Access(auth, "READY"),
        ("GET", "/admin/v2/namespaces/{tenant}"): Access(ta, "LIST_NAMESPACES"),
        ("GET", "/admin/v2/clusters/{cluster}"): Access(su, "GET_CLUSTER"),
        ("PUT", "/admin/v2/clusters/{cluster}"): Access(su, "CREATE_CLUSTER"),
        ("POST", "/admin/v2/clusters/{cluster}"): Access(su, "UPDATE_CLUSTER"),
        ("DELETE", "/admin/v2/clusters/{cluster}"): Access(su, "DELETE_CLUSTER"),
        ("GET", "/admin/v2/brokers"): Access(su, "LIST_BROKERS"),
        ("GET", "/admin/v2/brokers/{cluster}"): Access(su, "LIST_BROKERS"),
        ("GET", "/admin/v2/brokers/health"): Access(su, "HEALTH_CHECK"),
        ("GET", "/admin/v2/brokers/leaderBroker"): Access(su, "GET_LEADER_BROKER"),
        ("GET", "/admin/v2/broker-stats/topics"): Access(su, "BROKER_STATS"),
        ("GET", "/admin/v2/broker-stats/load-report"): Access(su, "BROKER_STATS"),
        # Kafka consumer groups: every tenant's (reads), and the peer call of a group's coordinator
        ("GET", "/admin/v2/kafka/groups"): Access(su, "LIST_KAFKA_GROUPS"),
        ("GET", "/admin/v2/kafka/groups/{group}"): Access(su, "GET_KAFKA_GROUP"),
        ("POST", "/admin/v2/kafka/groups/{group}/offsets"): Access(su, "KAFKA_GROUP_OFFSETS"),
        # the web console (broker.admin.console_site, console_api, bookies, audit)
        **{("GET", path): Access(Rule.PUBLIC, "CONSOLE") for path in CONSOLE_STATIC_ROUTES},
        ("GET", "/admin/v2/console/whoami"): Access(auth, "WHOAMI"),
        ("GET", "/admin/v2/console/cluster"): Access(su, "CONSOLE_CLUSTER"),
        ("GET", "/admin/v2/console/audit"): Access(su, "CONSOLE_AUDIT"),
        ("GET", "/admin/v2/bookies/all"): Access(su, "LIST_BOOKIES"),
    }
    for method, operation in (("GET", "GET_TENANT"), ("PUT", "CREATE_TENANT"), ("POST", "UPDATE_TENANT"),
                              ("DELETE", "DELETE_TENANT")):
        routes[(method, "/admin/v2/tenants/{tenant}")] = Access(su, operation)
    for (method, suffix), access in _namespace_rules().items():
        routes[(method, "/admin/v2/namespaces/{tenant}/{ns}" + suffix)] = access
    for domain in lookup.LOOKUP_DOMAINS:
        base = f"/admin/v2/{domain}/{{tenant}}/{{ns}}"
        routes[("GET", base)] = Access(ns_rule, "GET_TOPICS")
        routes[("GET", base + "/partitioned")] = Access(ns_rule, "GET_TOPICS")
        for (method, suffix), access in _topic_rules().items():
            routes[(method, base + "/{topic}" + suffix)] = access
        routes[("GET", f"/lookup/v2/topic/{domain}/{{tenant}}/{{ns}}/{{topic}}")] = Access(lk, "LOOKUP")
        routes[("GET", f"/lookup/v2/topic/{domain}/{{tenant}}/{{ns}}/{{topic}}/bundle")] = Access(lk, "LOOKUP")
    schemas = "/admin/v2/schemas/{tenant}/{ns}/{topic}"
    routes.update({
        ("GET", schemas + "/schema"): Access(lk, "GET_SCHEMA"),
        ("GET", schemas + "/schema/{version}"): Access(lk, "GET_SCHEMA"),
        ("GET", schemas + "/schemas"): Access(lk, "GET_SCHEMA"),
        ("POST", schemas + "/version"): Access(lk, "GET_SCHEMA"),
        ("POST", schemas + "/compatibility"): Access(lk, "GET_SCHEMA"),
        ("POST", schemas + "/schema"): Access(ta, "UPLOAD_SCHEMA"),
        ("DELETE", schemas + "/schema"): Access(ta, "DELETE_SCHEMA"),
    })
    return routes


# every route's rule (see the module docstring); brokers, broker-stats, cluster details: SUPERUSER
ROUTES: dict[tuple[str, str], Access] = _build_routes()


def access_of(method: str, canonical: str) -> Access:
    """The rule of a route (HEAD as GET); SUPERUSER for one not in ROUTES."""
    found = ROUTES.get(("GET" if method == "HEAD" else method, canonical))
    return found if found is not None else Access(Rule.SUPERUSER, f"{method} {canonical}")


def install(app: web.Application, service: BrokerService) -> None:
    """Give the middleware the service it asks (call before the app starts)."""
    app[SERVICE] = service


@web.middleware
async def access(request: web.Request, handler: Handler) -> web.StreamResponse:
    service = request.app[SERVICE]
    peers.PEER_CONFIG.set(service.config)       # this broker's credentials for the handler's peer calls
    route = request.match_info.route
    resource = route.resource
    if resource is None:                         # no such route: aiohttp's 404/405, nothing to protect
        return await handler(request)
    rule = access_of(request.method, resource.canonical)
    if rule.rule is Rule.PUBLIC:                 # static files: no identity, nothing to authorize
        return await handler(request)
    identity = await _authenticate(request, service, rule.rule)
    request[IDENTITY] = identity
    if identity is not None and service.authorization.enabled:
        await _authorize(request, service, identity.role, rule)
    return await handler(request)


async def _authenticate(request: web.Request, service: BrokerService, rule: Rule) -> Identity | None:
    """The caller's identity (AuthenticationFailed, 401, when credentials are needed and wrong);
    None for /metrics when it needs none."""
    config = service.config
    if not config.authentication_enabled:
        return None if rule is Rule.METRICS else Identity(config.anonymous_user_role, NO_METHOD)
    if rule is Rule.METRICS and not config.metrics_require_auth:
        return None
    authn = service.authentication
    peer_cn = peer_common_name(request.transport) if request.transport is not None else None
    credentials = authn.credentials_from_http(request.headers.get("Authorization"), peer_cn,
                                              request.headers.get(HTTP_METHOD_HEADER))
    return await authn.authenticate_async(credentials, unknown_method_anonymous=True)


async def _authorize(request: web.Request, service: BrokerService, role: str, rule: Access) -> None:
    """AuthorizationDenied (403) unless `role` may do what `rule` asks on the request's resource."""
    authz = service.authorization
    if rule.rule in (Rule.AUTHENTICATED, Rule.METRICS) or authz.is_superuser(role):
        return
    m = request.match_info
    if rule.rule is Rule.SUPERUSER:
        on = f" on {_resource_as_asked(request)}" if "tenant" in m else ""
        raise AuthorizationDenied(f"This operation requires super-user access: operation [{rule.operation}]{on}")
    if rule.rule is Rule.TENANT_ADMIN:
        if not await authz.is_tenant_admin(role, m["tenant"]):
            raise AuthorizationDenied(f"Don't have permission to administrate resources on this tenant: "
                                      f"operation [{rule.operation}] on {_resource_as_asked(request)}")
        return
    if rule.rule is Rule.NAMESPACE:
        if not (await authz.is_tenant_admin(role, m["tenant"])
                or await authz.allowed_namespace(role, m["tenant"], m["ns"])):
            raise AuthorizationDenied(f"Unauthorized to validateNamespaceOperation for operation "
                                      f"[{rule.operation}] on namespace [{m['tenant']}/{m['ns']}]")
        return
    action = {Rule.TOPIC_LOOKUP: Action.LOOKUP, Rule.TOPIC_CONSUME: Action.CONSUME,
              Rule.TOPIC_PRODUCE: Action.PRODUCE}[rule.rule]
    topic = topic_as_asked(request)
    if not (await authz.allowed(role, action, topic, m.get("sub"))
            and await _every_subscription_allowed(request, authz, role, topic)):
        raise AuthorizationDenied(f"Unauthorized to validateTopicOperation for operation [{rule.operation}] "
                                  f"on topic [{topic}]")


async def _every_subscription_allowed(request: web.Request, authz: AuthorizationService, role: str,
                                      topic: TopicName) -> bool:
    """A route acting on all of a topic's subscriptions (`/all_subscription/...`) needs consume on
    each subscription the namespace restricts (`subscription_auth_roles`), whether or not the topic
    has it: otherwise a role kept out of a subscription could still expire its messages."""
    resource = request.match_info.route.resource
    if resource is None or "/all_subscription/" not in resource.canonical:
        return True
    grants = await authz.grants(topic.tenant, topic.namespace, fresh=True)
    restricted = grants.auth.get(SUBSCRIPTION_AUTH) or {}
    return all(authz.permits(grants, role, Action.CONSUME, topic, sub) for sub in restricted)


def topic_as_asked(request: web.Request) -> TopicName:
    """The topic a topic route names, in its domain (InvalidTopicName, 400, when malformed)."""
    m = request.match_info
    path = request.match_info.route.resource.canonical if request.match_info.route.resource else ""
    domain = "non-persistent" if "/non-persistent/" in path else "persistent"
    return parse_topic(f"{domain}://{m['tenant']}/{m['ns']}/{m['topic']}")


def _resource_as_asked(request: web.Request) -> str:
    m = request.match_info
    if "topic" in m:
        return f"topic [{topic_as_asked(request)}]"
    if "ns" in m:
        return f"namespace [{m['tenant']}/{m['ns']}]"
    return f"tenant [{m['tenant']}]"


# --- /metrics -----------------------------------------------------------------------------------

_LABELS = re.compile(r'\b(tenant|namespace|topic)="([^"\\]*(?:\\.[^"\\]*)*)"')


async def metrics_visible_to(request: web.Request, text: str) -> str:
    """The /metrics text the caller may see (see the module docstring): all of it without an
    identity (metrics need no credentials), with authorization off, or for a superuser."""
    identity: Identity | None = request.get(IDENTITY)
    service = request.app[SERVICE]
    authz = service.authorization
    if identity is None or not authz.enabled or authz.is_superuser(identity.role):
        return text
    labels = await asyncio.to_thread(label_values, text)    # ~0.1 s for 4 MB: off the event loop
    visible = await _visible_labels(service, identity.role, labels)
    return await asyncio.to_thread(filter_metrics, text, visible)


def label_values(text: str) -> set[tuple[str, str]]:
    """Every (tenant|namespace|topic, value) pair in a Prometheus text."""
    return set(_LABELS.findall(text))


async def _visible_labels(service: BrokerService, role: str,
                          labels: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (label, value) pairs of the text `role` may see."""
    authz = service.authorization
    admin_of: dict[str, bool] = {}

    async def tenant_admin(tenant: str) -> bool:
        if tenant not in admin_of:
            admin_of[tenant] = await authz.is_tenant_admin(role, tenant)
        return admin_of[tenant]

    visible: set[tuple[str, str]] = set()
    for label, value in labels:
        if label == "tenant":
            ok = await tenant_admin(value)
        elif label == "namespace":
            tenant, _, ns = value.partition("/")
            ok = await tenant_admin(tenant) or await authz.allowed_namespace(role, tenant, ns)
        else:
            try:
                topic = parse_topic(value)
            except InvalidTopicName:
                continue
            ok = await tenant_admin(topic.tenant) or await authz.allowed(role, Action.LOOKUP, topic)
        if ok:
            visible.add((label, value))
    return visible


def filter_metrics(text: str, visible: set[tuple[str, str]]) -> str:
    """The lines of a Prometheus text whose tenant/namespace/topic labels are all in `visible`
    (lines without such labels, HELP and TYPE included, stay)."""
    kept = []
    for line in text.splitlines(keepends=True):
        if line.startswith("#") or all(pair in visible for pair in _LABELS.findall(line)):
            kept.append(line)
    return "".join(kept)
