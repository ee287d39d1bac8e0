"""Authorization: may this role produce to, consume from, look up, or administer this?

The binary protocol (PRODUCER, SUBSCRIBE, LOOKUP, ...), the admin HTTP API and the Spark source
code against this module's `AuthorizationService`.

Pulsar's model (PulsarAuthorizationProvider), as implemented here:
- authorization off (`authorization_enabled=false`): everything is allowed to everyone;
- `super_user_roles` may do everything;
- a tenant's `adminRoles` (TenantInfo, `broker.records.tenancy`; exact match) administer the tenant: its
  namespaces, their policies and permissions, and every topic in them (they may produce and
  consume too);
- namespace permissions (policies `auth_policies.namespace_auth`: role → ["produce","consume",...])
  and topic permissions (`auth_policies.destination_auth`: full topic name → role → actions) grant
  produce and consume; a partition has its partitioned topic's permissions (its own name is
  looked up first, then the base name); LOOKUP needs produce or consume;
- a consumer also needs its subscription's `auth_policies.subscription_auth_roles[sub]` to name
  its role when that list is not empty (Pulsar's subscription permission);
- with `authorization_allow_wildcards_matching`, a granted role "a.*" / "*.b" matches a role by
  prefix / suffix (only at the start or the end, as Pulsar);
- a client without a role (None before CONNECT, "" for an anonymous client when no
  `anonymous_user_role` is set) is allowed nothing, except what a grant names for that exact
  role; wildcards never match it.

Reads: the tenant's and the namespace's keys (`/admin/policies/<t>`, `/admin/policies/<t>/<ns>`),
through the metadata store. A namespace's grants are remembered for at most `_cache_ttl_s`
(min(1 s, half of `authorization_recheck_interval_ms`)) to spare the store a 1,000-partition
subscribe's worth of reads; a refusal is never answered from memory (the keys are read again
first), so a grant takes effect at once, and a revoke reaches new clients within that TTL (at
once on the broker whose admin API made it: `forget`) and existing ones at the next recheck
(`broker.protocol.revocation`, which reads fresh).

What must hold: a refusal (AuthorizationDenied) reads the same whether or not the topic or
namespace exists; no check creates anything.
"""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass, field

from broker.records.policies import namespace_path
from broker.records.tenancy import tenant_path
from common.clock import SYSTEM_CLOCK, Clock
from common.config import Config, csv_setting
from common.errors import AuthorizationDenied
from common.topic_names import TopicName
from metadata.api import AsyncStore

AUTH_POLICIES_KEY = "auth_policies"               # in the namespace policies (Pulsar's Policies.auth_policies)
NAMESPACE_AUTH = "namespace_auth"                 # role -> [actions]
DESTINATION_AUTH = "destination_auth"             # full topic name -> role -> [actions]
SUBSCRIPTION_AUTH = "subscription_auth_roles"     # subscription -> [roles]

_CACHE_TTL_MAX_S = 1.0
_CACHE_ENTRIES_MAX = 10_000     # namespaces remembered; past it the memory is cleared


class Action(enum.Enum):
    PRODUCE = "produce"
    CONSUME = "consume"
    LOOKUP = "lookup"          # produce or consume


_VERBS = {Action.PRODUCE: "Produce", Action.CONSUME: "Consume", Action.LOOKUP: "Lookup"}


def empty_auth_policies() -> dict:
    """Pulsar's AuthPolicies with nothing granted."""
    return {NAMESPACE_AUTH: {}, DESTINATION_AUTH: {}, SUBSCRIPTION_AUTH: {}}


@dataclass(frozen=True)
class NamespaceGrants:
    """What decides every check in one namespace: its tenant's admin roles and its auth policies."""

    admin_roles: frozenset[str] = frozenset()
    auth: dict = field(default_factory=empty_auth_policies)

    def namespace_roles(self) -> dict[str, list[str]]:
        return self.auth.get(NAMESPACE_AUTH) or {}

    def topic_roles(self, topic: str) -> dict[str, list[str]]:
        return (self.auth.get(DESTINATION_AUTH) or {}).get(topic) or {}

    def subscription_roles(self, subscription: str) -> list[str]:
        return (self.auth.get(SUBSCRIPTION_AUTH) or {}).get(subscription) or []


def wildcard_match(granted: str, role: str) -> bool:
    """Pulsar's checkWildcardPermission: "a.*" matches by prefix, "*.b" by suffix; "" never matches."""
    if not role or not granted:
        return False
    if granted.endswith("*") and role.startswith(granted[:-1]):
        return True
    return granted.startswith("*") and role.endswith(granted[1:])


def _granted(roles: dict[str, list[str]], role: str | None, wanted: tuple[str, ...], wildcards: bool) -> bool:
    """Whether `roles` (role -> actions) gives `role` one of the `wanted` actions."""
    if role is not None:
        actions = roles.get(role)
        if actions is not None and any(a in actions for a in wanted):
            return True
    if not wildcards or not role:
        return False
    return any(wildcard_match(granted, role) and any(a in actions for a in wanted)
               for granted, actions in roles.items())


def _wanted(action: Action) -> tuple[str, ...]:
    if action is Action.LOOKUP:
        return (Action.PRODUCE.value, Action.CONSUME.value)
    return (action.value,)


