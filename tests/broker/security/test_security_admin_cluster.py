"""Two secured brokers (tests.support.cluster_proc.LocalCluster, the kit's settings): the calls one
broker makes to the other carry its own token (broker_client_auth_token, role `strata-broker`, a
superuser), so a partitioned topic whose partitions live on both brokers answers its fanned-out
stats through either broker; a client's call on a topic the other broker owns follows the 307 with
its credentials (`strata admin`), and a role without the permission is refused before any redirect."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from cli.admin import main as admin_main
from tests.acceptance.test_security_admin import call
from tests.broker.admin.test_admin_cluster import LEASE_MS, unique
from tests.support.cluster_proc import LocalCluster
from tests.support.security import SUPERUSER, SecurityKit


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = tmp_path_factory.mktemp("secured-two")
    kit = SecurityKit.create(root / "security")
    env = kit.standalone_env(tls_port=0, extra={"STRATA_BROKER_LOAD_REPORT_INTERVAL_MS": "500",
                                                "STRATA_BROKER_LOOKUP_OWNER_WAIT_MS": "500"})
    with LocalCluster.start(root / "c", brokers=2, bookies=2, e=2, qw=2, qa=2, lease_ms=LEASE_MS,
                            env=env) as cluster:
        yield SimpleNamespace(cluster=cluster, kit=kit, su=kit.token(SUPERUSER))


def _owner(s: SimpleNamespace, path: str) -> int:
    """Index of the broker that owns persistent://`path` (assigned by the lookup)."""
    status, data = call(f"{s.cluster.brokers[0].admin_url}/lookup/v2/topic/persistent/{path}", token=s.su)
    assert status == 200, data
    return next(i for i, b in enumerate(s.cluster.brokers) if b.service_url == data["brokerUrl"])


def _spread(s: SimpleNamespace, ns: str, topic: str, count: int) -> dict[int, list[int]]:
    """Partitions by owner, partition 0's bundle moved if they all landed on one broker."""
    owners = [_owner(s, f"{ns}/{topic}-partition-{i}") for i in range(count)]
    if len(set(owners)) == 1:
        a = s.cluster.brokers[0]
        other = s.cluster.brokers[1 - owners[0]]
        _, bundle = call(f"{a.admin_url}/lookup/v2/topic/persistent/{ns}/{topic}-partition-0/bundle", token=s.su)
        status, body = call(f"{a.admin_url}/admin/v2/namespaces/{ns}/{bundle}/unload?destinationBroker={other.web_id}",
                            "PUT", token=s.su)
        assert status in (204, 307), body
        owners = [_owner(s, f"{ns}/{topic}-partition-{i}") for i in range(count)]
    by_owner: dict[int, list[int]] = {}
    for partition, owner in enumerate(owners):
        by_owner.setdefault(owner, []).append(partition)
    assert len(by_owner) == 2, "the partitions all live on one broker"
    return by_owner


def test_brokers_call_each_other_with_their_token(secured: SimpleNamespace, capsys: pytest.CaptureFixture) -> None:
    s = secured
    a, b = s.cluster.brokers
    ns = f"public/{unique('sec')}"
    assert call(f"{a.admin_url}/admin/v2/namespaces/{ns}", "PUT", {"bundles": {"numBundles": 16}}, token=s.su)[0] == 204
    assert call(f"{a.admin_url}/admin/v2/persistent/{ns}/p/partitions", "PUT", 4, token=s.su)[0] == 204
    by_owner = _spread(s, ns, "p", 4)
    for broker in (a, b):                    # each partition's stats from its owner, as strata-broker
        status, stats = call(f"{broker.admin_url}/admin/v2/persistent/{ns}/p/partitioned-stats", token=s.su)
        assert status == 200, stats
        assert len(stats["partitions"]) == 4
    elsewhere = by_owner[1][0]               # a partition broker b owns, asked of broker a: 307, followed
    partition = f"persistent://{ns}/p-partition-{elsewhere}"
    assert admin_main(["--admin-url", a.admin_url, "--auth-token", s.su, "-o", "json", "topics", "stats",
                       partition]) == 0
    assert '"msgInCounter"' in capsys.readouterr().out
    status, body = call(f"{a.admin_url}/admin/v2/persistent/{ns}/p-partition-{elsewhere}/stats",
                        token=s.kit.token("nobody"))
    assert status == 403 and "GET_STATS" in body["reason"]      # refused here, not redirected first
