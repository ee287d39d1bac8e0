"""Broker records in the metadata store: partitioned topics, namespace policies, the topic list.

Layout (every value is JSON):
- `/admin/partitioned-topics/<tenant>/<ns>/<topic>` = `{"partitions": N}` — PARTITIONED_METADATA
  answers N; absent means "not partitioned" (0).
  `/admin/partitioned-non-persistent-topics/<tenant>/<ns>/<topic>` the same for a
  `non-persistent://` topic (`broker.nonpersistent.topic`).
- `/admin/policies/<tenant>/<ns>` = `{"deduplicationEnabled": bool, "retention_policies":
  {"retentionTimeInMinutes": m, "retentionSizeInMB": s}, "message_ttl_in_seconds": n,
  "offload_threshold": bytes, "offload_threshold_in_seconds": s, "offload_deletion_lag_ms": ms}` —
  namespace policies; an absent field means the broker config's default applies (the offload
  fields: `broker.retention.offload`). The key IS the namespace: it exists from `namespaces create`
  (`broker.records.tenancy`) until the namespace is deleted, and setting a policy never creates it
  (NamespaceNotFound). `/admin/policies/<tenant>` is the tenant's TenantInfo (`broker.records.tenancy`).
- `/admin/topic-policies/<tenant>/<ns>/<topic>` = `{"deduplicationEnabled": bool,
  "retention_policies": {...}, "message_ttl_in_seconds": n, "offload_policies": {...}}` — topic
  policies; a field set here overrides the namespace's, which overrides the broker config. A
  partitioned topic's policies apply to every partition (looked up by the base name).
- `/topics/<tenant>/<ns>/<topic>` = `{"created_ms": t}` — every (partition) topic ever created,
  so a restarted broker and the admin API can list them without loading them.

Topic name parts are valid path segments by construction (`common.topic_names`).
What must hold: a partition count, once written, is in 1..broker_partitions_max and only grows.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from common import retry
from common.config import Config
from common.errors import AlreadyExists, BadVersion, InvalidArgument, NamespaceNotFound, NotFound, StrataError
from common.topic_names import PARTITIONED_ROOT, TOPICS_ROOT, TopicName
from cursor.retention import RetentionPolicy
from metadata.api import AsyncStore

POLICIES_ROOT = "/admin/policies"
TOPIC_POLICIES_ROOT = "/admin/topic-policies"
NON_PERSISTENT_PARTITIONED_ROOT = "/admin/partitioned-non-persistent-topics"   # as PARTITIONED_ROOT
DEDUP_KEY = "deduplicationEnabled"
RETENTION_KEY = "retention_policies"     # {"retentionTimeInMinutes": m, "retentionSizeInMB": s}
TTL_KEY = "message_ttl_in_seconds"       # int seconds, 0 = off

# A compare-and-set of a policy or partition-count key lost to another writer: read again, at
# once, ten times in all, then InvalidArgument.
_POLICY_CAS_RETRY = retry.Retry("broker.policy_cas", retry_on=(), wait=retry.no_wait(), attempts_max=10)


def namespace_path(tenant: str, namespace: str) -> str:
    return f"{POLICIES_ROOT}/{tenant}/{namespace}"


def _partitioned_path(name: TopicName) -> str:
    if not name.persistent:   # Pulsar keeps the domains apart: non-persistent://t/ns/x is another topic
        return f"{NON_PERSISTENT_PARTITIONED_ROOT}/{name.path}"
    return f"{PARTITIONED_ROOT}/{name.path}"


async def partition_count(astore: AsyncStore, name: TopicName) -> int:
    """Partitions of `name` (0 = not partitioned)."""
    found = await astore.get(_partitioned_path(name.base if name.partition_index >= 0 else name))
    if found is None or name.partition_index >= 0:
        return 0
    return int(json.loads(found.value)["partitions"])


async def create_partitioned(astore: AsyncStore, name: TopicName, partitions: int, partitions_max: int) -> None:
    """Record a partitioned topic; AlreadyExists if it is already partitioned, NamespaceNotFound
    if its namespace does not exist."""
    if not 1 <= partitions <= partitions_max:
        raise InvalidArgument("partition count out of range", partitions=partitions, max=partitions_max)
    if name.partition_index >= 0:
        raise InvalidArgument("a partition cannot itself be partitioned", topic=str(name))
    if await astore.get(namespace_path(name.tenant, name.namespace)) is None:
        raise NamespaceNotFound(name.tenant, name.namespace)
    await astore.create(_partitioned_path(name), json.dumps({"partitions": partitions}).encode())


async def update_partitioned(astore: AsyncStore, name: TopicName, partitions: int, partitions_max: int) -> int:
    """Raise the partition count of a partitioned topic (never lower it); returns the old count.
    NotFound if it is not partitioned; AlreadyExists (a conflict) if `partitions` is not larger."""
    if not 1 <= partitions <= partitions_max:
        raise InvalidArgument("partition count out of range", partitions=partitions, max=partitions_max)
    path = _partitioned_path(name)

    async def attempt() -> int:
        found = await astore.get(path)
        if found is None:
            raise NotFound("partitioned topic not found", topic=str(name))
        old = int(json.loads(found.value)["partitions"])
        if partitions <= old:
            raise AlreadyExists("the new partition count must be larger than the current one",
                                topic=str(name), current=old, asked=partitions)
        try:
            await astore.put(path, json.dumps({"partitions": partitions}).encode(),
                             expected_version=found.version)
        except (BadVersion, NotFound) as exc:  # another writer raced us: read again
            raise retry.TryAgain(str(exc)) from exc
        return old

    return await _POLICY_CAS_RETRY.call_async(attempt, give_up=lambda _: InvalidArgument(
        "partition count changed concurrently too often", topic=str(name)))


async def delete_partitioned(astore: AsyncStore, name: TopicName) -> None:
    await astore.delete(_partitioned_path(name))


async def partitioned_topics(astore: AsyncStore, tenant: str, namespace: str) -> list[str]:
    """Local names of the namespace's partitioned topics; NamespaceNotFound if it does not exist."""
    if await astore.get(namespace_path(tenant, namespace)) is None:
        raise NamespaceNotFound(tenant, namespace)
    return await astore.children(f"{PARTITIONED_ROOT}/{tenant}/{namespace}")