class AuthorizationService:
    def __init__(self, config: Config, astore: AsyncStore, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self._clock = clock   # dates the remembered grants
        self.astore = astore
        self.enabled = config.authorization_enabled
        self.superusers = frozenset(csv_setting(config.super_user_roles))
        self.wildcards = config.authorization_allow_wildcards_matching
        self._cache_ttl_s = min(_CACHE_TTL_MAX_S, config.authorization_recheck_interval_ms / 2000)
        self._cache: dict[tuple[str, str], tuple[float, NamespaceGrants]] = {}   # -> (read at, grants)

    # --- reads -----------------------------------------------------------------------------------------

    async def grants(self, tenant: str, namespace: str, *, fresh: bool = False) -> NamespaceGrants:
        """The namespace's grants (nothing granted if the tenant or namespace does not exist);
        `fresh` reads the store, otherwise a read younger than the cache TTL may answer."""
        key = (tenant, namespace)
        now_s = self._clock.monotonic_s()
        if not fresh:
            cached = self._cache.get(key)
            if cached is not None and now_s - cached[0] < self._cache_ttl_s:
                return cached[1]
        admins, ns_found = await asyncio.gather(self.admin_roles(tenant),
                                                self.astore.get(namespace_path(tenant, namespace)))
        auth = json.loads(ns_found.value).get(AUTH_POLICIES_KEY) if ns_found is not None else None
        grants = NamespaceGrants(admins, auth if isinstance(auth, dict) else empty_auth_policies())
        if len(self._cache) >= _CACHE_ENTRIES_MAX:
            self._cache.clear()
        self._cache[key] = (now_s, grants)
        return grants

    def forget(self, tenant: str, namespace: str) -> None:
        """Drop what is remembered of a namespace (its grants were just changed here)."""
        self._cache.pop((tenant, namespace), None)

    async def admin_roles(self, tenant: str) -> frozenset[str]:
        """The tenant's adminRoles (none if it does not exist)."""
        found = await self.astore.get(tenant_path(tenant))
        if found is None:
            return frozenset()
        return frozenset(json.loads(found.value).get("adminRoles") or [])

    # --- decisions -------------------------------------------------------------------------------------

    def is_superuser(self, role: str | None) -> bool:
        return role is not None and role != "" and role in self.superusers

    async def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        """Superuser, or in the tenant's adminRoles. Off: True."""
        if not self.enabled or self.is_superuser(role):
            return True
        return bool(role) and role in await self.admin_roles(tenant)

    def permits(self, grants: NamespaceGrants, role: str | None, action: Action, topic: TopicName,
                subscription: str | None = None) -> bool:
        """The decision for an enabled authorization, given the namespace's grants (no I/O)."""
        if self.is_superuser(role) or (role and role in grants.admin_roles):
            return True
        if action is Action.CONSUME and subscription:
            allowed_roles = grants.subscription_roles(subscription)
            if allowed_roles and role not in allowed_roles:
                return False
        wanted = _wanted(action)
        if _granted(grants.namespace_roles(), role, wanted, self.wildcards):
            return True
        names = [str(topic)] + ([str(topic.base)] if topic.partition_index >= 0 else [])
        return any(_granted(grants.topic_roles(name), role, wanted, self.wildcards) for name in names)

    async def allowed(self, role: str | None, action: Action, topic: TopicName,
                      subscription: str | None = None) -> bool:
        """May `role` do `action` on `topic` (a tenant admin and a superuser may do all)?"""
        if not self.enabled or self.is_superuser(role):
            return True
        if self.permits(await self.grants(topic.tenant, topic.namespace), role, action, topic, subscription):
            return True
        fresh = await self.grants(topic.tenant, topic.namespace, fresh=True)   # never refuse from memory
        return self.permits(fresh, role, action, topic, subscription)

    async def check(self, role: str | None, action: Action, topic: TopicName,
                    subscription: str | None = None) -> None:
        """AuthorizationDenied ("Client is not authorized to Produce/Consume/Lookup ...") unless allowed."""
        if not await self.allowed(role, action, topic, subscription):
            raise AuthorizationDenied(f"Client is not authorized to {_VERBS[action]}", topic=str(topic),
                                      role=role or "")

    async def check_producer(self, role: str | None, topic: TopicName, initial_subscription: str = "") -> None:
        """A PRODUCER's check: produce, and consume on the subscription it asks to create
        (`initial_subscription_name`, as Pulsar's ServerCnx checks both); AuthorizationDenied otherwise."""
        await self.check(role, Action.PRODUCE, topic)
        if initial_subscription:
            await self.check(role, Action.CONSUME, topic, initial_subscription)

    def permits_namespace(self, grants: NamespaceGrants, role: str | None) -> bool:
        if self.is_superuser(role) or (role and role in grants.admin_roles):
            return True
        return _granted(grants.namespace_roles(), role, _wanted(Action.LOOKUP), self.wildcards)

    async def allowed_namespace(self, role: str | None, tenant: str, namespace: str) -> bool:
        """May `role` see the namespace's topics (list them, watch them): a namespace grant of
        produce or consume, tenant admin, superuser (Pulsar's GET_TOPICS namespace operation)."""
        if not self.enabled or self.is_superuser(role):
            return True
        if self.permits_namespace(await self.grants(tenant, namespace), role):
            return True
        return self.permits_namespace(await self.grants(tenant, namespace, fresh=True), role)

    async def check_namespace(self, role: str | None, tenant: str, namespace: str) -> None:
        """AuthorizationDenied unless `allowed_namespace` (the same message whether it exists or not)."""
        if not await self.allowed_namespace(role, tenant, namespace):
            raise AuthorizationDenied("Client is not authorized to list the topics of the namespace",
                                      namespace=f"{tenant}/{namespace}", role=role or "")
