"""The Kafka admin APIs the dispatch table (`broker.kafka.handlers`) names, in one place.

Topics (CreateTopics, DeleteTopics, CreatePartitions): `broker.kafka.admin_topics`. Configs
(DescribeConfigs, AlterConfigs, IncrementalAlterConfigs): `broker.kafka.admin_configs`, over the
pure mapping of Kafka configs onto topic policies in `broker.kafka.topic_configs`.
`max_message_bytes` is what the produce path asks for a topic's `max.message.bytes`.
"""

from __future__ import annotations

from broker.kafka.admin_configs import alter_configs, describe_configs, incremental_alter_configs
from broker.kafka.admin_topics import create_partitions, create_topics, delete_topics, max_message_bytes

__all__ = ["alter_configs", "create_partitions", "create_topics", "delete_topics", "describe_configs",
           "incremental_alter_configs", "max_message_bytes"]
