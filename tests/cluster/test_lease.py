"""Losing the lease means stopping (issue 14, items 3 and 7): a frozen broker and a metadata
database that restarts, on a real cluster with the official client.

Frozen broker (SIGSTOP past its lease, then SIGCONT), deduplication on, producers through the
multi-host URL. What must hold:
- while it is frozen its registration and bundle keys vanish (lease + about a second), and
  another client's subscription on the survivor takes over the topics of half of them;
- once resumed it writes nothing: no publish is acked on a ledger it had opened before the
  freeze later than FREEZE_ACK_GRACE_S after the freeze began (those acks could only come from
  it adding an entry after its lease — the other half of its topics are not taken over before
  it resumes, so their ledgers are not fenced and only its own lease check stops the write);
- it lets its bundles go and registers anew under a new session; its old session owns no key;
- every producer resumes; each topic stores every acked seq exactly once (dedup), in order.

Database restart (PostgreSQL stopped, then started): a short outage (below the lease) is ridden
out; during a long one no publish is acked later than the lease after the database went down
(a broker never serves without a lease); after it, publishing resumes and nothing acked is lost.

Findings (06:03 UTC, tree at 0834df9 + uncommitted ownership work):
- (8 of 12 runs, 05:59-06:17 UTC, still open at d15a5bd) the survivor's lookup right after
  the frozen broker's keys were reaped REDIRECTED the client to the frozen broker:
  `Ownership._choose` picks from `registry.live()`, a watch-fed view that still lists the
  reaped broker for up to a watch poll after the store dropped it, and with all its bundles
  just reaped it is the least loaded. (A lookup waiting in `_wait_gone` wakes on the ownership
  key's deletion, so it meets the same stale view.) The official client then waits out its
  10 s connection timeout on the frozen broker's unanswered CONNECT and subscribe fails with
  ConnectError. Assignment should confirm the target's registration key in the store before
  redirecting to it (or drop a broker from the view when its session is reaped).
- (fixed in 0e532d2) after an outage longer than the lease no bookie registered again
  (LeaseLost from its refresh was taken as transient), so publishing never resumed.
"""

from __future__ import annotations

import time

import pulsar

from tests.cluster.conftest import LEASE_S, unique
from tests.cluster.helpers import (
    Consuming,
    MetadataView,
    Producing,
    duplicates,
    http,
    make_client,
    order_violations,
    owners_by_lookup,
    read_all,
)
from tests.support.cluster_proc import LocalCluster
from tests.support.namespaces import ensure_namespace, ensure_topic_namespace
from tests.support.waiting import wait_until

TOPICS = 6
RATE_PER_S = 40.0
FREEZE_ACK_GRACE_S = 0.5      # receipts already in the kernel's socket buffer at SIGSTOP
KEYS_GONE_SLACK_S = 2.0   # target past the lease, from the freeze; measured: gone after 2.91 s (lease 3 s)
RESUME_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 40.0
SHORT_OUTAGE_S = 1.0
LONG_OUTAGE_EXTRA_S = 2.0     # the long outage lasts the lease plus this
LATE_ACK_SLACK_S = 0.5        # an add sent just before the lease lapsed may be acked this late


def _start_load(client: pulsar.Client, topics: list[str]) -> tuple[dict[str, Producing], list[Consuming]]:
    consumers = [Consuming(client, t, "ex", pulsar.ConsumerType.Exclusive) for t in topics]
    producers = {t: Producing(client, t, RATE_PER_S) for t in topics}
    wait_until(lambda: all(len(p.acks) >= 20 for p in producers.values()) and all(c.received for c in consumers),
               30, what="load running")
    return producers, consumers


