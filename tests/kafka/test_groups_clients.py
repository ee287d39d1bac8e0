"""Kafka consumer groups with each client library on the shared standalone: confluent-kafka,
kafka-python, aiokafka, kafkajs (js/group.js) and kcat's balanced consumer (`kcat -G`).

Every member runs in a process of its own (groups_helpers.Member), so a crash is a real kill -9: no
LeaveGroup, no last commit, the group only learns of it when the member's session (6 s) passes. The
members commit synchronously what they processed after each batch; what the group read is checked
against every acknowledged record with groups_helpers.check_delivery: nothing lost, each partition
read in order by whoever holds it, and a record read a second time only if it came after the last
commit acknowledged before its new owner was given the partition (at-least-once, no more).

1. A group of three over six partitions while records keep coming: one member alone, two more join
   (a rebalance sharing the partitions two each), one leaves (LeaveGroup: the others take its
   partitions at once), one is killed (the last takes everything once the session passed); at the
   end the group's committed offsets are the partitions' ends. kcat commits on its own (auto commit,
   on rebalance, on close), so it is killed only once its commits are all in, and must then have
   read every record exactly once.
2. Commits survive a restart: a member processes 12 records, commits them with a metadata string and
   leaves; the same client library reads the commits back (offset and metadata), and a new member of
   the group starts exactly where they left off.
3. Static membership (group.instance.id), confluent-kafka and kafka-python: a static member killed
   and started again within its session gets its old partitions back, and the others see no
   rebalance at all, not even once the old session would have passed.
4. Assignors: confluent-kafka's cooperative-sticky only moves the partitions that change owner
   (incremental revocation); kafka-python's range and roundrobin give their known shapes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.kafka.groups_helpers import (
    CALL_TIMEOUT_S,
    KcatMember,
    Member,
    Trickle,
    admin,
    check_delivery,
    committed,
    consumed,
    create_topic,
    member_spec,
    wait_assigned,
    wait_committed_to_end,
    wait_consumed,
)
from tests.kafka.helpers import node, unique_topic
from tests.support.waiting import wait_until

PARTITIONS = 6
JOIN_BOUND_S = 60.0        # processes start, find the coordinator, the group (re)balances (3 s initial delay)
CRASH_BOUND_S = 60.0       # the dead member's session (6 s) passes and the others rebalance
READ_BOUND_S = 60.0        # the group reads what was produced
CLIENTS = ["confluent", "kafka-python", "aiokafka", "kafkajs"]


def start(client: str, bootstrap: str, topic: str, group: str, name: str, directory: Path,
          members: list[Member], **extra: object) -> Member:
    m = Member.start(client, member_spec(bootstrap, topic, group, name, **extra), directory)
    members.append(m)
    return m


def caught_up(members: list[Member], trickle: Trickle, what: str) -> None:
    """The group reads everything acknowledged so far (the trickle goes on meanwhile)."""
    wait_consumed(members, set(trickle.produced()), READ_BOUND_S, what)


def sizes(owned: dict[str, frozenset[int]]) -> list[int]:
    return sorted(len(o) for o in owned.values())


# --- 1. join, leave, crash ------------------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_group_rebalances_on_join_leave_and_crash_and_reads_every_record(bootstrap: str, tmp_path: Path,
                                                                       client: str) -> None:
    topic, group = unique_topic(f"grp-{client}"), unique_topic(f"g-{client}")
    create_topic(bootstrap, topic, PARTITIONS)
    trickle = Trickle(bootstrap, topic, PARTITIONS, rate=100).start()
    members: list[Member] = []
    marks: dict[str, float] = {}
    try:
        t0 = time.monotonic()
        a = start(client, bootstrap, topic, group, "a", tmp_path, members)
        wait_assigned([a], PARTITIONS, JOIN_BOUND_S, f"{client}: a alone")
        marks["first assignment"] = time.monotonic() - t0
        caught_up(members, trickle, f"{client}: a alone")

        t0 = time.monotonic()
        b = start(client, bootstrap, topic, group, "b", tmp_path, members)
        c = start(client, bootstrap, topic, group, "c", tmp_path, members)
        owned = wait_assigned([a, b, c], PARTITIONS, JOIN_BOUND_S, f"{client}: b and c joined")
        marks["b, c joined"] = time.monotonic() - t0
        assert sizes(owned) == [2, 2, 2], owned
        caught_up(members, trickle, f"{client}: three members")

        t0 = time.monotonic()
        a.close()
        owned = wait_assigned([b, c], PARTITIONS, JOIN_BOUND_S, f"{client}: a left")
        marks["a left"] = time.monotonic() - t0
        assert sizes(owned) == [3, 3], owned
        caught_up(members, trickle, f"{client}: two members")

        t0 = time.monotonic()
        b.kill9()
        wait_assigned([c], PARTITIONS, CRASH_BOUND_S, f"{client}: b was killed")
        marks["b killed"] = time.monotonic() - t0
        caught_up(members, trickle, f"{client}: c alone")

        trickle.stop()
        caught_up(members, trickle, f"{client}: the end")
        stats = check_delivery(members, trickle.produced(), f"{client} group of 3, join/leave/crash")
        ends = wait_committed_to_end(bootstrap, group, topic, PARTITIONS, READ_BOUND_S, members)
        c.close()
    finally:
        trickle.stop()
        for m in members:
            m.stop()
    print(f"{client}: rebalances (s) { {k: round(v, 1) for k, v in marks.items()} }; {stats}; ends {ends}")


def test_kcat_balanced_consumers_rebalance_and_read_every_record_once(bootstrap: str, tmp_path: Path) -> None:
    """kcat's own commits (auto commit) are not seen from outside but through OffsetFetch, and kcat
    drops a record it polled after its SIGTERM whose offset librdkafka had already stored (its
    consume callback returns at once once it is told to stop, and the close commits the stored
    offset): so the producer pauses, and the group catches up, before a kcat member is stopped or
    killed; records keep coming while members join."""
    topic, group = unique_topic("grp-kcat"), unique_topic("g-kcat")
    create_topic(bootstrap, topic, PARTITIONS)
    trickle = Trickle(bootstrap, topic, PARTITIONS, rate=100).start()
    members: list[Member] = []

    def kcat(name: str) -> KcatMember:
        m = KcatMember.start_kcat(bootstrap, topic, group, name, tmp_path)
        members.append(m)
        return m

    def quiet(what: str) -> None:
        trickle.pause()
        caught_up(members, trickle, what)
        wait_committed_to_end(bootstrap, group, topic, PARTITIONS, READ_BOUND_S, members)

    try:
        a = kcat("a")
        wait_assigned([a], PARTITIONS, JOIN_BOUND_S, "kcat a alone")
        caught_up(members, trickle, "kcat a alone")
        b, c = kcat("b"), kcat("c")
        owned = wait_assigned([a, b, c], PARTITIONS, JOIN_BOUND_S, "kcat b and c joined")
        assert sizes(owned) == [2, 2, 2], owned
        caught_up(members, trickle, "kcat: three members")
        quiet("kcat: before a leaves")
        a.close()                                  # SIGTERM: commits, leaves, exits 0
        trickle.resume()
        wait_assigned([b, c], PARTITIONS, JOIN_BOUND_S, "kcat a left")
        caught_up(members, trickle, "kcat: two members")
        quiet("kcat: before b is killed")
        b.kill9()
        trickle.resume()
        wait_assigned([c], PARTITIONS, CRASH_BOUND_S, "kcat b was killed")
        trickle.stop()
        caught_up(members, trickle, "kcat: the end")
        stats = check_delivery(members, trickle.produced(), "kcat -G group of 3", exactly_once=True)
        quiet("kcat: the end")
        c.close()
    finally:
        trickle.stop()
        for m in members:
            m.stop()
    print(f"kcat: {stats}")


# --- 2. commits survive a restart ------------------------------------------------------------------------

COMMIT_PARTITIONS = 3
PER_PARTITION = 10
FIRST_LIMIT = 12


def fetch_committed(client: str, bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, str | None]]:
    """The group's commits as `client` reads them (partition -> (offset, metadata); -1 where none;
    metadata None where the client gives none)."""
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            tps = consumer.committed([TopicPartition(topic, p) for p in range(COMMIT_PARTITIONS)],
                                     timeout=CALL_TIMEOUT_S)
        finally:
            consumer.close()
        # offsets only: groups_helpers.CONFLUENT_METADATA_NOTE
        return {tp.partition: (tp.offset if tp.offset >= 0 else -1, None) for tp in tps}
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                           bootstrap_timeout_ms=10_000)
        try:
            out: dict[int, tuple[int, str | None]] = {}
            for p in range(COMMIT_PARTITIONS):
                found = kp.committed(TopicPartition(topic, p), metadata=True, timeout_ms=CALL_TIMEOUT_S * 1000)
                out[p] = (-1, "") if found is None else (found.offset, found.metadata)
            return out
        finally:
            kp.close(autocommit=False)
    if client == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as AioTP

        async def run() -> dict[int, tuple[int, str | None]]:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                        request_timeout_ms=20_000)
            await consumer.start()
            try:
                out: dict[int, tuple[int, str | None]] = {}
                for p in range(COMMIT_PARTITIONS):
                    found = await consumer.committed(AioTP(topic, p))
                    out[p] = (-1 if found is None else found, None)     # aiokafka gives the offset only
                return out
            finally:
                await consumer.stop()

        async def bounded() -> dict[int, tuple[int, str | None]]:
            async with asyncio.timeout(60):
                return await run()
        return asyncio.run(bounded())
    answer = node("group.js", {"action": "offsets", "bootstrap": bootstrap, "group": group, "topic": topic})
    return {int(p["partition"]): (int(p["offset"]), p["metadata"] or "") for p in answer["partitions"]}


@pytest.mark.parametrize("client", CLIENTS)
def test_commits_survive_a_restart_with_their_metadata(bootstrap: str, tmp_path: Path, client: str) -> None:
    topic, group = unique_topic(f"commit-{client}"), unique_topic(f"gc-{client}")
    create_topic(bootstrap, topic, COMMIT_PARTITIONS)
    trickle = Trickle(bootstrap, topic, COMMIT_PARTITIONS)
    trickle.send(COMMIT_PARTITIONS * PER_PARTITION)
    trickle.flush()
    members: list[Member] = []
    try:
        first = start(client, bootstrap, topic, group, "first", tmp_path, members, limit=FIRST_LIMIT,
                      metadata=f"{client}-first")
        first.wait_closed(JOIN_BOUND_S)
        assert len(first.records()) == FIRST_LIMIT, first.describe()
        left = first.last_commits()             # partition -> (next offset, metadata), what it committed last
        expect = {p: left.get(p, (-1, "")) for p in range(COMMIT_PARTITIONS)}

        seen = fetch_committed(client, bootstrap, group, topic)
        assert {p: o for p, (o, _m) in seen.items()} == {p: o for p, (o, _m) in expect.items()}, (seen, expect)
        if client not in ("aiokafka", "confluent"):      # aiokafka's committed() gives no metadata
            assert {p: m for p, (_o, m) in seen.items()} == {p: m for p, (_o, m) in expect.items()}, (seen, expect)
        # and as another library (kafka-python's admin client) reads them, metadata included
        assert committed(bootstrap, group, topic, COMMIT_PARTITIONS) == expect

        second = start(client, bootstrap, topic, group, "second", tmp_path, members)
        wait_consumed(members, set(trickle.produced()), READ_BOUND_S, f"{client}: the second member")
        second.close()
        for p in range(COMMIT_PARTITIONS):
            mine = [o for q, o, _k in second.records() if q == p]
            start_at = max(expect[p][0], 0)
            assert mine == list(range(start_at, PER_PARTITION)), \
                f"partition {p}: the second member read {mine}, the first had committed {expect[p]}"
        check_delivery(members, trickle.produced(), f"{client}: restart", exactly_once=True)
        wait_committed_to_end(bootstrap, group, topic, COMMIT_PARTITIONS, READ_BOUND_S, members)
    finally:
        for m in members:
            m.stop()


# --- 3. static membership -------------------------------------------------------------------------------

STATIC_SESSION_MS = 8_000        # room for a restart on a loaded machine (measured: 0.1-1 s)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_static_member_restarted_within_its_session_gets_its_partitions_back_without_a_rebalance(
        bootstrap: str, tmp_path: Path, client: str) -> None:
    topic, group = unique_topic(f"static-{client}"), unique_topic(f"gs-{client}")
    create_topic(bootstrap, topic, PARTITIONS)
    trickle = Trickle(bootstrap, topic, PARTITIONS, rate=60).start()
    members: list[Member] = []

    def static(name: str, instance: str) -> Member:
        return start(client, bootstrap, topic, group, name, tmp_path, members, instance_id=instance,
                     session_ms=STATIC_SESSION_MS)

    try:
        a = static("a", "inst-a")                 # first: the group's leader, which is never restarted here
        wait_assigned([a], PARTITIONS, JOIN_BOUND_S, f"{client}: a alone")
        b, c = static("b", "inst-b"), static("c", "inst-c")
        owned = wait_assigned([a, b, c], PARTITIONS, JOIN_BOUND_S, f"{client}: three static members")
        caught_up(members, trickle, f"{client}: three static members")
        settled = {m.name: len(m.events) for m in (a, b)}

        c.kill9()
        killed = time.monotonic()
        c2 = static("c2", "inst-c")
        wait_until(lambda: c2.owned(), JOIN_BOUND_S, what=f"{client}: inst-c assigned again")
        back_s = time.monotonic() - killed
        assert back_s < STATIC_SESSION_MS / 1000, f"inst-c came back after {back_s:.1f} s, past its session"
        assert c2.owned() == owned["c"], f"inst-c had {owned['c']} before its restart, {c2.owned()} after"
        # watch past the end of the killed process's session: the group must not rebalance then either
        # (the old member id was replaced, not left to expire), and goes on reading meanwhile
        window_end = killed + STATIC_SESSION_MS / 1000 + 2
        wait_until(lambda: time.monotonic() >= window_end, STATIC_SESSION_MS / 1000 + 10,
                   what="the end of the killed member's session", interval_s=0.2)
        caught_up([a, b, c, c2], trickle, f"{client}: after the restart")
        client_admin = admin(bootstrap)           # held: a dropped AdminClient never completes its futures
        described = client_admin.describe_consumer_groups([group], request_timeout=CALL_TIMEOUT_S)[group]\
            .result(CALL_TIMEOUT_S)
        assert sorted(m.group_instance_id for m in described.members) == ["inst-a", "inst-b", "inst-c"], \
            [vars(m) for m in described.members]
        for m in (a, b):
            later = [e for e in m.events[settled[m.name]:] if e["ev"] in ("assigned", "revoked", "lost")]
            assert not later, f"{m.name} saw a rebalance after inst-c restarted: {later}"
        assert c2.owned() == owned["c"] and a.owned() == owned["a"] and b.owned() == owned["b"]
        trickle.stop()
        caught_up(members, trickle, f"{client}: the end")
        check_delivery(members, trickle.produced(), f"{client}: static restart")
    finally:
        trickle.stop()
        for m in members:
            m.stop()
    print(f"{client}: static member back with its partitions {sorted(owned['c'])} {back_s:.1f} s after its kill")


# --- 4. assignors ------------------------------------------------------------------------------------------

def changes_since(m: Member, since: int) -> tuple[set[int], set[int]]:
    """(partitions revoked, partitions assigned) in m's events after index `since`."""
    revoked: set[int] = set()
    assigned: set[int] = set()
    for e in m.events[since:]:
        if e["ev"] in ("revoked", "lost"):
            revoked |= set(e["changed"])
        elif e["ev"] == "assigned":
            assigned |= set(e["changed"])
    return revoked, assigned


