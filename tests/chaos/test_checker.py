"""The checker on synthetic histories (tests/chaos/synth.py): a clean seeded history passes every
check, and each check catches its own violation, and only that one; the redeliveries Pulsar
allows (nack, ack timeout, a consumer crash, a fault that can lose an unpersisted ack) are not
flagged, and those it does not allow are.
"""

from __future__ import annotations

import json

from chaos.checker import Verdict, check
from chaos.checks.subs import PERSIST_WINDOW_S
from chaos.history import payload
from chaos.orphans import OrphanReport
from tests.chaos.synth import PARTED, PLAIN, Built, clean_history, rec

LEASE_S = 10.0


def judge(built: Built, **kwargs) -> Verdict:
    kwargs.setdefault("orphans", OrphanReport())
    return check(built.records, lease_s=LEASE_S, **kwargs)


def counts(verdict: Verdict) -> dict[str, int]:
    return {name: cat.count for name, cat in verdict.categories.items() if cat.count}


def only(verdict: Verdict, *names: str) -> None:
    assert set(verdict.violations) == set(names), (verdict.violations, counts(verdict))


def test_a_clean_history_is_valid_with_every_count_zero(seed):
    verdict = judge(clean_history(seed, faults=True))
    assert verdict.valid, counts(verdict)
    assert counts(verdict) == {}
    assert verdict.liveness.ok, verdict.liveness.to_json()
    assert verdict.stats["faults"] >= 3 and verdict.stats["sends_ok"] == verdict.stats["read_back"]
    json.dumps(verdict.to_json())                 # the verdict is plain JSON


def test_no_orphan_report_is_not_a_pass():
    verdict = check(clean_history(1).records, lease_s=LEASE_S, orphans=None)
    assert not verdict.valid and {"orphans", "missing_objects"} <= set(verdict.violations)


def test_orphans_and_missing_objects_make_it_invalid():
    report = OrphanReport(orphans=["strata/t/ns/x/ledger-00000000000000000009.parquet"],
                          missing=[("t/ns/persistent/x", 7, "strata/t/ns/x/ledger-00000000000000000007.parquet")])
    verdict = judge(clean_history(1), orphans=report)
    only(verdict, "orphans", "missing_objects")
    assert verdict.categories["orphans"].examples[0]["key"].endswith("09.parquet")


# ---- the log ---------------------------------------------------------------------------------

def _drop_read(built: Built, value: str) -> None:
    built.drop(built.one("read", value=value))


