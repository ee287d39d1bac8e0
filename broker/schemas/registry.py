"""The schema registry: a topic's schema versions in the metadata store (`common.schema_records`).

    registry = SchemaRegistry(service.astore, service.clock)
    version = await registry.put_if_absent(name, schema, strategy)   # IncompatibleSchema, InvalidSchemaData
    stored = await registry.get(name)                # the latest live version, or None
    stored = await registry.get(name, 3)             # that version (None if absent or deleted)

`put_if_absent` is Pulsar's putSchemaIfAbsent: a schema identical to a live version (type,
definition as parsed JSON for AVRO/JSON, properties) gets that version; otherwise it is
validated, checked against the live versions by the strategy (`broker.schemas.compatibility`)
and stored as the next version. Two
brokers racing for the same next version both `create` its key: one wins, the other reads again
and retries (at most _CREATE_ATTEMPTS_MAX times).

What must hold: a version key is created once and never rewritten; nothing is stored when a
schema is refused; a topic has at most SCHEMA_VERSIONS_MAX versions (deleted markers count).
"""

from __future__ import annotations

import json

from broker.schemas import compatibility, validation
from broker.schemas.compatibility import Strategy
from common.clock import Clock
from common.errors import AlreadyExists, IncompatibleSchema, SchemaError
from common.schema_records import (
    STRUCT_TYPES,
    SchemaData,
    StoredSchema,
    live,
    parse_listing,
    topic_prefix,
    version_path,
)
from common.topic_names import TopicName
from metadata.api import AsyncStore

SCHEMA_VERSIONS_MAX = 1000     # versions per topic, deleted markers included
_CREATE_ATTEMPTS_MAX = 10      # another broker took the next version: read again, at most this often


def _base_path(name: TopicName) -> str:
    return name.base.path


class SchemaRegistry:
    def __init__(self, astore: AsyncStore, clock: Clock) -> None:
        self.astore = astore
        self.clock = clock

    async def versions(self, name: TopicName) -> list[StoredSchema]:
        """Every stored version of the topic (deleted markers too), oldest first."""
        prefix = topic_prefix(_base_path(name))
        listing = await self.astore.list_prefix(prefix, limit=SCHEMA_VERSIONS_MAX + 1)
        return parse_listing(prefix, [(path, found.value) for path, found in listing])

    async def live(self, name: TopicName) -> list[StoredSchema]:
        return live(await self.versions(name))

    async def get(self, name: TopicName, version: int | None = None) -> StoredSchema | None:
        """The latest live version (None: the topic has no schema), or the given version (None if
        never stored or a deleted marker)."""
        versions = await self.versions(name)
        if version is None:
            current = live(versions)
            return current[-1] if current else None
        found = next((s for s in versions if s.version == version), None)
        return None if found is None or found.deleted else found

    async def find_version(self, name: TopicName, schema: SchemaData) -> int | None:
        """The live version identical to `schema`, newest first; None if there is none."""
        return _identical(await self.live(name), schema)

    async def check(self, name: TopicName, schema: SchemaData, strategy: Strategy) -> None:
        """Would `put_if_absent` accept `schema`? IncompatibleSchema / InvalidSchemaData if not."""
        validation.validate(schema)
        current = await self.live(name)
        if _identical(current, schema) is None:
            compatibility.check_new(current, schema, strategy)

    async def put_if_absent(self, name: TopicName, schema: SchemaData, strategy: Strategy,
                            *, auto_update: bool = True) -> int:
        """The version of `schema` on the topic, registering it if it is new and allowed."""
        validation.validate(schema)
        for _ in range(_CREATE_ATTEMPTS_MAX):
            versions = await self.versions(name)
            current = live(versions)
            found = _identical(current, schema)
            if found is not None:
                return found
            if not auto_update:
                raise IncompatibleSchema("Schema not found and schema auto updating is disabled.")
            compatibility.check_new(current, schema, strategy)
            if await self._append(name, versions, schema, deleted=False):
                return versions[-1].version + 1 if versions else 0
        raise IncompatibleSchema("the topic's schema changed concurrently too often", topic=str(name))

    async def delete(self, name: TopicName, *, force: bool = False) -> int | None:
        """Delete the topic's schema: a deleted marker as the next version (returned), or with
        `force` every stored version (None). None too when there is no live schema (Pulsar
        then answers version -1)."""
        for _ in range(_CREATE_ATTEMPTS_MAX):
            versions = await self.versions(name)
            if force:
                if versions:
                    await self.astore.delete_recursive(topic_prefix(_base_path(name)))
                return None
            if not live(versions):
                return None
            if await self._append(name, versions, SchemaData(versions[-1].schema.type, b""), deleted=True):
                return versions[-1].version + 1
        raise IncompatibleSchema("the topic's schema changed concurrently too often", topic=str(name))

    async def _append(self, name: TopicName, versions: list[StoredSchema], schema: SchemaData,
                      *, deleted: bool) -> bool:
        """Create the next version's key; False if another writer created it first."""
        version = versions[-1].version + 1 if versions else 0
        if version >= SCHEMA_VERSIONS_MAX:
            raise SchemaError("too many schema versions for one topic; delete the schema with force",
                                topic=str(name), versions_max=SCHEMA_VERSIONS_MAX)
        record = StoredSchema(version, schema, self.clock.wall_ms(), deleted)
        try:
            await self.astore.create(version_path(_base_path(name), version), record.to_json())
        except AlreadyExists:
            return False
        return True


def _canonical(schema: SchemaData) -> tuple[str, object, dict[str, str]]:
    """What makes two schemas the same: an AVRO/JSON definition as parsed JSON (whitespace and
    key order do not make a new version: the client sends it indented, an admin file may not)."""
    if schema.type in STRUCT_TYPES:
        try:
            return schema.type, json.loads(schema.data), schema.props
        except ValueError:
            pass
    return schema.type, schema.data, schema.props


def _identical(current: list[StoredSchema], schema: SchemaData) -> int | None:
    wanted = _canonical(schema)
    return next((s.version for s in reversed(current) if _canonical(s.schema) == wanted), None)


async def forget_topic(astore: AsyncStore, clock: Clock, name: TopicName) -> None:
    """A deleted topic takes its schemas with it (Pulsar deletes the schema storage with the
    topic); a partition's deletion leaves the partitioned topic's schemas alone."""
    if name.partition_index < 0:
        await SchemaRegistry(astore, clock).delete(name, force=True)
