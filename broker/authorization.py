"""Authorization: may this role produce to, consume from, look up, or administer this?

OWNER: helper H3 (issue 17) implements this module; the signatures below are the contract the
binary protocol (PRODUCER, SUBSCRIBE, LOOKUP, ...), the admin HTTP API and the Spark source code
against.

Pulsar's model (PulsarAuthorizationProvider):
- `super_user_roles` may do everything;
- a tenant's `adminRoles` (TenantInfo) administer the tenant: its namespaces, their policies and
  permissions, and every topic in them (and may produce and consume);
- namespace permissions (policies `auth_policies.namespace_auth`: role → ["produce","consume",...])
  and topic permissions (`auth_policies.destination_auth`: topic → role → actions) grant produce and
  consume; lookup needs either;
- with `authorization_allow_wildcards_matching`, a granted role "a.*" / "*.b" matches by prefix /
  suffix;
- authorization off: everything is allowed to everyone.

What must hold: a refusal (AuthorizationDenied) reads the same whether or not the topic or
namespace exists; no check creates anything.
"""

from __future__ import annotations

import enum

from common.config import Config
from common.topic_names import TopicName
from metadata.api import AsyncStore


class Action(enum.Enum):
    PRODUCE = "produce"
    CONSUME = "consume"
    LOOKUP = "lookup"          # produce or consume


class AuthorizationService:
    def __init__(self, config: Config, astore: AsyncStore) -> None:
        self.config = config
        self.astore = astore
        self.enabled = config.authorization_enabled

    def is_superuser(self, role: str | None) -> bool:
        raise NotImplementedError

    async def is_tenant_admin(self, role: str | None, tenant: str) -> bool:
        """Superuser, or in the tenant's adminRoles."""
        raise NotImplementedError

    async def allowed(self, role: str | None, action: Action, topic: TopicName,
                      subscription: str | None = None) -> bool:
        """May `role` do `action` on `topic` (a tenant admin and a superuser may do all)?"""
        raise NotImplementedError

    async def check(self, role: str | None, action: Action, topic: TopicName,
                    subscription: str | None = None) -> None:
        """AuthorizationDenied ("Client is not authorized to Produce/Consume/Lookup ...") unless allowed."""
        raise NotImplementedError

    async def allowed_namespace(self, role: str | None, tenant: str, namespace: str) -> bool:
        """May `role` see the namespace's topics (list them, watch them): any grant in it, tenant admin, superuser."""
        raise NotImplementedError
