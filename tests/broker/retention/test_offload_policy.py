"""Effective offload policies (topic > namespace > config) and the checks the admin API applies
before storing anything: message ids, thresholds, lags, OffloadProcessStatus JSON."""

from __future__ import annotations

import pytest

from broker.admin.offload import check_offload_position, message_id, status_json
from broker.retention import offload as op
from common.config import default_config
from common.errors import BadRequestBody, NotAllowed
from ledger.ml_offload import OffloadStatus
from ledger.position import Position
from ledger.types import LedgerInfo, LedgerState


def _config(**overrides: int):
    return default_config(**overrides)


def test_config_defaults_apply_when_nothing_is_set() -> None:
    policy = op.effective({}, _config(offload_threshold_bytes=10, offload_threshold_seconds=20,
                                      offload_deletion_lag_ms=30))
    assert policy == op.OffloadPolicy(10, 20, 30)
    assert policy.auto_enabled


def test_pulsar_defaults_leave_automatic_offload_off() -> None:
    policy = op.effective({}, _config())
    assert (policy.threshold_bytes, policy.threshold_seconds, policy.deletion_lag_ms) == (-1, -1, 14_400_000)
    assert not policy.auto_enabled


def test_namespace_overrides_config_and_minus_one_means_unset() -> None:
    config = _config(offload_threshold_bytes=10, offload_threshold_seconds=20, offload_deletion_lag_ms=30)
    ns = {op.NS_THRESHOLD_KEY: 1000, op.NS_THRESHOLD_SECONDS_KEY: -1, op.NS_DELETION_LAG_KEY: 0}
    assert op.effective(ns, config) == op.OffloadPolicy(1000, 20, 0)
    assert op.effective({op.NS_THRESHOLD_KEY: -1}, config).threshold_bytes == 10
    # another negative value is a real setting: automatic offload off
    assert op.effective({op.NS_THRESHOLD_KEY: -5}, config).threshold_bytes == -5


def test_topic_overrides_namespace_field_by_field() -> None:
    config = _config(offload_threshold_bytes=10, offload_threshold_seconds=20, offload_deletion_lag_ms=30)
    ns = {op.NS_THRESHOLD_KEY: 1000, op.NS_THRESHOLD_SECONDS_KEY: 3600, op.NS_DELETION_LAG_KEY: 60_000}
    topic = {op.TOPIC_OFFLOAD_KEY: {op.THRESHOLD_BYTES_FIELD: 0, op.THRESHOLD_SECONDS_FIELD: None,
                                    op.DELETION_LAG_FIELD: -1}}
    assert op.effective(ns, config, topic) == op.OffloadPolicy(0, 3600, -1)


@pytest.mark.parametrize("value", ["10M", 1.5, True, None, [1], {"a": 1}])
def test_a_non_integer_value_is_a_400(value: object) -> None:
    with pytest.raises(BadRequestBody):
        op.check_long(value, "offloadThreshold")


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_a_value_outside_a_java_long_is_a_412(value: int) -> None:
    with pytest.raises(NotAllowed):
        op.check_long(value, "offloadThreshold")


def test_offload_policies_keep_strata_s_fields_and_ignore_the_rest() -> None:
    stored = op.check_offload_policies({op.THRESHOLD_BYTES_FIELD: 1024, "managedLedgerOffloadDriver": "S3",
                                        "s3ManagedLedgerOffloadBucket": "b"})
    assert stored == {op.THRESHOLD_BYTES_FIELD: 1024, op.THRESHOLD_SECONDS_FIELD: None, op.DELETION_LAG_FIELD: None}


@pytest.mark.parametrize(("body", "error"), [
    ([], BadRequestBody), (5, BadRequestBody), ({op.THRESHOLD_BYTES_FIELD: "1M"}, BadRequestBody),
    ({op.DELETION_LAG_FIELD: 1.5}, BadRequestBody), ({}, NotAllowed),
    ({"managedLedgerOffloadDriver": "S3"}, NotAllowed),
    ({op.THRESHOLD_SECONDS_FIELD: 2**64}, NotAllowed)])
