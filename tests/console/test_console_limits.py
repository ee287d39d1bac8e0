"""The console on big things: a topic with 10,000 partitions renders one page at a time without
summing its partitions' stats (that would load all of them on the broker), and the broker keeps
answering meanwhile; behind the `slow` marker, a namespace of 100,000 topics (ten topics of
10,000 partitions: the namespace's topic list names every partition).

A 5 MB message (truncated, then "Show all") is in test_messages_pages.py.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import ConsoleStandalone, login, unique
from tests.support import admin_http

PARTITIONS = 10_000
CREATE_TIMEOUT_S = 180        # 10,000 partitions' records: about 16 s here
HEALTH_BOUND_S = 2.0


def _partitioned(cs: ConsoleStandalone, ns: str, topic: str, partitions: int) -> None:
    answer = admin_http.exchange("PUT", f"{cs.admin_url}/admin/v2/persistent/ta/{ns}/{topic}/partitions", partitions,
                                 token=cs.token(), timeout_s=CREATE_TIMEOUT_S)
    assert answer.status == 204, answer.text()


def _namespace(cs: ConsoleStandalone) -> str:
    ns = unique("big")
    status, body = cs.call("PUT", f"/admin/v2/namespaces/ta/{ns}")
    assert status == 204, body
    return ns


def _health_is_quick(cs: ConsoleStandalone) -> None:
    started = time.monotonic()
    status, body = cs.call("GET", "/admin/v2/brokers/health")
    assert status == 200, body
    assert time.monotonic() - started < HEALTH_BOUND_S


def test_a_topic_with_10000_partitions_renders_a_page_at_a_time(page: Page, console_sa: ConsoleStandalone) -> None:
    ns = _namespace(console_sa)
    _partitioned(console_sa, ns, "wide", PARTITIONS)
    login(page, console_sa.url, console_sa.token())
    page.goto(f"{console_sa.url}#/namespace/ta/{ns}")
    topics = page.get_by_role("list", name=f"Topics of ta/{ns}")
    expect(topics).to_contain_text("10,000 partitions")
    expect(topics).to_contain_text("backlog per partition")

    page.goto(f"{console_sa.url}#/topic/ta/{ns}/wide/partitions")
    pager = page.get_by_role("group", name="Partitions pages")
    expect(pager).to_contain_text("Page 1 of 200")
    pager.get_by_role("button", name="Next").click()
    expect(pager).to_contain_text("Page 2 of 200")
    expect(page.get_by_role("table", name="Partitions")).to_contain_text("wide-partition-50")
    _health_is_quick(console_sa)

    page.goto(f"{console_sa.url}#/topic/ta/{ns}/wide/overview")
    expect(page.get_by_role("status").filter(has_text="partitions: its stats are not summed")).to_be_visible()
    page.goto(f"{console_sa.url}#/topic/ta/{ns}/wide/subscriptions")
    expect(page.get_by_role("alert")).to_contain_text("Open one partition from the Partitions tab")
    _health_is_quick(console_sa)


@pytest.mark.slow
def test_a_namespace_with_100000_topics(page: Page, console_sa: ConsoleStandalone) -> None:
    ns = _namespace(console_sa)
    for i in range(10):
        _partitioned(console_sa, ns, f"p{i}", PARTITIONS)
    status, names = console_sa.call("GET", f"/admin/v2/namespaces/ta/{ns}/topics")
    assert status == 200 and len(names) == 10 * PARTITIONS
    login(page, console_sa.url, console_sa.token())
    page.goto(f"{console_sa.url}#/namespace/ta/{ns}")
    expect(page.get_by_role("heading", name="Topics (10)")).to_be_visible()
    page.get_by_label("Search topics").fill("p7")
    topics = page.get_by_role("list", name=f"Topics of ta/{ns}")
    expect(topics.get_by_role("link")).to_have_count(1)
    _health_is_quick(console_sa)
    page.goto(f"{console_sa.url}#/tenants?q={ns}")
    expect(page.get_by_role("link", name="p3", exact=True)).to_be_visible()
    _health_is_quick(console_sa)
