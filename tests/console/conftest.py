"""Fixtures for the web console's browser tests: one headless Chromium, one secured standalone.

- `browser`: Debian's Chromium (/usr/bin/chromium) driven by Playwright, one per test run: its
  scope is this package, because Playwright's sync API keeps an event loop running in the main
  thread while it is open, and the suite's other tests call `asyncio.run`, which refuses to
  start inside a running loop. So it closes once the console's tests are done.
- `console_sa`: one secured standalone for the console's tests (package scope too) (tokens, basic auth and mTLS on,
  authorization on, a SeaweedFS cold tier), shared by every console test that only reads from
  it or works on topics of its own. Tenants `ta` (admin role `alice`) and `tb` (admin role
  `bob`), each with namespace `ns`; the superuser is `admin`. `console_sa.client(role)` is the
  official Pulsar client as that role.
- `page`: a fresh browser context per test at 1280x800. When the test fails, a screenshot goes
  to `.artifacts/console/<test>.png` (the path is printed in the report).
- `doc_shot(page, name)`: with STRATA_CONSOLE_DOC_SHOTS=1 set, saves the page as
  docs/img/console/<name>.png, the pictures of docs/console.md (kept out of ordinary runs so a
  test run does not rewrite committed files).

Tests wait with Playwright's own bounded waits (`expect(...).to_be_visible(timeout=...)`), never
with sleeps.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pulsar
import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

from tests.acceptance.conftest import make_client
from tests.support import admin_http
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess, free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1280, "height": 800}
UI_TIMEOUT_MS = 15_000
ARTIFACTS = REPO_ROOT / ".artifacts" / "console"
DOC_SHOTS = REPO_ROOT / "docs" / "img" / "console"
TENANTS = {"ta": "alice", "tb": "bob"}

_ids = itertools.count()
expect.set_options(timeout=UI_TIMEOUT_MS)   # every expect() waits as long as an action may (its default is 5 s)


@pytest.fixture(scope="package")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium (scripts/install-debian-deps.sh)")
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield b
    b.close()


class ConsoleStandalone(SimpleNamespace):
    sa: StandaloneProcess
    kit: SecurityKit
    url: str              # the console's URL
    admin_url: str
    admin_tls_url: str    # https://localhost:<admin TLS port>, where a client certificate logs in

    def token(self, role: str = SUPERUSER) -> str:
        return self.kit.token(role)

    def client(self, role: str = SUPERUSER) -> pulsar.Client:
        return make_client(self.sa.service_url, authentication=pulsar.AuthenticationToken(self.token(role)))

    def call(self, method: str, path: str, body: object = None, role: str = SUPERUSER) -> tuple[int, object]:
        return admin_http.call(method, self.admin_url + path, body, token=self.token(role))


def prepare_tenants(call, cluster: str) -> None:
    """Tenants ta (alice) and tb (bob), each with namespace ns, made through the admin API."""
    for tenant, admin in TENANTS.items():
        status, body = call("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [admin], "allowedClusters": [cluster]})
        assert status == 204, body
        status, body = call("PUT", f"/admin/v2/namespaces/{tenant}/ns")
        assert status == 204, body


@pytest.fixture(scope="package")
def console_sa(tmp_path_factory: pytest.TempPathFactory, s3_server) -> Iterator[ConsoleStandalone]:
    root = tmp_path_factory.mktemp("console")
    kit = SecurityKit.create(root / "security")
    admin_tls_port = free_port()
    env = kit.standalone_env(tls_port=free_port(), admin_tls_port=admin_tls_port,
                             extra={**s3_server.standalone_env(s3_server.new_bucket()),
                                    "STRATA_BROKER_LOAD_REPORT_INTERVAL_MS": "1000",
                                    # the limits test's 10,000-partition topics (the default allows 1,000)
                                    "STRATA_BROKER_PARTITIONS_MAX": "10000",
                                    # one broker for every console test (minutes): the topics made at
                                    # the start must not be deleted as inactive (on by default, as in
                                    # Pulsar) before the last test looks at them
                                    "STRATA_BROKER_DELETE_INACTIVE_TOPICS_ENABLED": "false"})
    with StandaloneProcess.start(root / "data", env=env) as sa:
        cs = ConsoleStandalone(sa=sa, kit=kit, url=f"{sa.admin_url}/console/", admin_url=sa.admin_url,
                               admin_tls_url=f"https://localhost:{admin_tls_port}")
        status, clusters = cs.call("GET", "/admin/v2/clusters")
        assert status == 200 and isinstance(clusters, list), clusters
        prepare_tenants(cs.call, clusters[0])
        yield cs


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_FAILED] = report.failed


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, ignore_https_errors=True)
    context.set_default_timeout(UI_TIMEOUT_MS)
    p = context.new_page()
    yield p
    if request.node.stash.get(_FAILED, False):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{request.node.name.replace('/', '_')}.png"
        try:
            p.screenshot(path=str(shot), full_page=True)
            print(f"\n*** screenshot of the failed console test: {shot}")
        except Exception as exc:   # a crashed page: the report says so instead of hiding the failure
            print(f"\n*** no screenshot of the failed console test: {exc}")
    context.close()


def login(page: Page, console_url: str, token: str) -> None:
    """Open the console and log in with `token` at its login page; waits for the main navigation."""
    page.goto(console_url)
    page.get_by_role("textbox", name="Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()


def doc_shot(page: Page, name: str) -> None:
    if os.environ.get("STRATA_CONSOLE_DOC_SHOTS") != "1":
        return
    DOC_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOC_SHOTS / f"{name}.png"))
