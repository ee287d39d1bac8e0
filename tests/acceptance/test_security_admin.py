"""The admin HTTP API of a secured standalone: every route authenticated, authorized by its rule,
refusals the same for what exists and what does not; HTTPS and mTLS; /metrics per role; the CLIs.

One standalone for the module (tests/support/security.py's kit: token, tls and basic providers,
authorization on, superuser `admin`). Tenants `ta` (admin role `alice`) and `tb` (admin role
`bob`), each with namespace `ns` and topic `t1`; `carol` has a consume grant in `ta/ns` only.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from types import SimpleNamespace

import pytest

from admin_client import Credentials
from broker.admin.access import Rule, access_of
from broker.admin.server import AdminServer
from cli.admin import main as admin_main
from cli.top import main as top_main
from common.config import default_config
from common.errors import AdminUnreachable
from tests.support import admin_http
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port

HANDSHAKE_TIMEOUT_MS = 1500
PLACEHOLDERS = {"tenant": "tb", "ns": "ns", "topic": "t1", "sub": "s", "count": "1", "n": "1", "seconds": "1",
                "timestamp": "1", "ledger": "1", "entry": "0", "version": "0", "cluster": "standalone",
                "bundle": "0x00000000_0x40000000", "role": "x", "subscription": "s", "group": "g",
                "path": "index.html"}


class Secured(SimpleNamespace):
    sa: StandaloneProcess
    kit: SecurityKit
    tls_url: str


def call(url: str, method: str = "GET", body: object = None, *, token: str | None = None,
         headers: dict[str, str] | None = None, context: ssl.SSLContext | None = None) -> tuple[int, object]:
    """(status, decoded body) of one request (tests.support.admin_http on admin_client); no
    redirects are involved on a standalone."""
    return admin_http.call(method, url, body, token=token, headers=headers,
                           credentials=Credentials(ssl_context=context))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("secured-admin")
    kit = SecurityKit.create(root / "security")
    admin_tls_port = free_port()
    env = kit.standalone_env(tls_port=free_port(), admin_tls_port=admin_tls_port,
                             extra={"STRATA_TLS_HANDSHAKE_TIMEOUT_MS": str(HANDSHAKE_TIMEOUT_MS)})
    with StandaloneProcess.start(root / "data", env=env) as sa:
        su = kit.token(SUPERUSER)
        base = sa.admin_url
        cluster = call(f"{base}/admin/v2/clusters", token=su)[1][0]
        for tenant, admin in (("ta", "alice"), ("tb", "bob")):
            assert call(f"{base}/admin/v2/tenants/{tenant}", "PUT",
                        {"adminRoles": [admin], "allowedClusters": [cluster]}, token=su)[0] == 204
            assert call(f"{base}/admin/v2/namespaces/{tenant}/ns", "PUT", token=su)[0] == 204
            assert call(f"{base}/admin/v2/persistent/{tenant}/ns/t1", "PUT", token=su)[0] == 204
            assert call(f"{base}/admin/v2/persistent/{tenant}/ns/t1/stats", token=su)[0] == 200    # loaded
        assert call(f"{base}/admin/v2/namespaces/ta/ns/permissions/carol", "POST", ["consume"], token=su)[0] == 204
        yield Secured(sa=sa, kit=kit, tls_url=f"https://localhost:{admin_tls_port}")


def _routes() -> list[tuple[str, str]]:
    """Every route that needs credentials: all but the PUBLIC ones (the console's static files)."""
    app = AdminServer(default_config(), 0).app(SimpleNamespace(config=default_config(), astore=None))   # type: ignore[arg-type]
    out = set()
    for route in app.router.routes():
        assert route.resource is not None
        if access_of(route.method, route.resource.canonical).rule is Rule.PUBLIC:
            continue
        path = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDERS[m.group(1)], route.resource.canonical)
        out.add((route.method, path))
    return sorted(out)


def test_every_route_without_credentials_is_401(secured: Secured) -> None:
    routes = _routes()
    assert len(routes) > 200
    wrong = []
    for method, path in routes:
        status, body = call(secured.sa.admin_url + path, method)
        if status != 401 or (method != "HEAD" and not (isinstance(body, dict) and body.get("reason"))):
            wrong.append(f"{method} {path} -> {status} {body}")
    assert not wrong, "\n".join(wrong)
    for public in ("/console", "/console/", "/console/index.html"):   # static files: no credentials asked
        assert call(secured.sa.admin_url + public)[0] in (200, 404, 503), public    # 404/503: console not built
    bad_key = secured.kit.token(SUPERUSER, key=b"k" * 32)
    assert call(secured.sa.admin_url + "/admin/v2/tenants", token=bad_key)[0] == 401
    assert call(secured.sa.admin_url + "/admin/v2/tenants", token=secured.kit.token(SUPERUSER, expires_in_s=-60))[0] \
        == 401


