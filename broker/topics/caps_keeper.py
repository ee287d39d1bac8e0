"""Keeps every loaded topic's caps (`broker.limits.topic_caps.TopicCaps`) in step with its policies.

A topic gets its caps when it loads (`on_load`, before any client attaches) and again whenever
the `PolicyView` says a policy of its namespace or its own changed (`_changed`, one refresh task
per matching loaded topic). A refresh replaces `topic.caps`; producers, consumers and
subscriptions already attached stay (Pulsar does not close them either), the next one is checked
against the new values. The unacked limits also reach the Shared and Key_Shared dispatchers: each
consumer's maxUnackedMessagesPerConsumer and the subscription's gate
(maxUnackedMessagesPerSubscription); a consumer or subscription the new values release is
dispatched to at once.

`refusals` counts every refusal by policy name for /metrics (`broker.stats.metrics_caps`).

What must hold: of two refreshes of one topic in flight, only the later applies (a slow read of
the older values never overwrites newer ones).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from broker.context import Spawn
from broker.limits.topic_caps import TopicCaps, resolve
from broker.limits.view import PolicyView
from broker.topics.dispatch.shared import SharedDispatcher
from common.config import Config
from common.topic_names import TopicName

if TYPE_CHECKING:
    from broker.topics.topic import PersistentTopic

log = logging.getLogger(__name__)


class CapsKeeper:
    def __init__(self, view: PolicyView, config: Config, topics: Mapping[str, PersistentTopic],
                 spawn: Spawn) -> None:
        self._view = view
        self._config = config
        self.topics = topics                                   # the broker's loaded topics
        self._spawn = spawn
        self.refusals: collections.Counter[str] = collections.Counter()   # policy name -> refusals
        self._refreshing: dict[str, int] = {}   # topic -> number of its latest refresh in flight
        self._seq = 0
        view.listen(self._changed)

    async def on_load(self, topic: PersistentTopic) -> None:
        """Resolve a topic's caps as it loads (before it is served)."""
        topic.caps = await resolve(self._view, topic.name, self._config, self.refusals)

    def _changed(self, match: Callable[[TopicName], bool]) -> None:
        for topic in list(self.topics.values()):
            if match(topic.name) and not topic.closing:
                self._seq += 1
                self._refreshing[str(topic.name)] = self._seq
                self._spawn(self._refresh(topic, self._seq))

    async def _refresh(self, topic: PersistentTopic, seq: int) -> None:
        key = str(topic.name)
        try:
            caps = await resolve(self._view, topic.name, self._config, self.refusals)
        finally:
            latest = self._refreshing.get(key) == seq
            if latest:
                del self._refreshing[key]
        if latest and not topic.closing:
            apply(topic, caps)


def apply(topic: PersistentTopic, caps: TopicCaps) -> None:
    """Put `caps` in force on a loaded topic, its dispatchers included."""
    old = topic.caps
    topic.caps = caps
    if (old.unacked_per_consumer_max, old.unacked_per_subscription_max) == (
            caps.unacked_per_consumer_max, caps.unacked_per_subscription_max):
        return
    log.info("%s: unacked limits now %d per consumer, %d per subscription", topic.name,
             caps.unacked_per_consumer_max, caps.unacked_per_subscription_max)
    for sub in list(topic.subscriptions.values()):
        if isinstance(sub.dispatcher, SharedDispatcher):
            sub.dispatcher.set_unacked_limits(caps.unacked_per_consumer_max, caps.unacked_per_subscription_max)
