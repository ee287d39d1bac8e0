"""Every admin route has an access rule (broker.admin.access.ROUTES), and /metrics filtering keeps
only the series a role may see. No broker: the application is built and its router read."""

from __future__ import annotations

from types import SimpleNamespace

from aiohttp import web

from broker.admin import access
from broker.admin.access import ROUTES, Rule, access_of, filter_metrics
from broker.admin.server import AdminServer
from common.config import default_config


def _registered_routes() -> set[tuple[str, str]]:
    service = SimpleNamespace(config=default_config(), astore=None)
    app = AdminServer(service.config, 0).app(service)   # type: ignore[arg-type]
    assert isinstance(app, web.Application)
    routes = set()
    for route in app.router.routes():
        resource = route.resource
        assert resource is not None
        routes.add((route.method, resource.canonical))
    return routes


def test_every_registered_route_has_a_rule():
    missing = sorted(f"{method} {path}" for method, path in _registered_routes()
                     if ("GET" if method == "HEAD" else method, path) not in ROUTES)
    assert not missing, "admin routes without an access rule in broker.admin.access.ROUTES:\n" + "\n".join(missing)


def test_rules_follow_pulsar():
    t = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
    assert access_of("GET", "/admin/v2/tenants").rule is Rule.SUPERUSER
    assert access_of("GET", "/admin/v2/namespaces/{tenant}").rule is Rule.TENANT_ADMIN
    assert access_of("GET", "/admin/v2/namespaces/{tenant}/{ns}/topics").rule is Rule.NAMESPACE
    assert access_of("GET", "/admin/v2/persistent/{tenant}/{ns}").rule is Rule.NAMESPACE
    assert access_of("GET", t + "/stats").rule is Rule.TOPIC_LOOKUP
    assert access_of("HEAD", t + "/stats").rule is Rule.TOPIC_LOOKUP
    for consume in ("/internalStats", "/examinemessage", "/subscription/{sub}/position/{count}", "/subscriptions"):
        assert access_of("GET", t + consume).rule is Rule.TOPIC_CONSUME, consume
    for admin in (("PUT", ""), ("DELETE", ""), ("PUT", "/unload"), ("PUT", "/compaction"), ("POST", "/terminate"),
                  ("POST", "/retention"), ("PUT", "/partitions")):
        assert access_of(admin[0], t + admin[1]).rule is Rule.TENANT_ADMIN, admin
    assert access_of("GET", "/admin/v2/clusters").rule is Rule.AUTHENTICATED
    assert access_of("GET", "/admin/v2/broker-stats/topics").rule is Rule.SUPERUSER    # unlisted: superuser
    assert access_of("PATCH", "/admin/v2/anything/new").rule is Rule.SUPERUSER


def test_filter_keeps_broker_series_and_visible_labels_only():
    text = ("# HELP pulsar_topics_count topics\n# TYPE pulsar_topics_count gauge\n"
            'pulsar_topics_count{cluster="standalone"} 3.0\n'
            'pulsar_msg_backlog{cluster="standalone",namespace="a/ns",topic="persistent://a/ns/t"} 1.0\n'
            'pulsar_msg_backlog{cluster="standalone",namespace="b/ns",topic="persistent://b/ns/t"} 2.0\n'
            'pulsar_ml_StoredMessagesSize{cluster="standalone",namespace="b/ns"} 9.0\n')
    visible = {("namespace", "a/ns"), ("topic", "persistent://a/ns/t")}
    kept = filter_metrics(text, visible)
    assert "pulsar_topics_count{" in kept and "# HELP pulsar_topics_count" in kept
    assert "persistent://a/ns/t" in kept
    assert "b/ns" not in kept
    assert access._LABELS.findall('x{namespace="a/ns",subtopic="q"}') == [("namespace", "a/ns")]


def test_peer_call_carries_the_broker_token_through_a_redirect_to_another_broker(tmp_path):
    """A 307 to another broker (another origin) keeps the broker's credentials (aiohttp alone drops them)."""
    import asyncio

    from broker.cluster import peers

    token_file = tmp_path / "broker.token"
    token_file.write_text("broker-jwt\n")
    seen: list[tuple[str, str | None]] = []

    async def scenario() -> tuple[int, object]:
        async def owner(request: web.Request) -> web.Response:
            seen.append(("owner", request.headers.get("Authorization")))
            return web.json_response({"served": request.query.get("authoritative")})

        owner_runner = web.AppRunner(_app_with(owner))
        await owner_runner.setup()
        owner_site = web.TCPSite(owner_runner, "127.0.0.1", 0)
        await owner_site.start()

        async def first(request: web.Request) -> web.Response:
            seen.append(("first", request.headers.get("Authorization")))
            location = f"http://127.0.0.1:{owner_site.port}{request.path}?authoritative=true"
            return web.Response(status=307, headers={"Location": location})

        first_runner = web.AppRunner(_app_with(first))
        await first_runner.setup()
        first_site = web.TCPSite(first_runner, "localhost", 0)
        await first_site.start()
        try:
            peers.PEER_CONFIG.set(default_config(broker_client_auth_token=f"file://{token_file}"))
            return await peers.peer_call(f"http://localhost:{first_site.port}", "GET", "/admin/v2/x/stats")
        finally:
            await first_runner.cleanup()
            await owner_runner.cleanup()

    assert asyncio.run(scenario()) == (200, {"served": "true"})
    assert seen == [("first", "Bearer broker-jwt"), ("owner", "Bearer broker-jwt")]


def _app_with(handler) -> web.Application:
    app = web.Application()
    app.router.add_get("/admin/v2/x/stats", handler)
    return app

