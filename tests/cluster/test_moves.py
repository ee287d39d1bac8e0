"""Graceful moves are invisible to the application (issue 14, items 4 and 7), official client.

Four topics take a steady load (producers through the multi-host URL, an Exclusive and a
Failover consumer each). Then, one after the other: `topics unload` of one topic, `namespaces
unload` of the namespace, a bundle unloaded to a named destination broker (it lands there), a
bundle split with unload, and SIGTERM of the broker owning most topics. What must hold:
- the application sees no error: every send callback is Ok, no receive or ack raises;
- nothing acked is lost, and per partition each consumer's new seqs come in order;
- each move stalls a topic's publishing for about a second at most (the longest gap between two
  acks around the move is printed and bounded by MOVE_STALL_MAX_S);
- the SIGTERMed broker exits 0, and its bundles' keys are gone (released, not left to expire).
"""

from __future__ import annotations

import time

import pulsar

from tests.cluster.conftest import unique
from tests.cluster.helpers import (
    Consuming,
    MetadataView,
    Producing,
    http,
    lookup,
    make_client,
    max_ack_gap_s,
    order_violations,
    owners_by_lookup,
    topic_path,
)
from tests.support.cluster_proc import LocalCluster
from tests.support.namespaces import ensure_namespace
from tests.support.waiting import wait_until

TOPICS = 4
RATE_PER_S = 50.0
# "Clients move within about a second." Measured longest pauses: 0.02-0.43 s on an idle 2-core
# machine (0.43 s: SIGTERM of the owner), up to 1.06 s under load (commit a473483). The bound has
# about 3x that worst case, so a loaded CI machine keeps it while a stall of seconds (a client
# waiting out a lookup timeout or a lease) still fails.
MOVE_STALL_MAX_S = 3.0
AFTER_MOVE_S = 1.0           # acks observed past the move before the stall is measured
SETTLE_TIMEOUT_S = 20.0
DRAIN_TIMEOUT_S = 40.0


def _stall_s(producer: Producing, start_s: float) -> float:
    """Wait until the producer has been acked AFTER_MOVE_S past the move's end, then the longest
    gap between acks since `start_s`."""
    wait_until(lambda: any(a.at_s > start_s + AFTER_MOVE_S for a in producer.acks_after(start_s)),
               SETTLE_TIMEOUT_S, what=f"publishing to {producer.topic} resumed after the move")
    end_s = max(a.at_s for a in producer.acks_after(start_s))
    return max_ack_gap_s(producer.acks_after(start_s), start_s, end_s)


def _check_move(what: str, producers: list[Producing], start_s: float) -> None:
    stalls = {p.topic.rsplit("/", 1)[1]: round(_stall_s(p, start_s), 2) for p in producers}
    print(f"{what}: longest pause in acks per topic (s): {stalls}")
    assert max(stalls.values()) <= MOVE_STALL_MAX_S, (what, stalls)
    for p in producers:
        assert not p.errors, (what, p.topic, p.errors[:5])


def test_unloads_and_sigterm_are_invisible_to_the_application(new_cluster) -> None:
    cluster: LocalCluster = new_cluster()
    a = cluster.brokers[0]
    tenant, ns_local = "public", unique("moves")
    ns = f"{tenant}/{ns_local}"
    ensure_namespace(a.admin_url, ns)
    topics = [f"persistent://{ns}/{unique('m')}" for _ in range(TOPICS)]
    view = MetadataView(cluster.metadata_url)
    client = make_client(cluster.service_url)
    producers: dict[str, Producing] = {}
    consumers: list[Consuming] = []
    try:
        for t in topics:
            consumers.append(Consuming(client, t, "ex", pulsar.ConsumerType.Exclusive))
            consumers.append(Consuming(client, t, "fo", pulsar.ConsumerType.Failover))
            producers[t] = Producing(client, t, RATE_PER_S)
        wait_until(lambda: all(len(p.acks) >= 20 for p in producers.values())
                   and all(c.received for c in consumers), 30, what="load running")

        start = time.monotonic()
        done = http("PUT", f"{a.admin_url}/admin/v2/{topic_path(topics[0])}/unload", follow=True)
        assert done.status == 204, (done.status, done.body)
        _check_move("topics unload", [producers[topics[0]]], start)

        start = time.monotonic()
        done = http("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}/unload", follow=True)
        assert done.status == 204, (done.status, done.body)
        _check_move("namespaces unload", list(producers.values()), start)

        # a bundle moved to a named broker, through the broker that does not own it
        moving = topics[1]
        bundle = http("GET", f"{a.admin_url}/lookup/v2/topic/{topic_path(moving)}/bundle", follow=True).json()
        owner_url = lookup(a.admin_url, moving)["brokerUrl"]
        destination = next(b for b in cluster.brokers if b.service_url != owner_url)
        start = time.monotonic()
        done = http("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}/{bundle}/unload"
                           f"?destinationBroker={destination.web_id}", follow=True)
        assert done.status == 204, (done.status, done.body)
        _check_move("bundle unload to a named broker", list(producers.values()), start)
        assert lookup(a.admin_url, moving)["brokerUrl"] == destination.service_url, "the bundle did not go there"

        # a bundle split by admin command, its halves unloaded
        splitting = topics[2]
        bundle = http("GET", f"{a.admin_url}/lookup/v2/topic/{topic_path(splitting)}/bundle", follow=True).json()
        before = http("GET", f"{a.admin_url}/admin/v2/namespaces/{ns}/bundles").json()["numBundles"]
        start = time.monotonic()
        done = http("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}/{bundle}/split?unload=true", follow=True)
        assert done.status == 204, (done.status, done.body)
        after = http("GET", f"{a.admin_url}/admin/v2/namespaces/{ns}/bundles").json()["numBundles"]
        assert after == before + 1, (before, after)
        _check_move("bundle split with unload", list(producers.values()), start)

        owners = owners_by_lookup(a.admin_url, topics)
        victim = max(cluster.brokers, key=lambda b: sum(1 for u in owners.values() if u == b.service_url))
        moved = [producers[t] for t in topics if owners[t] == victim.service_url]
        victim_keys = {k for k, (url, _) in view.bundle_owners(tenant, ns_local).items()
                       if url == victim.service_url}
        start = time.monotonic()
        code = victim.stop()
        stopped_s = time.monotonic() - start
        print(f"SIGTERM of {victim.name}: exited {code} after {stopped_s:.2f} s, {len(moved)} topics moved")
        assert code == 0, f"{victim.name} exited {code} on SIGTERM:\n{victim.log_tail()}"
        left = victim_keys & set(view.bundle_owners(tenant, ns_local))
        still_victim = {k for k in left if view.bundle_owners(tenant, ns_local)[k][0] == victim.service_url}
        assert not still_victim, f"{victim.name} stopped without releasing {sorted(still_victim)}"
        _check_move("SIGTERM of the owner", moved, start)

        for p in producers.values():
            p.stop(DRAIN_TIMEOUT_S)
        for c in consumers:
            acked = set(producers[c.topic].acks)
            wait_until(lambda c=c, acked=acked: acked <= c.seqs(), DRAIN_TIMEOUT_S,
                       what=f"every acked message of {c.topic} received on {c.subscription}")
            c.stop()
            assert not c.errors, (c.topic, c.subscription, c.errors[:5])
            problems = order_violations(c.received)
            assert not problems, (c.topic, c.subscription, problems[:10])
        for p in producers.values():
            assert not p.errors, (p.topic, p.errors[:5])
    finally:
        for c in consumers:
            c.stop()
            c.close()
        for p in producers.values():
            p.close()
        client.close()
        view.close()
