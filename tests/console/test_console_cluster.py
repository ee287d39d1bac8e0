"""The console on a real two-broker cluster (PostgreSQL, 2 bookies, 2 brokers; no auth, no S3):
the cluster page lists both brokers; through broker 1's console a topic owned by broker 2 is
listed, its stats answer, its messages are browsed and its live tail streams (the console's calls
carry `X-Strata-Forward: owner`, so broker 1 answers for the owner, broker/admin/forward.py); and
a broker that stops while the cluster page is open is shown as gone with a way forward, not as a blank page.
"""

from __future__ import annotations

from collections.abc import Iterator

import pulsar
import pytest
from playwright.sync_api import Page, expect

from tests.cluster.conftest import broker_tracebacks, start_cluster
from tests.cluster.helpers import lookup
from tests.console.conftest import unique
from tests.support import admin_http
from tests.support.cluster_proc import LocalCluster

NAMESPACE_BUNDLES = 8
TOPICS_TRIED_MAX = 40           # topics looked up until one lands on broker 2 (8 bundles: a few suffice)
REGISTRATION_WAIT_MS = 30_000   # a stopped broker's lease (3 s) plus a couple of 2 s polls, with slack


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("console-cluster") / "c")
    try:
        yield c
        problems = broker_tracebacks(c)
    finally:
        c.stop()
    assert not problems, "a broker logged a traceback:\n" + "\n".join(problems)


def console_of(cluster: LocalCluster, index: int = 0) -> str:
    return f"{cluster.brokers[index].admin_url}/console/"


def topic_owned_by_broker_2(cluster: LocalCluster, namespace: str) -> str:
    first, second = cluster.brokers[0], cluster.brokers[1]
    for i in range(TOPICS_TRIED_MAX):
        topic = f"persistent://{namespace}/t{i}"
        if lookup(first.admin_url, topic)["brokerUrl"] == second.service_url:
            return topic
    pytest.fail(f"none of {TOPICS_TRIED_MAX} topics of {namespace} was placed on {second.service_url}")


def test_the_cluster_page_lists_both_brokers(page: Page, two_brokers: LocalCluster) -> None:
    page.goto(console_of(two_brokers) + "#/cluster")
    table = page.get_by_role("table", name="Brokers")
    for broker in two_brokers.brokers:
        expect(table.get_by_role("row").filter(has_text=broker.web_id)).to_contain_text("reachable")
    expect(page.get_by_test_id("tier-state")).to_have_text("not configured")


def test_a_topic_owned_by_the_other_broker_answers_through_this_one(page: Page, two_brokers: LocalCluster) -> None:
    namespace = f"public/{unique('fwd')}"
    first = two_brokers.brokers[0]
    status, body = admin_http.call("PUT", f"{first.admin_url}/admin/v2/namespaces/{namespace}",
                                   {"bundles": {"numBundles": NAMESPACE_BUNDLES}})
    assert status == 204, body
    topic = topic_owned_by_broker_2(two_brokers, namespace)
    status, body = admin_http.call("PUT", f"{first.admin_url}/admin/v2/{topic.replace('://', '/')}")
    assert status == 204, body
    short = topic.rsplit("/", 1)[1]

    page.goto(console_of(two_brokers) + f"#/namespace/{namespace}")
    row = page.get_by_role("list", name=f"Topics of {namespace}").get_by_role("listitem").filter(has_text=short)
    expect(row).to_contain_text("backlog 0")   # its stats, read through broker 1 from broker 2

    stats_path = f"/admin/v2/{topic.replace('://', '/')}/stats"
    answer = page.evaluate(
        """async (path) => {
            const forwarded = await fetch(path, {headers: {"X-Strata-Forward": "owner"}, redirect: "manual"});
            const plain = await fetch(path, {redirect: "manual"});
            return {status: forwarded.status, body: await forwarded.json(), plain: plain.status, type: plain.type};
        }""", stats_path)
    assert answer["status"] == 200, answer
    assert "subscriptions" in answer["body"], answer
    assert answer["plain"] != 200, answer   # without the header broker 1 redirects to the owner (opaque here)

    client = pulsar.Client(two_brokers.service_url, operation_timeout_seconds=15,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"stored on broker 2")
        page.goto(console_of(two_brokers) + f"#/topic/{namespace}/{short}/messages")
        expect(page.get_by_role("article")).to_contain_text("stored on broker 2")
        page.goto(console_of(two_brokers) + f"#/topic/{namespace}/{short}/tail")
        page.get_by_role("button", name="Start").click()
        expect(page.get_by_test_id("tail-status")).to_contain_text("Tailing")
        producer.send(b"streamed from broker 2 through broker 1")
        expect(page.get_by_role("article")).to_contain_text("streamed from broker 2 through broker 1")
        page.get_by_role("button", name="Stop").click()
    finally:
        client.close()


def test_a_broker_that_stops_is_shown_as_gone_with_a_way_forward(page: Page, two_brokers: LocalCluster) -> None:
    second = two_brokers.brokers[1]
    page.goto(console_of(two_brokers) + "#/cluster")
    table = page.get_by_role("table", name="Brokers")
    expect(table.get_by_role("row").filter(has_text=second.web_id)).to_contain_text("reachable")
    second.stop()
    alert = page.get_by_role("alert").filter(has_text=second.web_id)
    expect(alert).to_contain_text("Check that the broker is running", timeout=REGISTRATION_WAIT_MS)
    expect(table.get_by_role("row").filter(has_text=second.web_id)).to_contain_text(
        "left the cluster", timeout=REGISTRATION_WAIT_MS)
    expect(table.get_by_role("row").filter(has_text=two_brokers.brokers[0].web_id)).to_contain_text("reachable")
    page.get_by_role("button", name="Forget brokers that left").click()
    expect(table.get_by_role("row").filter(has_text=second.web_id)).to_have_count(0)