def _drain_and_check(client: pulsar.Client, producers: dict[str, Producing], consumers: list[Consuming],
                     *, no_duplicates: bool) -> None:
    """Stop producing; every acked seq is received by its consumer and stored (once, with dedup),
    in order per partition."""
    for p in producers.values():
        p.stop(DRAIN_TIMEOUT_S)
    for c in consumers:
        acked = set(producers[c.topic].acks)
        wait_until(lambda c=c, acked=acked: acked <= c.seqs(), DRAIN_TIMEOUT_S,
                   what=f"every acked message of {c.topic} received")
        c.stop()
        problems = order_violations(c.received)
        assert not problems, (c.topic, problems[:10])
    for t, p in producers.items():
        stored = read_all(client, t, len(p.acks))
        assert set(p.acks) <= {r.seq for r in stored}, (t, sorted(set(p.acks) - {r.seq for r in stored})[:10])
        assert not order_violations(stored), (t, order_violations(stored)[:10])
        if no_duplicates:
            assert not duplicates(stored), (t, duplicates(stored)[:10])


def _close(client: pulsar.Client, producers: dict[str, Producing], consumers: list[Consuming]) -> None:
    for c in consumers:
        c.stop()
        c.close()
    for p in producers.values():
        p.close()
    client.close()


def test_frozen_broker_past_its_lease_writes_nothing_and_lets_go(new_cluster) -> None:
    cluster: LocalCluster = new_cluster()
    a = cluster.brokers[0]
    tenant, ns_local = "public", unique("freeze")
    ns = f"{tenant}/{ns_local}"
    ensure_namespace(a.admin_url, ns)
    dedup = http("POST", f"{a.admin_url}/admin/v2/namespaces/{ns}/deduplication", True, follow=True)
    assert dedup.status in (200, 204), (dedup.status, dedup.body)
    topics = [f"persistent://{ns}/{unique('f')}" for _ in range(TOPICS)]
    view = MetadataView(cluster.metadata_url)
    client = make_client(cluster.service_url)
    producers, consumers = _start_load(client, topics)
    try:
        owners = owners_by_lookup(a.admin_url, topics)
        victim = max(cluster.brokers, key=lambda b: sum(1 for u in owners.values() if u == b.service_url))
        survivor = next(b for b in cluster.brokers if b is not victim)
        on_victim = [t for t in topics if owners[t] == victim.service_url]
        taken_over, left_alone = on_victim[::2], on_victim[1::2]
        session = view.brokers()[victim.web_id][1]
        assert session, "the victim's registration is not an ephemeral key"
        old_ledgers = {t: {k.ledger_id for k in producers[t].acks.values()} for t in on_victim}

        sent_before_freeze = {t: producers[t].sent for t in on_victim}
        t_freeze = time.monotonic()
        victim.freeze()
        try:
            def old_session_keys() -> set[str] | None:
                keys = view.safe(view.bundle_owners)
                regs = view.safe(view.brokers)
                if keys is None or regs is None:
                    return None
                return ({k for k, (_, s) in keys.items() if s == session}
                        | {k for k, (_, s) in regs.items() if s == session})
            wait_until(lambda: old_session_keys() == set(), LEASE_S + KEYS_GONE_SLACK_S + 5,
                       what="the frozen broker's keys to vanish")
            gone_s = time.monotonic() - t_freeze
            print(f"\n{victim.name} frozen: its keys gone after {gone_s:.2f} s (lease {LEASE_S} s); "
                  f"{len(on_victim)} topics on it: {len(taken_over)} taken over while frozen, {len(left_alone)} not")
            assert gone_s <= LEASE_S + KEYS_GONE_SLACK_S, f"keys vanished only after {gone_s:.2f} s"
            other = make_client(survivor.service_url)
            try:
                for t in taken_over:     # loads the topic on the survivor: its ledger is fenced
                    other.subscribe(t, "survivor-probe", initial_position=pulsar.InitialPosition.Earliest)
            finally:
                other.close()
            wait_until(lambda: time.monotonic() - t_freeze > 2 * LEASE_S, 2 * LEASE_S + 1,
                       what="twice the lease frozen")
        finally:
            t_thaw = time.monotonic()
            victim.thaw()

        def resumed(t: str) -> bool:
            return any(k.ledger_id not in old_ledgers[t] for k in producers[t].acks_after(t_thaw))
        wait_until(lambda: all(resumed(t) for t in on_victim), RESUME_TIMEOUT_S,
                   what="every topic of the frozen broker published to again")
        print(f"resumed {time.monotonic() - t_thaw:.2f} s after the thaw")

        def registered_anew() -> bool:
            regs = view.safe(view.brokers)
            return bool(regs) and victim.web_id in regs and regs[victim.web_id][1] != session
        wait_until(registered_anew, RESUME_TIMEOUT_S, what="the resumed broker registered under a new session")
        assert victim.alive(), f"{victim.name} died after the thaw:\n{victim.log_tail()}"

        # A receipt that arrives after the thaw for a send already on its way to the bookies at the
        # freeze is fine: that entry became durable before the lease ran out (the next owner's
        # recovery finds it; _drain_and_check below proves it is neither lost nor doubled). What
        # must not happen is an entry the frozen broker accepted after the freeze landing on its
        # old ledgers: its later sends are refused by the lease check.
        late = {t: sorted((k.seq, k.ledger_id, round(k.at_s - t_freeze, 2)) for k in producers[t].acks.values()
                          if k.ledger_id in old_ledgers[t] and k.at_s > t_freeze + FREEZE_ACK_GRACE_S
                          and k.seq >= sent_before_freeze[t])
                for t in on_victim}
        late = {t: v for t, v in late.items() if v}
        assert not late, f"acks on the frozen broker's old ledgers after its lease (seq, ledger, s): {late}"
        stale = old_session_keys()
        assert stale == set(), f"keys of the old session are back: {stale}"
        _drain_and_check(client, producers, consumers, no_duplicates=True)
    finally:
        _close(client, producers, consumers)
        view.close()


