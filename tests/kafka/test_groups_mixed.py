"""Kafka consumer groups across client libraries, and their administration, on the shared standalone.

1. One group, four libraries: confluent-kafka (`partition.assignment.strategy=roundrobin`),
   kafka-python and aiokafka (RoundRobinPartitionAssignor) all call their round robin "roundrobin";
   kafkajs calls its own "RoundRobinAssigner", so here it runs the same algorithm under the name
   "roundrobin" (js/group.js). The broker picks the protocol they all share; each library in turn is
   the leader computing everyone's assignment (the members leave in join order), the assignments
   have round robin's shape every time, and the group reads every record.
2. The same kafkajs under its own name can not join a "roundrobin" group: the broker answers its
   JoinGroup with INCONSISTENT_GROUP_PROTOCOL (kafkajs gives up, the group goes on untouched), and
   confluent-kafka is refused alike by a group kafkajs started.
3. A group continued by one library after another: kafka-python reads and commits part, then
   confluent-kafka, then kafkajs, then kcat -G; each starts exactly at the previous one's commits
   (which carry the previous one's metadata), and together they read every record once.
4. Administration: list, describe and delete groups, list and alter a group's offsets and delete one
   partition's (OffsetDelete), with confluent-kafka's AdminClient and kafka-python's
   KafkaAdminClient; a live group can not be deleted; the group's committed offsets are the Pulsar
   subscription of the same name on each partition's topic, with its backlog (admin REST stats),
   and they go with OffsetDelete and DeleteGroups.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from tests.kafka.groups_helpers import (
    CALL_TIMEOUT_S,
    KcatMember,
    Member,
    Trickle,
    admin,
    check_delivery,
    committed,
    create_topic,
    member_spec,
    pulsar_subscription,
    send_one_per_batch,
    wait_assigned,
    wait_committed_to_end,
    wait_consumed,
)
from tests.kafka.helpers import unique_topic
from tests.support.waiting import wait_until

JOIN_BOUND_S = 60.0
CRASH_BOUND_S = 60.0
READ_BOUND_S = 60.0
REFUSAL_BOUND_S = 60.0     # a member refused by the group says so


def start(client: str, bootstrap: str, topic: str, group: str, name: str, directory: Path,
          members: list[Member], **extra: object) -> Member:
    m = Member.start(client, member_spec(bootstrap, topic, group, name, **extra), directory)
    members.append(m)
    return m


def round_robin(partitions: int, members: int) -> set[frozenset[int]]:
    """Round robin's shape: the i-th member (by member id) gets partitions i, i+n, i+2n, ..."""
    return {frozenset(range(i, partitions, members)) for i in range(members)}


# --- 1. four libraries, one group ----------------------------------------------------------------------

MIXED_PARTITIONS = 8


def test_four_libraries_share_one_roundrobin_group(bootstrap: str, tmp_path: Path) -> None:
    topic, group = unique_topic("mixed"), unique_topic("g-mixed")
    create_topic(bootstrap, topic, MIXED_PARTITIONS)
    trickle = Trickle(bootstrap, topic, MIXED_PARTITIONS, rate=80).start()
    members: list[Member] = []
    leaders: list[str] = []
    try:
        cf = start("confluent", bootstrap, topic, group, "cf", tmp_path, members, assignor="roundrobin")
        wait_assigned([cf], MIXED_PARTITIONS, JOIN_BOUND_S, "confluent alone")
        js = start("kafkajs", bootstrap, topic, group, "js", tmp_path, members, assignor="roundrobin")
        wait_assigned([cf, js], MIXED_PARTITIONS, JOIN_BOUND_S, "confluent and kafkajs")
        kp = start("kafka-python", bootstrap, topic, group, "kp", tmp_path, members, assignor="roundrobin")
        aio = start("aiokafka", bootstrap, topic, group, "aio", tmp_path, members, assignor="roundrobin")
        live = [cf, js, kp, aio]
        owned = wait_assigned(live, MIXED_PARTITIONS, JOIN_BOUND_S, "four libraries")
        assert set(owned.values()) == round_robin(MIXED_PARTITIONS, 4), owned
        joined = js.of("assigned")[-1]
        assert joined["protocol"] == "roundrobin", joined
        wait_consumed(members, set(trickle.produced()), READ_BOUND_S, "four libraries")

        # the members leave in the order they joined: each library leads (assigns) once
        for leaving, crash in ((cf, False), (js, False), (kp, True)):
            if crash:
                leaving.kill9()
            else:
                leaving.close()
            live.remove(leaving)
            owned = wait_assigned(live, MIXED_PARTITIONS, CRASH_BOUND_S if crash else JOIN_BOUND_S,
                                  f"{leaving.name} {'killed' if crash else 'left'}")
            assert set(owned.values()) == round_robin(MIXED_PARTITIONS, len(live)), owned
            if js in live and js.of("assigned")[-1].get("leader"):
                leaders.append("kafkajs")
            wait_consumed(members, set(trickle.produced()), READ_BOUND_S, f"after {leaving.name}")
        trickle.stop()
        wait_consumed(members, set(trickle.produced()), READ_BOUND_S, "the end")
        stats = check_delivery(members, trickle.produced(), "four libraries in one roundrobin group")
        aio.close()
        wait_committed_to_end(bootstrap, group, topic, MIXED_PARTITIONS, READ_BOUND_S, members)
    finally:
        trickle.stop()
        for m in members:
            m.stop()
    print(f"four libraries: {stats}; kafkajs led: {bool(leaders)}")


