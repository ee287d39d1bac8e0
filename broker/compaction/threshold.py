"""The compactionThreshold policy: compact a topic once enough is written since the last run.

The threshold (bytes; 0 = off) is the topic's `compactionThreshold` (topic policies), else its
namespace's `compaction_threshold` (Pulsar's Policies field), else the broker's
`compaction_threshold_bytes`. The retention pass (`broker.retention.task`, every
`broker_retention_check_interval_ms`) calls `retention_pass` for each loaded topic: with a
threshold set, the `__compaction` subscription is made to exist (so what is not compacted yet is
kept), and a run starts when its backlog (bytes not compacted yet) exceeds the threshold, as
Pulsar's PersistentTopic.checkCompaction.

What must hold: nothing starts while a run is in progress; a threshold <= 0 starts nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.compaction.topic_compaction import COMPACTION_SUBSCRIPTION
from common.config import Config
from common.errors import BadRequestBody, NotAllowed

if TYPE_CHECKING:
    from broker.compaction.topic_compaction import TopicCompaction

NS_KEY = "compaction_threshold"         # namespace Policies field (bytes)
TOPIC_KEY = "compactionThreshold"       # topic policies field (bytes)
THRESHOLD_MAX = 2**63 - 1


def check_threshold(value: object) -> int:
    """A threshold from a request body: a JSON integer, 0..2^63-1 (400 / 412 otherwise)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequestBody("compactionThreshold must be a JSON integer (bytes)")
    if not 0 <= value <= THRESHOLD_MAX:
        raise NotAllowed("compactionThreshold must be 0 or more bytes", value=value)
    return value


def effective(ns_policies: dict, config: Config, topic_policies: dict | None) -> int:
    """The threshold in force for a topic (bytes; 0 = off)."""
    if topic_policies is not None and topic_policies.get(TOPIC_KEY) is not None:
        return int(topic_policies[TOPIC_KEY])
    if ns_policies.get(NS_KEY) is not None:
        return int(ns_policies[NS_KEY])
    return config.compaction_threshold_bytes


async def retention_pass(config: Config, compaction: TopicCompaction, ns_policies: dict,
                         topic_policies: dict | None) -> bool:
    """Start a compaction of the topic if its threshold is exceeded; True if one started."""
    threshold = effective(ns_policies, config, topic_policies)
    topic = compaction.topic
    if threshold <= 0 or compaction.running or topic.closing:
        return False
    if COMPACTION_SUBSCRIPTION not in topic.subscriptions:
        await compaction.compaction_subscription()
    if compaction.backlog_bytes() <= threshold:
        return False
    compaction.trigger()
    return True
