"""The caps one topic has in force (Pulsar's max* policies), and the checks made against them.

`TopicCaps` holds the effective values of a topic (its own, else its namespace's, else the
broker's: `resolve` asks the `PolicyView`), so the produce and subscribe paths check a cap with
an attribute read, never a store read, and in the same synchronous step that attaches the
producer, consumer or subscription (no await between the count and the attach: two clients
racing cannot both take the last place). `broker.topics.caps_keeper` resolves them when a topic
loads and again after a policy change.

Each value is a count where 0 means "no limit", as Pulsar's; a namespace value of 0 lifts the
broker's limit (Pulsar's testMaxProducersPerTopicUnlimited). The refusals, with Pulsar's
ServerError and text (AbstractTopic, PersistentTopic, the dispatchers):
- a producer past `maxProducers`: ProducerBusy "Topic reached max producers limit";
- a consumer past `maxConsumers`: ConsumerBusy "Topic reached max consumers limit";
- a consumer past `maxConsumersPerSubscription` (Shared, Key_Shared, Failover; an Exclusive
  subscription already refuses a second consumer): ConsumerBusy "Subscription reached max
  consumers limit";
- a new subscription past `maxSubscriptionsPerTopic` (readers' too; existing ones are not
  affected): NotAllowed "Exceed the maximum number of subscriptions of the topic: <topic>";
- a message over the topic's `maxMessageSize` (chunks are not checked, as in Pulsar):
  NotAllowed "Exceed maximum message size", as SEND_ERROR for that message.
A partitioned topic's partitions each count their own producers, consumers and subscriptions.

What must hold: every refusal is counted in `refusals` (policy name -> count, shared by a
broker's topics, exported on /metrics) and leaves nothing changed.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from broker.limits import caps as specs
from broker.limits.view import PolicyView
from common.config import Config
from common.errors import ConsumerBusy, NotAllowed, ProducerBusy
from common.topic_names import TopicName

PRODUCERS_FULL = "Topic reached max producers limit"
TOPIC_CONSUMERS_FULL = "Topic reached max consumers limit"
SUBSCRIPTION_CONSUMERS_FULL = "Subscription reached max consumers limit"
SUBSCRIPTIONS_FULL = "Exceed the maximum number of subscriptions of the topic: "
MESSAGE_TOO_LARGE = "Exceed maximum message size"


@dataclass
class TopicCaps:
    producers_max: int = 0                    # producers attached at once; 0: no limit
    consumers_max: int = 0                    # consumers over all subscriptions; 0: no limit
    consumers_per_subscription_max: int = 0   # consumers of one subscription; 0: no limit
    subscriptions_max: int = 0                # subscriptions, readers' included; 0: no limit
    unacked_per_consumer_max: int = 0         # Shared/Key_Shared consumer blocks here; 0: never
    unacked_per_subscription_max: int = 0     # Shared/Key_Shared dispatch stops here; 0: never
    message_bytes_max: int = 0                # the topic's own maxMessageSize; 0: only the broker's bound
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)

    @classmethod
    def of_config(cls, config: Config, refusals: collections.Counter[str] | None = None) -> TopicCaps:
        """The broker's values: what a topic has before its policies are read."""
        return cls(
            producers_max=specs.MAX_PRODUCERS.default(config),
            consumers_max=specs.MAX_CONSUMERS.default(config),
            consumers_per_subscription_max=specs.MAX_CONSUMERS_PER_SUBSCRIPTION.default(config),
            subscriptions_max=specs.MAX_SUBSCRIPTIONS.default(config),
            unacked_per_consumer_max=specs.MAX_UNACKED_PER_CONSUMER.default(config),
            unacked_per_subscription_max=specs.MAX_UNACKED_PER_SUBSCRIPTION.default(config),
            refusals=refusals if refusals is not None else collections.Counter())

    # --- the checks (each raises, counted, or returns) -------------------------------------------

    def check_producer(self, producers: int) -> None:
        """A producer may attach to a topic that has `producers`."""
        if 0 < self.producers_max <= producers:
            self.refusals[specs.MAX_PRODUCERS.name] += 1
            raise ProducerBusy(PRODUCERS_FULL)

    def check_consumer(self, topic_consumers: int, subscription_consumers: int, exclusive: bool) -> None:
        """A consumer may attach: the topic has `topic_consumers`, its subscription
        `subscription_consumers` (not checked for Exclusive, which takes one consumer anyway)."""
        if 0 < self.consumers_max <= topic_consumers:
            self.refusals[specs.MAX_CONSUMERS.name] += 1
            raise ConsumerBusy(TOPIC_CONSUMERS_FULL)
        if not exclusive and 0 < self.consumers_per_subscription_max <= subscription_consumers:
            self.refusals[specs.MAX_CONSUMERS_PER_SUBSCRIPTION.name] += 1
            raise ConsumerBusy(SUBSCRIPTION_CONSUMERS_FULL)

    def check_subscription(self, topic: TopicName, subscriptions: int) -> None:
        """A new subscription may be made on `topic`, which has `subscriptions`."""
        if 0 < self.subscriptions_max <= subscriptions:
            self.refusals[specs.MAX_SUBSCRIPTIONS.name] += 1
            raise NotAllowed(SUBSCRIPTIONS_FULL + str(topic))

    def message_refusal(self, entry_bytes: int, chunk: bool) -> NotAllowed | None:
        """Why a SEND of `entry_bytes` (metadata and payload, as stored) must be refused, or None."""
        if chunk or not 0 < self.message_bytes_max < entry_bytes:
            return None
        self.refusals[specs.MAX_MESSAGE_SIZE.name] += 1
        return NotAllowed(MESSAGE_TOO_LARGE)


async def resolve(view: PolicyView, name: TopicName, config: Config,
                  refusals: collections.Counter[str]) -> TopicCaps:
    """The caps in force for `name` now (topic > namespace > broker)."""
    own_size = (await view.topic_doc(name)).get(specs.MAX_MESSAGE_SIZE.key) or 0
    return TopicCaps(
        producers_max=await view.value(name, specs.MAX_PRODUCERS),
        consumers_max=await view.value(name, specs.MAX_CONSUMERS),
        consumers_per_subscription_max=await view.value(name, specs.MAX_CONSUMERS_PER_SUBSCRIPTION),
        subscriptions_max=await view.value(name, specs.MAX_SUBSCRIPTIONS),
        unacked_per_consumer_max=await view.value(name, specs.MAX_UNACKED_PER_CONSUMER),
        unacked_per_subscription_max=await view.value(name, specs.MAX_UNACKED_PER_SUBSCRIPTION),
        # 0, or at least the broker's: the broker's own bound (with its header slack) applies alone
        message_bytes_max=own_size if own_size < config.broker_max_message_bytes else 0,
        refusals=refusals)