# --- 2. kafkajs under its own assigner name ----------------------------------------------------------------

REFUSAL_PARTITIONS = 4


def refusals(m: Member) -> list[str]:
    """What m said about being refused (kafkajs: its crash; librdkafka: a consumer error)."""
    found = [f"{e.get('type')} {e.get('code')} {e.get('error')}" for e in m.of("crash")]
    found += [str(e.get("error")) for e in m.of("client_error")]
    return found


def test_kafkajs_under_its_own_assigner_name_is_refused_by_a_roundrobin_group_and_back(bootstrap: str,
                                                                                      tmp_path: Path) -> None:
    topic = unique_topic("refused")
    create_topic(bootstrap, topic, REFUSAL_PARTITIONS)
    members: list[Member] = []
    try:
        # a roundrobin group (confluent-kafka) refuses kafkajs's "RoundRobinAssigner"
        group = unique_topic("g-rr")
        cf = start("confluent", bootstrap, topic, group, "cf", tmp_path, members, assignor="roundrobin")
        wait_assigned([cf], REFUSAL_PARTITIONS, JOIN_BOUND_S, "confluent alone")
        mark = len(cf.events)
        js = start("kafkajs", bootstrap, topic, group, "js", tmp_path, members)
        wait_until(lambda: js.of("crash"), REFUSAL_BOUND_S, what="kafkajs refused")
        crash = js.of("crash")[0]
        assert (crash["type"], crash["code"], crash["restart"]) == ("INCONSISTENT_GROUP_PROTOCOL", 23, False), crash
        js.wait_closed()
        assert not js.of("assigned"), js.describe()
        later = [e for e in cf.events[mark:] if e["ev"] in ("assigned", "revoked", "lost")]
        assert not later and cf.owned() == frozenset(range(REFUSAL_PARTITIONS)), \
            f"the group changed when kafkajs was refused: {later}"

        # a group kafkajs started refuses confluent-kafka's "roundrobin"
        group2 = unique_topic("g-kjs")
        js2 = start("kafkajs", bootstrap, topic, group2, "js2", tmp_path, members)
        wait_assigned([js2], REFUSAL_PARTITIONS, JOIN_BOUND_S, "kafkajs alone")
        mark = len(js2.events)
        cf2 = start("confluent", bootstrap, topic, group2, "cf2", tmp_path, members, assignor="roundrobin")
        wait_until(lambda: any("INCONSISTENT_GROUP_PROTOCOL" in r.upper().replace(" ", "_") for r in refusals(cf2)),
                   REFUSAL_BOUND_S, what=f"confluent refused: {refusals(cf2)}")
        assert not cf2.owned(), cf2.describe()
        later = [e for e in js2.events[mark:] if e["ev"] in ("assigned", "revoked")]
        assert not later and js2.owned() == frozenset(range(REFUSAL_PARTITIONS)), later
        print(f"refusals: kafkajs {crash['type']}; confluent {refusals(cf2)[0]}")
    finally:
        for m in members:
            m.stop()


# --- 3. one library after another -----------------------------------------------------------------------------

HANDOFF_PARTITIONS = 3
HANDOFF_PER_PARTITION = 15
HANDOFF_STEP = 10


