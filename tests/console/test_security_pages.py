"""Who sees what, through the console: a role without a grant on tenant ta (bob) sees neither its
namespaces nor its topics and gets a 403 message (not a blank page) when it opens one; a tenant
admin (alice) grants a role consume through the security page; the superuser's audit page lists
that change and a call bob was refused.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.console.conftest import ConsoleStandalone, doc_shot, login, unique


def test_a_role_without_a_grant_does_not_see_another_tenant(page: Page, console_sa: ConsoleStandalone) -> None:
    hidden = unique("secret")
    status, body = console_sa.call("PUT", f"/admin/v2/persistent/ta/ns/{hidden}", role="alice")
    assert status == 204, body
    login(page, console_sa.url, console_sa.token("bob"))
    page.goto(console_sa.url + "#/tenants")
    tree = page.get_by_role("list", name="Tenants")
    expect(tree.get_by_role("button", name="tb")).to_be_visible()
    expect(tree.get_by_role("button", name="ta", exact=True)).to_have_count(0)
    page.get_by_label("Search tenants, namespaces and topics").fill(hidden)
    expect(page.get_by_text(f"Nothing matches \"{hidden}\"")).to_be_visible()
    expect(page.get_by_role("link", name=hidden)).to_have_count(0)

    page.goto(console_sa.url + "#/namespace/ta/ns")
    expect(page.get_by_role("alert")).to_contain_text("403")
    expect(page.get_by_role("alert")).to_contain_text("may not see the topics of ta/ns")
    expect(page.get_by_role("link", name=hidden)).to_have_count(0)


def test_a_tenant_admin_grants_consume_and_the_audit_log_shows_it(page: Page, console_sa: ConsoleStandalone) -> None:
    carol = unique("carol")
    refused_role = unique("bobs-friend")
    status, body = console_sa.call("POST", f"/admin/v2/namespaces/ta/ns/permissions/{refused_role}", ["consume"],
                                   role="bob")
    assert status == 403, (status, body)

    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(console_sa.url + "#/security")
    expect(page.get_by_label("Tenant")).to_have_value("ta")
    expect(page.get_by_role("form", name="Admins of ta")).to_contain_text("may not see or change the admins")
    grant = page.get_by_role("form", name="Grant on ta/ns")
    grant.get_by_label("Role").fill(carol)
    grant.get_by_role("button", name="Grant").click()
    region = page.get_by_role("region", name="Permissions on ta/ns")
    expect(region.get_by_role("status")).to_contain_text(f"{carol} may consume")
    expect(region.get_by_role("table", name="Grants on ta/ns")).to_contain_text(carol)
    status, perms = console_sa.call("GET", "/admin/v2/namespaces/ta/ns/permissions", role="alice")
    assert status == 200 and perms.get(carol) == ["consume"], perms

    page.get_by_role("button", name="Log out").click()
    login(page, console_sa.url, console_sa.token("admin"))
    page.goto(console_sa.url + "#/audit")
    records = page.get_by_role("table", name="Audit records")
    change = records.get_by_role("row").filter(has_text=f"/permissions/{carol}")
    expect(change).to_contain_text("alice")
    expect(change).to_contain_text("change")
    page.get_by_label("Role").fill("bob")
    page.get_by_label("Kind").select_option("denied")
    page.get_by_role("button", name="Show").click()
    denied = records.get_by_role("row").filter(has_text=f"/permissions/{refused_role}")
    expect(denied).to_contain_text("denied")
    expect(denied).to_contain_text("403")
    expect(records.get_by_role("row").filter(has_text="alice")).to_have_count(0)
    doc_shot(page, "audit")


def test_the_audit_log_needs_a_superuser(page: Page, console_sa: ConsoleStandalone) -> None:
    login(page, console_sa.url, console_sa.token("alice"))
    page.goto(console_sa.url + "#/audit")
    expect(page.get_by_role("alert")).to_contain_text("needs a superuser")
