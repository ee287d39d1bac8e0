"""Permissions: grant, revoke and list what a role may do in a namespace or on a topic.

Stored where Pulsar stores them, in the namespace's policies key (`/admin/policies/<t>/<ns>`,
`broker.records.policies`) as Policies.auth_policies:
    {"namespace_auth": {role: [actions]},
     "destination_auth": {"persistent://t/ns/x": {role: [actions]}},
     "subscription_auth_roles": {subscription: [roles]}}
Every change is one compare-and-set of that key (read again if another writer raced us), so
concurrent grants never lose each other; the namespace must exist (NamespaceNotFound, 404) and is
never created here. `broker.security.authorization` reads these grants.

Checks: an action is one of Pulsar's AuthAction (produce, consume, functions, sources, sinks,
packages); a grant carries a non-empty list of them (BadRequestBody, 400, otherwise). A role is
1..`ROLE_CHARS_MAX` characters, without control characters, '/' or surrounding spaces
(BadRequestBody). Topic grants are per base topic: a partition has its partitioned topic's
permissions, so a grant naming a partition is refused (BadRequestBody).

Subscription permissions (`subscription_auth_roles`): `grant_subscription` names the only roles
that may consume on a subscription of the namespace (they still need consume); revoking the last
one lets every role with consume in again. A namespace-create body's `auth_policies` is checked
by `check_auth_policies` (the same rules; empty action lists are kept, granting nothing).

Listing: a namespace's permissions are its `namespace_auth`; a topic's are, as Pulsar's
getPermissionsOnTopic, the namespace's merged with the topic's own (the union of the actions).
Revoking a role the namespace never granted changes nothing; revoking a topic grant that does
not exist is refused as Pulsar does (412 "Permissions are not set at the topic level").

What must hold: the policies key's other fields are never changed; stored action lists are sorted
and without repeats.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable

from broker.records.policies import namespace_path
from broker.security.authorization import (
    AUTH_POLICIES_KEY,
    DESTINATION_AUTH,
    NAMESPACE_AUTH,
    SUBSCRIPTION_AUTH,
    empty_auth_policies,
)
from common import retry
from common.errors import BadRequestBody, BadVersion, InvalidArgument, NamespaceNotFound, NotFound
from common.topic_names import TopicName, parse_topic
from metadata.api import AsyncStore

AUTH_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")   # Pulsar's AuthAction
ROLE_CHARS_MAX = 256

_CAS_RETRY = retry.Retry("broker.permissions_cas", retry_on=(), wait=retry.no_wait(), attempts_max=10)


def check_role(role: object) -> str:
    """`role` if it can be granted; BadRequestBody otherwise."""
    if not isinstance(role, str) or not role or len(role) > ROLE_CHARS_MAX:
        raise BadRequestBody(f"a role is 1 to {ROLE_CHARS_MAX} characters")
    if role != role.strip() or "/" in role or any(unicodedata.category(c).startswith("C") for c in role):
        raise BadRequestBody("a role may not contain '/', control characters or surrounding spaces",
                             role=role[:80])
    return role


def check_actions(actions: object, *, empty_ok: bool = False) -> list[str]:
    """The actions, sorted and without repeats; BadRequestBody unless a non-empty (or, with
    `empty_ok`, any) list of AuthAction names."""
    if not isinstance(actions, list) or not (actions or empty_ok) or not all(isinstance(a, str) for a in actions):
        raise BadRequestBody(f"actions are a non-empty JSON list of {', '.join(AUTH_ACTIONS)}")
    unknown = sorted({a for a in actions if a not in AUTH_ACTIONS})
    if unknown:
        raise BadRequestBody(f"unknown action(s) {', '.join(repr(a[:40]) for a in unknown[:5])} "
                             f"(one of {', '.join(AUTH_ACTIONS)})")
    return sorted(set(actions))


def check_roles(roles: object) -> list[str]:
    """A JSON list of roles, checked, sorted and without repeats (BadRequestBody otherwise)."""
    if not isinstance(roles, list):
        raise BadRequestBody("roles are a JSON list of role names")
    return sorted({check_role(role) for role in roles})


def check_auth_policies(value: object) -> dict:
    """Pulsar's AuthPolicies from a namespace-create body, checked (BadRequestBody) and normalized:
    {"namespace_auth": {role: [actions]}, "destination_auth": {topic: {role: [actions]}},
    "subscription_auth_roles": {subscription: [roles]}}; absent or null parts are empty."""
    if not isinstance(value, dict):
        raise BadRequestBody("auth_policies must be a JSON object")

    def part(key: str) -> dict:
        found = value.get(key)
        if found is not None and not isinstance(found, dict):
            raise BadRequestBody(f"auth_policies.{key} must be a JSON object")
        return found or {}

    def grants(found: object) -> dict[str, list[str]]:
        if not isinstance(found, dict):
            raise BadRequestBody("a grant is a JSON object of role -> [actions]")
        return {check_role(role): check_actions(actions, empty_ok=True) for role, actions in found.items()}

    return {
        NAMESPACE_AUTH: grants(part(NAMESPACE_AUTH)),
        DESTINATION_AUTH: {_topic_key(parse_topic(str(topic))): grants(roles)
                           for topic, roles in part(DESTINATION_AUTH).items()},
        SUBSCRIPTION_AUTH: {str(sub): check_roles(roles) for sub, roles in part(SUBSCRIPTION_AUTH).items()},
    }


def _topic_key(topic: TopicName) -> str:
    if topic.partition_index >= 0:
        raise BadRequestBody("a partition has its partitioned topic's permissions: grant them on "
                             f"{topic.base}", topic=str(topic))
    return str(topic)


async def _update(astore: AsyncStore, tenant: str, namespace: str, change: Callable[[dict], None]) -> None:
    """Apply `change` to the namespace's auth_policies by compare-and-set."""
    path = namespace_path(tenant, namespace)

    async def attempt() -> None:
        found = await astore.get(path)
        if found is None:
            raise NamespaceNotFound(tenant, namespace)
        fields = json.loads(found.value)
        auth = fields.get(AUTH_POLICIES_KEY)
        auth = empty_auth_policies() | (auth if isinstance(auth, dict) else {})
        change(auth)
        fields[AUTH_POLICIES_KEY] = auth
        try:
            await astore.put(path, json.dumps(fields).encode(), expected_version=found.version)
        except (BadVersion, NotFound) as exc:   # another writer raced us: read again
            raise retry.TryAgain(str(exc)) from exc

    await _CAS_RETRY.call_async(attempt, give_up=lambda _: InvalidArgument(
        "permissions changed concurrently too often", namespace=f"{tenant}/{namespace}"))