def test_a_group_is_continued_by_one_library_after_another(bootstrap: str, tmp_path: Path) -> None:
    topic, group = unique_topic("handoff"), unique_topic("g-handoff")
    create_topic(bootstrap, topic, HANDOFF_PARTITIONS)
    trickle = Trickle(bootstrap, topic, HANDOFF_PARTITIONS)
    trickle.send(HANDOFF_PARTITIONS * HANDOFF_PER_PARTITION)
    trickle.flush()
    members: list[Member] = []
    resume = {p: (-1, "") for p in range(HANDOFF_PARTITIONS)}    # the group's commits: the next one starts there

    def started_where_left(m: Member) -> None:
        for p in range(HANDOFF_PARTITIONS):
            mine = [o for q, o, _k in m.records() if q == p]
            if mine:
                assert mine[0] == max(resume[p][0], 0), \
                    f"{m.name} started partition {p} at {mine[0]}, the group had committed {resume[p]}"

    try:
        for client in ("kafka-python", "confluent", "kafkajs"):
            m = start(client, bootstrap, topic, group, client, tmp_path, members, limit=HANDOFF_STEP,
                      metadata=f"by-{client}")
            m.wait_closed(JOIN_BOUND_S)
            assert len(m.records()) == HANDOFF_STEP, m.describe()
            started_where_left(m)
            resume.update(m.last_commits())
            assert committed(bootstrap, group, topic, HANDOFF_PARTITIONS) == resume, \
                f"after {client}: committed {committed(bootstrap, group, topic, HANDOFF_PARTITIONS)}, expected {resume}"
        rest = HANDOFF_PARTITIONS * HANDOFF_PER_PARTITION - 3 * HANDOFF_STEP
        kcat = KcatMember.start_kcat(bootstrap, topic, group, "kcat", tmp_path, extra=["-c", str(rest)])
        members.append(kcat)
        kcat.wait_closed(JOIN_BOUND_S)
        started_where_left(kcat)
        check_delivery(members, trickle.produced(), "kafka-python, confluent, kafkajs, kcat", exactly_once=True)
        ends = wait_committed_to_end(bootstrap, group, topic, HANDOFF_PARTITIONS, READ_BOUND_S, members)
        assert ends == {p: HANDOFF_PER_PARTITION for p in range(HANDOFF_PARTITIONS)}
    finally:
        for m in members:
            m.stop()


# --- 4. administration --------------------------------------------------------------------------------------

ADMIN_PARTITIONS = 3


def kafka_python_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000, bootstrap_timeout_ms=10_000)


def listed_state(client, group: str) -> ConsumerGroupState | None:
    listed = client.list_consumer_groups(request_timeout=CALL_TIMEOUT_S).result(CALL_TIMEOUT_S)
    assert not listed.errors, listed.errors
    return next((g.state for g in listed.valid if g.group_id == group), None)


def backlogs(admin_url: str, topic: str, group: str) -> dict[int, int | None]:
    """partition -> msgBacklog of the Pulsar subscription `group` (None: no such subscription)."""
    out: dict[int, int | None] = {}
    for p in range(ADMIN_PARTITIONS):
        sub = pulsar_subscription(admin_url, topic, p, group)
        out[p] = None if sub is None else int(sub["msgBacklog"])
    return out


