"""The console on a narrow screen and from the keyboard: every page fits a phone's width without
scrolling sideways (tables become stacked cards), and a login and a walk to a topic need no mouse.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.conftest import UI_TIMEOUT_MS, ConsoleStandalone, login, unique

NARROW = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def topic(console_sa: ConsoleStandalone) -> str:
    name = unique("layout")
    client = console_sa.client()
    try:
        producer = client.create_producer(f"persistent://ta/ns/{name}")
        consumer = client.subscribe(f"persistent://ta/ns/{name}", "s1")
        for i in range(5):
            producer.send(b"narrow-%d" % i, properties={"k": "v"})
        consumer.close()
    finally:
        client.close()
    return name


def _fits(page: Page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page is {overflow}px wider than the screen"


@pytest.mark.parametrize("hash_, ready", [
    ("#/cluster", "Brokers"),
    ("#/tenants", "Tenants"),
    ("#/namespace/ta/ns", "Policies"),
    ("#/topic/ta/ns/{topic}/overview", "Subscriptions"),
    ("#/topic/ta/ns/{topic}/messages", "narrow-4"),
    ("#/topic/ta/ns/{topic}/storage", "Ledgers"),
    ("#/audit", "Audit log"),
])
def test_every_page_fits_a_narrow_screen(browser: Browser, console_sa: ConsoleStandalone, topic: str,
                                         hash_: str, ready: str) -> None:
    context = browser.new_context(viewport=NARROW)
    context.set_default_timeout(UI_TIMEOUT_MS)
    try:
        page = context.new_page()
        login(page, console_sa.url, console_sa.token())
        page.goto(console_sa.url + hash_.format(topic=topic))
        expect(page.get_by_text(ready).first).to_be_visible()
        _fits(page)
    finally:
        context.close()


def test_login_and_a_topic_from_the_keyboard(page: Page, console_sa: ConsoleStandalone, topic: str) -> None:
    page.goto(console_sa.url)
    page.get_by_role("radio", name="Token").focus()
    page.keyboard.press("Tab")                          # to the token field
    page.keyboard.insert_text(console_sa.token())
    page.keyboard.press("Tab")                          # to "Log in"
    page.keyboard.press("Enter")
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tenants & topics").focus()
    page.keyboard.press("Enter")
    search = page.get_by_label("Search tenants, namespaces and topics")
    search.focus()
    page.keyboard.insert_text(topic)
    link = page.get_by_role("link", name=topic, exact=True)
    link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{console_sa.url}#/topic/ta/ns/{topic}")
    expect(page.get_by_role("heading", name=f"Topic {topic}")).to_be_visible()


