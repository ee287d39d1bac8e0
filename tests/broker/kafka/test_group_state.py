"""The classic consumer-group state machine (broker.kafka.groups.group.Group), driven directly with
explicit `now` values: JoinGroup (KIP-394 member ids, the initial rebalance delay, protocol
selection), SyncGroup, Heartbeat, LeaveGroup, session expiry, static membership (KIP-345),
OffsetCommit checks, the stored form a new coordinator resumes from, and kill.

Futures come from a real asyncio event loop (`loop.create_future()`); nothing awaits them, the
tests read them once the group answered. The expected answers are Kafka's (KAFKA-FACTS §6, AK
ClassicGroup / GroupMetadataManager).

The last test runs seeded random sequences of join/sync/heartbeat/leave/expire/coordinator moves
for up to 6 members and checks the group's invariants after every step, then lets every client
behave and checks the group settles Stable with all of them. The seed is in the failure message
(`STRATA_SEED=<n>` adds one to the fixed list)."""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field

import pytest

from broker.kafka.groups.group import Group, Limits, State
from broker.records.groups import StoredGroup
from wire.kafka.errors import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_S = 3.0
LIMITS = Limits(session_min_ms=6_000, session_max_ms=1_800_000, initial_delay_ms=3_000, members_max=50)
RANGE = [("range", b"sub-range")]

NONE = int(ErrorCode.NONE)
UNKNOWN = int(ErrorCode.UNKNOWN_MEMBER_ID)
ILLEGAL = int(ErrorCode.ILLEGAL_GENERATION)
REBALANCING = int(ErrorCode.REBALANCE_IN_PROGRESS)
FENCED = int(ErrorCode.FENCED_INSTANCE_ID)
INCONSISTENT = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
ID_REQUIRED = int(ErrorCode.MEMBER_ID_REQUIRED)


@pytest.fixture
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def new_group() -> Group:
    return Group("g", LIMITS)


def join(g: Group, loop, now: float, member_id: str = "", *, instance_id: str | None = None,
         protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer", version: int = 5,
         session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS, client_id: str = "client"):
    return g.join(member_id=member_id, instance_id=instance_id, client_id=client_id, client_host="/127.0.0.1",
                  session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, protocol_type=protocol_type,
                  protocols=list(protocols if protocols is not None else RANGE), version=version, now=now, loop=loop)


def sync(g: Group, loop, now: float, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
         *, instance_id: str | None = None, protocol_type: str | None = None, protocol_name: str | None = None):
    return g.sync(member_id=member_id, instance_id=instance_id, generation=generation, protocol_type=protocol_type,
                  protocol_name=protocol_name, assignments=assignments or {}, now=now, loop=loop)


def heartbeat(g: Group, now: float, member_id: str, generation: int, instance_id: str | None = None) -> int:
    return g.heartbeat(member_id=member_id, instance_id=instance_id, generation=generation, now=now)


def answer(outcome) -> dict:
    """The reply of an immediate answer or of an answered future."""
    if isinstance(outcome, dict):
        return outcome
    assert outcome.done(), "still parked"
    return outcome.result()


def parked(outcome) -> bool:
    return isinstance(outcome, asyncio.Future) and not outcome.done()


def dynamic_join(g: Group, loop, now: float, **kw) -> tuple[str, asyncio.Future | dict]:
    """A v4+ dynamic member's two JoinGroups: MEMBER_ID_REQUIRED, then the join with the id."""
    first = answer(join(g, loop, now, **kw))
    assert first["error_code"] == ID_REQUIRED
    member_id = first["member_id"]
    assert member_id and member_id in g.pending
    return member_id, join(g, loop, now, member_id, **kw)


def form(g: Group, loop, now: float, n: int, **kw) -> tuple[list[str], float]:
    """n dynamic members form a Stable group (the first is the leader; assignment = its id's bytes)."""
    futures = []
    ids = []
    for _ in range(n):
        mid, fut = dynamic_join(g, loop, now, **kw)
        ids.append(mid)
        futures.append(fut)
    now += DELAY_S
    g.expire(now)
    replies = [answer(f) for f in futures]
    assert all(r["error_code"] == NONE for r in replies)
    leader = replies[0]["leader"]
    ids.sort(key=lambda m: m != leader)
    gen = g.generation
    follower_syncs = [sync(g, loop, now, mid, gen) for mid in ids[1:]]
    lead = answer(sync(g, loop, now, leader, gen, {mid: mid.encode() for mid in ids}))
    assert lead["error_code"] == NONE and lead["assignment"] == leader.encode()
    assert [answer(s)["assignment"] for s in follower_syncs] == [mid.encode() for mid in ids[1:]]
    assert g.state is State.STABLE
    return ids, now


# --- JoinGroup ---------------------------------------------------------------------------------------

def test_new_dynamic_member_gets_an_id_then_waits_for_the_initial_delay(loop):
    g = new_group()
    first = answer(join(g, loop, 0.0, client_id="rdkafka"))
    assert first["error_code"] == ID_REQUIRED and first["member_id"].startswith("rdkafka-")
    assert g.state is State.EMPTY and not g.members and g.generation == 0
    mid = first["member_id"]
    fut = join(g, loop, 0.5, mid)
    assert parked(fut) and g.state is State.PREPARING and mid in g.members and mid not in g.pending
    g.try_complete(1.0)
    g.expire(3.4)
    assert parked(fut), "completes only after the initial rebalance delay"
    g.expire(3.5)
    reply = answer(fut)
    assert reply["error_code"] == NONE and reply["generation_id"] == 1 and reply["leader"] == mid
    assert reply["member_id"] == mid and reply["protocol_name"] == "range" and reply["protocol_type"] == "consumer"
    assert reply["members"] == [{"member_id": mid, "group_instance_id": None, "metadata": b"sub-range"}]
    assert g.state is State.COMPLETING and g.generation == 1


def test_leader_gets_the_member_list_and_followers_none(loop):
    g = new_group()
    a, fa = dynamic_join(g, loop, 0.0)
    b, fb = dynamic_join(g, loop, 1.0, protocols=[("range", b"meta-b")])
    g.try_complete(3.5)
    assert parked(fa) and parked(fb), "a member joining during the delay extends it"
    g.try_complete(4.0)
    ra, rb = answer(fa), answer(fb)
    assert ra["generation_id"] == rb["generation_id"] == 1
    assert ra["leader"] == rb["leader"] == a
    assert {m["member_id"]: m["metadata"] for m in ra["members"]} == {a: b"sub-range", b: b"meta-b"}
    assert rb["members"] == []


