"""The schema registry over the admin API (Pulsar's SchemasResource), and the schema policies.

Schemas of a topic (`{topic}` a local name; a partitioned topic's partitions share its schemas):
- `GET /admin/v2/schemas/{t}/{ns}/{topic}/schema` → GetSchemaResponse `{"version", "type",
  "timestamp", "data", "properties"}` of the latest version; 404 "Schema not found" (never any),
  "Schema is deleted" (the latest version is a delete marker).
- `GET .../schema/{version}` → that version; 404 "Schema not found" / "Schema is deleted".
- `GET .../schemas` → `{"getSchemaResponses": [...]}`, the live versions, oldest first.
- `POST .../schema` PostSchemaPayload `{"type": "AVRO", "schema": "<definition>", "properties":
  {}}` → 200 `{"version": {"version": n}}`; 409 incompatible (the strategy's reason), 422 a
  malformed definition, 400 an unknown type or a body that is not a PostSchemaPayload, 406 a
  BYTES schema (Pulsar: "Do not upload a BYTES schema, because it's the default schema type"). A
  KEY_VALUE `schema` is `{"key": <schema>, "value": <schema>}`, each part's type in the
  properties (`key.schema.type`, `value.schema.type`), as Pulsar's REST form.
- `DELETE .../schema[?force=true]` → `{"version": n}` of the deleted marker (-1: nothing to
  delete; force removes every version, and numbering starts again).
- `POST .../compatibility` PostSchemaPayload → Pulsar's IsCompatibilityResponse `{"compatibility":
  bool, "schemaCompatibilityStrategy": "FULL"}` (Jackson names the Java field `isCompatibility`
  "compatibility"; 422 / 400 as POST).
- `POST .../version` PostSchemaPayload → `{"version": n}` of the identical live version; 404 if none.

Policies (stored by `broker.schemas.policy`):
- `GET|PUT /admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy` (a JSON string; GET
  answers the effective one, FULL by default; PUT "UNDEFINED" unsets);
- `GET|POST .../isAllowAutoUpdateSchema`, `GET|POST .../schemaValidationEnforced` (true/false);
- `GET|PUT|DELETE /admin/v2/persistent/{t}/{ns}/{topic}/schemaCompatibilityStrategy` (GET
  answers null when unset, or with `?applied=true` the effective strategy).
A namespace that does not exist is a 404 for all of them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aiohttp import web

from broker.admin.http import Refused, body_bool, body_json, flag, namespace_of, topic_of
from broker.admin.lookup import TOPIC_ROUTE
from broker.records import policies
from broker.schemas import policy as schema_policy
from broker.schemas import validation
from broker.schemas.compatibility import UNDEFINED
from broker.schemas.registry import SchemaRegistry
from common.errors import (
    BadRequestBody,
    IncompatibleSchema,
    InvalidSchemaData,
    NotFound,
    SchemaError,
    UnknownSchemaType,
)
from common.schema_records import SchemaData, StoredSchema
from common.topic_names import TopicName, parse_topic

if TYPE_CHECKING:
    from broker.service import BrokerService

SCHEMA_ROUTE = "/admin/v2/schemas/{tenant}/{ns}/{topic}"
NS_ROUTE = "/admin/v2/namespaces/{tenant}/{ns}"


def register(app: web.Application, service: BrokerService) -> None:
    r = _SchemaRoutes(service)
    app.router.add_get(SCHEMA_ROUTE + "/schema", r.get_latest)
    app.router.add_get(SCHEMA_ROUTE + "/schema/{version}", r.get_version)
    app.router.add_get(SCHEMA_ROUTE + "/schemas", r.get_all)
    app.router.add_post(SCHEMA_ROUTE + "/schema", r.post)
    app.router.add_delete(SCHEMA_ROUTE + "/schema", r.delete)
    app.router.add_post(SCHEMA_ROUTE + "/compatibility", r.compatibility)
    app.router.add_post(SCHEMA_ROUTE + "/version", r.version_of)
    p = _PolicyRoutes(service)
    app.router.add_get(NS_ROUTE + "/schemaCompatibilityStrategy", p.get_ns_strategy)
    app.router.add_put(NS_ROUTE + "/schemaCompatibilityStrategy", p.set_ns_strategy)
    for suffix, key in (("/isAllowAutoUpdateSchema", schema_policy.NS_AUTO_UPDATE_KEY),
                        ("/schemaValidationEnforced", schema_policy.NS_VALIDATION_KEY)):
        app.router.add_get(NS_ROUTE + suffix, p.ns_flag_getter(key))
        app.router.add_post(NS_ROUTE + suffix, p.ns_flag_setter(key, suffix[1:]))
    app.router.add_get(TOPIC_ROUTE + "/schemaCompatibilityStrategy", p.get_topic_strategy)
    app.router.add_put(TOPIC_ROUTE + "/schemaCompatibilityStrategy", p.set_topic_strategy)
    app.router.add_delete(TOPIC_ROUTE + "/schemaCompatibilityStrategy", p.remove_topic_strategy)


def schema_response(stored: StoredSchema) -> dict:
    """Pulsar's GetSchemaResponse JSON (a KEY_VALUE definition as `{"key": ..., "value": ...}`)."""
    data = stored.schema.data.decode("utf-8", errors="replace")
    if stored.schema.type == "KEY_VALUE" and not stored.deleted:
        key, value = validation.key_value_parts(stored.schema)
        data = json.dumps({"key": _json_or_text(key.data), "value": _json_or_text(value.data)})
    return {"version": stored.version, "type": stored.schema.type, "timestamp": stored.timestamp_ms,
            "data": data, "properties": stored.schema.props}


