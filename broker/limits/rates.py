"""Rate policies, as Pulsar names and shapes them: publishRate, dispatchRate,
subscriptionDispatchRate, subscribeRate (and replicatorDispatchRate, refused: Strata does not
replicate between clusters).

Bodies (Pulsar's PublishRate, DispatchRate, SubscribeRate):
- publishRate: `{"publishThrottlingRateInMsg": n, "publishThrottlingRateInByte": b}`;
- dispatchRate / subscriptionDispatchRate: `{"dispatchThrottlingRateInMsg": n,
  "dispatchThrottlingRateInByte": b, "relativeToPublishRate": bool, "ratePeriodInSecond": s}`;
- subscribeRate: `{"subscribeThrottlingRatePerConsumer": n, "ratePeriodInSecond": s}`.
A rate of 0 or -1 is "no limit" (pulsar-admin's flags default to -1); below -1 is refused, as is a
period under 1 second. The namespace's Policies JSON keeps each per cluster
(`publishMaxMessageRate`, `topicDispatchRate`, `subscriptionDispatchRate`, `clusterSubscribeRate`).

What must hold: a stored rate has every field (absent ones at Pulsar's defaults).
"""

from __future__ import annotations

from typing import Any

from broker.limits.spec import CliFlag, PolicySpec, boolean, int_field, obj
from common.config import Config

UNLIMITED = -1
_rate = int_field(UNLIMITED, "must be -1 (no limit) or more")
_period = int_field(1, "must be 1 second or more")


def check_publish_rate(body: object) -> dict[str, Any]:
    return obj(body, "publishRate", {"publishThrottlingRateInMsg": _rate, "publishThrottlingRateInByte": _rate},
               {"publishThrottlingRateInMsg": UNLIMITED, "publishThrottlingRateInByte": UNLIMITED})


def check_dispatch_rate(body: object) -> dict[str, Any]:
    return obj(body, "dispatchRate",
               {"dispatchThrottlingRateInMsg": _rate, "dispatchThrottlingRateInByte": _rate,
                "relativeToPublishRate": boolean, "ratePeriodInSecond": _period},
               {"dispatchThrottlingRateInMsg": UNLIMITED, "dispatchThrottlingRateInByte": UNLIMITED,
                "relativeToPublishRate": False, "ratePeriodInSecond": 1})


def check_subscribe_rate(body: object) -> dict[str, Any]:
    return obj(body, "subscribeRate", {"subscribeThrottlingRatePerConsumer": _rate, "ratePeriodInSecond": _period},
               {"subscribeThrottlingRatePerConsumer": UNLIMITED, "ratePeriodInSecond": 30})


def _no_limit(value: int) -> int:
    return value if value > 0 else UNLIMITED


def _topic_dispatch_default(config: Config) -> dict[str, Any]:
    return {"dispatchThrottlingRateInMsg": _no_limit(config.broker_topic_dispatch_rate_messages_max),
            "dispatchThrottlingRateInByte": _no_limit(config.broker_topic_dispatch_rate_bytes_max),
            "relativeToPublishRate": False, "ratePeriodInSecond": 1}


def _subscription_dispatch_default(config: Config) -> dict[str, Any]:
    return {"dispatchThrottlingRateInMsg": _no_limit(config.broker_subscription_dispatch_rate_messages_max),
            "dispatchThrottlingRateInByte": _no_limit(config.broker_subscription_dispatch_rate_bytes_max),
            "relativeToPublishRate": False, "ratePeriodInSecond": 1}


def _dispatch_flags() -> tuple[CliFlag, ...]:
    return (CliFlag(("--msg-dispatch-rate", "-md"), "dispatchThrottlingRateInMsg", default=UNLIMITED),
            CliFlag(("--byte-dispatch-rate", "-bd"), "dispatchThrottlingRateInByte", default=UNLIMITED),
            CliFlag(("--dispatch-rate-period", "-dt"), "ratePeriodInSecond", default=1),
            CliFlag(("--relative-to-publish-rate", "-rp"), "relativeToPublishRate", switch=True))


PUBLISH_RATE = PolicySpec(
    key="publishMaxMessageRate", route="publishRate", topic_route="publishRate", per_cluster=True,
    check=check_publish_rate,
    default=lambda config: {"publishThrottlingRateInMsg": UNLIMITED, "publishThrottlingRateInByte": UNLIMITED},
    cli="publish-rate", topic_cli="publish-rate",
    flags=(CliFlag(("--msg-publish-rate", "-m"), "publishThrottlingRateInMsg", default=UNLIMITED),
           CliFlag(("--byte-publish-rate", "-b"), "publishThrottlingRateInByte", default=UNLIMITED)),
    doc="messages and bytes per second the producers of each topic may publish")
DISPATCH_RATE = PolicySpec(
    key="topicDispatchRate", route="dispatchRate", topic_route="dispatchRate", per_cluster=True,
    check=check_dispatch_rate, default=_topic_dispatch_default, cli="dispatch-rate", topic_cli="dispatch-rate",
    flags=_dispatch_flags(), doc="messages and bytes per second each topic dispatches to its consumers")
SUBSCRIPTION_DISPATCH_RATE = PolicySpec(
    key="subscriptionDispatchRate", route="subscriptionDispatchRate", topic_route="subscriptionDispatchRate",
    per_cluster=True, check=check_dispatch_rate, default=_subscription_dispatch_default,
    cli="subscription-dispatch-rate", topic_cli="subscription-dispatch-rate", flags=_dispatch_flags(),
    doc="messages and bytes per second each subscription dispatches")
def _subscribe_default(config: Config) -> dict[str, Any]:
    return {"subscribeThrottlingRatePerConsumer": _no_limit(config.broker_subscribe_rate_per_consumer_max),
            "ratePeriodInSecond": config.broker_subscribe_rate_period_seconds}


SUBSCRIBE_RATE = PolicySpec(
    key="clusterSubscribeRate", route="subscribeRate", topic_route="subscribeRate", per_cluster=True,
    check=check_subscribe_rate, default=_subscribe_default,
    cli="subscribe-rate", topic_cli="subscribe-rate",
    flags=(CliFlag(("--subscribe-rate", "-sr"), "subscribeThrottlingRatePerConsumer", default=UNLIMITED),
           CliFlag(("--subscribe-rate-period", "-st"), "ratePeriodInSecond", default=30)),
    doc="subscribes per period one consumer name may make on a topic")

SPECS = (PUBLISH_RATE, DISPATCH_RATE, SUBSCRIPTION_DISPATCH_RATE, SUBSCRIBE_RATE)