TENANT_B_READS = ("/admin/v2/persistent/tb/ns/{t}/stats", "/admin/v2/persistent/tb/ns/{t}/subscription/s/position/1",
                  "/admin/v2/persistent/tb/ns/{t}/examinemessage?initialPosition=earliest&messagePosition=1",
                  "/admin/v2/persistent/tb/ns/{t}/internalStats", "/admin/v2/schemas/tb/ns/{t}/schema",
                  "/admin/v2/persistent/tb/ns/{t}/permissions", "/admin/v2/persistent/tb/ns/{t}/subscriptions",
                  "/lookup/v2/topic/persistent/tb/ns/{t}")


def test_tenant_a_is_refused_tenant_b_the_same_whether_it_exists(secured: Secured) -> None:
    base, alice = secured.sa.admin_url, secured.kit.token("alice")
    for template in TENANT_B_READS:
        status, body = call(base + template.format(t="t1"), token=alice)
        assert status == 403, (template, status, body)
        missing_status, missing = call(base + template.format(t="nope"), token=alice)
        assert missing_status == 403
        assert json.dumps(missing).replace("nope", "t1") == json.dumps(body), template
    for existing, absent in (("/admin/v2/namespaces/tb", "/admin/v2/namespaces/zz"),
                             ("/admin/v2/persistent/tb/ns", "/admin/v2/persistent/tb/zz"),
                             ("/admin/v2/namespaces/tb/ns/topics", "/admin/v2/namespaces/tb/zz/topics"),
                             ("/admin/v2/namespaces/tb/ns", "/admin/v2/namespaces/tb/zz")):
        status, body = call(base + existing, token=alice)
        assert status == 403 and "reason" in body
        missing_status, missing = call(base + absent, token=alice)
        assert missing_status == 403
        assert json.dumps(missing).replace("zz", "tb" if "namespaces/zz" in absent else "ns") == json.dumps(body)
    status, body = call(base + "/admin/v2/persistent/tb/ns/t1/stats", token=alice)
    assert "GET_STATS" in body["reason"] and "persistent://tb/ns/t1" in body["reason"]
    assert call(base + "/admin/v2/tenants", token=alice)[0] == 403            # Pulsar: superusers only
    assert call(base + "/admin/v2/persistent/tb/ns/t1", "DELETE", token=alice)[0] == 403
    assert call(base + "/admin/v2/persistent/tb/ns/t1/stats", token=secured.kit.token("bob"))[0] == 200


def test_superuser_everywhere_and_tenant_admin_in_own_tenant(secured: Secured) -> None:
    base, su, alice = secured.sa.admin_url, secured.kit.token(SUPERUSER), secured.kit.token("alice")
    for path in ("/admin/v2/tenants", "/admin/v2/namespaces/tb", "/admin/v2/persistent/tb/ns",
                 "/admin/v2/persistent/tb/ns/t1/stats", "/admin/v2/persistent/tb/ns/t1/internalStats",
                 "/admin/v2/brokers", "/admin/v2/broker-stats/topics", "/admin/v2/persistent/tb/ns/t1/permissions"):
        assert call(base + path, token=su)[0] == 200, path
    assert call(base + "/admin/v2/clusters", token=alice)[0] == 200            # any authenticated role
    assert call(base + "/admin/v2/namespaces/ta/ns2", "PUT", token=alice)[0] == 204
    assert call(base + "/admin/v2/namespaces/ta", token=alice) == (200, ["ta/ns", "ta/ns2"])
    assert call(base + "/admin/v2/namespaces/ta/ns2/retention", "POST",
                {"retentionTimeInMinutes": 10, "retentionSizeInMB": 10}, token=alice)[0] == 204
    assert call(base + "/admin/v2/persistent/ta/ns2/x", "PUT", token=alice)[0] == 204
    assert call(base + "/admin/v2/persistent/ta/ns2/x/stats", token=alice)[0] == 200
    assert call(base + "/admin/v2/persistent/ta/ns2/x", "DELETE", token=alice)[0] == 204
    assert call(base + "/admin/v2/namespaces/ta/ns2", "DELETE", token=alice)[0] == 204
    basic = {"Authorization": "Basic YmFzaWMtdXNlcjpiYXNpYy1wYXNz"}             # basic-user:basic-pass
    assert call(base + "/admin/v2/clusters", headers=basic)[0] == 200


def test_a_grant_in_a_namespace_lists_its_topics_only(secured: Secured) -> None:
    base, carol = secured.sa.admin_url, secured.kit.token("carol")
    status, topics = call(base + "/admin/v2/persistent/ta/ns", token=carol)
    assert status == 200 and "persistent://ta/ns/t1" in topics
    assert call(base + "/admin/v2/namespaces/ta/ns/topics", token=carol)[0] == 200
    assert call(base + "/admin/v2/persistent/ta/ns/t1/internalStats", token=carol)[0] == 200   # consume
    assert call(base + "/admin/v2/persistent/tb/ns", token=carol)[0] == 403
    assert call(base + "/admin/v2/namespaces/ta", token=carol)[0] == 403        # tenant admins only
    assert call(base + "/admin/v2/persistent/ta/ns/t1", "DELETE", token=carol)[0] == 403


