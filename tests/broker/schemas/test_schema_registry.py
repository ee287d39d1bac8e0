"""broker.schemas.registry over a real SQLite metadata store: versions from 0, an identical schema
gets its version back, a refused schema stores nothing, a soft delete ends the live history (and
numbering goes on), a forced delete starts again at 0, auto update off, partitions share the base
topic's schemas, and two writers racing for the next version both end with distinct versions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.schemas.compatibility import Strategy
from broker.schemas.registry import SchemaRegistry
from common.clock import ManualClock
from common.errors import IncompatibleSchema, InvalidSchemaData
from common.schema_records import SchemaData
from common.topic_names import parse_topic
from metadata import open_store
from metadata.aio import AsyncMetadataStore

TOPIC = parse_topic("persistent://public/default/users")


def record(*fields: dict) -> SchemaData:
    return SchemaData("AVRO", json.dumps({"type": "record", "name": "User", "fields": list(fields)}).encode())


V1 = record({"name": "name", "type": "string"})
V2 = record({"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0})
BAD = record({"name": "name", "type": "int"})


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SchemaRegistry]:
    store = open_store(f"sqlite:///{tmp_path}/meta.db")
    yield SchemaRegistry(AsyncMetadataStore(store), ManualClock())
    store.close()


def run(coro):
    return asyncio.run(coro)


def test_versions_count_from_zero_and_identical_schemas_reuse_theirs(registry: SchemaRegistry) -> None:
    async def go() -> None:
        assert await registry.get(TOPIC) is None
        assert await registry.put_if_absent(TOPIC, V1, Strategy.FULL) == 0
        assert await registry.put_if_absent(TOPIC, V1, Strategy.FULL) == 0
        assert await registry.put_if_absent(TOPIC, V2, Strategy.FULL) == 1
        assert await registry.put_if_absent(TOPIC, V1, Strategy.FULL) == 0     # still live: its version
        latest = await registry.get(TOPIC)
        assert latest is not None and latest.version == 1 and latest.schema == V2
        first = await registry.get(TOPIC, 0)
        assert first is not None and first.schema == V1 and first.timestamp_ms == ManualClock().wall_ms()
        assert await registry.find_version(TOPIC, V2) == 1
        assert await registry.find_version(TOPIC, BAD) is None
    run(go())


def test_a_refused_schema_changes_nothing(registry: SchemaRegistry) -> None:
    async def go() -> None:
        await registry.put_if_absent(TOPIC, V1, Strategy.FULL)
        with pytest.raises(IncompatibleSchema, match="FULL"):
            await registry.put_if_absent(TOPIC, BAD, Strategy.FULL)
        with pytest.raises(InvalidSchemaData):
            await registry.put_if_absent(TOPIC, SchemaData("AVRO", b"{oops"), Strategy.ALWAYS_COMPATIBLE)
        assert [s.version for s in await registry.versions(TOPIC)] == [0]
        with pytest.raises(IncompatibleSchema, match="auto updating is disabled"):
            await registry.put_if_absent(TOPIC, V2, Strategy.FULL, auto_update=False)
        assert await registry.put_if_absent(TOPIC, V1, Strategy.FULL, auto_update=False) == 0
        assert await registry.put_if_absent(TOPIC, BAD, Strategy.ALWAYS_COMPATIBLE) == 1
    run(go())


def test_soft_delete_ends_the_history_and_force_starts_again(registry: SchemaRegistry) -> None:
    async def go() -> None:
        await registry.put_if_absent(TOPIC, V1, Strategy.FULL)
        assert await registry.delete(TOPIC) == 1
        assert await registry.get(TOPIC) is None and await registry.get(TOPIC, 1) is None
        assert await registry.delete(TOPIC) is None                     # nothing live: Pulsar's -1
        assert await registry.put_if_absent(TOPIC, BAD, Strategy.FULL) == 2   # no history to clash with
        assert [s.version for s in await registry.live(TOPIC)] == [2]
        assert await registry.delete(TOPIC, force=True) is None
        assert await registry.versions(TOPIC) == []
        assert await registry.put_if_absent(TOPIC, V1, Strategy.FULL) == 0
    run(go())


def test_partitions_share_the_base_topics_schemas(registry: SchemaRegistry) -> None:
    async def go() -> None:
        assert await registry.put_if_absent(TOPIC.partition(3), V1, Strategy.FULL) == 0
        found = await registry.get(TOPIC)
        assert found is not None and found.schema == V1
        other = parse_topic("persistent://public/default/users2")   # a name with the same prefix
        assert await registry.get(other) is None
    run(go())


def test_racing_writers_get_distinct_versions(registry: SchemaRegistry) -> None:
    async def go() -> None:
        schemas = [record({"name": "name", "type": "string"}, {"name": f"f{i}", "type": "int", "default": i})
                   for i in range(4)]
        versions = await asyncio.gather(*(registry.put_if_absent(TOPIC, s, Strategy.ALWAYS_COMPATIBLE)
                                          for s in schemas))
        assert sorted(versions) == [0, 1, 2, 3]
        stored = {s.version: s.schema for s in await registry.versions(TOPIC)}
        assert [stored[v] for v in versions] == schemas
    run(go())