def test_bad_offload_policies_are_refused(body: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        op.check_offload_policies(body)


def test_message_id_bodies() -> None:
    assert message_id({"ledgerId": 7, "entryId": 0, "partitionIndex": -1}) == Position(7, 0)
    assert message_id({"ledgerId": 7, "entryId": 3, "batchIndex": 2, "unknown": "x"}) == Position(7, 3)
    for bad in (None, [], "7:0", {"ledgerId": 7}, {"entryId": 0}, {"ledgerId": "7", "entryId": 0},
                {"ledgerId": 7, "entryId": 0.0}, {"ledgerId": True, "entryId": 0}):
        with pytest.raises(BadRequestBody):
            message_id(bad)


def _ledger(ledger_id: int, entries: int, state: LedgerState) -> LedgerInfo:
    return LedgerInfo(ledger_id, entries, entries * 100, entries, state, 0, 0, 0)


def test_offload_position_must_name_a_kept_entry() -> None:
    ledgers = [_ledger(3, 10, LedgerState.OFFLOADED), _ledger(5, 10, LedgerState.CLOSED),
               _ledger(8, 0, LedgerState.CLOSED), _ledger(9, 4, LedgerState.OPEN)]
    for ok in (Position(3, 0), Position(5, 9), Position(8, 0), Position(9, 0), Position(9, 4)):
        check_offload_position(ledgers, ok)
    for bad in (Position(4, 0), Position(-1, -1), Position(5, 10), Position(5, -1), Position(9, 5),
                Position(10, 0), Position(8, 1)):
        with pytest.raises(NotAllowed):
            check_offload_position(ledgers, bad)


def test_status_json_has_pulsar_s_shape() -> None:
    never = status_json(OffloadStatus(), None)
    assert never == {"status": "NOT_RUN", "lastError": "",
                     "firstUnoffloadedMessage": {"ledgerId": -1, "entryId": -1, "partitionIndex": -1},
                     "progress": {"entriesDone": 0, "entriesTotal": 0}}
    done = status_json(OffloadStatus(status="SUCCESS", first_unoffloaded=Position(12, 0), entries_done=5,
                                     entries_total=5), None)
    assert done["firstUnoffloadedMessage"] == {"ledgerId": 12, "entryId": 0, "partitionIndex": -1}
    assert done["progress"] == {"entriesDone": 5, "entriesTotal": 5}
    running = status_json(OffloadStatus(status="RUNNING", entries_done=1, entries_total=9), None)
    assert running["firstUnoffloadedMessage"]["ledgerId"] == -1
    failed = status_json(OffloadStatus(status="ERROR", last_error="S3 down"), None)
    assert (failed["status"], failed["lastError"]) == ("ERROR", "S3 down")


def test_a_cold_tier_that_failed_its_check_shows_as_error_until_an_offload_runs() -> None:
    reason = "cold tier not usable, offload disabled: access denied"
    out = status_json(OffloadStatus(), reason)
    assert (out["status"], out["lastError"]) == ("ERROR", reason)
    ran = status_json(OffloadStatus(status="SUCCESS", first_unoffloaded=Position(2, 0)), reason)
    assert ran["status"] == "SUCCESS"


def test_partitioned_stats_sum_offloaded_bytes_and_keep_the_latest_offload() -> None:
    from broker.stats.topic_stats import _SUMMED, partitioned_stats

    def partition(offloaded: int, ledger: int, success_ms: int, failure_ms: int) -> dict:
        stats: dict = {key: 0 for key in _SUMMED}
        stats.update(storageSize=offloaded * 2, offloadedStorageSize=offloaded, lastOffloadLedgerId=ledger,
                     lastOffloadSuccessTimeStamp=success_ms, lastOffloadFailureTimeStamp=failure_ms,
                     publishers=[], subscriptions={})
        return stats

    out = partitioned_stats(2, {"p0": partition(100, 7, 1000, 0), "p1": partition(50, 3, 2000, 1500)}, False)
    assert (out["offloadedStorageSize"], out["storageSize"]) == (150, 300)
    assert (out["lastOffloadLedgerId"], out["lastOffloadSuccessTimeStamp"], out["lastOffloadFailureTimeStamp"]) \
        == (7, 2000, 1500)


def test_a_namespace_offload_policies_object_is_a_view_of_the_three_fields() -> None:
    assert op.namespace_offload_policies({}) is None
    assert op.namespace_offload_policies({op.NS_THRESHOLD_KEY: -1, op.NS_THRESHOLD_SECONDS_KEY: -1}) is None
    given = op.check_offload_policies({op.THRESHOLD_BYTES_FIELD: 0, op.DELETION_LAG_FIELD: 5000})
    fields = op.namespace_fields(given)
    assert fields == {op.NS_THRESHOLD_KEY: 0, op.NS_THRESHOLD_SECONDS_KEY: -1, op.NS_DELETION_LAG_KEY: 5000}
    assert op.namespace_offload_policies(fields) == given
    assert op.effective(fields, _config()) == op.OffloadPolicy(0, -1, 5000)
    unset = op.namespace_fields(dict.fromkeys(op.OFFLOAD_POLICY_FIELDS))
    assert unset == {op.NS_THRESHOLD_KEY: -1, op.NS_THRESHOLD_SECONDS_KEY: -1, op.NS_DELETION_LAG_KEY: None}
