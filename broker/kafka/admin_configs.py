"""Kafka's config APIs: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Resources: type 2 (topic) and type 4 (broker); others are INVALID_REQUEST. A topic's configs are
views of its topic policies (`broker.kafka.topic_configs` says which and how). The broker
resource lists a few read-only values of Strata's settings; altering it is POLICY_VIOLATION
("broker configs are Strata settings": they are set in the broker's configuration, not by Kafka
clients).

AlterConfigs replaces the topic's whole Kafka-visible set (a writable config it does not name
goes back to its default: the namespace's, else the broker's); IncrementalAlterConfigs edits
keys: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) only on the list
config `cleanup.policy` (INVALID_REQUEST on the others). Policies a Kafka config does not map
(dedup, TTL, backlog quotas, ...) are never touched.

Errors, per resource: unknown topic UNKNOWN_TOPIC_OR_PARTITION, bad name INVALID_TOPIC_EXCEPTION,
a bad config name or value INVALID_CONFIG with a message, a retention at or under a backlog
quota in force POLICY_VIOLATION (as the admin API refuses it). `validate_only` checks and writes
nothing.

Authorization, as the admin REST API: altering takes the tenant's admin (or a superuser);
describing a topic takes what a lookup takes (produce or consume on it: a client that may use a
topic may read its settings); the broker resource may be described by anyone connected.

What must hold: a resource with an error changes nothing; every write of a topic's configs is
one compare-and-set of its policy record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.kafka import topic_configs as tc
from broker.kafka.admin_topics import TopicRefused, base_of, check_policies, failed, layout_now
from broker.records import policies
from broker.security.authorization import Action
from common.errors import StrataError
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from common.topic_names import TopicName
    from wire.kafka.codec import Request

TOPIC, BROKER = 2, 4      # ConfigResource types


def _refuse_type(resource_type: int) -> None:
    if resource_type == BROKER:
        return
    if resource_type != TOPIC:
        raise TopicRefused(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported: "
                           "only topics (2) and brokers (4)")


async def _existing_topic(conn: KafkaConnection, name: str, *, alter: bool) -> TopicName:
    base = base_of(conn, name)
    authz = conn.front.authorization
    allowed = (await authz.is_tenant_admin(conn.role, base.tenant) if alter
               else await authz.allowed(conn.role, Action.LOOKUP, base))
    if not allowed:
        raise TopicRefused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to "
                           f"{'alter' if alter else 'describe'} the configs of topic {name!r}")
    if await layout_now(conn, base) is None:
        raise TopicRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return base


# --- DescribeConfigs -------------------------------------------------------------------------------

async def _describe_one(conn: KafkaConnection, resource: dict) -> list[tc.ConfigEntry]:
    config = conn.front.ctx.config
    keys = resource.get("configuration_keys")
    kind = resource.get("resource_type", 0)
    _refuse_type(kind)
    if kind == BROKER:
        return tc.describe_broker(config, keys)
    base = await _existing_topic(conn, resource.get("resource_name") or "", alter=False)
    astore = conn.front.service.astore
    return tc.describe(await policies.topic_policies(astore, base),
                       await policies.namespace_policies(astore, base.tenant, base.namespace), config, keys)


async def describe_configs(conn: KafkaConnection, req: Request) -> dict:
    results = []
    for resource in req.body.get("resources") or []:
        out: dict = {"error_code": ErrorCode.NONE, "error_message": None,
                     "resource_type": resource.get("resource_type", 0),
                     "resource_name": resource.get("resource_name") or "", "configs": []}
        try:
            out["configs"] = [e.to_wire() for e in await _describe_one(conn, resource)]
        except (TopicRefused, StrataError) as exc:
            failed(out, exc)
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


# --- AlterConfigs, IncrementalAlterConfigs ---------------------------------------------------------

async def _alter_one(conn: KafkaConnection, resource: dict, validate_only: bool, incremental: bool) -> None:
    kind = resource.get("resource_type", 0)
    _refuse_type(kind)
    if kind == BROKER:
        raise TopicRefused(ErrorCode.POLICY_VIOLATION, "broker configs are Strata settings: set them in the "
                           "broker's configuration")
    front = conn.front
    config = front.ctx.config
    base = await _existing_topic(conn, resource.get("resource_name") or "", alter=True)
    astore = front.service.astore
    own = await policies.topic_policies(astore, base)
    ns_policies = await policies.namespace_policies(astore, base.tenant, base.namespace)
    changes = resource.get("configs") or []
    try:
        if incremental:
            ops = [(c["name"], int(c.get("config_operation", 0)), c.get("value")) for c in changes]
            explicit = tc.apply_incremental(tc.explicit_configs(own), tc.default_configs(ns_policies, config),
                                            ops, config)
        else:
            explicit = tc.checked({c["name"]: c.get("value") for c in changes}, config)
    except tc.ConfigRefused as exc:
        raise TopicRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None
    except ValueError as exc:     # an operation that does not apply
        raise TopicRefused(ErrorCode.INVALID_REQUEST, str(exc)) from None
    fields = tc.to_policies(explicit, ns_policies, config, own)
    await check_policies(conn, base, fields)
    if not validate_only:
        await policies.set_topic_policies(astore, base, fields)
        conn.front.catalog.forget(base)


async def _alter(conn: KafkaConnection, req: Request, incremental: bool) -> dict:
    body = req.body
    responses = []
    for resource in body.get("resources") or []:
        out: dict = {"error_code": ErrorCode.NONE, "error_message": None,
                     "resource_type": resource.get("resource_type", 0),
                     "resource_name": resource.get("resource_name") or ""}
        try:
            await _alter_one(conn, resource, bool(body.get("validate_only", False)), incremental)
        except (TopicRefused, StrataError) as exc:
            failed(out, exc)
        responses.append(out)
    return {"throttle_time_ms": 0, "responses": responses}


async def alter_configs(conn: KafkaConnection, req: Request) -> dict:
    return await _alter(conn, req, incremental=False)


async def incremental_alter_configs(conn: KafkaConnection, req: Request) -> dict:
    return await _alter(conn, req, incremental=True)