def test_join_waits_for_pending_members_until_they_expire(loop):
    g = new_group()
    _a, fa = dynamic_join(g, loop, 0.0)
    pending = answer(join(g, loop, 0.1))["member_id"]
    g.expire(5.0)
    assert parked(fa) and pending in g.pending, "all known members (the pending too) must join"
    g.expire(10.1)
    assert not g.pending and answer(fa)["error_code"] == NONE and g.generation == 1


def test_protocol_chosen_by_votes_among_common_protocols(loop):
    g = new_group()
    ids = []
    futures = []
    for protocols in ([("sticky", b"1"), ("range", b"2"), ("roundrobin", b"3")],
                      [("range", b"4"), ("sticky", b"5")],
                      [("roundrobin", b"6"), ("range", b"7"), ("sticky", b"8")]):
        mid, fut = dynamic_join(g, loop, 0.0, protocols=protocols)
        ids.append(mid)
        futures.append(fut)
    g.expire(DELAY_S)
    replies = [answer(f) for f in futures]
    # candidates {sticky, range}; first choices among them: sticky, range, range
    assert {r["protocol_name"] for r in replies} == {"range"}
    leader = next(r for r in replies if r["members"])
    assert {m["member_id"]: m["metadata"] for m in leader["members"]} == dict(zip(ids, [b"2", b"4", b"7"]))


def test_no_common_protocol_is_inconsistent(loop):
    g = new_group()
    _, fa = dynamic_join(g, loop, 0.0, protocols=[("roundrobin", b"")])
    kafkajs = answer(join(g, loop, 0.1, protocols=[("RoundRobinAssigner", b"")]))
    assert kafkajs["error_code"] == INCONSISTENT and not g.pending and len(g.members) == 1
    g.expire(DELAY_S)
    assert answer(fa)["error_code"] == NONE
    assert answer(join(g, loop, 4.0, version=3, protocols=[("RoundRobinAssigner", b"")]))["error_code"] == INCONSISTENT
    assert answer(join(g, loop, 4.0, protocols=[]))["error_code"] == INCONSISTENT


def test_different_protocol_type_is_inconsistent(loop):
    g = new_group()
    _, fa = dynamic_join(g, loop, 0.0)
    # during the very first rebalance too (the group has no protocol type of its own yet)
    assert answer(join(g, loop, 0.1, protocol_type="connect"))["error_code"] == INCONSISTENT
    assert answer(join(g, loop, 0.1, version=3, protocol_type="connect"))["error_code"] == INCONSISTENT
    assert len(g.members) == 1
    g.expire(DELAY_S)
    assert answer(fa)["protocol_type"] == "consumer"
    assert answer(join(g, loop, 4.0, protocol_type="connect"))["error_code"] == INCONSISTENT
    assert answer(join(g, loop, 4.0, protocol_type=""))["error_code"] == INCONSISTENT


def test_join_version_below_4_gets_an_id_at_once(loop):
    for version in (0, 3):
        g = new_group()
        fut = join(g, loop, 0.0, version=version)
        assert parked(fut) and not g.pending and len(g.members) == 1
        g.expire(DELAY_S)
        reply = answer(fut)
        assert reply["error_code"] == NONE and reply["member_id"] in g.members and reply["generation_id"] == 1


