"""kill -9 of an owner under load (issue 14, items 4 and 7), official client, multi-host URL.

A 4-partition topic and 3 plain topics take a steady load; each has an Exclusive subscription
and a Failover subscription of two consumers. The broker owning most of the partitions is
killed with SIGKILL. What must hold:
- every partition it owned is published to again through the survivor (the time from the kill
  to the first publish acked on a ledger the dead broker never wrote, per partition, is
  printed: p50 and max), within the lease plus a few seconds of client back-off;
- its ownership keys are gone within the lease plus about a second (the metadata store's
  promise for ephemeral keys), and the survivor's keys replace them;
- zero acknowledged messages are lost: every consumer of every subscription receives every seq
  the producer saw acked, and per partition the new seqs each consumer sees come in order;
- consumers resume: each subscription receives messages produced after the kill.

(Found here, fixed in d15a5bd: a lookup waiting for the dead owner's key ignored the bundle
being acquired meanwhile by its own broker and waited out broker_lookup_owner_wait_ms, 16.7 s.)
"""

from __future__ import annotations

import time

import pulsar

from tests.cluster.conftest import LEASE_S, unique
from tests.cluster.helpers import (
    Consuming,
    MetadataView,
    Producing,
    http,
    make_client,
    order_violations,
    owners_by_lookup,
    percentile,
    topic_path,
)
from tests.support.namespaces import ensure_namespace
from tests.support.waiting import wait_until

PARTITIONS = 4
RATE_PER_S = 40.0
WARMUP_TIMEOUT_S = 30.0
# Targets, timed from the kill -9. The lease part is fixed; load stretches only what comes past
# it. Measured (idle 2-core machine, lease 3 s): keys gone after 2.99 s (0.0 s past the lease),
# first publish through the survivor 3.17-3.43 s (0.43 s past it); the allowances have over 3x.
KEYS_GONE_SLACK_S = 1.5          # ephemeral keys vanish within lease + ~1 s (metadata/api.py)
CLIENT_RESUME_SLACK_S = 5.0      # + the client's reconnect back-off on top of the lease
DRAIN_TIMEOUT_S = 40.0


def _partitions(topic: str, partitioned: bool) -> list[str]:
    return [f"{topic}-partition-{i}" for i in range(PARTITIONS)] if partitioned else [topic]


