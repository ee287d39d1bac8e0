"""Lifecycle policies: inactiveTopicPolicies, subscriptionExpirationTime, autoTopicCreation and
autoSubscriptionCreation, with Pulsar's names and bodies.

Bodies (Pulsar's InactiveTopicPolicies, AutoTopicCreationOverride, AutoSubscriptionCreationOverride):
- inactiveTopicPolicies: `{"inactiveTopicDeleteMode": "delete_when_no_subscriptions" |
  "delete_when_subscriptions_caught_up", "maxInactiveDurationSeconds": s, "deleteWhileInactive": bool}`;
- subscriptionExpirationTime: minutes (an integer >= 0; 0: never);
- autoTopicCreation: `{"allowAutoTopicCreation": bool, "topicType": "partitioned" |
  "non-partitioned", "defaultNumPartitions": n}` (n >= 1 when partitioned);
- autoSubscriptionCreation: `{"allowAutoSubscriptionCreation": bool}`.

Enforcement reads the effective value through `broker.limits.view.PolicyView`; the decisions
themselves are the pure functions at the end of this module (`topic_active`, `inactive_due`,
`retained_by_retention`, `subscription_expired`, `creatable`), so the periodic task
(`broker.retention.lifecycle`) and the auto-creation check (`broker.topics.auto_create`) only
gather facts and act. `LifecycleCounters` are what `/metrics` shows of them.

What must hold: a stored value has every field, checked; a topic with a producer, a consumer,
or (per mode) a subscription or a backlog is never inactive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.limits.spec import CliFlag, PolicySpec, boolean, int_at_least, int_field, integer, obj, switch_pair
from common.config import Config
from common.errors import BadRequestBody, NotAllowed

DELETE_MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")
TOPIC_TYPES = ("partitioned", "non-partitioned")
_seconds = int_field(0, "must be 0 or more")


def _mode(value: object, name: str) -> str:
    if value not in DELETE_MODES:
        raise BadRequestBody(f"{name} must be one of {', '.join(DELETE_MODES)}", value=str(value))
    return str(value)


def _topic_type(value: object, name: str) -> str:
    if value not in TOPIC_TYPES:
        raise NotAllowed(f"Invalid configuration for autoTopicCreationOverride. the detail is [topicType] "
                         f"must be one of {', '.join(TOPIC_TYPES)}", value=str(value))
    return str(value)


def check_inactive(body: object) -> dict[str, Any]:
    return obj(body, "inactiveTopicPolicies",
               {"inactiveTopicDeleteMode": _mode, "maxInactiveDurationSeconds": _seconds,
                "deleteWhileInactive": boolean},
               {"inactiveTopicDeleteMode": DELETE_MODES[0], "maxInactiveDurationSeconds": 60,
                "deleteWhileInactive": False})


def _inactive_default(config: Config) -> dict[str, Any]:
    return {"inactiveTopicDeleteMode": config.broker_delete_inactive_topics_mode,
            "maxInactiveDurationSeconds": config.broker_delete_inactive_topics_max_inactive_duration_seconds,
            "deleteWhileInactive": config.broker_delete_inactive_topics_enabled}


def check_auto_topic(body: object) -> dict[str, Any]:
    got = obj(body, "autoTopicCreation",
              {"allowAutoTopicCreation": boolean, "topicType": _topic_type, "defaultNumPartitions": integer},
              {"topicType": "non-partitioned"})
    if got["allowAutoTopicCreation"] is None:
        raise NotAllowed("Invalid configuration for autoTopicCreationOverride. the detail is "
                         "[allowAutoTopicCreation] is required")
    if got["topicType"] == "partitioned":
        n = got["defaultNumPartitions"]
        if n is None or n < 1:
            raise NotAllowed("Invalid configuration for autoTopicCreationOverride. the detail is "
                             "[defaultNumPartitions] cannot be less than 1 for partition type.")
    return got


def check_auto_subscription(body: object) -> dict[str, Any]:
    got = obj(body, "autoSubscriptionCreation", {"allowAutoSubscriptionCreation": boolean}, {})
    if got["allowAutoSubscriptionCreation"] is None:
        raise BadRequestBody("autoSubscriptionCreation needs allowAutoSubscriptionCreation")
    return got


INACTIVE_TOPIC_POLICIES = PolicySpec(
    cli_body=switch_pair("deleteWhileInactive", "keepWhileInactive"),
    key="inactive_topic_policies", route="inactiveTopicPolicies", topic_route="inactiveTopicPolicies",
    check=check_inactive, default=_inactive_default, cli="inactive-topic-policies",
    topic_cli="inactive-topic-policies",
    flags=(CliFlag(("--enable-delete-while-inactive", "-e"), "deleteWhileInactive", switch=True),
           CliFlag(("--disable-delete-while-inactive", "-d"), "keepWhileInactive", switch=True),
           CliFlag(("--max-inactive-duration", "-t"), "maxInactiveDurationSeconds", required=True,
                   help="seconds, or 30s/10m/3h/2d/1w"),
           CliFlag(("--delete-mode", "-m"), "inactiveTopicDeleteMode", parse=str, required=True,
                   help="delete_when_no_subscriptions or delete_when_subscriptions_caught_up")),
    doc="delete a topic inactive this long (no producers, and no subscriptions or none with a backlog)")
SUBSCRIPTION_EXPIRATION = PolicySpec(
    key="subscription_expiration_time_minutes", route="subscriptionExpirationTime",
    topic_route="subscriptionExpirationTime", scalar=True,
    check=int_at_least("subscriptionExpirationTimeMinutes", 0),
    default=lambda config: config.broker_subscription_expiration_time_minutes,
    cli="subscription-expiration-time", topic_cli="subscription-expiration-time",
    flags=(CliFlag(("--time", "-t"), "value", required=True, help="minutes; 0: never"),),
    doc="remove a subscription that has had no consumer this many minutes")
AUTO_TOPIC_CREATION = PolicySpec(
    cli_body=switch_pair("allowAutoTopicCreation", "disallowAutoTopicCreation"),
    key="autoTopicCreationOverride", route="autoTopicCreation", topic_route=None, check=check_auto_topic,
    default=lambda config: {"allowAutoTopicCreation": config.broker_allow_auto_topic_creation,
                            "topicType": config.broker_allow_auto_topic_creation_type,
                            "defaultNumPartitions": config.broker_auto_topic_partitions},
    cli="auto-topic-creation",
    flags=(CliFlag(("--enable", "-e"), "allowAutoTopicCreation", switch=True),
           CliFlag(("--disable", "-d"), "disallowAutoTopicCreation", switch=True),
           CliFlag(("--type", "-t"), "topicType", parse=str, default="non-partitioned"),
           CliFlag(("--num-partitions", "-n"), "defaultNumPartitions")),
    doc="whether naming a topic that does not exist creates it, and as what")
AUTO_SUBSCRIPTION_CREATION = PolicySpec(
    cli_body=switch_pair("allowAutoSubscriptionCreation", "disallowAutoSubscriptionCreation"),
    key="autoSubscriptionCreationOverride", route="autoSubscriptionCreation", topic_route=None,
    check=check_auto_subscription,
    default=lambda config: {"allowAutoSubscriptionCreation": config.broker_allow_auto_subscription_creation},
    cli="auto-subscription-creation",
    flags=(CliFlag(("--enable", "-e"), "allowAutoSubscriptionCreation", switch=True),
           CliFlag(("--disable", "-d"), "disallowAutoSubscriptionCreation", switch=True)),
    doc="whether a consumer naming a subscription that does not exist creates it")

SPECS = (INACTIVE_TOPIC_POLICIES, SUBSCRIPTION_EXPIRATION, AUTO_TOPIC_CREATION, AUTO_SUBSCRIPTION_CREATION)


# --- decisions ----------------------------------------------------------------------------------------


def topic_active(mode: str, *, clients: bool, subscriptions: bool, backlog: bool) -> bool:
    """Pulsar's PersistentTopic.isActive: producers or consumers attached, or, under
    delete_when_no_subscriptions, any subscription; under delete_when_subscriptions_caught_up,
    any subscription with a backlog."""
    if clients:
        return True
    if mode == "delete_when_no_subscriptions":
        return subscriptions
    return backlog


def inactive_due(policy: dict[str, Any], inactive_since_ms: int, now_ms: int) -> bool:
    """The topic, inactive since `inactive_since_ms`, is to be deleted now under `policy`."""
    if not policy.get("deleteWhileInactive"):
        return False
    return now_ms - inactive_since_ms >= int(policy["maxInactiveDurationSeconds"]) * 1000


def retained_by_retention(retention_minutes: int, inactive_since_ms: int, now_ms: int) -> bool:
    """Pulsar's shouldTopicBeRetained: a retention time keeps an inactive topic that long after
    its last activity (negative: forever)."""
    return retention_minutes < 0 or now_ms - inactive_since_ms < retention_minutes * 60_000


def subscription_expired(minutes: int, last_active_ms: int, now_ms: int) -> bool:
    """A subscription idle since `last_active_ms` is past its expiration (0 minutes: never)."""
    return minutes > 0 and now_ms - last_active_ms > minutes * 60_000


def creatable(policy: dict[str, Any]) -> bool:
    """The autoTopicCreation value allows creating a topic by naming it."""
    return bool(policy.get("allowAutoTopicCreation"))


def auto_partitions(policy: dict[str, Any]) -> int:
    """Partitions of an auto-created topic: 0 (non-partitioned) or defaultNumPartitions."""
    if policy.get("topicType") != "partitioned":
        return 0
    return max(1, int(policy.get("defaultNumPartitions") or 1))


@dataclass
class LifecycleCounters:
    """What the lifecycle policies did since the broker started (`/metrics`)."""

    inactive_topics_deleted: int = 0          # topics (partitions) deleted as inactive
    partitioned_metadata_deleted: int = 0     # partitioned topics whose last partition went so
    subscriptions_expired: int = 0            # subscriptions removed by subscriptionExpirationTime
    topics_auto_created: int = 0              # topics created by naming them (autoTopicCreation)
    topic_creations_refused: int = 0          # namings refused: TopicNotFound
    subscription_creations_refused: int = 0   # SUBSCRIBEs refused: SubscriptionNotFound
    errors: int = 0                           # topic checks of the periodic task that failed (logged)
