"""inactiveTopicPolicies on a real 2-broker cluster: each broker's lifecycle task deletes the
inactive topics it owns, so a topic owned by the other broker is deleted there (its
`strata_inactive_topics_deleted_total` counts it), and explain-storage through either broker
says why it is gone (the record is in the metadata store).
"""

from __future__ import annotations

from tests.cluster.conftest import unique
from tests.cluster.helpers import make_client, owners_by_lookup
from tests.support.admin_http import admin_call, metrics
from tests.support.cluster_proc import LocalCluster
from tests.support.waiting import wait_until

ENV = {"STRATA_BROKER_DELETE_INACTIVE_TOPICS_FREQUENCY_SECONDS": "1",
       "STRATA_BROKER_DELETE_INACTIVE_TOPICS_MAX_INACTIVE_DURATION_SECONDS": "2"}


def _deleted(url: str) -> float:
    for line in metrics(url).splitlines():
        if line.startswith("strata_inactive_topics_deleted_total{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("strata_inactive_topics_deleted_total not in /metrics")


def test_the_owner_deletes_an_inactive_topic_owned_by_the_other_broker(new_cluster) -> None:
    cluster: LocalCluster = new_cluster(env=ENV)
    a, b = cluster.brokers
    ns = f"public/{unique('idle')}"
    assert admin_call(a.admin_url, "PUT", f"/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": 8}})[0] == 204
    topics = [f"persistent://{ns}/t{i}" for i in range(16)]
    owners = owners_by_lookup(a.admin_url, topics)
    on_b = [t for t in topics if owners[t] == b.service_url]
    assert on_b, owners                        # 8 bundles over 2 brokers: some land on b
    topic = on_b[0]
    client = make_client(a.service_url)        # the client follows the lookup to b
    try:
        producer = client.create_producer(topic)
        producer.send(b"x")
        producer.close()
    finally:
        client.close()
    before_a = _deleted(a.admin_url)
    wait_until(lambda: topic not in admin_call(a.admin_url, "GET", f"/admin/v2/persistent/{ns}")[1], 30,
               "the idle topic deleted by its owner")
    assert _deleted(b.admin_url) >= 1
    assert _deleted(a.admin_url) == before_a   # a never owned it
    status, body = admin_call(a.admin_url, "GET", f"/admin/v2/persistent/{topic.split('://')[1]}/explain-storage")
    assert status == 404 and "inactiveTopicPolicies" in body["reason"], body
