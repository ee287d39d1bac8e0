"""The cluster page against the secured standalone: the broker, its bookie with its state, the
cold tier reachable, and the live totals moving while a producer sends; a role that is not a
superuser is told the view needs one, with a way to its own tenants.
"""

from __future__ import annotations

import re
import threading

from playwright.sync_api import Page, expect

from tests.console.conftest import ConsoleStandalone, doc_shot, login, unique

NONZERO_MSG_RATE = re.compile(r"^(?:[1-9][\d,]*(?:\.\d+)?|0\.(?:0[1-9]|[1-9]\d)) msg/s$")
LOAD_REPORT_WAIT_MS = 30_000   # the standalone reports its load every second; rates need a few reports


def test_the_cluster_page_shows_broker_bookie_tier_and_live_rates(page: Page, console_sa: ConsoleStandalone) -> None:
    topic = f"persistent://ta/ns/{unique('cluster-rate')}"
    client = console_sa.client("admin")
    stop = threading.Event()
    try:
        producer = client.create_producer(topic)

        def send() -> None:
            while not stop.is_set():
                producer.send(b"m" * 200)
                stop.wait(0.01)

        sender = threading.Thread(target=send, daemon=True)
        login(page, console_sa.url, console_sa.token("admin"))
        page.goto(console_sa.url + "#/cluster")
        brokers = page.get_by_role("table", name="Brokers")
        expect(brokers).to_contain_text(console_sa.sa.admin_url.split("//")[1])
        expect(brokers).to_contain_text("reachable")
        bookies = page.get_by_role("table", name="Bookies")
        expect(bookies.get_by_role("row")).to_have_count(2)   # the header and the standalone's bookie
        expect(bookies).to_contain_text("available")
        expect(page.get_by_test_id("tier-state")).to_have_text("reachable")

        sender.start()
        expect(page.get_by_test_id("total-msgRateIn")).to_have_text(NONZERO_MSG_RATE, timeout=LOAD_REPORT_WAIT_MS)
        expect(page.get_by_test_id("total-msgThroughputIn")).not_to_have_text("0 B/s")
        expect(page.get_by_role("img", name="Messages per second, last minutes")).to_be_visible()
        page.get_by_label("Filter bundles").fill("ta/ns")
        expect(page.get_by_role("table", name="Bundles")).to_contain_text("ta/ns")
        doc_shot(page, "cluster")
    finally:
        stop.set()
        client.close()


def test_a_role_that_is_not_a_superuser_is_told_so(page: Page, console_sa: ConsoleStandalone) -> None:
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(console_sa.url + "#/cluster")
    expect(page.get_by_role("alert")).to_contain_text("needs a superuser")
    page.get_by_role("alert").get_by_role("link", name="Tenants & topics").click()
    expect(page).to_have_url(re.compile(r"#/tenants$"))
