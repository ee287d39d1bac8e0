"""The console's topic page against a real secured standalone: stats that follow new messages,
the storage picture of a topic held by an ack hole, a subscription reset by time and a cleared
backlog (both through Confirm, the backlog shown before and after), and the unknown topic and
forbidden role answers.

Data is produced and consumed with the official client as the tenant's admin (alice); the page
is logged in as alice too, so every call the page makes is authorized as the CLI's would be.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pulsar
import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import ConsoleStandalone, doc_shot, login, unique
from tests.support.waiting import wait_until

WAIT_S = 20.0
# a datetime-local value in the browser's own zone, as a person would type it
LOCAL_TIME_10_MIN_AGO = """() => {
    const d = new Date(Date.now() - 600000), p = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`
        + `T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}"""


@pytest.fixture
def client(console_sa: ConsoleStandalone) -> Iterator[pulsar.Client]:
    c = console_sa.client("alice")
    yield c
    c.close()


def topic_url(console_sa: ConsoleStandalone, topic: str, tab: str) -> str:
    return f"{console_sa.url}#/topic/ta/ns/{topic}/{tab}"


def produce(client: pulsar.Client, topic: str, count: int, prefix: bytes = b"m") -> None:
    producer = client.create_producer(f"persistent://ta/ns/{topic}", batching_enabled=False)
    try:
        for i in range(count):
            producer.send(prefix + b"-%04d" % i)
    finally:
        producer.close()


def stats(console_sa: ConsoleStandalone, topic: str) -> dict:
    status, body = console_sa.call("GET", f"/admin/v2/persistent/ta/ns/{topic}/stats")
    assert status == 200 and isinstance(body, dict), body
    return body


def wait_backlog(console_sa: ConsoleStandalone, topic: str, sub: str, entries: int) -> None:
    wait_until(lambda: stats(console_sa, topic)["subscriptions"][sub]["msgBacklog"] == entries, WAIT_S,
               f"backlog of {sub} at {entries}")


def consume_all(client: pulsar.Client, topic: str, sub: str, count: int, ack=lambda i: True) -> pulsar.Consumer:
    consumer = client.subscribe(f"persistent://ta/ns/{topic}", sub, initial_position=pulsar.InitialPosition.Earliest)
    for i in range(count):
        message = consumer.receive(10_000)
        if ack(i):
            consumer.acknowledge(message)
    return consumer


def test_stats_follow_new_messages(page: Page, console_sa: ConsoleStandalone, client: pulsar.Client) -> None:
    topic = unique("stats")
    producer = client.create_producer(f"persistent://ta/ns/{topic}", batching_enabled=False)
    client.subscribe(f"persistent://ta/ns/{topic}", "watcher", initial_position=pulsar.InitialPosition.Earliest).close()
    for i in range(5):
        producer.send(b"first-%d" % i)
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(topic_url(console_sa, topic, "overview"))
    expect(page.get_by_test_id("stat-msgInCounter")).to_have_text("5")
    expect(page.get_by_test_id("overview-backlog-watcher")).to_have_text("5")
    expect(page.get_by_role("table", name="Producers")).to_contain_text(producer.producer_name())
    for i in range(7):
        producer.send(b"more-%d" % i)
    expect(page.get_by_test_id("stat-msgInCounter")).to_have_text("12")
    expect(page.get_by_test_id("overview-backlog-watcher")).to_have_text("12")
    expect(page.get_by_role("img", name="Messages per second, in and out")).to_be_visible()
    doc_shot(page, "topic")
    producer.close()


def test_storage_names_the_ack_hole_that_keeps_ledgers(page: Page, console_sa: ConsoleStandalone,
                                                       client: pulsar.Client) -> None:
    topic = unique("holes")
    path = f"/admin/v2/persistent/ta/ns/{topic}"
    client.subscribe(f"persistent://ta/ns/{topic}", "s1", initial_position=pulsar.InitialPosition.Earliest).close()
    for batch in range(3):                     # an unload closes the ledger: the next batch goes to a new one
        produce(client, topic, 5, b"batch%d" % batch)
        assert console_sa.call("PUT", f"{path}/unload")[0] == 204
    consumer = consume_all(client, topic, "s1", 15, ack=lambda i: i != 1)   # message 1 is the hole
    wait_backlog(console_sa, topic, "s1", 1)
    status, doc = console_sa.call("GET", f"{path}/explain-storage")
    assert status == 200 and len([ledger for ledger in doc["ledgers"] if ledger["entries"]]) >= 3, doc

    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(topic_url(console_sa, topic, "storage"))
    table = page.get_by_role("table", name="Ledgers and what keeps them")
    expect(table).to_contain_text("ack holes of s1")
    first = str(doc["ledgers"][0]["ledgerId"])
    first_row = table.get_by_role("row").filter(has=page.get_by_role("cell", name=first, exact=True))
    expect(first_row).to_contain_text("ack holes of s1")
    expect(page.get_by_role("region", name="Advice")).to_contain_text("subscription s1 has 1 unacked message")
    expect(page.get_by_role("img", name="Ledgers stacked by size, coloured by what keeps each")).to_be_visible()
    segment = page.locator("[data-keeper=ackHoles]").first
    expect(segment).to_have_attribute("title", re.compile("kept by ack holes of s1"))
    expect(page.get_by_test_id("storage-size")).not_to_have_text("0 B")
    doc_shot(page, "storage")
    consumer.close()


def test_a_reset_by_time_brings_the_backlog_back(page: Page, console_sa: ConsoleStandalone,
                                                 client: pulsar.Client) -> None:
    topic = unique("reset")
    client.subscribe(f"persistent://ta/ns/{topic}", "s1", initial_position=pulsar.InitialPosition.Earliest).close()
    produce(client, topic, 6)
    consume_all(client, topic, "s1", 6).close()
    wait_backlog(console_sa, topic, "s1", 0)

    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(topic_url(console_sa, topic, "subscriptions"))
    expect(page.get_by_test_id("backlog-s1")).to_have_text("0")
    ten_minutes_ago = page.evaluate(LOCAL_TIME_10_MIN_AGO)
    page.get_by_label("Reset to publish time").fill(ten_minutes_ago)
    page.get_by_role("button", name="Reset to time").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("read again from the first message published at or after")
    dialog.get_by_role("button", name="Reset").click()
    expect(page.get_by_role("status").filter(has_text="Reset done on s1")).to_contain_text("backlog now 6 messages")
    expect(page.get_by_test_id("backlog-s1")).to_have_text("6")
    assert stats(console_sa, topic)["subscriptions"]["s1"]["msgBacklog"] == 6


def test_clear_backlog_follows_the_backlog_to_zero(page: Page, console_sa: ConsoleStandalone,
                                                   client: pulsar.Client) -> None:
    topic = unique("clear")
    client.subscribe(f"persistent://ta/ns/{topic}", "s1", initial_position=pulsar.InitialPosition.Earliest).close()
    produce(client, topic, 300)
    wait_backlog(console_sa, topic, "s1", 300)

    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(topic_url(console_sa, topic, "subscriptions"))
    expect(page.get_by_test_id("backlog-s1")).to_have_text("300")
    page.get_by_role("group", name="Actions on s1").get_by_role("button", name="Clear backlog").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("all 300 messages")
    dialog.get_by_role("button", name="Clear backlog").click()
    bar = page.get_by_role("progressbar", name=re.compile(r"Clearing the backlog of s1: 0 left"))
    expect(bar).to_have_attribute("value", "300")
    done = page.get_by_role("status").filter(has_text="Clear backlog done on s1")
    expect(done).to_contain_text("backlog now 0 messages")
    expect(page.get_by_test_id("backlog-s1")).to_have_text("0")
    assert stats(console_sa, topic)["subscriptions"]["s1"]["msgBacklog"] == 0


def test_an_unknown_topic_is_404_with_the_way_back(page: Page, console_sa: ConsoleStandalone) -> None:
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(topic_url(console_sa, "nope", "overview"))
    expect(page.get_by_role("alert")).to_contain_text("404")
    expect(page.get_by_role("alert")).to_contain_text("Topic not found")
    page.get_by_role("link", name="Back to namespace ta/ns").click()
    expect(page).to_have_url(re.compile(r"#/namespace/ta/ns$"))


def test_a_role_without_permission_gets_403(page: Page, console_sa: ConsoleStandalone, client: pulsar.Client) -> None:
    topic = unique("private")
    produce(client, topic, 1, prefix=b"secret-of-ta")
    login(page, console_sa.url, console_sa.token("bob"))    # bob administers tb, not ta
    page.goto(topic_url(console_sa, topic, "overview"))
    expect(page.get_by_role("alert")).to_contain_text("403")
    page.goto(topic_url(console_sa, topic, "messages"))
    expect(page.get_by_role("alert")).to_contain_text("403")
    expect(page.get_by_text("secret-of-ta")).to_have_count(0)
    # the page's own credentials cannot read them either: the REST call is refused as the CLI's would be
    status = page.evaluate("""async (path) => {
        const creds = JSON.parse(sessionStorage.getItem("strata.console.credentials"));
        const r = await fetch(path, {headers: {Authorization: `Bearer ${creds.token}`}});
        return r.status;
    }""", f"/admin/v2/persistent/ta/ns/{topic}/messages?from=earliest")
    assert status == 403
