"""The web console's admin routes on real standalones: whoami, bookies/all, the cluster page and
the audit log, open (authentication off) and secured (tokens, basic auth, tenants ta and tb).

Two standalones for the module, each started once: `open_sa` with the defaults, `secured` with
tests/support/security.py's kit (superuser `admin`; `alice` administers `ta`, `bob` `tb`; `carol`
may consume in `ta/ns`).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support import admin_http
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port

BASIC = {"Authorization": "Basic YmFzaWMtdXNlcjpiYXNpYy1wYXNz"}       # basic-user:basic-pass (the kit's)
LOAD_KEYS = {"cpu", "msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "numBundles", "numTopics",
             "numProducers", "numConsumers"}


def call(base: str, method: str, path: str, body: object = None, **kwargs) -> tuple[int, object]:
    return admin_http.admin_call(base, method, path, body, **kwargs)


@pytest.fixture(scope="module")
def open_sa(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneProcess.start(tmp_path_factory.mktemp("console-open") / "data") as sa:
        yield sa


class Secured(SimpleNamespace):
    sa: StandaloneProcess
    kit: SecurityKit


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("console-secured")
    kit = SecurityKit.create(root / "security")
    with StandaloneProcess.start(root / "data", env=kit.standalone_env(tls_port=free_port())) as sa:
        su = kit.token(SUPERUSER)
        for tenant, admin in (("ta", "alice"), ("tb", "bob")):
            assert call(sa.admin_url, "PUT", f"/admin/v2/tenants/{tenant}",
                        {"adminRoles": [admin], "allowedClusters": ["standalone"]}, token=su)[0] == 204
            assert call(sa.admin_url, "PUT", f"/admin/v2/namespaces/{tenant}/ns", token=su)[0] == 204
            assert call(sa.admin_url, "PUT", f"/admin/v2/persistent/{tenant}/ns/t1", token=su)[0] == 204
        assert call(sa.admin_url, "POST", "/admin/v2/namespaces/ta/ns/permissions/carol", ["consume"],
                    token=su)[0] == 204
        yield Secured(sa=sa, kit=kit)


# --- authentication off -------------------------------------------------------------------------

def test_whoami_without_authentication_is_anonymous(open_sa: StandaloneProcess) -> None:
    status, me = call(open_sa.admin_url, "GET", "/admin/v2/console/whoami")
    assert status == 200, me
    assert me["role"] is None and me["method"] == "none" and me["superuser"] is True
    assert me["authenticationEnabled"] is False and me["authorizationEnabled"] is False
    assert "public" in me["tenants"] and me["cluster"] == "standalone"
    assert me["broker"] == open_sa.admin_url.split("://", 1)[1]


def test_bookies_all(open_sa: StandaloneProcess) -> None:
    status, body = call(open_sa.admin_url, "GET", "/admin/v2/bookies/all")
    assert status == 200, body
    (bookie,) = body["bookies"]
    assert bookie["bookieId"] == bookie["address"] and ":" in bookie["address"]
    assert bookie["state"] == "available"
    assert bookie["freeBytes"] > 0 and bookie["usedBytes"] >= 0 and bookie["ledgerCount"] >= 0


def test_cluster_page(open_sa: StandaloneProcess) -> None:
    assert call(open_sa.admin_url, "PUT", "/admin/v2/persistent/public/default/console-page")[0] == 204
    assert call(open_sa.admin_url, "GET", "/admin/v2/persistent/public/default/console-page/stats")[0] == 200
    status, page = call(open_sa.admin_url, "GET", "/admin/v2/console/cluster")
    assert status == 200, page
    assert page["cluster"] == "standalone"
    (broker,) = page["brokers"]
    assert broker["reachable"] is True and broker["adminUrl"] == open_sa.admin_url
    assert broker["serviceUrl"] == open_sa.service_url and broker["id"] == open_sa.admin_url.split("://", 1)[1]
    assert broker["kafka"] is not None and broker["kafka"].endswith(f":{open_sa.kafka_port}")
    assert LOAD_KEYS <= set(broker["load"]), broker["load"]
    assert [b["state"] for b in page["bookies"]] == ["available"]
    bundles = page["bundles"]
    assert bundles["total"] >= 1 and len(bundles["items"]) == bundles["total"]
    mine = [i for i in bundles["items"] if i["namespace"] == "public/default"]
    assert mine and all(i["owner"] == broker["id"] for i in mine), bundles
    assert page["tier"] == {"configured": False, "driver": None, "bucket": None, "endpoint": None, "region": None,
                            "reachable": None, "error": None}
    assert set(page["totals"]) == {"msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"}


def test_audit_records_changes_not_reads(open_sa: StandaloneProcess) -> None:
    base = open_sa.admin_url
    assert call(base, "PUT", "/admin/v2/persistent/public/default/audited")[0] == 204
    assert call(base, "GET", "/admin/v2/persistent/public/default/audited/stats")[0] == 200
    status, body = call(base, "GET", "/admin/v2/console/audit?local=true&limit=50")
    assert status == 200, body
    entries = body["entries"]
    created = [e for e in entries if e["path"] == "/admin/v2/persistent/public/default/audited"]
    assert created and created[0]["kind"] == "change" and created[0]["method"] == "PUT"
    assert created[0]["status"] == 204 and created[0]["role"] is None
    assert created[0]["broker"] == base.split("://", 1)[1] and isinstance(created[0]["time"], int)
    assert not [e for e in entries if e["path"].endswith("/stats")]                 # plain reads: not recorded
    times = [e["time"] for e in entries]
    assert times == sorted(times, reverse=True)
    assert call(base, "GET", "/admin/v2/console/audit?kind=nope")[0] == 400
    assert call(base, "GET", "/admin/v2/console/audit?limit=0")[0] == 400
    merged = call(base, "GET", "/admin/v2/console/audit?limit=5")[1]                 # every broker: just this one
    assert merged["unreachable"] == [] and len(merged["entries"]) <= 5


# --- authentication and authorization on ----------------------------------------------------------

def test_whoami_needs_credentials_and_names_the_role(secured: Secured) -> None:
    base, kit = secured.sa.admin_url, secured.kit
    assert call(base, "GET", "/admin/v2/console/whoami")[0] == 401
    status, me = call(base, "GET", "/admin/v2/console/whoami", token=kit.token(SUPERUSER))
    assert status == 200, me
    assert me["role"] == SUPERUSER and me["superuser"] is True and me["method"] == "token"
    assert me["authenticationEnabled"] is True and me["authorizationEnabled"] is True
    assert {"public", "ta", "tb"} <= set(me["tenants"])
    status, alice = call(base, "GET", "/admin/v2/console/whoami", token=kit.token("alice"))
    assert status == 200 and alice["role"] == "alice" and alice["superuser"] is False
    assert alice["tenants"] == ["ta"]
    status, basic = call(base, "GET", "/admin/v2/console/whoami", headers=BASIC)
    assert status == 200 and basic["role"] == "basic-user" and basic["method"] == "basic"
    assert basic["tenants"] == []


def test_console_pages_are_for_superusers(secured: Secured) -> None:
    base, kit = secured.sa.admin_url, secured.kit
    for path in ("/admin/v2/console/cluster", "/admin/v2/console/audit", "/admin/v2/bookies/all"):
        assert call(base, "GET", path)[0] == 401, path
        assert call(base, "GET", path, token=kit.token("alice"))[0] == 403, path
        assert call(base, "GET", path, token=kit.token(SUPERUSER))[0] == 200, path


def test_audit_of_a_change_a_view_and_a_refusal(secured: Secured) -> None:
    base, kit = secured.sa.admin_url, secured.kit
    alice, carol, su = kit.token("alice"), kit.token("carol"), kit.token(SUPERUSER)
    assert call(base, "PUT", "/admin/v2/persistent/ta/ns/by-alice", token=alice)[0] == 204
    call(base, "GET", "/admin/v2/persistent/ta/ns/t1/examinemessage?initialPosition=earliest&messagePosition=1",
         token=carol)                                                       # a view, whatever it finds
    assert call(base, "DELETE", "/admin/v2/persistent/tb/ns/t1", token=alice)[0] == 403
    assert call(base, "DELETE", "/admin/v2/persistent/tb/ns/t1")[0] == 401

    entries = call(base, "GET", "/admin/v2/console/audit?local=true", token=su)[1]["entries"]
    change = next(e for e in entries if e["path"] == "/admin/v2/persistent/ta/ns/by-alice")
    assert (change["role"], change["kind"], change["method"], change["status"]) == ("alice", "change", "PUT", 204)
    view = next(e for e in entries if e["path"].endswith("/ta/ns/t1/examinemessage"))
    assert view["role"] == "carol" and view["kind"] == "view" and "messagePosition=1" in view["query"]
    denied = [e for e in entries if e["path"] == "/admin/v2/persistent/tb/ns/t1" and e["kind"] == "denied"]
    assert {(e["role"], e["status"]) for e in denied} == {("alice", 403), (None, 401)}

    only_alice = call(base, "GET", "/admin/v2/console/audit?role=alice", token=su)[1]["entries"]
    assert only_alice and {e["role"] for e in only_alice} == {"alice"}
    assert {e["kind"] for e in only_alice} == {"change", "denied"}
    only_denied = call(base, "GET", "/admin/v2/console/audit?kind=denied", token=su)[1]["entries"]
    assert only_denied and {e["kind"] for e in only_denied} == {"denied"}
    refused = [e for e in call(base, "GET", "/admin/v2/console/audit?kind=denied&local=true", token=su)[1]["entries"]
               if e["path"] == "/admin/v2/console/audit"]
    assert refused == []                                  # a refused plain read is not recorded


# --- the cold tier --------------------------------------------------------------------------------

def test_cluster_page_checks_the_cold_tier(tmp_path, s3_server) -> None:
    bucket = s3_server.new_bucket()
    with StandaloneProcess.start(tmp_path / "reachable", env=s3_server.standalone_env(bucket)) as sa:
        tier = call(sa.admin_url, "GET", "/admin/v2/console/cluster")[1]["tier"]
        assert tier == {"configured": True, "driver": "s3", "bucket": bucket, "endpoint": s3_server.endpoint,
                        "region": s3_server.region, "reachable": True, "error": None}
    with StandaloneProcess.start(tmp_path / "missing", env=s3_server.standalone_env("no-such-bucket-console")) as sa:
        tier = call(sa.admin_url, "GET", "/admin/v2/console/cluster")[1]["tier"]
        assert tier["configured"] is True and tier["reachable"] is False
        assert "no-such-bucket-console" in tier["error"], tier