def test_cooperative_sticky_revokes_only_the_partitions_that_move(bootstrap: str, tmp_path: Path) -> None:
    topic, group = unique_topic("coop"), unique_topic("g-coop")
    create_topic(bootstrap, topic, PARTITIONS)
    trickle = Trickle(bootstrap, topic, PARTITIONS, rate=60).start()
    members: list[Member] = []

    def coop(name: str) -> Member:
        return start("confluent", bootstrap, topic, group, name, tmp_path, members, assignor="cooperative-sticky")

    try:
        a = coop("a")
        before = wait_assigned([a], PARTITIONS, JOIN_BOUND_S, "a alone")
        for joining in (["b"], ["c"]):
            marks = {m.name: len(m.events) for m in members}
            new = [coop(n) for n in joining]
            after = wait_assigned(members, PARTITIONS, JOIN_BOUND_S, f"{joining} joined")
            for m in members:
                if m in new:
                    continue
                revoked, _ = changes_since(m, marks[m.name])
                moved = set(before[m.name]) - set(after[m.name])
                assert revoked == moved, (f"{m.name} had {sorted(before[m.name])}, kept {sorted(after[m.name])}: "
                                          f"it should have given up only {sorted(moved)}, gave up {sorted(revoked)}")
                assert after[m.name] & before[m.name], f"{m.name} kept none of its partitions: {before}, {after}"
            caught_up(members, trickle, f"{joining} joined")
            before = after
        assert sizes(before) == [2, 2, 2], before

        marks = {m.name: len(m.events) for m in members}
        c = members[2]
        c.close()
        after = wait_assigned(members[:2], PARTITIONS, JOIN_BOUND_S, "c left")
        for m in members[:2]:
            revoked, assigned = changes_since(m, marks[m.name])
            assert not revoked, f"{m.name} gave up {sorted(revoked)} when c left (cooperative: nothing to give up)"
            assert set(after[m.name]) == set(before[m.name]) | assigned
        trickle.stop()
        caught_up(members, trickle, "the end")
        stats = check_delivery(members, trickle.produced(), "cooperative-sticky group")
    finally:
        trickle.stop()
        for m in members:
            m.stop()
    print(f"cooperative-sticky: {stats}")


SHAPES = {
    "range": {frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5})},
    "roundrobin": {frozenset({0, 3}), frozenset({1, 4}), frozenset({2, 5})},
}


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_kafka_python_assignors_give_their_shapes(bootstrap: str, tmp_path: Path, assignor: str) -> None:
    topic, group = unique_topic(f"kp-{assignor}"), unique_topic(f"g-kp-{assignor}")
    create_topic(bootstrap, topic, PARTITIONS)
    trickle = Trickle(bootstrap, topic, PARTITIONS)
    trickle.send(60)
    trickle.flush()
    members: list[Member] = []
    try:
        for name in "abc":
            start("kafka-python", bootstrap, topic, group, name, tmp_path, members, assignor=assignor)
        owned = wait_assigned(members, PARTITIONS, JOIN_BOUND_S, f"kafka-python {assignor}")
        assert set(owned.values()) == SHAPES[assignor], owned
        wait_consumed(members, set(trickle.produced()), READ_BOUND_S, f"kafka-python {assignor}")
        for m in members:
            m.close()
        check_delivery(members, trickle.produced(), f"kafka-python {assignor}", exactly_once=True)
        assert consumed(members) == set(trickle.produced())
    finally:
        for m in members:
            m.stop()
