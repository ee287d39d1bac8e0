"""A Kafka consumer group on a real two-broker cluster, through the kill -9 of its coordinator.

Three confluent-kafka members (each a process of its own, committing synchronously what they
processed) share a topic whose partitions are served by both brokers, while an idempotent acks=all
producer (stream_check.NumberedStream) keeps sending. The broker coordinating the group (FindCoordinator,
as AdminClient.describe_consumer_groups reports it) is killed with SIGKILL mid-stream. Its placement
bundle, and its share of the partitions, pass to the other broker once its lease (3 s) lapses; the
group's record in the metadata store lets the new coordinator resume the Stable group.

What must hold: the group commits again (a commit acknowledged for a record sent after the kill)
within lease + 5 s of the kill; FindCoordinator then names the surviving broker; every acknowledged
record is read by the group (none lost) and each partition resumes from its committed offset (a
record is read twice only after the last commit acknowledged before its reader got the partition:
groups_helpers.check_delivery); in the end the committed offsets are the partitions' ends. The
killed broker is started again afterwards (the module's cluster stays whole for the traceback check).
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.kafka.conftest import wait_kafka_port
from tests.kafka.groups_helpers import (
    CALL_TIMEOUT_S,
    Member,
    admin,
    check_delivery,
    member_spec,
    wait_assigned,
    wait_committed_to_end,
    wait_consumed,
)
from tests.kafka.helpers import unique_topic
from tests.kafka.stream_check import NumberedStream, key_of
from tests.kafka.test_cluster_clients import PARTITIONS, spread_topic
from tests.support.cluster_proc import LocalCluster

LEASE_S = 3.0                    # conftest.checked_cluster's lease_ms
RECOVERY_BOUND_S = LEASE_S + 5.0
JOIN_BOUND_S = 60.0
READ_BOUND_S = 90.0
BEFORE_KILL = 600                # records sent before the kill, then AFTER_KILL more around it
AFTER_KILL = 2400
PACE_S = 0.004                   # ~250 records a second: ~10 s of sending after the kill


def coordinator_port(bootstrap: str, group: str) -> int:
    """The Kafka port of the broker coordinating `group` (FindCoordinator, through describe)."""
    client = admin(bootstrap)      # held: a dropped AdminClient fails its futures
    described = client.describe_consumer_groups([group], request_timeout=CALL_TIMEOUT_S)[group].result(CALL_TIMEOUT_S)
    return int(described.coordinator.port)


def recovered_at(members: list[Member], killed_at: float, first_after: int) -> float | None:
    """When a member first had a commit acknowledged that covers a record sent after the kill (so
    the commit was answered by the new coordinator); None if none yet."""
    times = []
    for m in members:
        last_keys: list[str | None] = []
        for e in list(m.events):
            if e["ev"] == "records":
                last_keys = [k for _p, _o, k in e["recs"]]
            elif e["ev"] == "committed" and e["t"] > killed_at:
                if any(k is not None and int(k[1:]) >= first_after for k in last_keys):
                    times.append(float(e["t"]))
                    break
    return min(times) if times else None


def test_group_commits_again_soon_after_its_coordinator_is_killed(kafka_cluster: LocalCluster,
                                                                   tmp_path: Path) -> None:
    bootstrap = kafka_cluster.kafka_bootstrap
    topic, owners = spread_topic(kafka_cluster)
    group = unique_topic("g-failover")
    members = [Member.start("confluent", member_spec(bootstrap, topic, group, name), tmp_path) for name in "abc"]
    victim = None
    try:
        owned = wait_assigned(members, PARTITIONS, JOIN_BOUND_S, "three members")
        port = coordinator_port(bootstrap, group)
        victim = next(b for b in kafka_cluster.brokers if b.kafka_port == port)
        survivor = next(b for b in kafka_cluster.brokers if b is not victim)
        stream = NumberedStream(bootstrap, topic, PARTITIONS)
        stream.send(range(BEFORE_KILL), pace_s=PACE_S)
        kill: dict[str, float] = {}

        def kill_coordinator() -> None:
            assert victim is not None
            victim.kill9()
            kill["at"] = time.monotonic()
            kill["first_after"] = len(stream.sent)     # records numbered from here on were sent after it

        stream.send(range(BEFORE_KILL, BEFORE_KILL + AFTER_KILL), pace_s=PACE_S,
                    at={BEFORE_KILL + 1: kill_coordinator})
        stream.finish()
        produced = {stream.delivered[n]: key_of(n).decode() for n in stream.delivered}
        wait_consumed(members, set(produced), READ_BOUND_S, "every acknowledged record")
        back = recovered_at(members, kill["at"], int(kill["first_after"]))
        assert back is not None, "no commit acknowledged after the kill"
        recovery_s = back - kill["at"]
        print(f"coordinator {victim.name} (Kafka port {port}) killed; the group committed again after "
              f"{recovery_s:.2f} s (bound {RECOVERY_BOUND_S} s); assignment {dict(owned)}; "
              f"partitions it served: {sorted(p for p, o in owners.items() if o == victim.service_url)}")
        assert recovery_s <= RECOVERY_BOUND_S, \
            f"the group committed again only {recovery_s:.2f} s after its coordinator was killed"
        assert coordinator_port(survivor.kafka_bootstrap, group) == survivor.kafka_port
        stats = check_delivery(members, produced, "the group through its coordinator's kill")
        wait_committed_to_end(survivor.kafka_bootstrap, group, topic, PARTITIONS, READ_BOUND_S, members)
        for m in members:
            m.close()
        print(f"delivery: {stats}")
    finally:
        for m in members:
            m.stop()
        if victim is not None and not victim.alive():
            victim.launch()
            wait_kafka_port(victim.kafka_bootstrap, victim.name, victim.log_path)
