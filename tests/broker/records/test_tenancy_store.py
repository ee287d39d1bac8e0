"""broker.records.tenancy over a real SQLite metadata store: the defaults created once however many brokers
start at once, namespaces used before they were entities adopted, nothing created by use
(policies, bundles), and the existence cache dropping a namespace when the store's watch reports
its deletion or its `deleted` mark.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.records import bundles, policies, tenancy
from common.errors import NotEmpty
from metadata import open_store
from metadata.aio import AsyncMetadataStore
from tests.support.waiting import wait_until

CLUSTER = "standalone"


@pytest.fixture
def astore(tmp_path: Path) -> Iterator[AsyncMetadataStore]:
    store = open_store(f"sqlite:///{tmp_path}/meta.db")
    yield AsyncMetadataStore(store)
    store.close()


def run(coro):
    return asyncio.run(coro)


def test_defaults_are_created_once_by_brokers_starting_together(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        await asyncio.gather(*(tenancy.ensure_defaults(astore, CLUSTER, 4) for _ in range(4)))
        assert await tenancy.list_tenants(astore) == ["public"]
        assert await tenancy.get_tenant(astore, "public") == {"adminRoles": [], "allowedClusters": [CLUSTER]}
        assert await tenancy.list_namespaces(astore, "public") == ["public/default"]
        found = await bundles.load_bundles(astore, "public", "default", 99)
        assert len(found.ranges) == 4
        assert (await astore.get(policies.namespace_path("public", "default"))).version == 1  # never rewritten

    run(go())


def test_namespaces_used_before_they_were_entities_are_adopted(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        await astore.create("/topics/acme/legacy/orders", json.dumps({"created_ms": 1}).encode())
        await bundles.create_bundles(astore, "old", "split", 2)
        await tenancy.ensure_defaults(astore, CLUSTER, 4)
        assert await tenancy.list_tenants(astore) == ["acme", "old", "public"]
        assert await tenancy.namespace_exists(astore, "acme", "legacy")
        assert len((await bundles.load_bundles(astore, "acme", "legacy", 4)).ranges) == 4
        assert len((await bundles.load_bundles(astore, "old", "split", 4)).ranges) == 2   # kept as they were

    run(go())


def test_nothing_is_created_by_use(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        with pytest.raises(policies.NamespaceNotFound) as caught:
            await policies.set_namespace_policy(astore, "t", "ns", policies.TTL_KEY, 5)
        assert str(caught.value) == "Policies not found for t/ns namespace"
        with pytest.raises(policies.NamespaceNotFound):
            await bundles.load_bundles(astore, "t", "ns", 4)
        with pytest.raises(policies.NamespaceNotFound):
            await policies.existing_namespace_policies(astore, "t", "ns")
        assert await astore.list_prefix("/admin") == []

    run(go())


def test_tenant_with_namespaces_is_not_deleted(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        await tenancy.create_tenant(astore, "t", {"adminRoles": [], "allowedClusters": [CLUSTER]})
        await tenancy.create_namespace(astore, "t", "ns", {}, 2)
        with pytest.raises(NotEmpty):
            await tenancy.delete_tenant(astore, "t")
        with pytest.raises(tenancy.TenantNotFound):
            await tenancy.create_namespace(astore, "nobody", "ns", {}, 2)

    run(go())


def test_existence_cache_follows_the_watch(astore: AsyncMetadataStore) -> None:
    async def go() -> None:
        await tenancy.create_tenant(astore, "t", {"adminRoles": [], "allowedClusters": [CLUSTER]})
        await tenancy.create_namespace(astore, "t", "ns", {}, 2)
        cache = tenancy.NamespaceCache(astore)
        await cache.start()
        try:
            await cache.require_live("t", "ns")
            assert ("t", "ns") in cache._known          # remembered: no read next time
            await policies.set_namespace_policy(astore, "t", "ns", tenancy.DELETED_KEY, True)
            await asyncio.to_thread(wait_until, lambda: ("t", "ns") not in cache._known, 5, "the watch")
            with pytest.raises(policies.NamespaceNotFound):
                await cache.require_live("t", "ns")     # being deleted: clients are refused
            await cache.require("t", "ns")               # but it still exists for the deletion
            await astore.delete(policies.namespace_path("t", "ns"))
            await asyncio.to_thread(wait_until, lambda: ("t", "ns") not in cache._known, 5, "the watch")
            with pytest.raises(policies.NamespaceNotFound):
                await cache.require("t", "ns")
            with pytest.raises(policies.NamespaceNotFound):
                await cache.require("t", "never")
            assert ("t", "never") not in cache._known   # a miss is never remembered
        finally:
            cache.stop()

    run(go())