def _json_or_text(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def _key_value_data(definition: str) -> bytes:
    """Pulsar's REST form of a KEY_VALUE definition, `{"key": <schema>, "value": <schema>}`, in
    the stored binary form (InvalidSchemaData, 422, if it is not that)."""
    try:
        doc = json.loads(definition)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or "key" not in doc or "value" not in doc:
        raise InvalidSchemaData('Invalid KeyValue schema: expected {"key": ..., "value": ...}')
    parts = [b"" if doc[k] in (None, "") else (doc[k] if isinstance(doc[k], str) else json.dumps(doc[k])).encode()
             for k in ("key", "value")]
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def schema_of_payload(body: object) -> SchemaData:
    """A PostSchemaPayload `{"type", "schema", "properties"}` as SchemaData; 400 if it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        raise BadRequestBody('a schema payload is {"type": "AVRO", "schema": "...", "properties": {}}')
    definition = body.get("schema") or ""
    props = body.get("properties") or {}
    if not isinstance(definition, str) or not isinstance(props, dict):
        raise BadRequestBody("schema must be a string and properties an object of strings")
    try:
        data = _key_value_data(definition) if body["type"] == "KEY_VALUE" else definition.encode()
    except InvalidSchemaData as exc:
        raise _refusal(exc) from None
    return SchemaData(body["type"], data, {str(k): str(v) for k, v in props.items()})


def _schema_topic(request: web.Request) -> TopicName:
    m = request.match_info
    return parse_topic(f"persistent://{m['tenant']}/{m['ns']}/{m['topic']}")


def _refusal(exc: Exception) -> Refused:
    if isinstance(exc, UnknownSchemaType):
        return Refused(400, str(exc))
    if isinstance(exc, InvalidSchemaData):
        return Refused(422, str(exc))
    return Refused(409, str(exc))


class _SchemaRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self._registry: SchemaRegistry | None = None

    @property
    def registry(self) -> SchemaRegistry:
        """Made on first use: building the routes must not need a running service."""
        if self._registry is None:
            self._registry = SchemaRegistry(self.service.astore, self.service.clock)
        return self._registry

    async def _topic(self, request: web.Request) -> TopicName:
        """The route's topic; NamespaceNotFound (404) unless its namespace exists."""
        name = _schema_topic(request)
        await policies.existing_namespace_policies(self.service.astore, name.tenant, name.namespace)
        return name

    async def get_latest(self, request: web.Request) -> web.Response:
        versions = await self.registry.versions(await self._topic(request))
        if not versions:
            raise NotFound("Schema not found")
        if versions[-1].deleted:
            raise NotFound("Schema is deleted")
        return web.json_response(schema_response(versions[-1]))

    async def get_version(self, request: web.Request) -> web.Response:
        name = await self._topic(request)
        try:
            version = int(request.match_info["version"])
        except ValueError:
            raise BadRequestBody("a schema version is an integer", got=request.match_info["version"]) from None
        found = next((s for s in await self.registry.versions(name) if s.version == version), None)
        if found is None:
            raise NotFound("Schema not found")
        if found.deleted:
            raise NotFound("Schema is deleted")
        return web.json_response(schema_response(found))

    async def get_all(self, request: web.Request) -> web.Response:
        current = await self.registry.live(await self._topic(request))
        return web.json_response({"getSchemaResponses": [schema_response(s) for s in current]})

    async def post(self, request: web.Request) -> web.Response:
        name = await self._topic(request)
        schema = schema_of_payload(await body_json(request))
        if schema.type == "BYTES":
            raise Refused(406, "Do not upload a BYTES schema, because it's the default schema type")
        strategy = (await schema_policy.policy_of(self.service.astore, name)).strategy
        try:
            version = await self.registry.put_if_absent(name, schema, strategy)
        except SchemaError as exc:      # incompatible (409), malformed (422), unknown type (400)
            raise _refusal(exc) from None
        return web.json_response({"version": {"version": version}})

    async def delete(self, request: web.Request) -> web.Response:
        version = await self.registry.delete(await self._topic(request), force=flag(request, "force"))
        return web.json_response({"version": -1 if version is None else version})

    async def compatibility(self, request: web.Request) -> web.Response:
        name = await self._topic(request)
        schema = schema_of_payload(await body_json(request))
        strategy = (await schema_policy.policy_of(self.service.astore, name)).strategy
        try:
            await self.registry.check(name, schema, strategy)
            ok = True
        except IncompatibleSchema:
            ok = False
        except (UnknownSchemaType, InvalidSchemaData) as exc:
            raise _refusal(exc) from None
        return web.json_response({"compatibility": ok, "schemaCompatibilityStrategy": strategy.value})

    async def version_of(self, request: web.Request) -> web.Response:
        name = await self._topic(request)
        version = await self.registry.find_version(name, schema_of_payload(await body_json(request)))
        if version is None:
            raise NotFound("Schema not found")
        return web.json_response({"version": version})


class _PolicyRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def get_ns_strategy(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        stored = await policies.existing_namespace_policies(self.service.astore, tenant, ns)
        return web.json_response(schema_policy.strategy_of(stored, {}).value)

    async def set_ns_strategy(self, request: web.Request) -> web.Response:
        tenant, ns = namespace_of(request)
        value = schema_policy.parse_strategy(await body_json(request), allow_undefined=True)
        await policies.set_namespace_policy(self.service.astore, tenant, ns, schema_policy.NS_STRATEGY_KEY,
                                            None if value == UNDEFINED else value)
        return web.Response(status=204)

    def ns_flag_getter(self, key: str):
        async def get(request: web.Request) -> web.Response:
            tenant, ns = namespace_of(request)
            await policies.existing_namespace_policies(self.service.astore, tenant, ns)
            name = TopicName("persistent", tenant, ns, "-")
            effective = await schema_policy.policy_of(self.service.astore, name)
            value = effective.auto_update if key == schema_policy.NS_AUTO_UPDATE_KEY else effective.validation_enforced
            return web.json_response(value)
        return get

    def ns_flag_setter(self, key: str, what: str):
        async def set_(request: web.Request) -> web.Response:
            tenant, ns = namespace_of(request)
            value = await body_bool(request, what)
            await policies.set_namespace_policy(self.service.astore, tenant, ns, key, value)
            return web.Response(status=204)
        return set_

    async def get_topic_strategy(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        stored = await policies.topic_policies(self.service.astore, name)
        if flag(request, "applied"):
            ns = await policies.existing_namespace_policies(self.service.astore, name.tenant, name.namespace)
            return web.json_response(schema_policy.strategy_of(ns, stored).value)
        return web.json_response(stored.get(schema_policy.TOPIC_STRATEGY_KEY))

    async def set_topic_strategy(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        await policies.existing_namespace_policies(self.service.astore, name.tenant, name.namespace)
        value = schema_policy.parse_strategy(await body_json(request), allow_undefined=True)
        await policies.set_topic_policy(self.service.astore, name, schema_policy.TOPIC_STRATEGY_KEY,
                                        None if value == UNDEFINED else value)
        return web.Response(status=204)

    async def remove_topic_strategy(self, request: web.Request) -> web.Response:
        name = topic_of(request)
        await policies.set_topic_policy(self.service.astore, name, schema_policy.TOPIC_STRATEGY_KEY, None)
        return web.Response(status=204)
