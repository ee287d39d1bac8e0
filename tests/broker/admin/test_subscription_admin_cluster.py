"""Subscription admin operations on two real brokers (tests.support.cluster_proc.LocalCluster over
PostgreSQL): a partitioned topic whose partitions live on both brokers gets every fanned-out
operation on each partition's owner, whichever broker is asked; a call on one topic asked of the
broker that does not own it is redirected (307) and lands on the owner, body included; a peek
asked of the other broker answers the owner's payload and headers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from admin_client import request, request_json
from tests.broker.admin.test_admin_cluster import LEASE_MS, http, owner_of, quiet_client, spread_partitions, unique
from tests.support.cluster_proc import LocalCluster
from tests.support.namespaces import ensure_namespace

EARLIEST = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {"STRATA_BROKER_LOAD_REPORT_INTERVAL_MS": "500", "STRATA_BROKER_LOOKUP_OWNER_WAIT_MS": "500"}
    with LocalCluster.start(tmp_path_factory.mktemp("subs-two") / "c", brokers=2, bookies=2, e=2, qw=2, qa=2,
                            lease_ms=LEASE_MS, env=env) as cluster:
        yield cluster
        logs = {b.name: b.log_path.read_text(errors="replace") for b in cluster.brokers if b.log_path.exists()}
    assert not [name for name, text in logs.items() if "Traceback" in text], "a broker logged a traceback"


def test_partitioned_subscription_operations_reach_every_partitions_owner(two: LocalCluster) -> None:
    ns = f"public/{unique('psubs')}"
    a, b = two.brokers
    assert request_json("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": 16}}) is None
    base = f"/admin/v2/persistent/{ns}/p"
    assert http(a.admin_url + base + "/partitions", "PUT", 6)[0] == 204
    spread_partitions(two, ns, "p", 6)
    assert http(a.admin_url + base + "/subscription/s", "PUT", EARLIEST)[0] == 204
    assert http(b.admin_url + base + "/subscription/s", "PUT", EARLIEST)[:2] == (
        409, {"reason": "Subscription already exists for topic"})
    for broker in two.brokers:
        assert http(broker.admin_url + base + "/subscriptions")[:2] == (200, ["s"])
    client = quiet_client(a.service_url)
    try:
        producer = client.create_producer(f"persistent://{ns}/p", batching_enabled=False)
        for i in range(12):
            producer.send(b"%d" % i, partition_key=str(i))
    finally:
        client.close()

    def backlog(broker_url: str) -> int:
        status, stats, _ = http(broker_url + base + "/partitioned-stats")
        assert status == 200, stats
        return stats["subscriptions"]["s"]["msgBacklog"]

    assert backlog(a.admin_url) == backlog(b.admin_url) == 12       # created at earliest everywhere
    assert http(b.admin_url + base + "/subscription/s/skip_all", "POST")[0] == 204
    assert backlog(a.admin_url) == 0
    assert http(a.admin_url + base + "/subscription/s/resetcursor/0", "POST")[0] == 204
    assert backlog(b.admin_url) == 12
    assert http(b.admin_url + base + "/all_subscription/expireMessages/0", "POST")[0] == 204
    assert backlog(a.admin_url) == 0
    assert http(a.admin_url + base + "/subscription/s", "DELETE")[0] == 204
    for broker in two.brokers:
        assert http(broker.admin_url + base + "/subscriptions")[:2] == (200, [])
    assert http(b.admin_url + base + "/subscription/s", "DELETE")[0] == 404


def test_a_topic_call_on_the_other_broker_lands_on_the_owner(two: LocalCluster) -> None:
    ns = f"public/{unique('rsubs')}"
    ensure_namespace(two.brokers[0].admin_url, ns)
    owner, other = owner_of(two, f"{ns}/t")
    client = quiet_client(owner.service_url)
    try:
        producer = client.create_producer(f"persistent://{ns}/t", batching_enabled=False)
        for i in range(4):
            producer.send(b"m%d" % i, properties={"i": str(i)})
    finally:
        client.close()
    path = f"/admin/v2/persistent/{ns}/t/subscription/s"
    status, _, headers = http(other.admin_url + path, "PUT", EARLIEST)
    assert status == 307 and headers["Location"].startswith(owner.admin_url + path)
    assert request_json("PUT", other.admin_url + path, EARLIEST) is None        # followed, body and all
    assert request_json("POST", other.admin_url + path + "/skip/1") is None
    peeked = request("GET", other.admin_url + path + "/position/1")
    assert peeked.body == b"m1" and peeked.headers["X-Pulsar-PROPERTY"] == '{"i": "1"}'
    stats = request_json("GET", owner.admin_url + f"/admin/v2/persistent/{ns}/t/stats")
    assert isinstance(stats, dict) and stats["subscriptions"]["s"]["msgBacklog"] == 3