async def namespace_policies(astore: AsyncStore, tenant: str, namespace: str) -> dict:
    """The namespace's stored policy fields ({} if it has none, or does not exist)."""
    found = await astore.get(namespace_path(tenant, namespace))
    return json.loads(found.value) if found is not None else {}


async def existing_namespace_policies(astore: AsyncStore, tenant: str, namespace: str) -> dict:
    """The namespace's stored policy fields; NamespaceNotFound (404) if it does not exist."""
    found = await astore.get(namespace_path(tenant, namespace))
    if found is None:
        raise NamespaceNotFound(tenant, namespace)
    return json.loads(found.value)


async def set_namespace_policy(astore: AsyncStore, tenant: str, namespace: str, key: str, value: object) -> None:
    """Set (None: remove) one policy field with compare-and-set, retrying if another writer
    raced us; NamespaceNotFound if the namespace does not exist (it is not created)."""
    await set_namespace_policies(astore, tenant, namespace, {key: value})


async def set_namespace_policies(astore: AsyncStore, tenant: str, namespace: str, fields: dict) -> None:
    """Set (None: remove) several policy fields in one compare-and-set: all or none;
    NamespaceNotFound if the namespace does not exist."""
    await _set_fields(astore, namespace_path(tenant, namespace), fields,
                      missing=lambda: NamespaceNotFound(tenant, namespace))


async def topic_policies(astore: AsyncStore, name: TopicName) -> dict:
    found = await astore.get(f"{TOPIC_POLICIES_ROOT}/{name.base.path}")
    return json.loads(found.value) if found is not None else {}


async def set_topic_policy(astore: AsyncStore, name: TopicName, key: str, value: object) -> None:
    """Set (or with value None, remove) one topic policy field of `name` (its base topic)."""
    await _set_fields(astore, f"{TOPIC_POLICIES_ROOT}/{name.base.path}", {key: value})


async def set_topic_policies(astore: AsyncStore, name: TopicName, fields: dict) -> None:
    """Set (None: remove) several topic policy fields of `name` (its base topic) in one
    compare-and-set: all or none."""
    await _set_fields(astore, f"{TOPIC_POLICIES_ROOT}/{name.base.path}", fields)


