"""The web console's cluster page and merged audit log on a real 2-broker cluster.

Either broker's `/admin/v2/console/cluster` lists both brokers with their load (the other's fetched
from it) and the cluster's bookies; `/admin/v2/console/audit` merges both brokers' records by time
(`local=true`: this broker's only). A console call (`X-Strata-Forward: owner`) on a topic the other
broker owns is answered through the broker asked, not with a 307, and audited once, there.
A frozen broker (SIGSTOP) shows `reachable: false` and is named `unreachable` by the audit gather,
and the answers still come within the peer bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.cluster.conftest import unique
from tests.support import admin_http
from tests.support.cluster_proc import LocalCluster
from tests.support.waiting import wait_until

PEER_BOUND_S = 2.0


def _get(url: str) -> dict:
    status, body = admin_http.call("GET", url)
    assert status == 200, (url, status, body)
    return body


def test_cluster_page_and_merged_audit(new_cluster: Callable[..., LocalCluster]) -> None:
    cluster = new_cluster()
    a, b = cluster.brokers

    def both_listed() -> dict | None:    # A's view of the registry follows B's registration closely, not at once
        page = _get(a.admin_url + "/admin/v2/console/cluster")
        return page if len(page["brokers"]) == 2 else None
    page = wait_until(both_listed, 10.0, "both brokers on A's cluster page")
    assert isinstance(page, dict)
    assert sorted(br["adminUrl"] for br in page["brokers"]) == sorted([a.admin_url, b.admin_url])
    assert all(br["reachable"] and "msgRateIn" in br["load"] for br in page["brokers"]), page["brokers"]
    assert len(page["bookies"]) == 2 and {bk["state"] for bk in page["bookies"]} == {"available"}

    on_a, on_b = unique("console-a"), unique("console-b")
    assert admin_http.call("PUT", f"{a.admin_url}/admin/v2/namespaces/public/{on_a}")[0] == 204
    assert admin_http.call("PUT", f"{b.admin_url}/admin/v2/namespaces/public/{on_b}")[0] == 204
    merged = _get(a.admin_url + "/admin/v2/console/audit?kind=change")
    paths = [e["path"] for e in merged["entries"]]
    assert f"/admin/v2/namespaces/public/{on_a}" in paths and f"/admin/v2/namespaces/public/{on_b}" in paths
    assert paths.index(f"/admin/v2/namespaces/public/{on_b}") < paths.index(f"/admin/v2/namespaces/public/{on_a}")
    assert len({e["broker"] for e in merged["entries"]}) == 2 and merged["unreachable"] == []
    local = [e["path"] for e in _get(a.admin_url + "/admin/v2/console/audit?local=true")["entries"]]
    assert f"/admin/v2/namespaces/public/{on_b}" not in local

    _forwarded_calls_answer_through_the_broker_asked(a.admin_url, b.admin_url)

    b.freeze()
    try:
        started = time.monotonic()
        page = _get(a.admin_url + "/admin/v2/console/cluster")
        audit = _get(a.admin_url + "/admin/v2/console/audit")
        assert time.monotonic() - started < 3 * PEER_BOUND_S
        reach = {br["adminUrl"]: br["reachable"] for br in page["brokers"]}
        assert reach == {a.admin_url: True, b.admin_url: False}
        assert len(audit["unreachable"]) == 1 and b.admin_url.endswith(audit["unreachable"][0])
    finally:
        b.thaw()


FORWARD = {"X-Strata-Forward": "owner"}


def _forwarded_calls_answer_through_the_broker_asked(a_url: str, b_url: str) -> None:
    ns = unique("console-fwd")
    assert admin_http.call("PUT", f"{a_url}/admin/v2/namespaces/public/{ns}")[0] == 204
    for i in range(32):     # a topic B owns: bundles spread over both brokers
        topic = f"public/{ns}/t{i}"
        status, found = admin_http.call("GET", f"{a_url}/lookup/v2/topic/persistent/{topic}")
        assert status == 200, found
        if found["httpUrl"].rstrip("/") == b_url.rstrip("/"):
            break
    else:
        raise AssertionError("no topic of 32 was placed on broker B")
    assert admin_http.call("PUT", f"{a_url}/admin/v2/persistent/{topic}")[0] == 204    # created on B (307 followed)
    plain = admin_http.exchange("GET", f"{a_url}/admin/v2/persistent/{topic}/stats", follow=False)
    assert plain.status == 307, plain.status
    status, stats = admin_http.call("GET", f"{a_url}/admin/v2/persistent/{topic}/stats", headers=FORWARD,
                                    follow=False)
    assert status == 200 and "msgRateIn" in stats, (status, stats)
    sub_path = f"/admin/v2/persistent/{topic}/subscription/fwd"
    status, body = admin_http.call("PUT", a_url + sub_path, headers=FORWARD, follow=False)
    assert status == 204, body
    entries = _get(a_url + "/admin/v2/console/audit?kind=change")["entries"]
    recorded = [e for e in entries if e["path"] == sub_path]
    assert len(recorded) == 1 and a_url.endswith(recorded[0]["broker"]), recorded