def test_join_checks(loop):
    g = new_group()
    assert answer(join(g, loop, 0.0, session_ms=5_999))["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
    assert answer(join(g, loop, 0.0, session_ms=1_800_001))["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
    assert answer(join(g, loop, 0.0, "nobody"))["error_code"] == UNKNOWN
    small = Group("g", Limits(6_000, 1_800_000, 3_000, 2))
    dynamic_join(small, loop, 0.0)
    answer(join(small, loop, 0.0))                       # pending: counts too
    assert answer(join(small, loop, 0.0))["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert not g.members and not g.pending and g.state is State.EMPTY


def test_duplicate_join_answers_the_older_one(loop):
    g = new_group()
    a, first = dynamic_join(g, loop, 0.0)
    second = join(g, loop, 0.5, a)
    assert answer(first)["error_code"] == REBALANCING and parked(second)
    g.expire(DELAY_S + 0.5)
    assert answer(second)["error_code"] == NONE


# --- SyncGroup ---------------------------------------------------------------------------------------

def test_sync_leader_assignments_reach_parked_followers(loop):
    g = new_group()
    a, fa = dynamic_join(g, loop, 0.0)
    b, _fb = dynamic_join(g, loop, 0.0)
    g.expire(DELAY_S)
    leader = answer(fa)["leader"]
    follower = b if leader == a else a
    early = sync(g, loop, 3.1, follower, 1)
    assert parked(early) and g.state is State.COMPLETING
    lead = answer(sync(g, loop, 3.2, leader, 1, {leader: b"L", follower: b"F"}))
    assert lead == {"error_code": NONE, "protocol_type": "consumer", "protocol_name": "range", "assignment": b"L"}
    assert answer(early)["assignment"] == b"F"
    assert g.state is State.STABLE
    assert answer(sync(g, loop, 4.0, follower, 1))["assignment"] == b"F", "a Stable group's sync answers at once"
    assert answer(sync(g, loop, 4.0, leader, 1, {leader: b"X"}))["assignment"] == b"L"


def test_sync_leaves_out_members_the_leader_did_not_assign(loop):
    g = new_group()
    a, fa = dynamic_join(g, loop, 0.0)
    b, _fb = dynamic_join(g, loop, 0.0)
    g.expire(DELAY_S)
    leader = answer(fa)["leader"]
    follower = b if leader == a else a
    answer(sync(g, loop, 3.2, leader, 1, {leader: b"L"}))
    assert answer(sync(g, loop, 3.3, follower, 1))["assignment"] == b""


def test_sync_errors(loop):
    g = new_group()
    assert answer(sync(g, loop, 0.0, "nobody", 0))["error_code"] == UNKNOWN     # Empty
    (leader, follower), now = form(g, loop, 0.0, 2)
    assert answer(sync(g, loop, now, follower, 0))["error_code"] == ILLEGAL
    assert answer(sync(g, loop, now, follower, 2))["error_code"] == ILLEGAL
    assert answer(sync(g, loop, now, "nobody", 1))["error_code"] == UNKNOWN
    assert answer(sync(g, loop, now, follower, 1, protocol_type="consumer", protocol_name="roundrobin"))[
        "error_code"] == INCONSISTENT
    assert answer(sync(g, loop, now, follower, 1, protocol_type="connect", protocol_name="range"))[
        "error_code"] == INCONSISTENT
    assert answer(sync(g, loop, now, follower, 1, protocol_type="consumer", protocol_name="range"))[
        "error_code"] == NONE
    # a new member: PreparingRebalance
    _, _fc = dynamic_join(g, loop, now)
    assert g.state is State.PREPARING
    assert answer(sync(g, loop, now, follower, 1))["error_code"] == REBALANCING
    assert answer(sync(g, loop, now, leader, 1, {leader: b"x"}))["error_code"] == REBALANCING


def test_rebalance_answers_followers_parked_in_sync(loop):
    g = new_group()
    a, fa = dynamic_join(g, loop, 0.0)
    b, _fb = dynamic_join(g, loop, 0.0)
    g.expire(DELAY_S)
    leader = answer(fa)["leader"]
    follower = b if leader == a else a
    waiting = sync(g, loop, 3.1, follower, 1)
    dynamic_join(g, loop, 3.2)                          # a newcomer: back to PreparingRebalance
    assert answer(waiting)["error_code"] == REBALANCING
    assert g.state is State.PREPARING


# --- Heartbeat ---------------------------------------------------------------------------------------

def test_heartbeat(loop):
    g = new_group()
    assert heartbeat(g, 0.0, "nobody", 0) == UNKNOWN                        # Empty
    a, fa = dynamic_join(g, loop, 0.0)
    b, _fb = dynamic_join(g, loop, 0.0)
    assert g.state is State.PREPARING
    assert heartbeat(g, 0.5, a, 0) == REBALANCING
    g.expire(DELAY_S)
    leader = answer(fa)["leader"]
    follower = b if leader == a else a
    assert g.state is State.COMPLETING
    assert heartbeat(g, 3.1, follower, 1) == NONE
    assert heartbeat(g, 3.1, follower, 0) == ILLEGAL
    assert heartbeat(g, 3.1, "nobody", 1) == UNKNOWN
    answer(sync(g, loop, 3.2, leader, 1, {}))
    assert g.state is State.STABLE
    assert heartbeat(g, 3.3, follower, 1) == NONE
    assert heartbeat(g, 3.3, leader, 1) == NONE
    assert heartbeat(g, 3.3, leader, 2) == ILLEGAL
    assert heartbeat(g, 3.3, "nobody", 1) == UNKNOWN
    g.leave([(a, None), (b, None)], 4.0)
    assert g.state is State.EMPTY
    assert heartbeat(g, 4.1, a, g.generation) == UNKNOWN


def test_heartbeat_keeps_a_member_alive(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    for t in range(1, 40):
        assert heartbeat(g, now + t, leader, 1) == NONE
        assert heartbeat(g, now + t, follower, 1) == NONE
        g.expire(now + t)
    assert g.state is State.STABLE and set(g.members) == {leader, follower} and g.generation == 1


# --- rebalances ----------------------------------------------------------------------------------------

def test_new_member_in_a_stable_group_rebalances_without_waiting_for_the_deadline(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    newcomer, fn = dynamic_join(g, loop, now)
    assert parked(fn) and g.state is State.PREPARING
    assert heartbeat(g, now + 1, leader, 1) == REBALANCING
    assert heartbeat(g, now + 1, follower, 1) == REBALANCING
    fl = join(g, loop, now + 1, leader)
    ff = join(g, loop, now + 1.5, follower)
    assert not parked(fn), "everyone rejoined: the join completes at once (no initial delay past Empty)"
    replies = {mid: answer(f) for mid, f in ((leader, fl), (follower, ff), (newcomer, fn))}
    assert {r["generation_id"] for r in replies.values()} == {2} and g.generation == 2
    assert {r["leader"] for r in replies.values()} == {leader}, "the leader stays the leader"
    assert {m["member_id"] for m in replies[leader]["members"]} == {leader, follower, newcomer}
    assert replies[follower]["members"] == replies[newcomer]["members"] == []


def test_member_not_rejoining_is_dropped_at_the_rebalance_deadline(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    newcomer, fn = dynamic_join(g, loop, now)
    fl = join(g, loop, now + 1, leader)
    for t in range(2, 30):                  # the follower heartbeats (alive) but never rejoins
        assert heartbeat(g, now + t, follower, 1) == REBALANCING
        g.expire(now + t)
        assert parked(fl) and parked(fn)
    g.expire(now + REBALANCE_MS / 1000)
    assert answer(fl)["generation_id"] == 2 and answer(fn)["generation_id"] == 2
    assert set(g.members) == {leader, newcomer}
    assert {m["member_id"] for m in answer(fl)["members"]} == {leader, newcomer}
    assert heartbeat(g, now + 31, follower, 1) == UNKNOWN
    assert answer(join(g, loop, now + 31, follower))["error_code"] == UNKNOWN


def test_leader_rejoining_a_stable_group_rebalances_and_an_unchanged_follower_does_not(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    same = answer(join(g, loop, now, follower))
    assert same["error_code"] == NONE and same["generation_id"] == 1 and g.state is State.STABLE
    changed = join(g, loop, now, follower, protocols=[("range", b"new topics")])
    assert parked(changed) and g.state is State.PREPARING
    fl = join(g, loop, now, leader)
    assert answer(fl)["generation_id"] == answer(changed)["generation_id"] == 2
    g2 = new_group()
    (leader, follower), now = form(g2, loop, 0.0, 2)
    assert parked(join(g2, loop, now, leader)) and g2.state is State.PREPARING


# --- session expiry ------------------------------------------------------------------------------------

def test_silent_member_expires_and_the_rest_rebalance(loop):
    g = new_group()
    (leader, follower, third), now = form(g, loop, 0.0, 3)
    for t in (3, 6, 9):
        assert heartbeat(g, now + t, leader, 1) == NONE
        assert heartbeat(g, now + t, follower, 1) == NONE
        g.expire(now + t)
    assert set(g.members) == {leader, follower, third}
    g.expire(now + SESSION_MS / 1000)
    assert set(g.members) == {leader, follower} and g.state is State.PREPARING
    assert heartbeat(g, now + 10.5, third, 1) == UNKNOWN
    assert heartbeat(g, now + 10.5, follower, 1) == REBALANCING
    fl, ff = join(g, loop, now + 11, leader), join(g, loop, now + 11, follower)
    assert answer(fl)["generation_id"] == answer(ff)["generation_id"] == 2
    assert {m["member_id"] for m in answer(fl)["members"]} == {leader, follower}


def test_last_member_expiring_empties_the_group(loop):
    g = new_group()
    ([_only], now) = form(g, loop, 0.0, 1)
    g.expire(now + SESSION_MS / 1000)
    assert g.state is State.EMPTY and not g.members and g.generation == 2 and g.leader == "" and g.protocol == ""


def test_member_parked_in_join_or_sync_is_not_expired(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    fl = join(g, loop, now, leader)             # the leader rejoins; the follower does not yet
    g.expire(now + 25)                          # the follower's session has passed, the leader is parked
    assert set(g.members) == {leader}, "the silent follower expired"
    reply = answer(fl)
    assert reply["generation_id"] == 2 and [m["member_id"] for m in reply["members"]] == [leader]
    g2 = new_group()
    a, fa = dynamic_join(g2, loop, 0.0)
    b, _fb = dynamic_join(g2, loop, 0.0)
    g2.expire(DELAY_S)
    lead = answer(fa)["leader"]
    follower = b if lead == a else a
    waiting = sync(g2, loop, DELAY_S, follower, 1)
    g2.expire(DELAY_S + 12)                     # the leader never syncs: it expires, the follower waits on
    assert set(g2.members) == {follower} and g2.state is State.PREPARING
    assert answer(waiting)["error_code"] == REBALANCING


def test_pending_member_expires(loop):
    g = new_group()
    pending = answer(join(g, loop, 0.0))["member_id"]
    g.expire(9.9)
    assert pending in g.pending
    g.expire(10.0)
    assert not g.pending and g.state is State.EMPTY and g.generation == 0
    assert answer(join(g, loop, 10.1, pending))["error_code"] == UNKNOWN


# --- LeaveGroup ------------------------------------------------------------------------------------------

def test_leave_single_then_last_empties(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    assert g.leave([(follower, None)], now) == [NONE]
    assert g.state is State.PREPARING and set(g.members) == {leader}
    assert g.leave([("nobody", None)], now) == [UNKNOWN]
    assert g.leave([(leader, None)], now) == [NONE]
    assert g.state is State.EMPTY and not g.members and g.generation == 2
    assert g.leave([(leader, None)], now) == [UNKNOWN]


def test_leave_of_a_parked_member_answers_its_join(loop):
    g = new_group()
    (leader, follower, third), now = form(g, loop, 0.0, 3)
    fl, ff = join(g, loop, now, leader), join(g, loop, now, follower)
    assert parked(fl) and parked(ff)
    assert g.leave([(third, None)], now) == [NONE]
    assert answer(fl)["generation_id"] == answer(ff)["generation_id"] == 2, "only the one that left was missing"
    fl2 = join(g, loop, now, leader, protocols=[("range", b"changed")])
    assert parked(fl2) and g.state is State.PREPARING
    assert g.leave([(leader, None)], now) == [NONE]
    assert answer(fl2)["error_code"] == UNKNOWN and g.state is State.PREPARING
    assert g.leave([(follower, None)], now) == [NONE]
    assert g.state is State.EMPTY and not g.members and g.generation == 3


def test_leave_batch_with_static_instances(loop):
    g = new_group()
    fa = join(g, loop, 0.0, instance_id="i-a")
    fb = join(g, loop, 0.0, instance_id="i-b")
    fc = join(g, loop, 0.0, instance_id="i-c")
    _, fd = dynamic_join(g, loop, 0.0)
    g.expire(DELAY_S)
    a, b, c, d = (answer(f)["member_id"] for f in (fa, fb, fc, fd))
    assert a.startswith("i-a-") and g.static == {"i-a": a, "i-b": b, "i-c": c}
    codes = g.leave([(b, "i-a"),            # names another member: fenced
                     ("", "i-b"),           # instance only
                     (c, "i-c"),            # both, matching
                     ("", "i-zzz"),         # unknown instance
                     ("nobody", None),      # unknown member
                     (d, None)], DELAY_S)
    assert codes == [FENCED, NONE, NONE, UNKNOWN, UNKNOWN, NONE]
    assert set(g.members) == {a} and g.static == {"i-a": a} and g.state is State.PREPARING
    assert g.leave([(a, "i-a")], DELAY_S) == [NONE]
    assert g.state is State.EMPTY and not g.static and g.generation == 2


def test_leave_of_a_pending_member_does_not_rebalance(loop):
    g = new_group()
    (_leader, follower), now = form(g, loop, 0.0, 2)
    pending = answer(join(g, loop, now))["member_id"]
    assert g.leave([(pending, None)], now) == [NONE]
    assert not g.pending and g.state is State.STABLE and g.generation == 1
    assert heartbeat(g, now, follower, 1) == NONE
    e = new_group()
    pending = answer(join(e, loop, 0.0))["member_id"]
    assert e.leave([(pending, None)], 0.0) == [NONE]
    assert e.state is State.EMPTY and e.generation == 0


# --- static membership (KIP-345) ----------------------------------------------------------------------

def static_group(loop, n: int = 2) -> tuple[Group, list[str], float]:
    g = new_group()
    futures = [join(g, loop, 0.0, instance_id=f"i{k}", protocols=[("range", b"m%d" % k)]) for k in range(n)]
    g.expire(DELAY_S)
    replies = [answer(f) for f in futures]
    ids = [r["member_id"] for r in replies]
    leader = replies[0]["leader"]
    assert leader == ids[0]
    for mid in ids[1:]:
        assert parked(sync(g, loop, DELAY_S, mid, 1))
    answer(sync(g, loop, DELAY_S, leader, 1, {mid: mid.encode() for mid in ids}))
    assert g.state is State.STABLE
    return g, ids, DELAY_S


def test_static_follower_rejoining_takes_its_old_place_without_a_rebalance(loop):
    g, (leader, old), now = static_group(loop)
    reply = answer(join(g, loop, now + 1, "", instance_id="i1", protocols=[("range", b"m1")]))
    new = reply["member_id"]
    assert reply["error_code"] == NONE and new != old and new.startswith("i1-")
    assert reply["generation_id"] == 1 and reply["leader"] == leader and reply["members"] == []
    assert g.state is State.STABLE and g.generation == 1 and set(g.members) == {leader, new}
    assert g.static["i1"] == new
    assert answer(sync(g, loop, now + 1, new, 1, instance_id="i1"))["assignment"] == old.encode()
    assert heartbeat(g, now + 1, new, 1, "i1") == NONE
    # the old id: fenced with its instance id, unknown without it (Kafka's ClassicGroup.validateMember)
    assert heartbeat(g, now + 1, old, 1, "i1") == FENCED
    assert heartbeat(g, now + 1, old, 1) == UNKNOWN
    assert answer(sync(g, loop, now + 1, old, 1, instance_id="i1"))["error_code"] == FENCED
    assert answer(sync(g, loop, now + 1, old, 1))["error_code"] == UNKNOWN
    assert g.commit_check(old, "i1", 1, now + 1) == FENCED
    assert answer(join(g, loop, now + 1, old, instance_id="i1"))["error_code"] == FENCED
    assert g.leave([(old, "i1")], now + 1) == [FENCED]
    assert g.state is State.STABLE and g.generation == 1


def test_static_rejoin_fences_a_parked_old_member(loop):
    g, (leader, old, third), now = static_group(loop, 3)
    fl = join(g, loop, now, leader, instance_id="i0")          # the leader rejoins: a rebalance
    fo = join(g, loop, now, old, instance_id="i1")
    assert parked(fl) and parked(fo)
    new = join(g, loop, now + 1, "", instance_id="i1", protocols=[("range", b"m1")])
    assert answer(fo)["error_code"] == FENCED and parked(new)
    new_id = g.static["i1"]
    assert old not in g.members and new_id in g.members
    ft = join(g, loop, now + 1, third, instance_id="i2")
    replies = [answer(f) for f in (fl, new, ft)]
    assert {r["generation_id"] for r in replies} == {2}
    assert {m["member_id"] for m in replies[0]["members"]} == {leader, new_id, third}
    # one parked in a sync is fenced too, and a rejoin in CompletingRebalance rebalances
    ws = sync(g, loop, now + 1, new_id, 2, instance_id="i1")
    assert parked(ws)
    newer = join(g, loop, now + 2, "", instance_id="i1", protocols=[("range", b"m1")])
    assert answer(ws)["error_code"] == FENCED
    assert parked(newer) and g.state is State.PREPARING and g.static["i1"] != new_id


def test_static_follower_with_changed_metadata_rebalances(loop):
    g, (leader, _old), now = static_group(loop)
    fut = join(g, loop, now + 1, "", instance_id="i1", protocols=[("range", b"other topics")])
    assert parked(fut) and g.state is State.PREPARING and g.generation == 1
    fl = join(g, loop, now + 1, leader, instance_id="i0")
    assert answer(fut)["generation_id"] == answer(fl)["generation_id"] == 2


def test_static_leader_rejoining_rebalances(loop):
    g, (old_leader, follower), now = static_group(loop)
    fut = join(g, loop, now + 1, "", instance_id="i0", protocols=[("range", b"m0")])
    assert parked(fut) and g.state is State.PREPARING
    new_leader = next(m for m in g.members if m != follower)
    assert g.leader == new_leader and new_leader.startswith("i0-")
    assert heartbeat(g, now + 1, old_leader, 1, "i0") == FENCED
    assert heartbeat(g, now + 1, follower, 1, "i1") == REBALANCING
    ff = join(g, loop, now + 1, follower, instance_id="i1")
    r = answer(fut)
    assert r["generation_id"] == 2 and r["leader"] == new_leader
    assert {m["member_id"]: m["group_instance_id"] for m in r["members"]} == {new_leader: "i0", follower: "i1"}
    assert answer(ff)["members"] == []


def test_static_member_fenced_join_with_its_old_id(loop):
    g, (leader, old), now = static_group(loop)
    answer(join(g, loop, now, "", instance_id="i1", protocols=[("range", b"m1")]))
    assert answer(join(g, loop, now, old, instance_id="i1"))["error_code"] == FENCED
    assert answer(join(g, loop, now, leader, instance_id="i1"))["error_code"] == FENCED


# --- OffsetCommit checks ------------------------------------------------------------------------------

def test_commit_check(loop):
    g = new_group()
    assert g.commit_check("", None, -1, 0.0) == NONE                   # standalone, Empty
    assert g.commit_check("someone", None, 0, 0.0) == UNKNOWN
    a, fa = dynamic_join(g, loop, 0.0)
    b, _fb = dynamic_join(g, loop, 0.0)
    assert g.state is State.PREPARING
    assert g.commit_check("", None, -1, 0.0) == UNKNOWN                # standalone refused once not Empty
    assert g.commit_check(a, None, 0, 0.0) == NONE                     # the previous generation, Preparing
    g.expire(DELAY_S)
    assert g.state is State.COMPLETING
    assert g.commit_check(a, None, 1, DELAY_S) == REBALANCING
    assert g.commit_check(a, None, 0, DELAY_S) == ILLEGAL
    leader = answer(fa)["leader"]
    answer(sync(g, loop, DELAY_S, leader, 1, {}))
    assert g.commit_check(a, None, 1, DELAY_S) == NONE
    assert g.commit_check(b, None, 1, DELAY_S) == NONE
    assert g.commit_check(a, None, 2, DELAY_S) == ILLEGAL
    assert g.commit_check("nobody", None, 1, DELAY_S) == UNKNOWN
    assert g.commit_check("", None, -1, DELAY_S) == UNKNOWN
    g.kill(int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    assert g.commit_check("", None, -1, DELAY_S) == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_commit_keeps_a_member_alive(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    for t in range(1, 30):
        assert g.commit_check(leader, None, 1, now + t) == NONE
        assert heartbeat(g, now + t, follower, 1) == NONE
        g.expire(now + t)
    assert set(g.members) == {leader, follower}


# --- stored form ----------------------------------------------------------------------------------------

def round_trip(g: Group, now: float) -> Group:
    raw = g.stored(123).to_json()
    return Group.restore(StoredGroup.from_json(raw), 7, LIMITS, now)


def test_stable_group_round_trips(loop):
    g = new_group()
    (leader, follower), _now = form(g, loop, 0.0, 2)
    g.partitions = ["persistent://public/default/t-partition-0"]
    stored = g.stored(123)
    assert stored.state == "Stable" and stored.generation == 1 and stored.leader == leader
    assert {m.member_id: (m.metadata, m.assignment) for m in stored.members} == {
        leader: (b"sub-range", leader.encode()), follower: (b"sub-range", follower.encode())}
    r = round_trip(g, 100.0)
    assert r.state is State.STABLE and r.generation == 1 and r.leader == leader and r.version == 7
    assert r.protocol == "range" and r.protocol_type == "consumer" and r.partitions == g.partitions
    assert {m.member_id: m.assignment for m in r.members.values()} == {leader: leader.encode(),
                                                                        follower: follower.encode()}
    assert heartbeat(r, 101.0, leader, 1) == NONE and heartbeat(r, 101.0, follower, 1) == NONE
    assert answer(sync(r, loop, 101.0, follower, 1))["assignment"] == follower.encode()
    assert answer(join(r, loop, 101.0, follower))["generation_id"] == 1, "an unchanged follower: no rebalance"
    r.expire(109.0)
    assert set(r.members) == {leader, follower}, "each restored member has a full session"
    r.expire(110.9)
    assert set(r.members) == {leader, follower} and r.state is State.STABLE, "both heartbeat/synced at 101"
    r.expire(111.0)
    assert r.state is State.EMPTY and r.generation == 2


def test_static_group_round_trips(loop):
    g, (leader, follower), _now = static_group(loop)
    r = round_trip(g, 50.0)
    assert r.static == {"i0": leader, "i1": follower}
    reply = answer(join(r, loop, 50.0, "", instance_id="i1", protocols=[("range", b"m1")]))
    assert reply["generation_id"] == 1 and r.state is State.STABLE
    assert answer(sync(r, loop, 50.0, reply["member_id"], 1))["assignment"] == follower.encode()


def test_group_stored_mid_rebalance_restores_preparing(loop):
    g = new_group()
    (leader, follower), now = form(g, loop, 0.0, 2)
    fl = join(g, loop, now, leader, protocols=[("range", b"changed")])
    assert g.state is State.PREPARING
    stored = g.stored(1)
    assert stored.state == "PreparingRebalance" and all(m.assignment == b"" for m in stored.members)
    r = round_trip(g, 200.0)
    g.kill(int(ErrorCode.NOT_COORDINATOR))
    assert answer(fl)["error_code"] == ErrorCode.NOT_COORDINATOR
    assert r.state is State.PREPARING and r.generation == 1 and set(r.members) == {leader, follower}
    assert heartbeat(r, 201.0, follower, 1) == REBALANCING
    fl2 = join(r, loop, 201.0, leader, protocols=[("range", b"changed")])
    ff = join(r, loop, 201.5, follower)
    assert answer(fl2)["generation_id"] == answer(ff)["generation_id"] == 2
    # completing: also restored as a rebalance
    assert r.state is State.COMPLETING and r.stored(2).state == "PreparingRebalance"
    assert round_trip(r, 300.0).state is State.PREPARING


def test_group_stored_during_its_first_rebalance_restores_and_completes(loop):
    g = new_group()
    a, _fa = dynamic_join(g, loop, 0.0)
    b, _fb = dynamic_join(g, loop, 0.0)
    c, _fc = dynamic_join(g, loop, 0.0)
    assert g.leave([(c, None)], 1.0) == [NONE] and g.dirty and g.state is State.PREPARING
    assert g.stored(1).protocol == ""
    r = round_trip(g, 5.0)
    g.kill(int(ErrorCode.NOT_COORDINATOR))
    assert r.state is State.PREPARING and set(r.members) == {a, b}
    fa2 = join(r, loop, 5.0, a)
    assert parked(fa2), "the restored members carry no protocols to be inconsistent with"
    fb2 = join(r, loop, 5.1, b)
    ra, rb = answer(fa2), answer(fb2)
    assert ra["error_code"] == rb["error_code"] == NONE and ra["generation_id"] == 1
    assert ra["protocol_name"] == "range" and ra["protocol_type"] == "consumer"
    leader = ra["leader"]
    assert answer(sync(r, loop, 5.2, leader, 1, {a: b"A", b: b"B"}, protocol_type="consumer",
                       protocol_name="range"))["assignment"] == (b"A" if leader == a else b"B")
    assert r.state is State.STABLE


def test_restored_rebalance_drops_members_that_do_not_rejoin(loop):
    g = new_group()
    (_leader, follower), now = form(g, loop, 0.0, 2)
    g.leave([(follower, None)], now)
    g2 = new_group()
    (l2, _f2), _ = form(g2, loop, 0.0, 2)
    join(g2, loop, now, l2)
    r = round_trip(g2, 100.0)
    fl = join(r, loop, 100.0, l2)
    for t in range(1, 9):
        r.expire(100.0 + t)
        assert parked(fl)
    r.expire(110.0)                          # the follower never came back: its session ends
    assert answer(fl)["generation_id"] == 2 and set(r.members) == {l2}


def test_empty_group_round_trips(loop):
    g = new_group()
    ([only], now) = form(g, loop, 0.0, 1)
    g.partitions = ["p"]
    g.leave([(only, None)], now)
    stored = g.stored(5)
    assert stored.state == "Empty" and stored.members == [] and stored.generation == 2
    r = round_trip(g, 10.0)
    assert r.state is State.EMPTY and r.generation == 2 and not r.members and r.partitions == ["p"]
    assert r.commit_check("", None, -1, 10.0) == NONE
    _mid, fut = dynamic_join(r, loop, 10.0)
    r.expire(10.0 + DELAY_S)
    assert answer(fut)["generation_id"] == 3


# --- kill -------------------------------------------------------------------------------------------------

def test_kill_answers_everything_parked(loop):
    g = new_group()
    (leader, follower, _third), now = form(g, loop, 0.0, 3)
    fl, ff = join(g, loop, now, leader), join(g, loop, now, follower)      # the third has not rejoined
    pending = answer(join(g, loop, now))["member_id"]
    g2 = new_group()
    a, fa = dynamic_join(g2, loop, 0.0)
    b, _ = dynamic_join(g2, loop, 0.0)
    g2.expire(DELAY_S)
    lead = answer(fa)["leader"]
    fs = sync(g2, loop, DELAY_S, b if lead == a else a, 1)
    assert parked(fl) and parked(ff) and parked(fs)
    g.kill(int(ErrorCode.NOT_COORDINATOR))
    g2.kill(int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    for f, mid in ((fl, leader), (ff, follower)):
        r = answer(f)
        assert r["error_code"] == ErrorCode.NOT_COORDINATOR and r["member_id"] == mid and r["generation_id"] == -1
    assert answer(fs) == {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "assignment": b""}
    assert g.state is State.DEAD and not g.members and not g.pending and not g.static
    assert answer(join(g, loop, now, ""))["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert answer(join(g, loop, now, pending))["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert heartbeat(g, now, leader, 1) == UNKNOWN
    assert g.commit_check(leader, None, 1, now) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert g.stored(1).members == [] and g2.describe()["group_state"] == "Dead"


# --- randomized ----------------------------------------------------------------------------------------

SEEDS = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233] + (
    [int(os.environ["STRATA_SEED"])] if os.environ.get("STRATA_SEED") else [])


@dataclass
class Client:
    name: str
    instance_id: str | None
    protocols: list[tuple[str, bytes]]
    member_id: str = ""
    generation: int = -1
    join_f: asyncio.Future | None = None
    sync_f: asyncio.Future | None = None
    protocol_type: str = "consumer"
    synced: bool = False
    needs_join: bool = True
    dead: bool = False                  # FENCED_INSTANCE_ID or INCONSISTENT_GROUP_PROTOCOL: fatal to clients
    leader_of: list[str] = field(default_factory=list)

    def waiting(self) -> bool:
        return any(f is not None and not f.done() for f in (self.join_f, self.sync_f))


class Sim:
    def __init__(self, seed: int, loop: asyncio.AbstractEventLoop) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.loop = loop
        self.now = 0.0
        self.g = new_group()
        n = self.rng.randint(1, 6)
        self.clients: list[Client] = []
        for k in range(n):
            protocols = [("range", b"r%d" % k), ("roundrobin", b"rr%d" % k)][:self.rng.randint(1, 2)]
            if self.rng.random() < 0.05:
                protocols = [("RoundRobinAssigner", b"kjs%d" % k)]
            instance = f"i{k}" if self.rng.random() < 0.3 else None
            if k and self.rng.random() < 0.15 and self.clients[-1].instance_id:
                instance = self.clients[-1].instance_id         # a zombie: two processes, one instance id
            self.clients.append(Client(f"c{k}", instance, protocols,
                                       protocol_type="connect" if self.rng.random() < 0.03 else "consumer"))
        self.futures: list[asyncio.Future] = []
        self.generation = 0
        self.log: list[str] = []

    def fail(self, what: str) -> str:
        return f"seed {self.seed}: {what}\nlast steps: {self.log[-15:]}\ngroup: {self.g.state} gen {self.g.generation}"

    # the client side: what each reply makes a client do next
    def on_join(self, c: Client, reply: dict) -> None:
        code = reply["error_code"]
        if code == NONE:
            c.member_id, c.generation, c.needs_join, c.synced = reply["member_id"], reply["generation_id"], False, False
            c.leader_of = [m["member_id"] for m in reply["members"]] if reply["leader"] == c.member_id else []
            assert reply["generation_id"] <= self.g.generation, self.fail("a join answered a future generation")
            if reply["generation_id"] == self.g.generation and self.g.state is State.COMPLETING:
                assert reply["leader"] == self.g.leader, self.fail("join reply names another leader")
                if c.leader_of:
                    assert set(c.leader_of) == set(self.g.members), self.fail("leader's member list")
        elif code == ID_REQUIRED:
            c.member_id = reply["member_id"]
        elif code in (FENCED, INCONSISTENT):
            c.dead = True
        elif code == UNKNOWN:
            c.member_id, c.generation = "", -1
            c.needs_join = True
        else:
            c.needs_join = True

    def on_sync(self, c: Client, reply: dict) -> None:
        if reply["error_code"] == NONE:
            c.synced = True
        elif reply["error_code"] == FENCED:
            c.dead = True
        elif reply["error_code"] == UNKNOWN:
            c.member_id, c.generation, c.needs_join = "", -1, True
        else:
            c.needs_join = True

    def on_heartbeat(self, c: Client, code: int) -> None:
        if code == FENCED:
            c.dead = True
        elif code == UNKNOWN:
            c.member_id, c.generation, c.needs_join = "", -1, True
        elif code != NONE:
            c.needs_join = True

    def track(self, outcome):
        if isinstance(outcome, asyncio.Future):
            self.futures.append(outcome)
        return outcome

    def deliver(self) -> None:
        for c in self.clients:
            if c.join_f is not None and c.join_f.done():
                f, c.join_f = c.join_f, None
                self.on_join(c, f.result())
            if c.sync_f is not None and c.sync_f.done():
                f, c.sync_f = c.sync_f, None
                self.on_sync(c, f.result())

    # actions
    def do_join(self, c: Client) -> None:
        if c.join_f is not None:
            return
        if self.rng.random() < 0.05:
            c.protocols = [(name, meta + b"+") for name, meta in c.protocols]
        version = self.rng.choice([3, 5, 5, 7])
        out = self.track(join(self.g, self.loop, self.now, c.member_id, instance_id=c.instance_id,
                              protocols=c.protocols, protocol_type=c.protocol_type, version=version,
                              client_id=c.name))
        self.log.append(f"{self.now:.1f} join {c.name} {c.member_id[:8]} v{version}")
        if isinstance(out, dict):
            self.on_join(c, out)
        else:
            c.join_f = out

    def do_sync(self, c: Client) -> None:
        if c.sync_f is not None or not c.member_id:
            return
        assignments = {m: m.encode() for m in c.leader_of}
        out = self.track(sync(self.g, self.loop, self.now, c.member_id, c.generation, assignments,
                              instance_id=c.instance_id, protocol_type=c.protocol_type))
        self.log.append(f"{self.now:.1f} sync {c.name} gen {c.generation}")
        if isinstance(out, dict) and out["error_code"] == INCONSISTENT:
            assert c.protocol_type != self.g.protocol_type, self.fail("a member's own protocol type refused")
        if isinstance(out, dict):
            self.on_sync(c, out)
        else:
            c.sync_f = out

    def do_heartbeat(self, c: Client) -> None:
        if not c.member_id:
            return
        code = heartbeat(self.g, self.now, c.member_id, c.generation, c.instance_id)
        self.log.append(f"{self.now:.1f} heartbeat {c.name} gen {c.generation} -> {code}")
        self.on_heartbeat(c, code)

    def do_leave(self, c: Client) -> None:
        leaving: list[tuple[str, str | None]]
        if self.rng.random() < 0.5 or not c.instance_id:
            leaving = [(c.member_id, None)]
        else:
            leaving = [(self.rng.choice([c.member_id, ""]), c.instance_id)]
        codes = self.g.leave(leaving, self.now)
        assert len(codes) == 1, self.fail("one code per leaving member")
        self.log.append(f"{self.now:.1f} leave {c.name} -> {codes}")
        c.member_id, c.generation, c.needs_join, c.synced = "", -1, True, False

    def do_tick(self, dt: float) -> None:
        self.now += dt
        self.g.expire(self.now)
        self.log.append(f"{self.now:.1f} expire")

    def do_move(self) -> None:
        """The coordinator moves: the group is stored, killed here, restored there."""
        stored = StoredGroup.from_json(self.g.stored(int(self.now * 1000)).to_json())
        self.g.kill(int(ErrorCode.NOT_COORDINATOR))
        for f in self.futures:
            assert f.done(), self.fail("kill left a future parked")
        self.g = Group.restore(stored, 1, LIMITS, self.now)
        self.log.append(f"{self.now:.1f} move -> {self.g.state} gen {self.g.generation}")
        for c in self.clients:                      # NOT_COORDINATOR: they retry what they were doing
            for attr in ("join_f", "sync_f"):
                f = getattr(c, attr)
                if f is not None:
                    assert f.result()["error_code"] == ErrorCode.NOT_COORDINATOR, self.fail("killed with the code")
                    setattr(c, attr, None)
                    c.needs_join = c.needs_join or attr == "join_f"

    def random_step(self) -> None:
        c = self.rng.choice(self.clients)
        if c.dead:
            c = Client(c.name, c.instance_id, c.protocols, protocol_type=c.protocol_type)   # restarted
            self.clients = [c if x.name == c.name else x for x in self.clients]
        r = self.rng.random()
        if r < 0.3:
            self.do_join(c)
        elif r < 0.45:
            self.do_sync(c)
        elif r < 0.65:
            self.do_heartbeat(c)
        elif r < 0.72:
            if c.member_id:
                self.do_leave(c)
        elif r < 0.97:
            self.do_tick(self.rng.choice([0.1, 0.5, 1.0, 3.0, 7.0, 11.0, 31.0]))
        else:
            self.do_move()
        self.deliver()

    def behave_step(self) -> None:
        """Every client does what a well-behaved client does next; a second passes."""
        for c in self.clients:
            if c.waiting() or c.dead:
                continue
            if c.needs_join or not c.member_id or c.generation < 0:
                self.do_join(c)
            elif not c.synced:
                self.do_sync(c)
            else:
                self.do_heartbeat(c)
            self.deliver()
            self.check()
        self.do_tick(1.0)
        self.deliver()

    def settled(self) -> bool:
        g = self.g
        live = [c for c in self.clients if not c.dead]
        if not live:
            return not g.members
        return (g.state is State.STABLE and set(g.members) == {c.member_id for c in live}
                and all(c.generation == g.generation and c.synced and not c.waiting() for c in live))

    def check(self) -> None:
        g = self.g
        assert g.generation >= self.generation, self.fail("the generation went down")
        self.generation = g.generation
        if g.state in (State.EMPTY, State.DEAD):
            assert not g.members, self.fail("members in Empty")
        for f in self.futures:
            if not f.done():
                assert any(m.join is f or m.sync is f for m in g.members.values()), self.fail(
                    "a parked future nobody will answer")
        if g.state in (State.STABLE, State.EMPTY):
            assert not any(not f.done() for f in self.futures), self.fail(f"a future parked in {g.state}")
        if g.state is State.COMPLETING:
            assert all(m.join is None for m in g.members.values()), self.fail("a join parked in Completing")
        if g.state in (State.STABLE, State.COMPLETING):
            assert g.members and g.leader in g.members, self.fail("the leader is not a member")
            assert g.protocol in g._candidates(list(g.members.values())), self.fail("protocol not common")
        assert not set(g.pending) & set(g.members), self.fail("pending and member at once")
        assert g.static == {m.instance_id: mid for mid, m in g.members.items() if m.instance_id}, self.fail(
            "static map out of step with the members")
        for m in g.members.values():
            for made in (m.join, m.sync):
                assert made is None or made in self.futures, self.fail("a future the group made up")


@pytest.mark.parametrize("seed", SEEDS)
def test_randomized_group_invariants(seed, loop):
    sim = Sim(seed, loop)
    for _ in range(sim.rng.randint(50, 400)):
        sim.random_step()
        sim.check()
    for _ in range(200):
        if sim.settled():
            break
        sim.behave_step()
    assert sim.settled(), sim.fail(
        f"did not settle: clients {[(c.name, c.member_id[:8], c.generation, c.synced) for c in sim.clients]} "
        f"members {[m[:8] for m in sim.g.members]}")
    stable_gen = sim.g.generation
    for _ in range(30):                          # and stays settled while everyone heartbeats
        sim.behave_step()
        sim.check()
    assert sim.settled() and sim.g.generation == stable_gen, sim.fail("a settled group rebalanced")
    sim.g.kill(int(ErrorCode.NOT_COORDINATOR))
    assert all(f.done() for f in sim.futures), sim.fail("kill left a future parked")
