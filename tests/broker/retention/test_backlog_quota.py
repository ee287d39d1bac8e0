"""Backlog quota rules as plain functions (`broker.retention.backlog_quota`): bodies, precedence, the
retention conflict, and when a backlog is "exceeded" (measured, never remembered).

The end-to-end behaviour of each policy is in tests/acceptance/test_backlog_quota.py.
"""

from __future__ import annotations

import pytest

from broker.admin.namespace_policies import policies_from_body, policies_json
from broker.records.bundles import NamespaceBundles, equal_boundaries
from broker.retention import backlog_quota as bq
from common.config import load_config
from common.errors import BadRequestBody, ConfigError

NOW_MS = 1_000_000_000


def test_body_takes_pulsars_fields_and_aliases() -> None:
    assert bq.quota_from_body({"limitSize": 10, "limitTime": 5, "policy": "producer_exception"}) == \
        bq.BacklogQuota(10, 5, "producer_exception")
    assert bq.quota_from_body({"limit": 7, "policy": "consumer_backlog_eviction"}) == \
        bq.BacklogQuota(7, -1, "consumer_backlog_eviction")
    assert bq.quota_from_body({"policy": "producer_request_hold"}) == bq.BacklogQuota(-1, -1, "producer_request_hold")
    assert bq.BacklogQuota(10, 5, "producer_exception").to_json() == {
        "limit": 10, "limitSize": 10, "limitTime": 5, "policy": "producer_exception"}


@pytest.mark.parametrize("body", [None, [], {"limitSize": 1}, {"limitSize": "1M", "policy": "producer_exception"},
                                  {"limitSize": -2, "policy": "producer_exception"},
                                  {"limitTime": True, "policy": "producer_exception"},
                                  {"limitSize": 1, "policy": "drop_everything"}])
def test_malformed_bodies_are_400(body: object) -> None:
    with pytest.raises(BadRequestBody):
        bq.quota_from_body(body)


def test_quota_type_defaults_to_destination_storage() -> None:
    assert bq.quota_type(None) == bq.quota_type("") == "destination_storage"
    assert bq.quota_type("message_age") == "message_age"
    with pytest.raises(BadRequestBody):
        bq.quota_type("backlog_bytes")


def test_the_topic_wins_then_the_namespace_then_the_broker() -> None:
    config = load_config(backlog_quota_default_limit_bytes=100, backlog_quota_default_policy="producer_exception")
    ns = {bq.QUOTA_KEY: {"destination_storage": {"limitSize": 50, "limitTime": -1, "policy": "producer_request_hold"},
                         "message_age": {"limitSize": -1, "limitTime": 60, "policy": "consumer_backlog_eviction"}}}
    topic = {bq.QUOTA_KEY: {"message_age": {"limitTime": 5, "policy": "producer_exception"}}}
    found = bq.effective(ns, topic, config)
    assert found["destination_storage"] == bq.BacklogQuota(50, -1, "producer_request_hold")
    assert found["message_age"] == bq.BacklogQuota(-1, 5, "producer_exception")
    assert bq.effective({}, None, config)["destination_storage"] == bq.BacklogQuota(100, -1, "producer_exception")


def test_default_policy_must_be_pulsars() -> None:
    with pytest.raises(ConfigError):
        load_config(backlog_quota_default_policy="drop")


@pytest.mark.parametrize(("quota", "retention", "conflict"), [
    (bq.BacklogQuota(2 * 1024 * 1024, -1), {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}, True),
    (bq.BacklogQuota(1024 * 1024, -1), {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}, True),  # equal
    (bq.BacklogQuota(512 * 1024, -1), {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}, False),
    (bq.BacklogQuota(-1, 600), {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}, True),
    (bq.BacklogQuota(-1, 599), {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}, False),
    (bq.BacklogQuota(10**12, 10**9), {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}, False),
    (bq.BacklogQuota(10**12, 10**9), None, False),
])
def test_a_quota_at_or_over_the_retention_conflicts(quota, retention, conflict) -> None:
    assert bq.conflicts_with_retention(quota, retention) is conflict


def _subs(*backlogs: tuple[int, int]) -> list[bq.SubscriptionBacklog]:
    return [bq.SubscriptionBacklog(f"s{i}", size, oldest) for i, (size, oldest) in enumerate(backlogs)]


def test_size_is_the_largest_subscription_backlog() -> None:
    quota = bq.BacklogQuota(1000, -1)
    assert bq.exceeded("destination_storage", quota, _subs((999, 1), (10, 1)), NOW_MS) is False
    assert bq.exceeded("destination_storage", quota, _subs((999, 1), (1000, 1)), NOW_MS) is True
    assert bq.exceeded("destination_storage", bq.BacklogQuota(-1, -1), _subs((10**9, 1)), NOW_MS) is False


def test_an_empty_backlog_is_never_exceeded() -> None:
    """Pulsar #15609: a drained topic kept refusing producers. Nothing but the backlog counts."""
    assert bq.exceeded("destination_storage", bq.BacklogQuota(0, -1), _subs((0, 0)), NOW_MS) is False
    assert bq.exceeded("message_age", bq.BacklogQuota(-1, 1), _subs((0, 0), (0, 0)), NOW_MS) is False
    assert bq.exceeded("message_age", bq.BacklogQuota(-1, 1), [], NOW_MS) is False


def test_age_is_the_oldest_unacked_message() -> None:
    quota = bq.BacklogQuota(-1, 60)
    young, old = NOW_MS - 59_000, NOW_MS - 61_000
    assert bq.exceeded("message_age", quota, _subs((5, young), (0, 0)), NOW_MS) is False
    assert bq.exceeded("message_age", quota, _subs((5, young), (5, old)), NOW_MS) is True
    assert bq.exceeded("message_age", bq.BacklogQuota(-1, 0), _subs((5, old)), NOW_MS) is False   # 0: none


def test_namespace_policies_carry_the_quota_map() -> None:
    body = {"backlog_quota_map": {"message_age": {"limitTime": 30, "policy": "producer_exception"}}}
    stored, _, _ = policies_from_body(body, "standalone")
    bundles = NamespaceBundles("t", "ns", tuple(equal_boundaries(1)))
    out = policies_json(stored, bundles, "standalone")
    assert out["backlog_quota_map"] == {"message_age": {"limit": -1, "limitSize": -1, "limitTime": 30,
                                                        "policy": "producer_exception"}}
    assert policies_json({}, bundles, "standalone")["backlog_quota_map"] == {}
    with pytest.raises(BadRequestBody):
        policies_from_body({"backlog_quota_map": {"message_age": {"policy": "nope"}}}, "standalone")
