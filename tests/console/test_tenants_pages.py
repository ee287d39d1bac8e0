"""The tenants tree and the namespace page against the secured standalone: a topic found by
search and followed to its page, the backlog of a topic with unacknowledged messages in the list,
and retention edited in Pulsar's units (a bad value refused in the page and nothing stored; a
good one stored as minutes and MB).
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.console.conftest import ConsoleStandalone, doc_shot, login, unique

BACKLOG_MESSAGES = 7


def test_search_finds_a_topic_and_leads_to_its_page(page: Page, console_sa: ConsoleStandalone) -> None:
    name = unique("findme")
    status, body = console_sa.call("PUT", f"/admin/v2/persistent/ta/ns/{name}", role="alice")
    assert status == 204, body
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(console_sa.url + "#/tenants")
    page.get_by_label("Search tenants, namespaces and topics").fill(name)
    topics = page.get_by_role("list", name="Topics of ta/ns")
    expect(topics.get_by_role("link")).to_have_count(1)
    expect(page.get_by_role("list", name="Namespaces of tb")).to_have_count(0)   # tb has no match
    expect(page).to_have_url(re.compile(rf"#/tenants\?q={re.escape(name)}$"))
    doc_shot(page, "tenants")
    topics.get_by_role("link", name=name).click()
    expect(page).to_have_url(re.compile(rf"#/topic/ta/ns/{re.escape(name)}$"))


def test_the_topic_list_shows_the_backlog_of_unacknowledged_messages(page: Page, console_sa: ConsoleStandalone) -> None:
    name = unique("lagging")
    topic = f"persistent://ta/ns/{name}"
    client = console_sa.client("alice")
    try:
        client.subscribe(topic, "slow-reader")
        producer = client.create_producer(topic)
        for i in range(BACKLOG_MESSAGES):
            producer.send(f"m{i}".encode())
        login(page, console_sa.url, console_sa.token("alice"))
        page.goto(console_sa.url + "#/namespace/ta/ns")
        page.get_by_label("Search topics").fill(name)
        row = page.get_by_role("list", name="Topics of ta/ns").get_by_role("listitem").filter(has_text=name)
        expect(row).to_contain_text(f"backlog {BACKLOG_MESSAGES}")
    finally:
        client.close()


def test_retention_refuses_a_bad_value_and_stores_a_good_one(page: Page, console_sa: ConsoleStandalone) -> None:
    ns = unique("ret")
    status, body = console_sa.call("PUT", f"/admin/v2/namespaces/ta/{ns}", role="alice")
    assert status == 204, body
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(console_sa.url + f"#/namespace/ta/{ns}")
    form = page.get_by_role("form", name="Retention")
    expect(form.get_by_test_id("policy-retention")).to_contain_text("not set")

    form.get_by_label("Retention time").fill("abc")
    form.get_by_label("Retention size").fill("1G")
    form.get_by_role("button", name="Save retention").click()
    expect(form.get_by_role("alert")).to_contain_text('"abc" is not a time')
    status, stored = console_sa.call("GET", f"/admin/v2/namespaces/ta/{ns}/retention", role="alice")
    assert status == 200 and stored is None, stored

    form.get_by_label("Retention time").fill("2d")
    form.get_by_role("button", name="Save retention").click()
    expect(form.get_by_role("status")).to_contain_text("Saved")
    expect(form.get_by_test_id("policy-retention")).to_contain_text("time 2d, size 1.0 GB")
    status, stored = console_sa.call("GET", f"/admin/v2/namespaces/ta/{ns}/retention", role="alice")
    assert status == 200 and stored == {"retentionTimeInMinutes": 2 * 24 * 60, "retentionSizeInMB": 1024}, stored
    doc_shot(page, "namespace")


def test_a_server_refusal_is_shown_under_the_form(page: Page, console_sa: ConsoleStandalone) -> None:
    ns = unique("quota")
    status, body = console_sa.call("PUT", f"/admin/v2/namespaces/ta/{ns}", role="alice")
    assert status == 204, body
    status, body = console_sa.call("POST", f"/admin/v2/namespaces/ta/{ns}/retention",
                                   {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}, role="alice")
    assert status == 204, body
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(console_sa.url + f"#/namespace/ta/{ns}")
    form = page.get_by_role("form", name="Backlog quota")
    form.get_by_label("Quota limit").fill("1G")   # over the 10 MB retention: the broker refuses it (412)
    form.get_by_role("button", name="Save backlog quota").click()
    expect(form.get_by_role("alert")).to_contain_text("412")
    status, stored = console_sa.call("GET", f"/admin/v2/namespaces/ta/{ns}/backlogQuotaMap", role="alice")
    assert status == 200 and stored == {}, stored
