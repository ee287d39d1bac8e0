"""broker.security.authorization over a real SQLite metadata store, with grants written by broker.security.permissions:
superusers, tenant admins, namespace and topic grants, partitions inheriting their partitioned
topic's grants, wildcard roles on and off, anonymous clients, subscription roles, authorization
off, and a refusal that reads the same whether the topic or namespace exists.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.records import tenancy
from broker.security import permissions
from broker.security.authorization import Action, AuthorizationService
from common.clock import ManualClock
from common.config import load_config
from common.errors import AuthorizationDenied, BadRequestBody, InvalidTopicName, NamespaceNotFound
from common.topic_names import parse_namespace, parse_topic
from metadata import open_store
from metadata.aio import AsyncMetadataStore

CLUSTER = "standalone"
PRODUCE, CONSUME, LOOKUP = Action.PRODUCE, Action.CONSUME, Action.LOOKUP
ORDERS = parse_topic("persistent://acme/sales/orders")


@pytest.fixture
def astore(tmp_path: Path) -> Iterator[AsyncMetadataStore]:
    store = open_store(f"sqlite:///{tmp_path}/meta.db")
    yield AsyncMetadataStore(store)
    store.close()


def run(coro):
    return asyncio.run(coro)


def service(astore: AsyncMetadataStore, **overrides) -> AuthorizationService:
    settings = {"authorization_enabled": True, "super_user_roles": "admin, ops"} | overrides
    return AuthorizationService(load_config(env={}, **settings), astore)


async def tenant_with_namespace(astore: AsyncMetadataStore, tenant: str = "acme", ns: str = "sales",
                                admins: tuple[str, ...] = ("acme-admin",)) -> None:
    await tenancy.create_tenant(astore, tenant, {"adminRoles": list(admins), "allowedClusters": [CLUSTER]})
    await tenancy.create_namespace(astore, tenant, ns, {}, 1)


def test_superusers_may_do_everything_even_where_nothing_exists(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        for action in Action:
            assert await authz.allowed("admin", action, ORDERS)
            assert await authz.allowed("ops", action, ORDERS)
        assert await authz.is_tenant_admin("admin", "nobody")
        assert await authz.allowed_namespace("admin", "nobody", "nothing")
        assert authz.is_superuser("admin") and not authz.is_superuser("") and not authz.is_superuser(None)

    run(go())


def test_tenant_admins_administer_and_use_only_their_tenant(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await tenant_with_namespace(astore, "other", "ns", admins=("other-admin",))
        assert await authz.is_tenant_admin("acme-admin", "acme")
        assert not await authz.is_tenant_admin("acme-admin", "other")
        assert not await authz.is_tenant_admin("acme-admin", "missing")
        for action in Action:
            assert await authz.allowed("acme-admin", action, ORDERS)
            assert not await authz.allowed("other-admin", action, ORDERS)
        assert await authz.allowed_namespace("acme-admin", "acme", "sales")
        assert not await authz.allowed_namespace("other-admin", "acme", "sales")

    run(go())


def test_a_namespace_grant_gives_its_actions_on_every_topic_and_lookup_with_either(
        astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        await tenant_with_namespace(astore)
        assert not await authz.allowed("alice", LOOKUP, ORDERS)
        await permissions.grant_namespace(astore, "acme", "sales", "alice", ["produce"])
        await permissions.grant_namespace(astore, "acme", "sales", "bob", ["consume"])
        any_topic = parse_topic("persistent://acme/sales/anything-at-all")
        assert await authz.allowed("alice", PRODUCE, any_topic)
        assert not await authz.allowed("alice", CONSUME, any_topic)
        assert await authz.allowed("alice", LOOKUP, any_topic)
        assert await authz.allowed("bob", CONSUME, any_topic, subscription="s")
        assert not await authz.allowed("bob", PRODUCE, any_topic)
        assert await authz.allowed("bob", LOOKUP, any_topic)
        assert await authz.allowed_namespace("bob", "acme", "sales")
        assert not await authz.allowed("alice", PRODUCE, parse_topic("persistent://acme/other/x"))
        assert await permissions.namespace_permissions(astore, "acme", "sales") == {
            "alice": ["produce"], "bob": ["consume"]}

    run(go())


def test_a_topic_grant_covers_that_topic_and_its_partitions_only(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_topic(astore, ORDERS, "carol", ["produce", "consume"])
        assert await authz.allowed("carol", PRODUCE, ORDERS)
        assert await authz.allowed("carol", CONSUME, ORDERS.partition(3), subscription="s")
        assert await authz.allowed("carol", LOOKUP, ORDERS.partition(0))
        assert not await authz.allowed("carol", PRODUCE, parse_topic("persistent://acme/sales/payments"))
        assert not await authz.allowed("carol", PRODUCE, parse_topic("non-persistent://acme/sales/orders"))
        assert not await authz.allowed_namespace("carol", "acme", "sales")   # a topic grant lists nothing
        merged = await permissions.topic_permissions(astore, ORDERS.partition(1))
        assert merged == {"carol": ["consume", "produce"]}
        with pytest.raises(BadRequestBody):   # a partition's permissions are its partitioned topic's
            await permissions.grant_topic(astore, ORDERS.partition(1), "dave", ["produce"])

    run(go())


def test_wildcard_roles_match_by_prefix_or_suffix_only_when_enabled(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_namespace(astore, "acme", "sales", "app.*", ["produce"])
        await permissions.grant_topic(astore, ORDERS, "*.reader", ["consume"])
        await permissions.grant_namespace(astore, "acme", "sales", "my.*.role", ["produce"])
        off, on = service(astore), service(astore, authorization_allow_wildcards_matching=True)
        assert not await off.allowed("app.one", PRODUCE, ORDERS)
        assert await on.allowed("app.one", PRODUCE, ORDERS)
        assert not await on.allowed("other.app.one", PRODUCE, ORDERS)
        assert await on.allowed("team.reader", CONSUME, ORDERS)
        assert not await off.allowed("team.reader", CONSUME, ORDERS)
        assert not await on.allowed("my.1.role", PRODUCE, ORDERS)   # '*' in the middle is literal
        assert await on.allowed("my.*.role", PRODUCE, ORDERS)
        assert not await on.allowed("", PRODUCE, ORDERS) and not await on.allowed(None, PRODUCE, ORDERS)

    run(go())


def test_a_client_without_a_role_is_allowed_nothing(astore: AsyncMetadataStore) -> None:
    authz = service(astore, authorization_allow_wildcards_matching=True)

    async def go() -> None:
        await tenant_with_namespace(astore, admins=())
        await permissions.grant_namespace(astore, "acme", "sales", "*", ["produce", "consume"])
        for role in (None, ""):
            for action in Action:
                assert not await authz.allowed(role, action, ORDERS)
            assert not await authz.is_tenant_admin(role, "acme")
            assert not await authz.allowed_namespace(role, "acme", "sales")
        assert await authz.allowed("anyone", PRODUCE, ORDERS)   # '*' matches every named role

    run(go())


def test_subscription_roles_restrict_who_consumes_on_that_subscription(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_namespace(astore, "acme", "sales", "bob", ["consume"])
        await permissions.grant_namespace(astore, "acme", "sales", "eve", ["consume"])
        policies = json.loads((await astore.get("/admin/policies/acme/sales")).value)
        policies["auth_policies"]["subscription_auth_roles"] = {"billing": ["bob"]}
        await astore.put("/admin/policies/acme/sales", json.dumps(policies).encode())
        assert await authz.allowed("bob", CONSUME, ORDERS, subscription="billing")
        assert not await authz.allowed("eve", CONSUME, ORDERS, subscription="billing")
        assert await authz.allowed("eve", CONSUME, ORDERS, subscription="other")

    run(go())


def test_a_producer_creating_a_subscription_needs_consume_on_it_too(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_namespace(astore, "acme", "sales", "writer", ["produce"])
        await authz.check_producer("writer", ORDERS)
        with pytest.raises(AuthorizationDenied, match="to Consume"):
            await authz.check_producer("writer", ORDERS, "initial")
        await permissions.grant_topic(astore, ORDERS, "writer", ["consume"])
        await authz.check_producer("writer", ORDERS, "initial")

    run(go())


def test_authorization_off_allows_everything(astore: AsyncMetadataStore) -> None:
    authz = AuthorizationService(load_config(env={}), astore)

    async def go() -> None:
        assert not authz.enabled
        for role in (None, "", "nobody"):
            for action in Action:
                assert await authz.allowed(role, action, ORDERS)
            assert await authz.is_tenant_admin(role, "acme")
            assert await authz.allowed_namespace(role, "acme", "sales")
        await authz.check(None, PRODUCE, ORDERS)

    run(go())


def test_a_refusal_reads_the_same_whether_the_topic_or_namespace_exists(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def refusal(role: str, action: Action, topic: str) -> str:
        with pytest.raises(AuthorizationDenied) as caught:
            await authz.check(role, action, parse_topic(topic))
        return str(caught.value)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_topic(astore, ORDERS, "carol", ["produce"])   # makes ORDERS "exist"
        here = await refusal("mallory", PRODUCE, "persistent://acme/sales/orders")
        gone = await refusal("mallory", PRODUCE, "persistent://acme/missing/orders")
        nowhere = await refusal("mallory", PRODUCE, "persistent://nobody/missing/orders")
        assert here == ("Client is not authorized to Produce "
                        "(role='mallory', topic='persistent://acme/sales/orders')")
        assert gone == here.replace("sales", "missing")
        assert nowhere == gone.replace("acme", "nobody")
        assert (await refusal("mallory", CONSUME, "persistent://acme/sales/orders")).startswith(
            "Client is not authorized to Consume")
        assert (await refusal("mallory", LOOKUP, "persistent://acme/sales/orders")).startswith(
            "Client is not authorized to Lookup")
        assert await astore.get("/admin/policies/acme/missing") is None   # no check creates anything
        assert await astore.get("/admin/policies/nobody") is None

    run(go())


def test_a_grant_is_seen_at_once_and_a_revoke_within_the_cache_ttl(astore: AsyncMetadataStore) -> None:
    authz = service(astore, authorization_recheck_interval_ms=100)   # cache TTL 50 ms

    async def go() -> None:
        await tenant_with_namespace(astore)
        assert not await authz.allowed("alice", PRODUCE, ORDERS)
        await permissions.grant_namespace(astore, "acme", "sales", "alice", ["produce"])
        assert await authz.allowed("alice", PRODUCE, ORDERS)        # a refusal is never from memory
        await permissions.revoke_namespace(astore, "acme", "sales", "alice")
        await asyncio.sleep(0.06)
        assert not await authz.allowed("alice", PRODUCE, ORDERS)

    run(go())


def test_grants_are_checked_and_kept_in_the_namespace_policies(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        await tenant_with_namespace(astore)
        with pytest.raises(NamespaceNotFound):
            await permissions.grant_namespace(astore, "acme", "missing", "alice", ["produce"])
        for actions in (["produce", "fly"], "produce", [], [1]):
            with pytest.raises(BadRequestBody):
                await permissions.grant_namespace(astore, "acme", "sales", "alice", actions)
        for role in ("", " ", "a/b", "x" * 1000, "tab\there"):
            with pytest.raises(BadRequestBody):
                await permissions.grant_namespace(astore, "acme", "sales", role, ["produce"])
        await permissions.grant_namespace(astore, "acme", "sales", "alice",
                                          ["produce", "consume", "functions", "sources", "sinks", "packages"])
        await permissions.grant_topic(astore, ORDERS, "carol", ["consume"])
        stored = json.loads((await astore.get("/admin/policies/acme/sales")).value)["auth_policies"]
        assert stored["namespace_auth"]["alice"] == ["consume", "functions", "packages", "produce", "sinks",
                                                     "sources"]
        assert stored["destination_auth"] == {"persistent://acme/sales/orders": {"carol": ["consume"]}}
        await permissions.revoke_topic(astore, ORDERS, "carol")
        await permissions.revoke_namespace(astore, "acme", "sales", "alice")
        stored = json.loads((await astore.get("/admin/policies/acme/sales")).value)["auth_policies"]
        assert stored["namespace_auth"] == {} and stored["destination_auth"] == {}

    run(go())


def test_subscription_permissions_and_a_create_body_s_auth_policies(astore: AsyncMetadataStore) -> None:
    authz = service(astore)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_namespace(astore, "acme", "sales", "bob", ["consume"])
        await permissions.grant_namespace(astore, "acme", "sales", "eve", ["consume"])
        await permissions.grant_subscription(astore, "acme", "sales", "billing", ["bob", "bob", "ann"])
        assert not await authz.allowed("eve", CONSUME, ORDERS, subscription="billing")
        await permissions.revoke_subscription(astore, "acme", "sales", "billing", "bob")
        await permissions.revoke_subscription(astore, "acme", "sales", "billing", "ann")
        assert await authz.allowed("eve", CONSUME, ORDERS, subscription="billing")   # an emptied list: open
        with pytest.raises(BadRequestBody):
            await permissions.grant_subscription(astore, "acme", "sales", "billing", [])
        body = {"namespace_auth": {"alice": ["produce"], "nobody": []},
                "destination_auth": {"acme/sales/orders": {"carol": ["consume"]}}}
        assert permissions.check_auth_policies(body) == {
            "namespace_auth": {"alice": ["produce"], "nobody": []},
            "destination_auth": {"persistent://acme/sales/orders": {"carol": ["consume"]}},
            "subscription_auth_roles": {}}
        for bad in ([], {"namespace_auth": {"alice": ["fly"]}}, {"namespace_auth": []},
                    {"destination_auth": {"persistent://acme/sales/orders-partition-1": {"carol": ["consume"]}}},
                    {"subscription_auth_roles": {"s": "bob"}}):
            with pytest.raises(BadRequestBody):
                permissions.check_auth_policies(bad)

    run(go())


def test_forget_drops_remembered_grants_at_once(astore: AsyncMetadataStore) -> None:
    clock = ManualClock()     # time moves only when told: the remembered grant cannot age meanwhile
    authz = AuthorizationService(load_config(env={}, authorization_enabled=True), astore, clock)

    async def go() -> None:
        await tenant_with_namespace(astore)
        await permissions.grant_namespace(astore, "acme", "sales", "alice", ["produce"])
        assert await authz.allowed("alice", PRODUCE, ORDERS)
        await permissions.revoke_namespace(astore, "acme", "sales", "alice")
        assert await authz.allowed("alice", PRODUCE, ORDERS)       # remembered (within the TTL)
        authz.forget("acme", "sales")                               # what the admin routes do on a change
        assert not await authz.allowed("alice", PRODUCE, ORDERS)
        # and without forget(), a remembered grant goes once the TTL (at most 1 s) is over
        await permissions.grant_namespace(astore, "acme", "sales", "alice", ["produce"])
        assert await authz.allowed("alice", PRODUCE, ORDERS)        # a refusal is never from memory
        await permissions.revoke_namespace(astore, "acme", "sales", "alice")
        clock.advance_s(0.9)
        assert await authz.allowed("alice", PRODUCE, ORDERS)        # still remembered
        clock.advance_s(0.1)
        assert not await authz.allowed("alice", PRODUCE, ORDERS)    # read again: revoked

    run(go())


def test_a_name_part_with_a_trailing_newline_is_no_topic_name() -> None:
    """Python's `$` matches before a final newline: "ta\\n" passed as a name part, reached the
    authorization check and the metadata store (MetadataError, HTTP 500) instead of InvalidTopicName,
    and a LOOKUP of "persistent://ta/ns/x\\n" was answered as a topic."""
    for name in ("persistent://acme/sales/orders\n", "persistent://acme\n/sales/orders",
                 "persistent://acme/sales\n/orders", "non-persistent://acme/sales/orders\n", "orders\n"):
        with pytest.raises(InvalidTopicName):
            parse_topic(name)
    with pytest.raises(InvalidTopicName):
        parse_namespace("acme/sales\n")
