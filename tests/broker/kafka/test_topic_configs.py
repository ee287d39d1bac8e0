"""Kafka topic configs <-> Strata topic policies (broker.kafka.topic_configs): pure, no broker."""

import pytest

from broker.compaction import threshold
from broker.kafka import topic_configs as tc
from broker.records import policies
from common.config import default_config

MIB = 1024 * 1024
CONFIG = default_config()


def test_retention_ms_rounds_up_to_minutes_and_bytes_to_mib():
    explicit = tc.checked({"retention.ms": "90001", "retention.bytes": str(MIB + 1)}, CONFIG)
    fields = tc.to_policies(explicit, {}, CONFIG)
    assert fields[policies.RETENTION_KEY] == {"retentionTimeInMinutes": 2, "retentionSizeInMB": 2}
    assert tc.explicit_configs(fields) == {"retention.ms": "120000", "retention.bytes": str(2 * MIB)}


def test_one_retention_value_leaves_the_other_unbounded():
    fields = tc.to_policies(tc.checked({"retention.ms": "60000"}, CONFIG), {}, CONFIG)
    assert fields[policies.RETENTION_KEY] == {"retentionTimeInMinutes": 1, "retentionSizeInMB": -1}
    fields = tc.to_policies(tc.checked({"retention.bytes": "-1"}, CONFIG), {}, CONFIG)
    assert fields[policies.RETENTION_KEY] == {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}


def test_zero_pairs_with_zero_and_is_refused_with_anything_else():
    fields = tc.to_policies(tc.checked({"retention.ms": "0"}, CONFIG), {}, CONFIG)
    assert fields[policies.RETENTION_KEY] == {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
    with pytest.raises(tc.ConfigRefused, match="go together"):
        tc.checked({"retention.ms": "0", "retention.bytes": "100"}, CONFIG)


def test_long_max_means_forever():
    fields = tc.to_policies(tc.checked({"retention.ms": str(2**63 - 1)}, CONFIG), {}, CONFIG)
    assert fields[policies.RETENTION_KEY]["retentionTimeInMinutes"] == -1


@pytest.mark.parametrize(("name", "value"), [("retention.ms", "-2"), ("retention.ms", "soon"),
                                             ("retention.bytes", ""), ("cleanup.policy", "compact,nope"),
                                             ("cleanup.policy", ""), ("max.message.bytes", "0"),
                                             ("max.message.bytes", str(64 * MIB)), ("segment.ms", "1"),
                                             ("min.insync.replicas", "2")])
def test_bad_names_and_values_are_refused(name, value):
    with pytest.raises(tc.ConfigRefused):
        tc.checked({name: value}, CONFIG)


def test_cleanup_policy_maps_to_a_compaction_threshold():
    compact = tc.to_policies(tc.checked({"cleanup.policy": "compact"}, CONFIG), {}, CONFIG)
    assert compact[threshold.TOPIC_KEY] == tc.COMPACT_THRESHOLD_BYTES
    inherited = tc.to_policies({"cleanup.policy": "compact"}, {threshold.NS_KEY: 5 * MIB}, CONFIG)
    assert inherited[threshold.TOPIC_KEY] == 5 * MIB
    kept = tc.to_policies({"cleanup.policy": "compact"}, {}, CONFIG, {threshold.TOPIC_KEY: 7})
    assert kept[threshold.TOPIC_KEY] == 7
    delete = tc.to_policies(tc.checked({"cleanup.policy": "delete"}, CONFIG), {threshold.NS_KEY: 5 * MIB}, CONFIG)
    assert delete[threshold.TOPIC_KEY] == 0          # off, although the namespace compacts
    assert tc.checked({"cleanup.policy": "delete, compact"}, CONFIG) == {"cleanup.policy": "compact"}
    assert tc.explicit_configs(delete) == {"cleanup.policy": "delete"}


def test_an_empty_set_removes_every_kafka_policy_and_only_those():
    fields = tc.to_policies({}, {}, CONFIG)
    assert fields == {policies.RETENTION_KEY: None, threshold.TOPIC_KEY: None, tc.MAX_MESSAGE_SIZE_KEY: None}


def test_describe_marks_what_the_topic_sets():
    own = {tc.MAX_MESSAGE_SIZE_KEY: 1000, policies.DEDUP_KEY: True}
    entries = {e.name: e for e in tc.describe(own, {}, CONFIG, None)}
    assert entries["max.message.bytes"].value == "1000" and entries["max.message.bytes"].source == tc.SOURCE_TOPIC
    assert entries["retention.ms"].source == tc.SOURCE_DEFAULT and entries["retention.ms"].is_default
    assert entries["retention.ms"].value == str(CONFIG.retention_time_minutes * 60_000)
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].config_type == tc.TYPE_LIST
    assert entries["min.insync.replicas"].read_only
    assert entries["retention.bytes"].to_wire()["config_type"] == tc.TYPE_LONG
    assert [e.name for e in tc.describe(own, {}, CONFIG, ["retention.ms", "nope"])] == ["retention.ms"]


def test_describe_broker_is_read_only():
    entries = tc.describe_broker(CONFIG, None)
    assert all(e.read_only for e in entries)
    assert {e.name for e in entries} >= {"log.retention.ms", "num.partitions", "message.max.bytes"}


def test_max_message_bytes_getter():
    assert tc.max_message_bytes_of({}, CONFIG) == CONFIG.broker_max_message_bytes
    assert tc.max_message_bytes_of({tc.MAX_MESSAGE_SIZE_KEY: 1234}, CONFIG) == 1234


def test_incremental_set_delete_append_subtract():
    defaults = tc.default_configs({}, CONFIG)
    explicit = {"retention.ms": "60000", "retention.bytes": "-1"}
    out = tc.apply_incremental(explicit, defaults, [("max.message.bytes", tc.SET, "2048"),
                                                    ("retention.ms", tc.DELETE, None)], CONFIG)
    assert out == {"retention.bytes": "-1", "max.message.bytes": "2048"}
    out = tc.apply_incremental({}, defaults, [("cleanup.policy", tc.APPEND, "compact")], CONFIG)
    assert out == {"cleanup.policy": "compact"}
    out = tc.apply_incremental(out, defaults, [("cleanup.policy", tc.SUBTRACT, "compact")], CONFIG)
    assert out == {"cleanup.policy": "delete"}
    with pytest.raises(ValueError, match="list configs only"):
        tc.apply_incremental({}, defaults, [("retention.ms", tc.APPEND, "1")], CONFIG)
    with pytest.raises(tc.ConfigRefused):
        tc.apply_incremental({}, defaults, [("segment.bytes", tc.DELETE, None)], CONFIG)
    with pytest.raises(tc.ConfigRefused):
        tc.apply_incremental({}, defaults, [("retention.bytes", tc.SET, "5"), ("retention.ms", tc.SET, "0")],
                             CONFIG)
