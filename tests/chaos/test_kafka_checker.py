"""The Kafka checks (chaos.checks.kafka) on synthetic histories of the Kafka workload: a clean one
passes with every count zero; each violation is caught by its own category (and only by it); a
redelivery to the group after a rebalance is counted, never a failure; recovery after a fault is
measured per partition; a history without Kafka records gets no Kafka category at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from chaos.checker import Verdict, check
from chaos.checks.kafka import check_kafka
from chaos.checks.model import History
from chaos.history import payload
from chaos.orphans import OrphanReport
from tests.chaos.synth import clean_history, rec

T0 = 1_700_000_000.0
PARTITIONS = 3
GAP_S = 0.1
Record = dict[str, Any]


@dataclass
class KafkaRun:
    """A clean history: two producers, every send acknowledged, consumed once and committed,
    every partition read back whole, in order."""

    records: list[Record] = field(default_factory=list)
    sends: list[Record] = field(default_factory=list)

    @classmethod
    def build(cls, count: int = 30) -> KafkaRun:
        run = cls()
        run.add(rec("kafka-topic", T0, "runner", topic="k", pulsar="persistent://chaos/ns/k", partitions=PARTITIONS,
                    group="g", producers=["p0", "p1"], members=["m0", "m1", "m2"]))
        offsets = [0] * PARTITIONS
        t = T0 + 1
        for i in range(count):
            producer, seq = f"p{i % 2}", i // 2
            p = seq % PARTITIONS
            send = rec("kafka-send", t + 0.05, "producer-kafka", producer=producer, seq=seq,
                       value=payload(producer, seq), outcome="ok", t0=t, t1=t + 0.05, partition=p,
                       offset=offsets[p], error=None)
            run.sends.append(send)
            run.add(send)
            run.add(rec("kafka-consume", t + 0.1, "consumer-kafka", member=f"m{p}", partition=p, offset=offsets[p],
                        value=send["value"], key=producer))
            run.add(rec("kafka-commit", t + 0.11, "consumer-kafka", member=f"m{p}", offsets={str(p): offsets[p] + 1},
                        ok=True, error=None))
            offsets[p] += 1
            t += GAP_S
        t += 5
        for p in range(PARTITIONS):
            for send in sorted((s for s in run.sends if s["partition"] == p), key=lambda s: s["offset"]):
                run.add(rec("kafka-read", t, "final-kafka", partition=p, offset=send["offset"], value=send["value"],
                            key=send["producer"]))
            run.add(rec("kafka-final", t, "final-kafka", partition=p, low=0, high=offsets[p], count=offsets[p],
                        complete=True, error=None))
        return run

    def add(self, record: Record) -> None:
        self.records.append(record)
        self.records.sort(key=lambda r: r["t"])

    def drop(self, op: str, **match: Any) -> None:
        self.records = [r for r in self.records if not (r["op"] == op and all(r.get(k) == v for k, v in match.items()))]

    def find(self, op: str, **match: Any) -> list[Record]:
        return [r for r in self.records if r["op"] == op and all(r.get(k) == v for k, v in match.items())]


def judge(records: list[Record]) -> Verdict:
    return check(records, lease_s=3.0, orphans=OrphanReport())


def kafka_counts(verdict: Verdict) -> dict[str, int]:
    return {name: cat.count for name, cat in verdict.categories.items() if name.startswith("kafka_") and cat.count}


def test_a_clean_kafka_history_is_valid_with_every_count_zero() -> None:
    verdict = judge(KafkaRun.build().records)
    assert verdict.valid and kafka_counts(verdict) == {}, kafka_counts(verdict)
    assert verdict.kafka is not None
    stats = verdict.kafka.stats
    assert stats["sends_ok"] == stats["consumed"] == stats["read_back"] == 30 and stats["redelivered"] == 0
    json.dumps(verdict.to_json())


def test_without_kafka_records_there_is_no_kafka_category() -> None:
    verdict = judge(clean_history(3).records)
    assert verdict.kafka is None and not any(name.startswith("kafka_") for name in verdict.categories)


def test_an_acknowledged_record_the_group_never_consumed_is_lost() -> None:
    run = KafkaRun.build()
    victim = run.sends[7]
    run.drop("kafka-consume", value=victim["value"])
    verdict = judge(run.records)
    assert set(verdict.violations) == {"kafka_lost"}
    assert verdict.categories["kafka_lost"].examples[0]["value"] == victim["value"]


def test_an_acknowledged_record_missing_from_the_read_is_lost_in_storage_and_the_offsets_disagree() -> None:
    run = KafkaRun.build()
    victim = run.sends[4]
    run.drop("kafka-read", value=victim["value"])
    verdict = judge(run.records)
    # the group consumed it at an offset the final read no longer holds
    assert set(verdict.violations) == {"kafka_lost_in_storage", "kafka_offset_mismatch"}
    assert verdict.categories["kafka_lost_in_storage"].count == 1
    assert verdict.categories["kafka_gaps"].count == 1          # the offset it held is skipped


def test_a_seq_stored_at_two_offsets_is_duplicated_in_storage() -> None:
    run = KafkaRun.build()
    victim = run.sends[5]
    p = victim["partition"]
    final = run.find("kafka-final", partition=p)[0]
    run.add(rec("kafka-read", final["t"], "final-kafka", partition=p, offset=final["high"], value=victim["value"],
                key=victim["producer"]))
    final["high"] += 1
    verdict = judge(run.records)
    assert "kafka_duplicated_in_storage" in verdict.violations
    copies = verdict.categories["kafka_duplicated_in_storage"].examples[0]["copies"]
    assert [tuple(c) for c in copies] == [(p, victim["offset"]), (p, final["high"] - 1)]


def test_a_delivery_report_offset_that_holds_another_record_is_a_mismatch() -> None:
    run = KafkaRun.build()
    run.sends[6]["offset"] += 1
    verdict = judge(run.records)
    assert set(verdict.violations) == {"kafka_offset_mismatch"}


def test_records_of_one_producer_stored_out_of_order_are_nonmonotonic() -> None:
    run = KafkaRun.build()
    p0 = [r for r in run.find("kafka-read", partition=0) if r["value"].startswith("p0:")]
    first, second = p0[0], p0[1]
    first["value"], second["value"] = second["value"], first["value"]
    verdict = judge(run.records)
    assert "kafka_nonmonotonic" in verdict.violations


def test_a_redelivery_after_a_rebalance_is_counted_not_failed() -> None:
    run = KafkaRun.build()
    again = run.find("kafka-consume", partition=1)[:3]
    for r in again:
        run.add(rec("kafka-consume", r["t"] + 2, "consumer-kafka", member="m2", partition=1, offset=r["offset"],
                    value=r["value"], key=r["key"]))
    verdict = judge(run.records)
    assert verdict.valid, verdict.violations
    assert verdict.categories["kafka_redelivered"].count == 3
    assert verdict.kafka is not None and verdict.kafka.stats["redelivered"] == 3


def test_an_incomplete_read_leaves_its_records_unverified_and_the_run_invalid() -> None:
    run = KafkaRun.build()
    final = run.find("kafka-final", partition=2)[0]
    final["complete"] = False
    victim = next(s for s in run.sends if s["partition"] == 2)
    run.drop("kafka-read", value=victim["value"])
    verdict = judge(run.records)
    assert set(verdict.violations) == {"kafka_incomplete_readback"}
    assert verdict.categories["kafka_unverified"].count == 1


def test_a_fatal_client_error_is_a_violation_and_failed_commits_are_reported() -> None:
    run = KafkaRun.build()
    run.add(rec("kafka-error", T0 + 2, "producer-kafka", who="p0", fatal=True,
                error="KafkaError{code=OUT_OF_ORDER_SEQUENCE_NUMBER}"))
    run.add(rec("kafka-commit", T0 + 2, "consumer-kafka", member="m0", offsets={"0": 3}, ok=False,
                error="REBALANCE_IN_PROGRESS"))
    verdict = judge(run.records)
    assert set(verdict.violations) == {"kafka_fatal"}
    assert verdict.categories["kafka_commit_failed"].count == 1


def test_unknown_sends_are_reported_and_those_stored_say_so() -> None:
    run = KafkaRun.build()
    stored, gone = run.sends[2], run.sends[3]
    for send in (stored, gone):
        send.update(outcome="unknown", error="timed out")
    run.drop("kafka-read", value=gone["value"])
    run.drop("kafka-consume", value=gone["value"])
    final = run.find("kafka-final", partition=gone["partition"])[0]
    verdict = judge(run.records)
    assert verdict.categories["kafka_unknown"].count == 2 and verdict.categories["kafka_unknown_present"].count == 1
    assert final["complete"] and set(verdict.violations) == set(), verdict.violations


def test_recovery_is_the_worst_partition_time_to_its_next_consumption() -> None:
    run = KafkaRun.build(count=90)                     # sends from T0+1 to T0+10
    start, heal = T0 + 4.0, T0 + 5.0
    # partition 2 is not consumed between the fault's start and 2.5 s after its heal
    run.records = [r for r in run.records
                   if not (r["op"] == "kafka-consume" and r["partition"] == 2 and start < r["t"] < heal + 2.5)]
    faults = [rec("fault", start, "nemesis", fault="broker-kill9", role="broker", target="broker-1", id=1),
              rec("heal", heal, "nemesis", fault="broker-kill9", role="broker", target="broker-1", id=1)]
    records = sorted(run.records + faults, key=lambda r: r["t"])
    cats: dict = {}
    verdict = check_kafka(records, History.of(records).faults, cats)
    assert verdict is not None
    [row] = verdict.recovery
    assert 3.5 <= (row.from_start_s or 0) <= 3.7 and 2.5 <= (row.from_heal_s or 0) <= 2.7, row.to_json()
    assert row.never == [] and row.commit_from_heal_s is not None and row.commit_from_heal_s < 0.2
    [kind] = verdict.by_kind()
    assert kind["kind"] == "broker-kill9" and kind["count"] == 1
    assert any("broker-kill9" in line for line in verdict.summary_lines())


def test_a_fault_after_the_sends_ended_is_not_judged() -> None:
    run = KafkaRun.build()
    late = T0 + 100
    faults = [rec("fault", late, "node-logs", fault="bundle-unload", role="broker", target="broker-2", id="u1"),
              rec("heal", late, "node-logs", fault="bundle-unload", role="broker", target="broker-2", id="u1")]
    records = sorted(run.records + faults, key=lambda r: r["t"])
    verdict = check_kafka(records, History.of(records).faults, {})
    assert verdict is not None
    [row] = verdict.recovery
    assert row.never == [] and row.from_start_s is None
