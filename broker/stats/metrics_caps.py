"""/metrics families of the caps (Pulsar's max* policies), broker-wide (label `cluster`).

- `strata_cap_refusals_total{policy}`: producers, consumers, subscriptions, messages and topics
  refused at a cap since the broker started, by Pulsar's policy name (`maxProducersPerTopic`,
  `maxConsumersPerTopic`, `maxConsumersPerSubscription`, `maxSubscriptionsPerTopic`,
  `maxMessageSize`, `maxTopicsPerNamespace`, and `delayedDelivery` for a message whose delay is
  past the topic's maxDeliveryDelayInMillis);
- `strata_consumers_blocked_on_unacked`: Shared/Key_Shared consumers of the loaded topics held
  at maxUnackedMessagesPerConsumer now;
- `strata_subscriptions_blocked_on_unacked`: subscriptions whose dispatch is stopped at
  maxUnackedMessagesPerSubscription now.
Per subscription, `pulsar_subscription_blocked_on_unacked_messages` (`broker.stats.metrics_topics`)
is 1 while the subscription or one of its consumers is blocked, as Pulsar's.

What must hold: the gauges agree with the stats of the same moment (`blockedConsumerOnUnackedMsgs`,
`blockedSubscriptionOnUnackedMsgs`); a scrape changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.limits import caps as specs
from broker.limits.persistence import DELAYED_DELIVERY

if TYPE_CHECKING:
    from broker.topics.caps_keeper import CapsKeeper

POLICIES = (specs.MAX_PRODUCERS.name, specs.MAX_CONSUMERS.name, specs.MAX_CONSUMERS_PER_SUBSCRIPTION.name,
            specs.MAX_SUBSCRIPTIONS.name, specs.MAX_MESSAGE_SIZE.name, specs.MAX_TOPICS_PER_NAMESPACE.name,
            DELAYED_DELIVERY.name)


def families(keeper: CapsKeeper, cluster: str) -> Iterator[Metric]:
    refusals = CounterMetricFamily("strata_cap_refusals", "producers, consumers, subscriptions, messages and "
                                   "topics refused at a cap, by policy", labels=["cluster", "policy"])
    for policy in POLICIES:
        refusals.add_metric([cluster, policy], keeper.refusals.get(policy, 0))
    yield refusals
    consumers = subscriptions = 0
    for topic in list(keeper.topics.values()):
        for sub in topic.subscriptions.values():
            blocked = [c for c in sub.consumers if c.blocked_on_unacked]
            consumers += len(blocked)
            gate = getattr(sub.dispatcher, "gate", None)
            subscriptions += int(gate is not None and gate.blocked)
    for name, help_text, value in (
            ("strata_consumers_blocked_on_unacked", "consumers held at maxUnackedMessagesPerConsumer", consumers),
            ("strata_subscriptions_blocked_on_unacked", "subscriptions whose dispatch is stopped at "
             "maxUnackedMessagesPerSubscription", subscriptions)):
        gauge = GaugeMetricFamily(name, help_text, labels=["cluster"])
        gauge.add_metric([cluster], value)
        yield gauge
