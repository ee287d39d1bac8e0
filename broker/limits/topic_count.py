"""maxTopicsPerNamespace: room for new topics in a namespace (Pulsar's checkMaxTopicsPerNamespace).

The namespace's value, else the broker's `broker_namespace_topics_max` (0: no limit), is checked
whenever topics are created: a non-partitioned topic created over REST or by a producer or
consumer (auto-creation) adds 1, a partitioned topic adds its partitions. The count is the
namespace's persistent topics as listed (`broker.records.policies.topics_of_namespace`), where a
partitioned topic's partitions are listed one by one, as Pulsar counts them.

A refusal is `TooManyTopics`: over REST 412 "Exceed maximum number of topics in namespace."; on
the binary protocol Pulsar's RestException maps to no ServerError, so the client gets
UnknownError with that text, as from Pulsar.

What must hold: a refused creation stores nothing (the check runs before anything is written).
Two creations racing for the last place may both pass (Pulsar's check is not atomic either).
"""

from __future__ import annotations

import collections
import logging

from broker.limits import caps as specs
from broker.limits.view import PolicyView
from broker.records import policies
from common.errors import TooManyTopics
from common.topic_names import TOPICS_ROOT, TopicName
from metadata.api import AsyncStore

log = logging.getLogger(__name__)


async def check_room(astore: AsyncStore, view: PolicyView, name: TopicName, adding: int,
                     refusals: collections.Counter[str] | None = None) -> None:
    """`adding` topics may be created in `name`'s namespace; TooManyTopics if not."""
    limit = await view.namespace_value(name.tenant, name.namespace, specs.MAX_TOPICS_PER_NAMESPACE)
    if limit <= 0:
        return
    existing = len(await policies.topics_of_namespace(astore, name.tenant, name.namespace))
    if existing + adding > limit:
        log.warning("%s not created: %s/%s has %d topics, %d more would pass maxTopicsPerNamespace %d",
                    name, name.tenant, name.namespace, existing, adding, limit)
        if refusals is not None:
            refusals[specs.MAX_TOPICS_PER_NAMESPACE.name] += 1
        raise TooManyTopics(TooManyTopics.rest_reason)


async def register_new(astore: AsyncStore, view: PolicyView, name: TopicName, now_ms: int,
                       refusals: collections.Counter[str] | None = None) -> None:
    """Record `name` in the topic list, checking the namespace has room when it is new (a
    topic or partition already listed is loaded again without a check)."""
    if await astore.get(f"{TOPICS_ROOT}/{name.path}") is None:
        await check_room(astore, view, name, 1, refusals)
    await policies.register_topic(astore, name, now_ms)
