"""Broker records in the metadata store: partitioned topics, namespace policies, the topic list.

Layout (every value is JSON):
- `/admin/partitioned-topics/<tenant>/<ns>/<topic>` = `{"partitions": N}` — PARTITIONED_METADATA
  answers N; absent means "not partitioned" (0).
- `/admin/policies/<tenant>/<ns>` = `{"deduplicationEnabled": bool, ...}` — namespace policies.
- `/topics/<tenant>/<ns>/<topic>` = `{"created_ms": t}` — every (partition) topic ever created,
  so a restarted broker and the admin API can list them without loading them.

Topic name parts are valid path segments by construction (`broker.names`).
What must hold: a partition count, once written, is in 1..broker_partitions_max.
"""

from __future__ import annotations

import json
from typing import Any

from broker.names import TopicName
from common.errors import AlreadyExists, BadVersion, InvalidArgument, NotFound

PARTITIONED_ROOT = "/admin/partitioned-topics"
POLICIES_ROOT = "/admin/policies"
TOPICS_ROOT = "/topics"


def _partitioned_path(name: TopicName) -> str:
    return f"{PARTITIONED_ROOT}/{name.path}"


async def partition_count(astore: Any, name: TopicName) -> int:
    """Partitions of `name` (0 = not partitioned)."""
    found = await astore.get(_partitioned_path(name.base if name.partition_index >= 0 else name))
    if found is None or name.partition_index >= 0:
        return 0
    return int(json.loads(found.value)["partitions"])


async def create_partitioned(astore: Any, name: TopicName, partitions: int, partitions_max: int) -> None:
    """Record a partitioned topic; AlreadyExists if it is already partitioned."""
    if not 1 <= partitions <= partitions_max:
        raise InvalidArgument("partition count out of range", partitions=partitions, max=partitions_max)
    if name.partition_index >= 0:
        raise InvalidArgument("a partition cannot itself be partitioned", topic=str(name))
    await astore.create(_partitioned_path(name), json.dumps({"partitions": partitions}).encode())


async def delete_partitioned(astore: Any, name: TopicName) -> None:
    await astore.delete(_partitioned_path(name))


async def partitioned_topics(astore: Any, tenant: str, namespace: str) -> list[str]:
    return await astore.children(f"{PARTITIONED_ROOT}/{tenant}/{namespace}")


async def namespace_policies(astore: Any, tenant: str, namespace: str) -> dict:
    found = await astore.get(f"{POLICIES_ROOT}/{tenant}/{namespace}")
    return json.loads(found.value) if found is not None else {}


async def set_namespace_policy(astore: Any, tenant: str, namespace: str, key: str, value: object) -> None:
    """Set one policy field with compare-and-set, retrying if another writer raced us."""
    path = f"{POLICIES_ROOT}/{tenant}/{namespace}"
    for _ in range(10):
        found = await astore.get(path)
        policies = json.loads(found.value) if found is not None else {}
        policies[key] = value
        data = json.dumps(policies).encode()
        try:
            if found is None:
                await astore.create(path, data)
            else:
                await astore.put(path, data, expected_version=found.version)
            return
        except (AlreadyExists, NotFound, BadVersion):
            continue  # another writer raced us: read again
    raise InvalidArgument("namespace policies changed concurrently too often", namespace=f"{tenant}/{namespace}")


async def register_topic(astore: Any, name: TopicName, now_ms: int) -> None:
    try:
        await astore.create(f"{TOPICS_ROOT}/{name.path}", json.dumps({"created_ms": now_ms}).encode())
    except AlreadyExists:
        pass


async def unregister_topic(astore: Any, name: TopicName) -> None:
    try:
        await astore.delete(f"{TOPICS_ROOT}/{name.path}")
    except NotFound:
        pass


async def topics_of_namespace(astore: Any, tenant: str, namespace: str) -> list[TopicName]:
    locals_ = await astore.children(f"{TOPICS_ROOT}/{tenant}/{namespace}")
    return [TopicName("persistent", tenant, namespace, local) for local in locals_]