def test_a_lost_middle_value_is_lost_and_in_the_middle(seed):
    built = clean_history(seed)
    values = built.values_of("p-plain")
    _drop_read(built, values[len(values) // 2])
    verdict = judge(built)
    only(verdict, "lost")
    assert counts(verdict) == {"lost": 1, "lost_middle": 1}
    assert verdict.categories["lost"].examples[0]["value"] == values[len(values) // 2]


def test_lost_prefix_and_postfix(seed):
    built = clean_history(seed)
    values = built.values_of("p-parted")
    for value in values[:2] + values[-1:]:
        _drop_read(built, value)
    verdict = judge(built)
    assert counts(verdict) == {"lost": 3, "lost_prefix": 2, "lost_postfix": 1}


def test_an_incomplete_read_back_is_reported_and_its_gaps_are_unverified_not_lost():
    built = clean_history(3)
    final = built.one("final", topic=PLAIN)
    final["complete"], final["error"] = False, "reader timed out"
    _drop_read(built, built.values_of("p-plain")[-1])
    verdict = judge(built)
    only(verdict, "incomplete_readback")
    assert counts(verdict) == {"incomplete_readback": 1, "unverified": 1}
    assert verdict.categories["incomplete_readback"].examples[0]["error"] == "reader timed out"


def test_a_partition_without_a_final_record_is_incomplete():
    built = clean_history(4)
    built.drop(built.one("final", topic=f"{PARTED}-partition-1"))
    verdict = judge(built)
    only(verdict, "incomplete_readback")


def test_a_seq_stored_twice_is_duplicated_but_a_reread_entry_is_not():
    built = clean_history(5)
    read = built.find("read", topic=PLAIN)[3]
    built.add({**read, "t": read["t"] + 0.0001})                    # a reconnect read it again
    assert judge(built).valid
    built.add({**read, "t": read["t"] + 0.0002, "msg_id": "999:0:-1:-1"})   # stored again elsewhere
    verdict = judge(built)
    only(verdict, "duplicated")
    example = verdict.categories["duplicated"].examples[0]
    assert example["value"] == read["value"] and len(example["copies"]) == 2


def test_two_sends_stored_out_of_order_are_nonmonotonic():
    built = clean_history(6)
    reads = built.find("read", topic=PLAIN)
    first, second = reads[4], reads[5]
    for field in ("value", "key"):
        first[field], second[field] = second[field], first[field]      # stored in the other order
    verdict = judge(built)
    assert "nonmonotonic" in verdict.violations
    assert verdict.categories["nonmonotonic"].count == 1
    example = verdict.categories["nonmonotonic"].examples[0]
    assert example["earlier"]["seq"] > example["later"]["seq"]


def _flip(value: str) -> str:
    i = value.index(":") + 1
    return value[:i] + chr(ord(value[i]) ^ 1) + value[i + 1:]


def test_a_bit_flipped_payload_is_wrong_bytes_wherever_it_is_seen():
    built = clean_history(7)
    deliver = built.find("deliver", sub="sh")[2]
    deliver["value"] = _flip(deliver["value"])
    verdict = judge(built)
    assert "wrong_bytes" in verdict.violations
    assert verdict.categories["wrong_bytes"].examples[0]["source"].startswith("subscription sh")
    built = clean_history(7)
    built.add(rec("read", built.records[-1]["t"], "reader-1", topic=PLAIN, reader="tail",
                  value=_flip(payload("p-plain", 0)), key=None, msg_id="1:1:-1:-1"))
    assert judge(built).categories["wrong_bytes"].count == 1


def test_unknown_and_failed_sends_present_are_reported_but_valid():
    built = clean_history(8)
    built.sends[1]["outcome"], built.sends[1]["t1"] = "unknown", None
    built.sends[2]["outcome"], built.sends[2]["error"] = "failed", "Disconnected"
    verdict = judge(built)
    assert verdict.valid, verdict.violations
    assert counts(verdict) == {"unknown_present": 1, "failed_present": 1}


def test_a_stored_value_no_send_names_is_unrecorded_and_valid():
    built = clean_history(9)
    built.drop(built.sends[0])
    verdict = judge(built)
    assert verdict.valid and counts(verdict) == {"unrecorded_present": 1}


# ---- subscriptions ---------------------------------------------------------------------------

def test_a_message_a_subscription_never_delivered_is_unseen():
    built = clean_history(10)
    value = built.values_of("p-parted")[3]
    built.drop(built.one("deliver", sub="ks", value=value))
    verdict = judge(built)
    only(verdict, "unseen")
    assert verdict.categories["unseen"].examples == [{"topic": PARTED, "sub": "ks", "value": value,
                                                      "msg_id": built.one("send", value=value)["msg_id"]}]


def _same_key_pair(built: Built, producer: str) -> tuple[str, str]:
    by_key: dict[str, list[str]] = {}
    for send in built.sends:
        if send["producer"] == producer and send["key"] is not None:
            by_key.setdefault(send["key"], []).append(send["value"])
    values = next(v for v in by_key.values() if len(v) >= 2)
    return values[0], values[1]


def _swap_delivery_times(built: Built, sub: str, a: str, b: str) -> tuple[dict, dict]:
    first, second = built.one("deliver", sub=sub, value=a), built.one("deliver", sub=sub, value=b)
    first["t"], second["t"] = second["t"], first["t"]
    built.records.sort(key=lambda r: r["t"])
    return first, second


def test_a_key_delivered_out_of_log_order_breaks_key_order_on_key_shared_and_failover():
    for sub in ("ks", "fo"):
        built = clean_history(11)
        a, b = _same_key_pair(built, "p-parted")
        _swap_delivery_times(built, sub, a, b)
        verdict = judge(built)
        assert verdict.categories["key_order"].count == 1, (sub, counts(verdict))
        example = verdict.categories["key_order"].examples[0]
        assert (example["sub"], example["earlier"]["value"], example["later"]["value"]) == (sub, b, a)


def test_key_order_is_not_judged_on_shared_nor_on_redeliveries():
    built = clean_history(12)
    a, b = _same_key_pair(built, "p-plain")
    _swap_delivery_times(built, "sh", a, b)
    assert judge(built).categories["key_order"].count == 0
    built = clean_history(12)
    a, b = _same_key_pair(built, "p-plain")
    first, _ = _swap_delivery_times(built, "ks", a, b)
    first["redelivery"] = 1                      # the earlier message came again: not a first delivery
    built.drop(built.one("ack", sub="ks", value=a))   # (and it was not acked before, so no other finding)
    verdict = judge(built)
    assert verdict.categories["key_order"].count == 0, counts(verdict)


def _redeliver(built: Built, sub: str, value: str, after_s: float, **fields) -> dict:
    ack = built.one("ack", sub=sub, value=value)
    delivery = {**built.one("deliver", sub=sub, value=value), "t": ack["t"] + after_s, "redelivery": 1, **fields}
    built.add(delivery)
    return ack


def test_a_redelivery_after_a_persisted_individual_ack_is_flagged():
    built = clean_history(13)
    value = built.values_of("p-plain")[5]
    ack = _redeliver(built, "sh", value, PERSIST_WINDOW_S + 3)
    verdict = judge(built)
    only(verdict, "redelivered_after_ack")
    example = verdict.categories["redelivered_after_ack"].examples[0]
    assert (example["value"], example["acked_t"]) == (value, ack["t"])


def test_a_redelivery_covered_by_a_cumulative_ack_is_flagged():
    built = clean_history(14)
    values = built.values_of("p-plain")
    for ack in built.find("ack", sub="ex"):
        ack["mode"] = "individual"
    last = built.one("ack", sub="ex", value=values[-1])
    last["mode"] = "cumulative"
    for value in values[:-1]:
        built.drop(built.one("ack", sub="ex", value=value))      # only the cumulative one acks them
    redelivered = {**built.one("deliver", sub="ex", value=values[2]), "t": last["t"] + 5, "redelivery": 1}
    built.add(redelivered)
    verdict = judge(built)
    only(verdict, "redelivered_after_ack")
    assert verdict.categories["redelivered_after_ack"].examples[0]["ack_mode"] == "cumulative"


def test_redeliveries_pulsar_allows_are_not_flagged():
    value_index = 6
    # a nack of it
    built = clean_history(15)
    value = built.values_of("p-plain")[value_index]
    ack = _redeliver(built, "sh", value, 5.0)
    built.add(rec("nack", ack["t"] + 1, "c-sh", topic=PLAIN, sub="sh", consumer="sh-1", value=value,
                  msg_id=ack["msg_id"]))
    assert judge(built).valid
    # a consumer of the subscription crashed just after the ack
    built = clean_history(15)
    ack = _redeliver(built, "sh", value, 5.0)
    built.add(rec("consumer", ack["t"] + 0.05, "runner", topic=PLAIN, sub="sh", consumer="sh-1", event="crashed"))
    assert judge(built).valid
    # a broker fault, and a metadata-store fault, around the ack
    for role, start, heal in (("broker", -0.5, 8.0), ("metadata", 0.3, 4.0), ("network", -3.0, -0.2)):
        built = clean_history(15)
        ack = _redeliver(built, "sh", value, 9.0)
        built.add(rec("fault", ack["t"] + start, "nemesis", fault=f"{role}-x", role=role, target="x", id="f1"))
        built.add(rec("heal", ack["t"] + heal, "nemesis", fault=f"{role}-x", role=role, target="x", id="f1"))
        verdict = judge(built)
        assert verdict.categories["redelivered_after_ack"].count == 0, (role, counts(verdict))
    # an ack timeout that fired about when the consumer acked
    built = clean_history(15)
    opened = built.one("consumer", topic=PLAIN, sub="sh", event="open")
    opened["ack_timeout_ms"] = 1
    _redeliver(built, "sh", value, 5.0)
    assert judge(built).valid


def test_faults_that_cannot_lose_an_ack_or_are_far_from_it_do_not_excuse_a_redelivery():
    cases = [("bookie", -0.5, 8.0), ("s3", -0.5, 8.0), ("broker", PERSIST_WINDOW_S + 1, PERSIST_WINDOW_S + 3)]
    for role, start, heal in cases:
        built = clean_history(16)
        value = built.values_of("p-plain")[4]
        ack = _redeliver(built, "sh", value, 9.0)
        built.add(rec("fault", ack["t"] + start, "nemesis", fault=f"{role}-x", role=role, target="x", id="f1"))
        built.add(rec("heal", ack["t"] + heal, "nemesis", fault=f"{role}-x", role=role, target="x", id="f1"))
        assert judge(built).categories["redelivered_after_ack"].count == 1, role
    # a crash long after the ack was persisted does not excuse it either
    built = clean_history(16)
    ack = _redeliver(built, "sh", value, 9.0)
    built.add(rec("consumer", ack["t"] + PERSIST_WINDOW_S + 1, "runner", topic=PLAIN, sub="sh", consumer="sh-1",
                  event="crashed"))
    assert judge(built).categories["redelivered_after_ack"].count == 1


def test_a_delivery_before_the_ack_is_not_a_redelivery():
    built = clean_history(17)
    value = built.values_of("p-parted")[2]
    delivery = built.one("deliver", sub="fo", value=value)
    built.add({**delivery, "t": delivery["t"] + 0.0001, "redelivery": 1})    # twice before the ack
    for ack in built.find("ack", sub="fo", value=value):
        ack["t"] = delivery["t"] + 0.0003
    built.records.sort(key=lambda r: r["t"])
    assert judge(built).valid, counts(judge(built))


def test_a_redelivery_before_the_ack_is_surely_persisted_is_allowed():
    """An Exclusive or Failover rewind (after a nack) redelivers what the broker has not heard
    acked yet: pulsar-client groups acks for ~100 ms. Inside the persist window it is allowed."""
    built = clean_history(17)
    value = built.values_of("p-plain")[3]
    _redeliver(built, "ex", value, 0.06)
    assert judge(built).categories["redelivered_after_ack"].count == 0


def test_the_earliest_cumulative_ack_covering_a_value_is_the_one_judged():
    """A value covered by an old cumulative ack stays acked when a newer cumulative ack lands just
    before its redelivery: judged from the old one, it is flagged."""
    built = clean_history(18)
    values = built.values_of("p-plain")
    for ack in built.find("ack", sub="ex"):
        ack["mode"] = "individual"
    first, last = built.one("ack", sub="ex", value=values[3]), built.one("ack", sub="ex", value=values[-1])
    first["mode"] = last["mode"] = "cumulative"
    for value in values[:3] + values[4:-1]:
        built.drop(built.one("ack", sub="ex", value=value))
    redelivered = {**built.one("deliver", sub="ex", value=values[1]), "t": last["t"] + 0.05, "redelivery": 1}
    assert redelivered["t"] - first["t"] > PERSIST_WINDOW_S, "the clean history spans the window"
    built.add(redelivered)
    only(judge(built), "redelivered_after_ack")


def _batched_pair(seed: int) -> tuple[Built, str, str]:
    """A clean history whose messages 2 and 3 of p-plain share one entry (9:9) as a batch."""
    built = clean_history(seed)
    first, second = built.values_of("p-plain")[2:4]
    for record in built.records:
        if record.get("value") in (first, second) and "msg_id" in record:
            record["msg_id"] = f"9:9:-1:{0 if record['value'] == first else 1}"
    return built, first, second


def test_a_batch_comes_back_whole_until_every_message_in_it_is_acked():
    """Pulsar acks a batch's entry only once all its messages are acked (batch-index acks off):
    a redelivery of an acked message whose sibling was nacked is allowed; once every sibling was
    acked long before, it is not."""
    built, first, second = _batched_pair(19)
    ack = built.one("ack", sub="sh", value=second)
    built.add(rec("nack", ack["t"] - 0.01, "c-sh", topic=PLAIN, sub="sh", consumer="sh-1", value=second,
                  msg_id="9:9:-1:1"))
    _redeliver(built, "sh", first, PERSIST_WINDOW_S + 3)
    assert judge(built).categories["redelivered_after_ack"].count == 0
    built, first, _ = _batched_pair(19)
    _redeliver(built, "sh", first, PERSIST_WINDOW_S + 3)
    only(judge(built), "redelivered_after_ack")
