"""The web console's static files on a real standalone's admin port: index, assets, redirect, the
503 page of an unbuilt console, path traversal refused; and the access rules: the console's static
routes are the only PUBLIC ones.

One standalone (no S3) whose `console_assets_dir` is a temp directory the test fills and empties.
Requests go through http.client so the request target is sent exactly as written (`..`, `%2e`).
"""

from __future__ import annotations

import http.client
import urllib.parse
from pathlib import Path

import pytest

from broker.admin import access
from broker.admin.access import ROUTES, Rule
from broker.admin.console_site import content_type, resolve_inside
from tests.support.standalone_proc import StandaloneProcess

INDEX_HTML = "<!doctype html><title>console</title><div id=app></div>"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("console-site")
    dist = root / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text(INDEX_HTML)
    (dist / "assets" / "x.js").write_text("console.log('x')")
    (dist / "assets" / "app.css").write_text("body{}")
    (root / "secret.txt").write_text("outside")
    with StandaloneProcess.start(root / "data", env={"STRATA_CONSOLE_ASSETS_DIR": str(dist)}) as sa:
        yield sa, dist


def get(sa: StandaloneProcess, target: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of `GET target`, the target sent verbatim."""
    host, port = urllib.parse.urlsplit(sa.admin_url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", target)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_index_assets_and_redirect(site) -> None:
    sa, _ = site
    status, headers, body = get(sa, "/console")
    assert status == 302 and headers["location"] == "/console/"
    status, headers, body = get(sa, "/console/")
    assert status == 200 and body.decode() == INDEX_HTML
    assert headers["content-type"].startswith("text/html") and headers["cache-control"] == "no-cache"
    status, headers, body = get(sa, "/console/assets/x.js")
    assert status == 200 and body == b"console.log('x')"
    assert headers["content-type"].startswith("text/javascript")
    assert "immutable" in headers["cache-control"] and "max-age=31536000" in headers["cache-control"]
    status, headers, _ = get(sa, "/console/assets/app.css")
    assert status == 200 and headers["content-type"].startswith("text/css")
    status, _, body = get(sa, "/console/topics/public/default")        # the app's own route: index.html
    assert status == 200 and body.decode() == INDEX_HTML
    assert get(sa, "/console/assets/missing.js")[0] == 404


def test_traversal_is_refused(site) -> None:
    sa, _ = site
    for target in ("/console/../secret.txt", "/console/assets/../../secret.txt", "/console/%2e%2e/secret.txt",
                   "/console/assets/%2e%2e/%2e%2e/secret.txt", "/console/..%2fsecret.txt",
                   "/console/%2fetc%2fpasswd", "/console/.hidden", "/console/assets"):
        status, _, body = get(sa, target)
        assert b"outside" not in body and b"root:" not in body, target
        assert status in (400, 404) or (status == 200 and body.decode() == INDEX_HTML), (target, status)


def test_unbuilt_console_is_503_with_how_to_build(site) -> None:
    sa, dist = site
    index = dist / "index.html"
    index.rename(dist / "index.bak")
    try:
        status, headers, body = get(sa, "/console/")
        assert status == 503 and headers["content-type"].startswith("text/html")
        assert "The console's assets are not built" in body.decode() and "make setup" in body.decode()
    finally:
        (dist / "index.bak").rename(index)
    assert get(sa, "/console/")[0] == 200


def test_static_routes_are_the_only_public_ones() -> None:
    public = sorted(path for (method, path), rule in ROUTES.items() if rule.rule is Rule.PUBLIC)
    assert public == sorted(access.CONSOLE_STATIC_ROUTES)
    assert all(path == "/console" or path.startswith("/console/") for path in public)
    assert ROUTES[("GET", "/admin/v2/console/whoami")].rule is Rule.AUTHENTICATED
    for path in ("/admin/v2/console/cluster", "/admin/v2/console/audit", "/admin/v2/bookies/all"):
        assert ROUTES[("GET", path)].rule is Rule.SUPERUSER, path


def test_resolve_inside_and_types(tmp_path: Path) -> None:
    (tmp_path / "d" / "assets").mkdir(parents=True)
    (tmp_path / "d" / "assets" / "a.js").write_text("x")
    (tmp_path / "outside.txt").write_text("x")
    (tmp_path / "d" / "link.txt").symlink_to(tmp_path / "outside.txt")
    root = tmp_path / "d"
    assert resolve_inside(root, "assets/a.js") == (root / "assets" / "a.js").resolve()
    for bad in ("../outside.txt", "/etc/passwd", "assets/../../outside.txt", "link.txt", "assets", "",
                "assets\\a.js", ".git/config"):
        assert resolve_inside(root, bad) is None, bad
    assert resolve_inside(tmp_path / "missing", "index.html") is None
    assert content_type("a.js").startswith("text/javascript") and content_type("x.woff2") == "font/woff2"
    assert content_type("blob.unknownext") == "application/octet-stream"


def test_console_disabled_registers_no_console_routes() -> None:
    from types import SimpleNamespace

    from broker.admin.server import AdminServer
    from common.config import default_config

    def paths(config) -> set[str]:
        app = AdminServer(config, 0).app(SimpleNamespace(config=config, astore=None))  # type: ignore[arg-type]
        return {r.resource.canonical for r in app.router.routes() if r.resource is not None}

    on, off = paths(default_config()), paths(default_config(console_enabled=False))
    console = {"/console", "/console/", "/console/{path}", "/admin/v2/console/whoami", "/admin/v2/console/cluster",
               "/admin/v2/console/audit"}
    assert console <= on and not console & off
    assert "/admin/v2/bookies/all" in off          # Pulsar's route: served either way
