"""Kafka admin APIs through real clients (confluent-kafka, kafka-python) against a standalone:
CreateTopics with configs, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
CreatePartitions, DeleteTopics, their refusals, and that Strata's admin REST sees the same topic
and policies (broker.kafka.admin, broker.kafka.topic_configs).

Every client object is held while its futures run (a dropped confluent AdminClient fails its
futures with _DESTROY)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from admin_client.client import AdminClient as RestClient
from tests.kafka.helpers import NAMESPACE, rest_partitions, unique_topic

CALL_TIMEOUT_S = 20.0
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000})


def one(futures: dict):
    (future,) = futures.values()
    return future.result(CALL_TIMEOUT_S)


def error_of(futures: dict) -> KafkaError:
    with pytest.raises(KafkaException) as refused:
        one(futures)
    return refused.value.args[0]


def configs_of(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    return one(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=CALL_TIMEOUT_S))


def broker_id(admin: AdminClient) -> str:
    """This standalone's Kafka node id (librdkafka sends a broker resource's request to that broker)."""
    return str(next(iter(admin.list_topics(timeout=CALL_TIMEOUT_S).brokers)))


def rest_policy(admin_url: str, topic: str, policy: str) -> object:
    return RestClient(admin_url).call("GET", f"/admin/v2/persistent/{NAMESPACE}/{topic}/{policy}")


def test_create_with_configs_describe_alter_grow_delete(admin: AdminClient, standalone) -> None:
    topic = unique_topic("admin-api")
    one(admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact",
                                                          "max.message.bytes": "65536"})],
                            request_timeout=CALL_TIMEOUT_S))
    assert rest_partitions(standalone.admin_url, topic) == 2
    assert rest_policy(standalone.admin_url, topic, "retention") == {"retentionTimeInMinutes": 60,
                                                                     "retentionSizeInMB": -1}
    assert rest_policy(standalone.admin_url, topic, "compactionThreshold") == 100 * MIB

    configs = configs_of(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    assert configs["max.message.bytes"].value == "65536"
    assert configs["min.insync.replicas"].is_read_only

    # incremental: one key set, one back to its default, the rest kept
    one(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", str(10 * MIB), incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])]))
    configs = configs_of(admin, topic)
    assert configs["retention.bytes"].value == str(10 * MIB) and configs["retention.ms"].value == "3600000"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"

    # the whole set replaced: what is not named goes back to the default
    one(admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"cleanup.policy": "delete"})]))
    configs = configs_of(admin, topic)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert rest_policy(standalone.admin_url, topic, "retention") is None

    one(admin.create_partitions([NewPartitions(topic, 4)], request_timeout=CALL_TIMEOUT_S))
    assert rest_partitions(standalone.admin_url, topic) == 4

    one(admin.delete_topics([topic], request_timeout=CALL_TIMEOUT_S))
    assert rest_partitions(standalone.admin_url, topic) == 0
    assert error_of(admin.delete_topics([topic], request_timeout=CALL_TIMEOUT_S)).code() \
        == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_refusals(admin: AdminClient) -> None:
    topic = unique_topic("admin-refused")
    one(admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=CALL_TIMEOUT_S))
    assert error_of(admin.create_topics([NewTopic(topic, 1, 1)])).code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_of(admin.create_topics([NewTopic(unique_topic("bad-config"), 1, 1, config={"segment.ms": "1"})])
                    ).code() == KafkaError.INVALID_CONFIG
    assert error_of(admin.create_topics([NewTopic("no/such/ns/x", 1, 1)])).code() == KafkaError.TOPIC_EXCEPTION
    assert error_of(admin.create_partitions([NewPartitions(topic, 1)])).code() == KafkaError.INVALID_PARTITIONS
    assert error_of(admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                                        set_config={"retention.ms": "soon"})])
                    ).code() == KafkaError.INVALID_CONFIG
    assert error_of(admin.alter_configs([ConfigResource(ResourceType.BROKER, broker_id(admin),
                                                        set_config={"num.partitions": "3"})])
                    ).code() == KafkaError.POLICY_VIOLATION
    one(admin.create_topics([NewTopic(unique_topic("checked"), 1, 1)], validate_only=True))
    one(admin.delete_topics([topic], request_timeout=CALL_TIMEOUT_S))


def test_broker_configs_are_listed_read_only(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.BROKER, broker_id(admin))
    configs = one(admin.describe_configs([resource], request_timeout=CALL_TIMEOUT_S))
    assert {"num.partitions", "message.max.bytes", "log.retention.ms"} <= set(configs)
    assert all(entry.is_read_only for entry in configs.values())


def test_kafka_python_admin(bootstrap: str, standalone) -> None:
    topic = unique_topic("kp-admin")
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(CALL_TIMEOUT_S * 1000))
    try:
        client.create_topics([KpNewTopic(topic, 3, 1, topic_configs={"retention.bytes": str(MIB)})])
        assert rest_partitions(standalone.admin_url, topic) == 3
        described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
        text = repr(described)
        assert "retention.bytes" in text and str(MIB) in text
        client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "120000"})])
        assert rest_policy(standalone.admin_url, topic, "retention") == {"retentionTimeInMinutes": 2,
                                                                         "retentionSizeInMB": 1}
        client.delete_topics([topic])
        assert rest_partitions(standalone.admin_url, topic) == 0
    finally:
        client.close()