async def dedup_enabled(astore: AsyncStore, name: TopicName) -> bool:
    """Effective dedup switch: the topic's policy if set, else the namespace's, else off."""
    topic_level = (await topic_policies(astore, name)).get(DEDUP_KEY)
    if topic_level is not None:
        return bool(topic_level)
    return bool((await namespace_policies(astore, name.tenant, name.namespace)).get(DEDUP_KEY, False))


def retention_of(ns_policies: dict, config: Config, topic_policies: dict | None = None) -> RetentionPolicy:
    """Effective retention: the topic's policy if set, else the namespace's, else the config's."""
    found = (topic_policies or {}).get(RETENTION_KEY)
    if found is None:
        found = ns_policies.get(RETENTION_KEY)
    if found is None:
        return RetentionPolicy(config.retention_time_minutes, config.retention_size_mb)
    return RetentionPolicy(int(found["retentionTimeInMinutes"]), int(found["retentionSizeInMB"]))


def ttl_seconds_of(ns_policies: dict, config: Config, topic_policies: dict | None = None) -> int:
    """Effective message TTL in seconds (0 = off): the topic's, else the namespace's, else the
    config's."""
    found = (topic_policies or {}).get(TTL_KEY)
    if found is None:
        found = ns_policies.get(TTL_KEY)
    return int(config.ttl_seconds if found is None else found)


async def namespace_topic_policies(astore: AsyncStore, tenant: str, namespace: str) -> dict[str, dict]:
    """Every topic-level policy record of a namespace, by base topic local name (one read)."""
    prefix = f"{TOPIC_POLICIES_ROOT}/{tenant}/{namespace}"
    return {path.rsplit("/", 1)[1]: json.loads(found.value)
            for path, found in await astore.list_prefix(prefix) if path != prefix}


async def delete_topic_policies(astore: AsyncStore, name: TopicName) -> None:
    try:
        await astore.delete(f"{TOPIC_POLICIES_ROOT}/{name.base.path}")
    except NotFound:
        pass


async def _set_fields(astore: AsyncStore, path: str, updates: dict,
                      missing: Callable[[], StrataError] | None = None) -> None:
    """Apply `updates` to the JSON object at `path` by compare-and-set. An absent key is created,
    unless `missing` is given: then `missing()` is raised."""
    async def attempt() -> None:
        found = await astore.get(path)
        if found is None and missing is not None:
            raise missing()
        fields = json.loads(found.value) if found is not None else {}
        for key, value in updates.items():
            if value is None:
                fields.pop(key, None)
            else:
                fields[key] = value
        data = json.dumps(fields).encode()
        try:
            if found is None:
                await astore.create(path, data)
            else:
                await astore.put(path, data, expected_version=found.version)
        except (AlreadyExists, NotFound, BadVersion) as exc:  # another writer raced us: read again
            raise retry.TryAgain(str(exc)) from exc

    await _POLICY_CAS_RETRY.call_async(attempt, give_up=lambda _: InvalidArgument(
        "policies changed concurrently too often", path=path))


async def register_topic(astore: AsyncStore, name: TopicName, now_ms: int) -> None:
    """Record the topic in the topic list (once: a read first, since every metadata write takes
    the cluster's single write lock and a takeover loads many topics at once)."""
    if await astore.get(f"{TOPICS_ROOT}/{name.path}") is not None:
        return
    try:
        await astore.create(f"{TOPICS_ROOT}/{name.path}", json.dumps({"created_ms": now_ms}).encode())
    except AlreadyExists:
        pass


async def register_partitions(astore: AsyncStore, name: TopicName, first: int, end: int, now_ms: int) -> None:
    """List partitions first..end-1 of the partitioned topic `name` as topics at once (as Pulsar
    creates them up front), so listings show them before anything uses them; their storage is
    made on first use."""
    for i in range(first, end):
        await register_topic(astore, name.partition(i), now_ms)


async def unregister_topic(astore: AsyncStore, name: TopicName) -> None:
    try:
        await astore.delete(f"{TOPICS_ROOT}/{name.path}")
    except NotFound:
        pass


async def topics_of_namespace(astore: AsyncStore, tenant: str, namespace: str) -> list[TopicName]:
    locals_ = await astore.children(f"{TOPICS_ROOT}/{tenant}/{namespace}")
    return [TopicName("persistent", tenant, namespace, local) for local in locals_]