def test_group_administration_and_its_pulsar_subscriptions(standalone, bootstrap: str, tmp_path: Path) -> None:
    topic, group = unique_topic("gadmin"), unique_topic("g-admin")
    create_topic(bootstrap, topic, ADMIN_PARTITIONS)
    trickle = Trickle(bootstrap, topic, ADMIN_PARTITIONS)
    send_one_per_batch(trickle, 10 * ADMIN_PARTITIONS)       # one record per entry: backlogs count records
    members: list[Member] = []
    cadmin = admin(bootstrap)
    kadmin = kafka_python_admin(bootstrap)
    try:
        m = start("confluent", bootstrap, topic, group, "admin-member", tmp_path, members)
        wait_assigned([m], ADMIN_PARTITIONS, JOIN_BOUND_S, "one member")
        wait_committed_to_end(bootstrap, group, topic, ADMIN_PARTITIONS, READ_BOUND_S, members)

        # a live group: listed, described
        assert listed_state(cadmin, group) == ConsumerGroupState.STABLE
        desc = cadmin.describe_consumer_groups([group], request_timeout=CALL_TIMEOUT_S)[group].result(CALL_TIMEOUT_S)
        assert (desc.group_id, desc.state, desc.partition_assignor, desc.is_simple_consumer_group) == \
            (group, ConsumerGroupState.STABLE, "range", False), vars(desc)
        (member,) = desc.members
        assert member.client_id == "admin-member", vars(member)
        assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == \
            [(topic, p) for p in range(ADMIN_PARTITIONS)]
        assert desc.coordinator.port == standalone.kafka_port, vars(desc.coordinator)

        (kp_listed,) = [g for g in kadmin.list_groups() if g["group_id"] == group]
        assert (kp_listed["protocol_type"], kp_listed["group_state"]) == ("consumer", "Stable"), kp_listed
        kp_desc = kadmin.describe_groups([group])[group]
        assert kp_desc["error"] is None, kp_desc
        assert (kp_desc["group_state"], kp_desc["protocol_type"], kp_desc["protocol_data"]) == \
            ("Stable", "consumer", "range"), kp_desc
        (kp_member,) = kp_desc["members"]
        assert kp_member["client_id"] == "admin-member", kp_member
        assigned = kp_member["member_assignment"]        # decoded ConsumerProtocolAssignment
        assert [(t["topic"], sorted(t["partitions"])) for t in assigned["assigned_partitions"]] == \
            [(topic, list(range(ADMIN_PARTITIONS)))], assigned

        # a live group can not be deleted
        with pytest.raises(KafkaException) as refused:
            cadmin.delete_consumer_groups([group], request_timeout=CALL_TIMEOUT_S)[group].result(CALL_TIMEOUT_S)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP, refused.value
        assert kadmin.delete_groups([group]) == {group: "NonEmptyGroupError"}

        # its offsets: through both admin clients, and as the Pulsar subscription `group`
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(ADMIN_PARTITIONS)])]
        answer = cadmin.list_consumer_group_offsets(request, request_timeout=CALL_TIMEOUT_S)[group]\
            .result(CALL_TIMEOUT_S)
        # offsets only: groups_helpers.CONFLUENT_METADATA_NOTE
        assert sorted((tp.partition, tp.offset) for tp in answer.topic_partitions) == \
            [(p, 10) for p in range(ADMIN_PARTITIONS)]
        assert committed(bootstrap, group, topic, ADMIN_PARTITIONS) == {p: (10, "") for p in range(ADMIN_PARTITIONS)}
        assert backlogs(standalone.admin_url, topic, group) == {p: 0 for p in range(ADMIN_PARTITIONS)}

        m.close()
        wait_until(lambda: listed_state(cadmin, group) == ConsumerGroupState.EMPTY, JOIN_BOUND_S,
                   what="the group empty once its member left", interval_s=0.3)
        send_one_per_batch(trickle, 5 * ADMIN_PARTITIONS)
        assert backlogs(standalone.admin_url, topic, group) == {p: 5 for p in range(ADMIN_PARTITIONS)}

        # an empty group's offsets can be moved (back, here) and deleted one partition at a time
        moved = cadmin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1, 3)])],
            request_timeout=CALL_TIMEOUT_S)[group].result(CALL_TIMEOUT_S)
        assert [(tp.partition, tp.offset, tp.error) for tp in moved.topic_partitions] == [(1, 3, None)]
        assert committed(bootstrap, group, topic, ADMIN_PARTITIONS) == {0: (10, ""), 1: (3, ""), 2: (10, "")}
        assert backlogs(standalone.admin_url, topic, group) == {0: 5, 1: 12, 2: 5}

        forgotten = kadmin.delete_group_offsets(group, [KpTopicPartition(topic, 0)])
        assert {tp.partition: err.__name__ for tp, err in forgotten.items()} == {0: "NoError"}, forgotten
        assert committed(bootstrap, group, topic, ADMIN_PARTITIONS) == {0: (-1, ""), 1: (3, ""), 2: (10, "")}
        assert backlogs(standalone.admin_url, topic, group) == {0: None, 1: 12, 2: 5}

        # DeleteGroups: the group, its offsets and its subscriptions go
        assert cadmin.delete_consumer_groups([group], request_timeout=CALL_TIMEOUT_S)[group].result(CALL_TIMEOUT_S) \
            is None
        assert listed_state(cadmin, group) is None
        assert group not in [g["group_id"] for g in kadmin.list_groups()]
        assert committed(bootstrap, group, topic, ADMIN_PARTITIONS) == {p: (-1, "") for p in range(ADMIN_PARTITIONS)}
        assert backlogs(standalone.admin_url, topic, group) == {p: None for p in range(ADMIN_PARTITIONS)}
        assert kadmin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    finally:
        kadmin.close()
        for m in members:
            m.stop()
    # a new consumer of the deleted group starts over (auto.offset.reset earliest: everything again)
    again = start("kafka-python", bootstrap, topic, group, "again", tmp_path, members)
    try:
        wait_consumed([again], set(trickle.produced()), READ_BOUND_S, "the deleted group's name reused")
        again.close()
    finally:
        again.stop()
    assert [o for p, o, _k in again.records() if p == 0][:1] == [0]
