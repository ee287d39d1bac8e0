"""A namespace's Policies in Pulsar's JSON: read from a create body, written for `GET .../{t}/{ns}`.

Fields Strata applies, stored as given (`broker.records.policies`, `broker.retention.offload`):
`bundles` ({"numBundles": N} or {"boundaries": [...]}), `retention_policies`,
`message_ttl_in_seconds`, `deduplicationEnabled`, `offload_threshold`,
`offload_threshold_in_seconds`, `offload_deletion_lag_ms`, `offload_policies` (its three
thresholds), `backlog_quota_map` (`broker.retention.backlog_quota`), `compaction_threshold`
(`broker.compaction.threshold`), `schema_compatibility_strategy`, `is_allow_auto_update_schema`,
`schema_validation_enforced` (`broker.schemas.policy`), `auth_policies` (the grants,
`broker.security.permissions`), `replication_clusters` (this cluster only: Strata does not
replicate), and the multi-tenant policies of `broker.limits.registry` (max_producers_per_topic,
publishMaxMessageRate, persistence, inactive_topic_policies, ...; a per-cluster one, such as
`publishMaxMessageRate`, as `{cluster: value}` for this cluster).

Every other field of Pulsar's Policies is accepted only at its default value (null, an empty
list or map, or the default `_PULSAR_DEFAULTS` lists), so the JSON a GET answers can be sent
back as a create body; any other value is refused (412 "... is not supported by Strata"), since
storing a policy nobody applies would mislead. Fields Pulsar does not know are ignored, as
Pulsar's JSON reader ignores them.

What must hold: a create body is checked whole before anything is stored (400 wrong types, 412
invalid values); the GET answer always has every field of `_PULSAR_DEFAULTS` plus Strata's.
"""

from __future__ import annotations

from broker.admin.policy_bodies import retention_value, ttl_seconds
from broker.compaction import threshold as compaction_threshold
from broker.limits import registry as limit_registry
from broker.limits.spec import cluster_value
from broker.records import bundles as bundles_mod
from broker.records import policies
from broker.records.bundles import NamespaceBundles
from broker.retention import backlog_quota
from broker.retention import offload as offload_policy
from broker.retention.offload import check_long
from broker.schemas import policy as schema_policy
from broker.security import permissions
from broker.security.authorization import AUTH_POLICIES_KEY, empty_auth_policies
from common.config import Config
from common.errors import BadRequestBody, InvalidBundle, NotAllowed

# Pulsar's Policies fields Strata does not apply, at their defaults (Policies.java)
_PULSAR_DEFAULTS: dict[str, object] = {
    "allowed_clusters": [],
    "clusterDispatchRate": {},
    "replicatorDispatchRate": {},
    "latency_stats_sample_rate": {},
    "deleted": False,
    "encryption_required": False,
    "subscription_auth_mode": "None",
    "schema_auto_update_compatibility_strategy": "Full",
    "subscription_types_enabled": [],
    "properties": {},
    "resource_group_name": None,
    "entry_filters": None,
    "migrated": False,
}

_LONG_FIELDS = (offload_policy.NS_THRESHOLD_KEY, offload_policy.NS_THRESHOLD_SECONDS_KEY,
                offload_policy.NS_DELETION_LAG_KEY)


def _is_default(value: object, default: object) -> bool:
    """null, the default, or a container holding only such empties (`{"namespace_auth": {}}`)."""
    if value is None or value == default:
        return True
    if isinstance(value, list):
        return not value
    return isinstance(value, dict) and all(_is_default(v, None) for v in value.values())


def bundles_of_body(found: object) -> tuple[int | None, list[int] | None]:
    """(count, boundaries) of a Policies `bundles` value; (None, None): the default count."""
    if found is None:
        return None, None
    if not isinstance(found, dict):
        raise BadRequestBody('bundles must be {"numBundles": N} or {"boundaries": [...]}')
    count, boundaries = found.get("numBundles"), found.get("boundaries")
    if boundaries is None:
        return (None, None) if count is None else (bundles_mod.check_count(count), None)
    if not isinstance(boundaries, list) or not all(isinstance(b, str) for b in boundaries):
        raise BadRequestBody("bundles.boundaries must be a list of hex strings")
    try:
        values = [int(b, 16) for b in boundaries]
    except ValueError:
        raise InvalidBundle("bundle boundaries are hex numbers, 0x00000000..0xffffffff") from None
    if count is not None and count != len(values) - 1:
        raise InvalidBundle("numBundles must be one less than the number of boundaries", numBundles=count)
    NamespaceBundles("-", "-", tuple(values))      # InvalidBundle unless well formed
    return len(values) - 1, values