def test_metadata_database_restart(new_cluster) -> None:
    cluster: LocalCluster = new_cluster()
    topics = [f"persistent://public/{unique('db')}/{unique('d')}" for _ in range(4)]
    for topic in topics:
        ensure_topic_namespace(cluster.brokers[0].admin_url, topic)
    client = make_client(cluster.service_url)
    producers, consumers = _start_load(client, topics)
    pg = cluster.postgres
    try:
        # a short outage, below the lease: ridden out
        pg.stop()
        t_down = time.monotonic()
        time.sleep(SHORT_OUTAGE_S)        # the outage itself: a fixed, bounded duration
        pg.start()
        t_up = time.monotonic()
        wait_until(lambda: all(p.first_ack_after(t_up) for p in producers.values()), RESUME_TIMEOUT_S,
                   what="publishing after a short database outage")
        print(f"\nshort outage ({t_up - t_down:.2f} s): resumed "
              f"{max(p.first_ack_after(t_up) for p in producers.values()) - t_up:.2f} s after it")  # type: ignore[operator]

        # a long outage, past the lease: nothing may be acked once the lease has lapsed
        pg.stop()
        t_down = time.monotonic()
        time.sleep(LEASE_S + LONG_OUTAGE_EXTRA_S)   # the outage itself
        t_up_begin = time.monotonic()
        pg.start()
        t_up = time.monotonic()
        late = {p.topic: sorted(round(k.at_s - t_down, 2) for k in p.acks.values()
                                if t_down + LEASE_S + LATE_ACK_SLACK_S < k.at_s < t_up_begin)
                for p in producers.values()}
        late = {t: v for t, v in late.items() if v}
        assert not late, f"publishes acked without a lease (s after the database went down): {late}"
        wait_until(lambda: all(p.first_ack_after(t_up) for p in producers.values()), RESUME_TIMEOUT_S,
                   what="publishing after a long database outage")
        print(f"long outage ({t_up - t_down:.2f} s): resumed "
              f"{max(p.first_ack_after(t_up) for p in producers.values()) - t_up:.2f} s after it")  # type: ignore[operator]
        _drain_and_check(client, producers, consumers, no_duplicates=False)
        errors = {p.topic: p.errors[:3] for p in producers.values() if p.errors}
        print(f"send errors: {errors or 'none'}")
    finally:
        _close(client, producers, consumers)
