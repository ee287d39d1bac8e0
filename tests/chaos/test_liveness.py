"""Liveness on small hand-made histories: the time from a fault (or its heal) to the next
acknowledged send against the issue's bounds per role, combined faults, partitions with nothing
to send, sends that never completed, and subscriptions stuck after the last heal.
"""

from __future__ import annotations

from chaos.checks.liveness import BOOKIE_BOUND_S, check_liveness
from chaos.checks.model import History
from chaos.history import payload
from tests.chaos.synth import T0, rec

LEASE_S = 10.0
TOPIC = "persistent://chaos/ns/live"


def sends(times: list[float], *, topic: str = TOPIC, hanging_at: float | None = None) -> list[dict]:
    """Acknowledged sends completing at `times` (relative to T0); one never completing if asked."""
    out = []
    for seq, t in enumerate(times):
        out.append(rec("send", T0 + t, "p", topic=topic, producer="p", seq=seq, key=None, value=payload("p", seq),
                       outcome="ok", t0=T0 + t - 0.01, t1=T0 + t, msg_id=f"1:{seq}:-1:-1"))
    if hanging_at is not None:
        out.append(rec("send", T0 + hanging_at, "p", topic=topic, producer="p", seq=len(times), key=None,
                       value=payload("p", len(times)), outcome="unknown", t0=T0 + hanging_at, t1=None, msg_id=None))
    return out


def fault(role: str, start: float, heal: float, fid: str = "f1", kind: str | None = None) -> list[dict]:
    kind = kind or f"{role}-fault"
    return [rec("fault", T0 + start, "nemesis", fault=kind, role=role, target="x", id=fid),
            rec("heal", T0 + heal, "nemesis", fault=kind, role=role, target="x", id=fid)]


def steady(until: float, *, gap: tuple[float, float] | None = None) -> list[float]:
    """A send every 0.5 s up to `until`, none inside `gap`."""
    times = [i * 0.5 for i in range(1, int(until * 2))]
    return [t for t in times if gap is None or not gap[0] < t < gap[1]]


def live(records: list[dict], stuck_s: float = 15.0):
    return check_liveness(History.of(sorted(records, key=lambda r: r["t"])), LEASE_S, stuck_s)


def test_a_broker_fault_is_judged_from_its_start_against_lease_plus_2s():
    on_time = live(sends(steady(60, gap=(10, 10 + LEASE_S + 1.5))) + fault("broker", 10, 12))
    assert on_time.ok and on_time.faults[0].rule == "start"
    assert 10.5 < on_time.faults[0].from_start_s <= LEASE_S + 2
    late = live(sends(steady(60, gap=(10, 10 + LEASE_S + 3))) + fault("broker", 10, 12))
    assert not late.ok and late.faults[0].late[0]["topic"] == TOPIC
    assert late.kinds[0].kind == "broker-fault" and late.kinds[0].late == 1


def test_a_bookie_fault_must_see_acks_within_2s_of_its_start():
    assert live(sends(steady(60, gap=(10, 10 + BOOKIE_BOUND_S - 0.6))) + fault("bookie", 10, 30)).ok
    late = live(sends(steady(60, gap=(10, 10 + BOOKIE_BOUND_S + 1))) + fault("bookie", 10, 30))
    assert not late.ok and late.faults[0].late[0]["waited_s"] > BOOKIE_BOUND_S


def test_other_faults_are_judged_from_their_heal():
    # sends stop for the whole metadata-store outage and resume lease + 1 s after the heal: on time
    ok = live(sends(steady(80, gap=(10, 30 + LEASE_S + 1))) + fault("metadata", 10, 30))
    assert ok.ok and ok.faults[0].rule == "heal" and ok.faults[0].from_start_s > 30
    late = live(sends(steady(80, gap=(10, 30 + LEASE_S + 3))) + fault("network", 10, 30))
    assert not late.ok


def test_a_fault_inside_another_ones_recovery_window_gets_its_deadline():
    # a bookie fault 1 s after a broker kill: the sends wait for the broker's topics to move
    records = sends(steady(60, gap=(10, 10 + LEASE_S + 1))) + fault("broker", 10, 11, "f1") + \
        fault("bookie", 10.5, 12, "f2")
    result = live(records)
    assert result.ok, result.to_json()
    assert result.faults[1].fault.combined and result.faults[1].deadline == T0 + 10 + LEASE_S + 2


def test_a_partition_with_nothing_to_send_is_not_judged_but_a_hanging_send_is():
    quiet = live(sends([1.0, 2.0]) + fault("broker", 10, 12))
    assert quiet.ok and quiet.faults[0].from_start_s is None
    hanging = live(sends([1.0, 2.0], hanging_at=9.0) + fault("broker", 10, 12))
    assert not hanging.ok and hanging.faults[0].late[0]["first_ack_t"] is None


def _sub_records(delivered_until: float, end: float, *, closed_at: float | None = None) -> list[dict]:
    records = [rec("topic", T0, "runner", topic=TOPIC, partitions=0, subs=[["s", "Shared"]]),
               rec("consumer", T0, "c", topic=TOPIC, sub="s", consumer="c1", event="open")]
    records += sends(steady(end))
    for send in records[2:]:
        if send["t1"] - T0 <= delivered_until:
            records.append(rec("deliver", send["t1"] + 0.01, "c", topic=TOPIC, sub="s", subtype="Shared",
                               consumer="c1", value=send["value"], key=None, msg_id=send["msg_id"], redelivery=0))
    if closed_at is not None:
        records.append(rec("consumer", T0 + closed_at, "c", topic=TOPIC, sub="s", consumer="c1", event="closed"))
    return records + fault("broker", 5, 6)


def test_a_subscription_with_backlog_and_a_consumer_that_stops_delivering_is_stuck():
    assert live(_sub_records(60, 60)).stuck.count == 0
    stuck = live(_sub_records(20, 60)).stuck
    assert stuck.count == 1 and stuck.examples[0]["sub"] == "s" and stuck.examples[0]["stalled_s"] > 30
    assert live(_sub_records(20, 60, closed_at=21)).stuck.count == 0       # nobody connected: not stuck