async def _auth_policies(astore: AsyncStore, tenant: str, namespace: str) -> dict:
    found = await astore.get(namespace_path(tenant, namespace))
    if found is None:
        raise NamespaceNotFound(tenant, namespace)
    auth = json.loads(found.value).get(AUTH_POLICIES_KEY)
    return empty_auth_policies() | (auth if isinstance(auth, dict) else {})


# --- namespace level ------------------------------------------------------------------------------------

async def grant_namespace(astore: AsyncStore, tenant: str, namespace: str, role: str, actions: object) -> None:
    """Give `role` exactly `actions` on every topic of the namespace (replacing its earlier grant)."""
    role, wanted = check_role(role), check_actions(actions)
    await _update(astore, tenant, namespace, lambda auth: auth[NAMESPACE_AUTH].__setitem__(role, wanted))


async def revoke_namespace(astore: AsyncStore, tenant: str, namespace: str, role: str) -> None:
    role = check_role(role)
    await _update(astore, tenant, namespace, lambda auth: auth[NAMESPACE_AUTH].pop(role, None))


async def namespace_permissions(astore: AsyncStore, tenant: str, namespace: str) -> dict[str, list[str]]:
    """{role: [actions]} granted on the namespace; NamespaceNotFound if it does not exist."""
    auth = await _auth_policies(astore, tenant, namespace)
    return {role: sorted(actions) for role, actions in sorted((auth[NAMESPACE_AUTH] or {}).items())}


async def grant_subscription(astore: AsyncStore, tenant: str, namespace: str, subscription: str,
                             roles: object) -> None:
    """Only `roles` may consume on `subscription` in this namespace (replacing the earlier list)."""
    checked = check_roles(roles)
    if not checked:
        raise BadRequestBody("a subscription permission names at least one role")
    await _update(astore, tenant, namespace, lambda auth: auth[SUBSCRIPTION_AUTH].__setitem__(subscription, checked))


async def revoke_subscription(astore: AsyncStore, tenant: str, namespace: str, subscription: str,
                              role: str) -> None:
    """Take `role` off the subscription's list (an emptied list lets every consumer role in again)."""
    role = check_role(role)

    def change(auth: dict) -> None:
        roles = [r for r in auth[SUBSCRIPTION_AUTH].get(subscription) or [] if r != role]
        if roles:
            auth[SUBSCRIPTION_AUTH][subscription] = roles
        else:
            auth[SUBSCRIPTION_AUTH].pop(subscription, None)

    await _update(astore, tenant, namespace, change)


# --- topic level ----------------------------------------------------------------------------------------

async def grant_topic(astore: AsyncStore, topic: TopicName, role: str, actions: object) -> None:
    """Give `role` exactly `actions` on the topic (and its partitions), replacing its earlier grant."""
    key, role, wanted = _topic_key(topic), check_role(role), check_actions(actions)

    def change(auth: dict) -> None:
        auth[DESTINATION_AUTH].setdefault(key, {})[role] = wanted

    await _update(astore, topic.tenant, topic.namespace, change)


async def revoke_topic(astore: AsyncStore, topic: TopicName, role: str) -> None:
    """Take the topic-level grant of `role` away; InvalidArgument (412) if there is none."""
    key, role = _topic_key(topic), check_role(role)

    def change(auth: dict) -> None:
        roles = auth[DESTINATION_AUTH].get(key) or {}
        if role not in roles:
            raise InvalidArgument("Permissions are not set at the topic level", topic=key, role=role)
        del roles[role]
        if not roles:
            auth[DESTINATION_AUTH].pop(key, None)

    await _update(astore, topic.tenant, topic.namespace, change)


async def topic_permissions(astore: AsyncStore, topic: TopicName) -> dict[str, list[str]]:
    """{role: [actions]} on the topic: the namespace's grants merged with the (partitioned) topic's own."""
    auth = await _auth_policies(astore, topic.tenant, topic.namespace)
    merged: dict[str, set[str]] = {role: set(actions) for role, actions in (auth[NAMESPACE_AUTH] or {}).items()}
    for role, actions in ((auth[DESTINATION_AUTH] or {}).get(str(topic.base)) or {}).items():
        merged.setdefault(role, set()).update(actions)
    return {role: sorted(actions) for role, actions in sorted(merged.items())}