def _check_clusters(value: object, cluster: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise BadRequestBody("replication_clusters must be a list of cluster names")
    if any(c != cluster for c in value):
        raise NotAllowed("Clusters do not exist")


# multi-tenant policies whose create-body value equal to Pulsar's Policies default means "not set"
_LIMIT_DEFAULTS: dict[str, object] = {"subscription_expiration_time_minutes": 0}


def _limit_fields(body: dict, cluster: str, config: Config | None) -> dict:
    """The multi-tenant policies (`broker.limits`) of a create body, checked."""
    fields: dict[str, object] = {}
    for spec in limit_registry.ALL:
        raw = body.get(spec.key)
        if spec.route is None or raw is None or raw == _LIMIT_DEFAULTS.get(spec.key, None):
            continue
        if spec.per_cluster:
            raw = cluster_value(raw, cluster)
            if raw is None:
                continue
        fields[spec.key] = spec.checked(raw, config)
    return fields


def _stored_fields(body: dict) -> dict:
    """The policy fields Strata stores, checked."""
    fields: dict[str, object] = {}
    if body.get(policies.RETENTION_KEY) is not None:
        fields[policies.RETENTION_KEY] = retention_value(body[policies.RETENTION_KEY])
    if body.get(policies.TTL_KEY) is not None:
        fields[policies.TTL_KEY] = ttl_seconds(body[policies.TTL_KEY])
    dedup = body.get(policies.DEDUP_KEY)
    if dedup is not None:
        if not isinstance(dedup, bool):
            raise BadRequestBody("deduplicationEnabled must be true, false or null")
        fields[policies.DEDUP_KEY] = dedup
    fields.update(schema_policy.stored_fields(body))
    if body.get(AUTH_POLICIES_KEY) is not None:   # the grants (broker.security)
        fields[AUTH_POLICIES_KEY] = permissions.check_auth_policies(body[AUTH_POLICIES_KEY])
    for key in _LONG_FIELDS:
        if body.get(key) is not None:
            fields[key] = check_long(body[key], key)
    if body.get(compaction_threshold.NS_KEY) is not None:
        fields[compaction_threshold.NS_KEY] = compaction_threshold.check_threshold(body[compaction_threshold.NS_KEY])
    if body.get(offload_policy.TOPIC_OFFLOAD_KEY) is not None:
        checked = offload_policy.check_offload_policies(body[offload_policy.TOPIC_OFFLOAD_KEY])
        fields.update({k: v for k, v in offload_policy.namespace_fields(checked).items() if v is not None})
    quotas = body.get(backlog_quota.QUOTA_KEY)
    if quotas:
        if not isinstance(quotas, dict):
            raise BadRequestBody("backlog_quota_map must map a quota type to a quota")
        fields[backlog_quota.QUOTA_KEY] = {backlog_quota.quota_type(kind): backlog_quota.quota_from_body(q).to_json()
                                           for kind, q in quotas.items()}
    for key in (offload_policy.NS_THRESHOLD_KEY, offload_policy.NS_THRESHOLD_SECONDS_KEY):
        if fields.get(key) == -1:
            del fields[key]          # -1 is "unset": nothing stored
    return fields


def policies_from_body(body: object, cluster: str,
                       config: Config | None = None) -> tuple[dict, int | None, list[int] | None]:
    """A namespace-create body (None: all defaults) → (stored fields, bundle count, boundaries)."""
    if body is None:
        return {}, None, None
    if not isinstance(body, dict):
        raise BadRequestBody("a namespace's policies are a JSON object")
    for field, default in _PULSAR_DEFAULTS.items():
        if field in body and not _is_default(body[field], default):
            raise NotAllowed(f"the namespace policy {field} is not supported by Strata "
                             f"(only its default {default!r} is accepted)")
    _check_clusters(body.get("replication_clusters"), cluster)
    count, boundaries = bundles_of_body(body.get("bundles"))
    return {**_stored_fields(body), **_limit_fields(body, cluster, config)}, count, boundaries


def policies_json(stored: dict, bundles: NamespaceBundles, cluster: str) -> dict:
    """Pulsar's Policies JSON of a namespace: its stored fields, the rest at their defaults."""
    out: dict[str, object] = dict(_PULSAR_DEFAULTS)
    out.update({
        "replication_clusters": [cluster],
        "bundles": bundles.to_json(),
        policies.RETENTION_KEY: stored.get(policies.RETENTION_KEY),
        policies.TTL_KEY: stored.get(policies.TTL_KEY),
        policies.DEDUP_KEY: stored.get(policies.DEDUP_KEY),
        offload_policy.NS_THRESHOLD_KEY: stored.get(offload_policy.NS_THRESHOLD_KEY, -1),
        offload_policy.NS_THRESHOLD_SECONDS_KEY: stored.get(offload_policy.NS_THRESHOLD_SECONDS_KEY, -1),
        offload_policy.NS_DELETION_LAG_KEY: stored.get(offload_policy.NS_DELETION_LAG_KEY),
        offload_policy.TOPIC_OFFLOAD_KEY: offload_policy.namespace_offload_policies(stored),
        compaction_threshold.NS_KEY: stored.get(compaction_threshold.NS_KEY),
        backlog_quota.QUOTA_KEY: stored.get(backlog_quota.QUOTA_KEY, {}),
        AUTH_POLICIES_KEY: stored.get(AUTH_POLICIES_KEY) or empty_auth_policies(),
    })
    out.update(schema_policy.json_fields(stored))
    for spec in limit_registry.ALL:
        if spec.route is None:
            continue
        value = stored.get(spec.key, _LIMIT_DEFAULTS.get(spec.key))
        out[spec.key] = ({cluster: value} if value is not None else {}) if spec.per_cluster else value
    return out
