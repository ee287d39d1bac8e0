"""The view of the loaded topics that broker-wide machinery is typed against.

Retention, backlog quotas, bundle ownership and the load report act on every topic this broker
serves. They get this narrow view (the service satisfies it) instead of the service itself, so
they can read the loaded topics, close one, and wait for loads in flight, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.topics.topic import PersistentTopic
    from common.topic_names import TopicName


class LoadedTopics(Protocol):
    @property
    def topics(self) -> Mapping[str, PersistentTopic]:
        """Loaded persistent topics by full name."""
        ...

    async def release(self, topic: PersistentTopic) -> None:
        """Close `topic` and forget it (its clients look it up again)."""
        ...

    async def settle_loads(self, match: Callable[[TopicName], bool], timeout_s: float) -> None:
        """Wait (bounded) until no load of a topic `match` picks is in flight."""
        ...