def test_kill9_of_an_owner_under_load(new_cluster) -> None:
    cluster = new_cluster()
    a = cluster.brokers[0]
    ns = f"public/{unique('kill')}"
    ensure_namespace(a.admin_url, ns)
    partitioned = f"persistent://{ns}/{unique('pt')}"
    created = http("PUT", f"{a.admin_url}/admin/v2/{topic_path(partitioned)}/partitions", PARTITIONS, follow=True)
    assert created.status == 204, (created.status, created.body)
    topics = {partitioned: True, **{f"persistent://{ns}/{unique('t')}": False for _ in range(3)}}
    view = MetadataView(cluster.metadata_url)
    client = make_client(cluster.service_url)
    producers: dict[str, Producing] = {}
    consumers: dict[str, list[Consuming]] = {}
    try:
        for t in topics:
            consumers[t] = [Consuming(client, t, "ex", pulsar.ConsumerType.Exclusive),
                            Consuming(client, t, "fo", pulsar.ConsumerType.Failover, consumer_name="fo-1"),
                            Consuming(client, t, "fo", pulsar.ConsumerType.Failover, consumer_name="fo-2")]
            producers[t] = Producing(client, t, RATE_PER_S)
        wait_until(lambda: all(len(p.acks) >= 20 for p in producers.values())
                   and all(c[0].received and (c[1].received or c[2].received) for c in consumers.values()),
                   WARMUP_TIMEOUT_S, what="every producer acked and every subscription receiving")

        names = [p for t, part in topics.items() for p in _partitions(t, part)]
        owners = owners_by_lookup(a.admin_url, names)
        by_url = {b.service_url: b for b in cluster.brokers}
        victim = max(cluster.brokers, key=lambda b: sum(1 for u in owners.values() if u == b.service_url))
        survivor = next(b for b in cluster.brokers if b is not victim)
        moved = [n for n in names if owners[n] == victim.service_url]
        print(f"\nowners: { {n.rsplit('/', 1)[1]: by_url[u].name for n, u in owners.items()} }; killing {victim.name}")
        victim_keys = {k for k, (url, _) in view.bundle_owners("public", ns.split("/")[1]).items()
                       if url == victim.service_url}
        assert victim_keys, "the victim owns no bundle key of the namespace"

        def partition_index(name: str) -> int:
            return int(name.rsplit("-partition-", 1)[1]) if "-partition-" in name else -1

        def topic_of(name: str) -> str:
            return name.rsplit("-partition-", 1)[0] if "-partition-" in name else name

        old_ledgers = {n: {k.ledger_id for k in producers[topic_of(n)].acks.values()
                           if k.partition == partition_index(n)} for n in moved}

        t_kill = time.monotonic()
        victim.kill9()

        def keys_gone() -> bool:
            keys = view.safe(view.bundle_owners, "public", ns.split("/")[1])
            return keys is not None and not (victim_keys & {k for k, (u, _) in keys.items()
                                                          if u == victim.service_url})
        wait_until(keys_gone, LEASE_S + KEYS_GONE_SLACK_S + 5, what="the dead broker's bundle keys to vanish")
        keys_gone_s = time.monotonic() - t_kill

        def resumed_at(name: str) -> float | None:
            later = [k.at_s for k in producers[topic_of(name)].acks_after(t_kill)
                     if k.partition == partition_index(name) and k.ledger_id not in old_ledgers[name]]
            return min(later) if later else None

        wait_until(lambda: all(resumed_at(n) for n in moved), LEASE_S + CLIENT_RESUME_SLACK_S + 10,
                   what="a publish acked through the survivor on every moved partition")
        per_partition = {n.rsplit("/", 1)[1]: round(resumed_at(n) - t_kill, 2) for n in moved}  # type: ignore[operator]
        failover_s = list(per_partition.values())
        print(f"first publish after the kill, per moved partition (s): {per_partition}")
        print(f"kill -9 of {victim.name} ({len(moved)} partitions moved, lease {LEASE_S} s): keys gone after "
              f"{keys_gone_s:.2f} s; first publish after the kill p50 {percentile(failover_s, 0.5):.2f} s, "
              f"max {max(failover_s):.2f} s")
        assert keys_gone_s <= LEASE_S + KEYS_GONE_SLACK_S, f"keys vanished only after {keys_gone_s:.2f} s"
        assert max(failover_s) <= LEASE_S + CLIENT_RESUME_SLACK_S, f"failover took {max(failover_s):.2f} s"
        now_owned = owners_by_lookup(survivor.admin_url, moved)
        assert set(now_owned.values()) == {survivor.service_url}, now_owned

        # consumers resume: every subscription gets messages produced after the kill
        def sub_received_after(group: list[Consuming]) -> bool:
            failover = group[1].received_after(t_kill) + group[2].received_after(t_kill)
            return group[0].received_after(t_kill) > 0 and failover > 0
        wait_until(lambda: all(sub_received_after(g) for g in consumers.values()), 20,
                   what="every subscription receiving after the kill")

        for p in producers.values():
            p.stop(DRAIN_TIMEOUT_S)
        for t, group in consumers.items():
            acked = set(producers[t].acks)
            wait_until(lambda acked=acked, group=group: acked <= group[0].seqs()
                       and acked <= (group[1].seqs() | group[2].seqs()),
                       DRAIN_TIMEOUT_S, what=f"every acked message of {t} received by both subscriptions")
        for t, group in consumers.items():
            for consumer in group:
                consumer.stop()
                problems = order_violations(consumer.received)
                assert not problems, (t, consumer.subscription, problems[:10])
                assert not consumer.errors, (t, consumer.subscription, consumer.errors[:5])
        errors = {t: p.errors for t, p in producers.items() if p.errors}
        print(f"acked {sum(len(p.acks) for p in producers.values())} messages, send errors {errors or 'none'}")
    finally:
        for group in consumers.values():
            for consumer in group:
                consumer.stop()
                consumer.close()
        for p in producers.values():
            p.close()
        client.close()
        view.close()
