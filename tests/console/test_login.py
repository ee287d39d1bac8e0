"""Logging in to the console: a token, basic credentials, a client certificate (mTLS), a broker
with authentication off (no login page), and the refusals (a wrong password, an expired token).
"""

from __future__ import annotations

import time

from playwright.sync_api import Browser, Page, expect

from tests.console.conftest import VIEWPORT, ConsoleStandalone, doc_shot, login
from tests.support.standalone_proc import StandaloneProcess


def test_a_token_logs_in_and_names_the_role(page: Page, console_sa: ConsoleStandalone) -> None:
    page.goto(console_sa.url)
    expect(page.get_by_role("heading", name="Strata console")).to_be_visible()
    doc_shot(page, "login")
    login(page, console_sa.url, console_sa.token("alice"))
    expect(page.get_by_test_id("role")).to_have_text("alice")


def test_basic_credentials_log_in_and_a_wrong_password_is_refused(page: Page, console_sa: ConsoleStandalone) -> None:
    page.goto(console_sa.url)
    page.get_by_label("User name and password").check()
    page.get_by_label("User name", exact=True).fill("basic-user")
    page.get_by_label("Password", exact=True).fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("Login refused")
    page.get_by_label("Password", exact=True).fill("basic-pass")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("role")).to_have_text("basic-user")


def test_an_expired_token_brings_back_the_login_page_with_the_reason(page: Page, console_sa: ConsoleStandalone) -> None:
    short = console_sa.kit.token("alice", expires_in_s=3)
    login(page, console_sa.url, short)
    time.sleep(3.5)   # the token's own lifetime: nothing else can make it expire
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Cluster").click()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    expect(page.get_by_role("alert")).to_be_visible()


def test_a_client_certificate_needs_no_login_page(browser: Browser, console_sa: ConsoleStandalone) -> None:
    cert, key = console_sa.kit.client_cert("alice")
    https_admin = console_sa.admin_tls_url
    context = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True,
                                  client_certificates=[{"origin": https_admin, "certPath": cert, "keyPath": key}])
    try:
        page = context.new_page()
        page.goto(f"{https_admin}/console/")
        expect(page.get_by_test_id("role")).to_have_text("alice")
        expect(page.get_by_role("button", name="Log in")).to_have_count(0)
    finally:
        context.close()


def test_no_login_page_when_authentication_is_off(page: Page, tmp_path) -> None:
    with StandaloneProcess.start(tmp_path / "data") as sa:
        page.goto(f"{sa.admin_url}/console/")
        expect(page.get_by_role("navigation", name="Main")).to_be_visible()
        expect(page.get_by_text("authentication off")).to_be_visible()
