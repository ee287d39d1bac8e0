"""Caps: how many producers, consumers, subscriptions, unacked messages and topics one tenant's
topic or namespace may have, and the largest message (Pulsar's max* policies).

Each is an integer where 0 means "no limit" (as Pulsar's), set on the namespace
(`maxProducersPerTopic`, ...) or the topic (`maxProducers`, ...); the topic's value wins, then the
namespace's, then the broker's setting. `maxTopicsPerNamespace` is a namespace policy only,
`maxMessageSize` a topic policy only (its broker value is `broker_max_message_bytes`).

What must hold: a value is an integer >= 0; a refusal uses Pulsar's text ("... must be 0 or more");
a topic's maxMessageSize is at most the broker's `broker_max_message_bytes` (412 otherwise, as
Pulsar). Enforced by `broker.limits.topic_caps`, `broker.limits.topic_count` and the topics.
"""

from __future__ import annotations

from broker.limits.spec import CliFlag, PolicySpec, int_at_least, integer
from common.config import Config
from common.errors import NotAllowed


def _cap(key: str, route: str | None, topic_route: str | None, setting: str, cli: str, topic_cli: str,
         flag: tuple[str, ...], doc: str) -> PolicySpec:
    return PolicySpec(
        key=key, route=route, topic_route=topic_route, scalar=True,
        check=int_at_least(route or topic_route or key, 0),
        default=lambda config: int(getattr(config, setting)),
        cli=cli, topic_cli=topic_cli, doc=doc,
        flags=(CliFlag(flag, "value", required=True, help="0: no limit"),))


MAX_PRODUCERS = _cap("max_producers_per_topic", "maxProducersPerTopic", "maxProducers", "broker_topic_producers_max",
                     "max-producers-per-topic", "max-producers", ("--max-producers-per-topic", "--max-producers", "-p"),
                     "producers one topic may have")
MAX_CONSUMERS = _cap("max_consumers_per_topic", "maxConsumersPerTopic", "maxConsumers", "broker_topic_consumers_max",
                     "max-consumers-per-topic", "max-consumers", ("--max-consumers-per-topic", "--max-consumers", "-c"),
                     "consumers one topic may have")
MAX_CONSUMERS_PER_SUBSCRIPTION = _cap(
    "max_consumers_per_subscription", "maxConsumersPerSubscription", "maxConsumersPerSubscription",
    "broker_subscription_consumers_max", "max-consumers-per-subscription", "max-consumers-per-subscription",
    ("--max-consumers-per-subscription", "-c"), "consumers one subscription may have")
MAX_SUBSCRIPTIONS = _cap(
    "max_subscriptions_per_topic", "maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic",
    "broker_topic_subscriptions_max", "max-subscriptions-per-topic", "max-subscriptions-per-topic",
    ("--max-subscriptions-per-topic", "-m"), "subscriptions one topic may have")
MAX_UNACKED_PER_CONSUMER = _cap(
    "max_unacked_messages_per_consumer", "maxUnackedMessagesPerConsumer", "maxUnackedMessagesOnConsumer",
    "broker_consumer_unacked_messages_max", "max-unacked-messages-per-consumer", "max-unacked-messages-per-consumer",
    ("--max-unacked-messages-per-topic", "--max-unacked-messages-per-consumer", "-c"),
    "unacked messages one Shared/Key_Shared consumer may hold before dispatch to it stops")
MAX_UNACKED_PER_SUBSCRIPTION = _cap(
    "max_unacked_messages_per_subscription", "maxUnackedMessagesPerSubscription", "maxUnackedMessagesOnSubscription",
    "broker_subscription_unacked_messages_max", "max-unacked-messages-per-subscription",
    "max-unacked-messages-per-subscription", ("--max-unacked-messages-per-subscription", "-c"),
    "unacked messages one Shared/Key_Shared subscription may hold before its dispatch stops")
MAX_TOPICS_PER_NAMESPACE = _cap(
    "max_topics_per_namespace", "maxTopicsPerNamespace", None, "broker_namespace_topics_max",
    "max-topics-per-namespace", "", ("--max-topics-per-namespace", "-t"),
    "topics one namespace may have (a partitioned topic counts its partitions)")
# Pulsar's PersistentTopicsBase.internalSetMaxMessageSize: 412 outside 0..the broker's maxMessageSize
MESSAGE_SIZE_RANGE = ("topic-level maxMessageSize must be greater than or equal to 0 "
                      "and must be smaller than that in the broker-level")


def _message_size(body: object, config: Config) -> int:
    value = integer(body, "maxMessageSize")
    if not 0 <= value <= config.broker_max_message_bytes:
        raise NotAllowed(MESSAGE_SIZE_RANGE)
    return value


MAX_MESSAGE_SIZE = PolicySpec(
    key="max_message_size", route=None, topic_route="maxMessageSize", scalar=True,
    check=int_at_least("maxMessageSize", 0), check_config=_message_size,
    default=lambda config: int(config.broker_max_message_bytes),
    cli="", topic_cli="max-message-size",
    flags=(CliFlag(("--max-message-size", "-m"), "value", required=True, help="bytes; 0: the broker's"),),
    doc="the largest message a producer may send to the topic (0: the broker's broker_max_message_bytes)")

SPECS = (MAX_PRODUCERS, MAX_CONSUMERS, MAX_CONSUMERS_PER_SUBSCRIPTION, MAX_SUBSCRIPTIONS, MAX_UNACKED_PER_CONSUMER,
         MAX_UNACKED_PER_SUBSCRIPTION, MAX_TOPICS_PER_NAMESPACE, MAX_MESSAGE_SIZE)