def test_https_with_the_ca_and_mtls_roles(secured: Secured) -> None:
    kit, url = secured.kit, secured.tls_url
    trusting = ssl.create_default_context(cafile=str(kit.ca_file))
    assert call(url + "/admin/v2/clusters", token=kit.token("alice"), context=trusting)[0] == 200
    assert call(url + "/admin/v2/clusters", context=trusting)[0] == 401
    for role, expected in ((SUPERUSER, 200), ("alice", 403)):
        mtls = ssl.create_default_context(cafile=str(kit.ca_file))
        mtls.load_cert_chain(*kit.client_cert(role))
        assert call(url + "/admin/v2/tenants", context=mtls)[0] == expected, role
    with pytest.raises(AdminUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
        call(url + "/admin/v2/clusters", context=ssl.create_default_context())


def test_a_stalled_tls_handshake_is_dropped(secured: Secured) -> None:
    port = int(secured.tls_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""              # nothing sent: the broker closes it
        waited_s = time.monotonic() - started
    assert HANDSHAKE_TIMEOUT_MS / 1000 - 0.2 < waited_s < HANDSHAKE_TIMEOUT_MS / 1000 + 3


def test_metrics_need_credentials_and_show_a_role_its_tenants_only(secured: Secured) -> None:
    base, kit = secured.sa.admin_url, secured.kit
    assert call(base + "/metrics")[0] == 401
    status, everything = call(base + "/metrics", token=kit.token(SUPERUSER))
    assert status == 200 and 'topic="persistent://tb/ns/t1"' in everything and 'persistent://ta/ns/t1' in everything
    status, alices = call(base + "/metrics", token=kit.token("alice"))
    assert status == 200
    assert 'topic="persistent://ta/ns/t1"' in alices
    assert "persistent://tb/" not in alices and 'namespace="tb/ns"' not in alices
    assert "pulsar_topics_count{" in alices and "# TYPE pulsar_msg_backlog" in alices   # broker-level series stay


def test_cli_with_and_without_a_token(secured: Secured, capsys: pytest.CaptureFixture, monkeypatch,
                                      tmp_path) -> None:
    base, kit = secured.sa.admin_url, secured.kit
    token_file = tmp_path / "admin.token"
    token_file.write_text(kit.token(SUPERUSER) + "\n")
    assert admin_main(["--admin-url", base, "--auth-token", f"file://{token_file}", "-o", "json", "tenants", "list"]) \
        == 0
    assert "tb" in json.loads(capsys.readouterr().out)
    assert admin_main(["--admin-url", base, "tenants", "list"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "--auth-token" in err and "Traceback" not in err
    assert admin_main(["--admin-url", base, "--auth-params", f"token:{kit.token('alice')}", "tenants", "list"]) == 1
    assert "HTTP 403" in capsys.readouterr().err
    monkeypatch.setenv("STRATA_ADMIN_AUTH_TOKEN", kit.token(SUPERUSER))
    monkeypatch.setenv("STRATA_ADMIN_TLS_TRUST_CERT", str(kit.ca_file))
    assert admin_main(["--admin-url", secured.tls_url, "-o", "json", "namespaces", "list", "tb"]) == 0
    assert json.loads(capsys.readouterr().out) == ["tb/ns"]
    cert, key = kit.client_cert(SUPERUSER)
    monkeypatch.delenv("STRATA_ADMIN_AUTH_TOKEN")
    assert admin_main(["--admin-url", secured.tls_url, "--tls-cert", cert, "--tls-key", key, "-o", "json",
                       "tenants", "list"]) == 0
    capsys.readouterr()
    monkeypatch.delenv("STRATA_ADMIN_TLS_TRUST_CERT")
    assert top_main(["--admin-url", base, "--once", "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "Traceback" not in err
    assert top_main(["--admin-url", base, "--once", "--timeout", "5", "--auth-token", kit.token(SUPERUSER)]) == 0
    assert "tb/ns/t1" in capsys.readouterr().out


def test_cli_names_the_trust_option_when_the_certificate_fails(secured: Secured,
                                                               capsys: pytest.CaptureFixture) -> None:
    token = secured.kit.token(SUPERUSER)   # the CA is not among the system's: the check fails without it
    assert admin_main(["--admin-url", secured.tls_url, "--auth-token", token, "tenants", "list"]) == 1
    err = capsys.readouterr().err
    assert "CERTIFICATE_VERIFY_FAILED" in err and "--tls-trust-cert" in err and "Traceback" not in err
    assert top_main(["--admin-url", secured.tls_url, "--once", "--timeout", "5", "--auth-token", token]) == 1
    err = capsys.readouterr().err      # it said only "no broker answered"
    assert "CERTIFICATE_VERIFY_FAILED" in err and "--tls-trust-cert" in err and "Traceback" not in err
