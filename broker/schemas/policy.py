"""The schema policies of a namespace (and the compatibility strategy of a topic), stored in the
policy records of `broker.records.policies` under Pulsar's Policies field names.

- `schema_compatibility_strategy` (namespace; REST `schemaCompatibilityStrategy`): a Strategy
  name, or UNDEFINED (absent) = the broker default, FULL. A topic's `schemaCompatibilityStrategy`
  topic policy overrides it.
- `is_allow_auto_update_schema` (REST `isAllowAutoUpdateSchema`): may a producer register a new
  schema version? Absent = true (Pulsar's `isAllowAutoUpdateSchemaEnabled`). When false, a
  producer's schema must already be a version of the topic.
- `schema_validation_enforced` (REST `schemaValidationEnforced`): refuse producers without a
  schema on a topic that has one. Absent = false.

What must hold: the effective values read here are the ones the admin API shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.records import policies
from broker.schemas.compatibility import AUTO_UPDATE_TO_STRATEGY, DEFAULT_STRATEGY, UNDEFINED, Strategy
from common.errors import BadRequestBody
from common.topic_names import TopicName
from metadata.api import AsyncStore

NS_STRATEGY_KEY = "schema_compatibility_strategy"
NS_AUTO_UPDATE_KEY = "is_allow_auto_update_schema"
NS_VALIDATION_KEY = "schema_validation_enforced"
NS_AUTO_UPDATE_STRATEGY_KEY = "schema_auto_update_compatibility_strategy"   # Pulsar's older field
TOPIC_STRATEGY_KEY = "schemaCompatibilityStrategy"
NS_KEYS = (NS_STRATEGY_KEY, NS_AUTO_UPDATE_KEY, NS_VALIDATION_KEY)
AUTO_UPDATE_DEFAULT = True
VALIDATION_ENFORCED_DEFAULT = False


@dataclass(frozen=True)
class SchemaPolicy:
    strategy: Strategy
    auto_update: bool
    validation_enforced: bool


def parse_strategy(value: object, *, allow_undefined: bool) -> str:
    """A strategy name from a request body (a JSON string); BadRequestBody (400) if not one."""
    names = [s.value for s in Strategy] + ([UNDEFINED] if allow_undefined else [])
    if not isinstance(value, str) or value.upper() not in names:
        raise BadRequestBody(f"schema compatibility strategy must be one of {', '.join(names)}", got=value)
    return value.upper()


def strategy_of(ns_policies: dict, topic_policies: dict) -> Strategy:
    """Effective strategy: the topic's, else the namespace's, else its older auto-update field
    if not the default, else the broker default (FULL)."""
    for value in (topic_policies.get(TOPIC_STRATEGY_KEY), ns_policies.get(NS_STRATEGY_KEY)):
        if value and value != UNDEFINED:
            return Strategy(value)
    legacy = AUTO_UPDATE_TO_STRATEGY.get(str(ns_policies.get(NS_AUTO_UPDATE_STRATEGY_KEY)))
    return legacy if legacy is not None else DEFAULT_STRATEGY


async def policy_of(astore: AsyncStore, name: TopicName) -> SchemaPolicy:
    ns = await policies.namespace_policies(astore, name.tenant, name.namespace)
    topic = await policies.topic_policies(astore, name)
    auto_update = ns.get(NS_AUTO_UPDATE_KEY)
    enforced = ns.get(NS_VALIDATION_KEY)
    return SchemaPolicy(strategy_of(ns, topic),
                        AUTO_UPDATE_DEFAULT if auto_update is None else bool(auto_update),
                        VALIDATION_ENFORCED_DEFAULT if enforced is None else bool(enforced))


def stored_fields(body: dict) -> dict:
    """The schema policy fields of a namespace-create body, checked (400 on a wrong type)."""
    fields: dict[str, object] = {}
    strategy = body.get(NS_STRATEGY_KEY)
    if strategy is not None and strategy != UNDEFINED:
        fields[NS_STRATEGY_KEY] = parse_strategy(strategy, allow_undefined=True)
    for key in (NS_AUTO_UPDATE_KEY, NS_VALIDATION_KEY):
        value = body.get(key)
        if value is not None:
            if not isinstance(value, bool):
                raise BadRequestBody(f"{key} must be true, false or null")
            fields[key] = value
    return fields


def json_fields(stored: dict) -> dict:
    """The schema fields of a namespace's Policies JSON (Pulsar's defaults where unset)."""
    return {NS_STRATEGY_KEY: stored.get(NS_STRATEGY_KEY, UNDEFINED),
            NS_AUTO_UPDATE_KEY: stored.get(NS_AUTO_UPDATE_KEY),
            NS_VALIDATION_KEY: stored.get(NS_VALIDATION_KEY, VALIDATION_ENFORCED_DEFAULT)}
