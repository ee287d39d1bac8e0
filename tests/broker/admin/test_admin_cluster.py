"""The cluster admin API (broker.admin_cluster) against real brokers: Pulsar's paths, JSON and status
codes; bad input answers 412/400 with a reason and stores nothing; the owner redirect.

One broker (a real `strata standalone`): namespace create with bundles and the bundles read back,
the bundle of a topic against CRC32 computed here, LookupData, unload and split (and their
refusals), brokers/health/leader/clusters/load report, `strata admin` end to end, and the
existing topic routes still served locally (every bundle is this broker's once assigned).

Two brokers (tests.support.cluster_proc.LocalCluster over PostgreSQL): a topic call on the broker
that does not own the topic gets a 307 to the owner with `authoritative=true`, and a PUT/POST/
DELETE followed with its body lands there; a bundle unload on the wrong broker is redirected; a
namespace unload and a partitioned topic's unload reach every owner; the CLI gives the same answers
against either broker; with the owner killed, a call finds no owner: 412.
"""

from __future__ import annotations

import itertools
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator

import pulsar
import pytest

from admin_client import request_json
from metadata import open_store
from tests.support.admin_cli import run_admin
from tests.support.admin_http import decoded, exchange
from tests.support.cluster_proc import BrokerProcess, LocalCluster
from tests.support.namespaces import ensure_namespace
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until

LEASE_MS = 4000
HTTP_TIMEOUT_S = 20


def http(url: str, method: str = "GET", body: object = None, raw: bytes | None = None,
         ) -> tuple[int, object, dict[str, str]]:
    """(status, decoded body, headers) without following redirects."""
    answer = exchange(method, url, body, raw=raw, follow=False, timeout_s=HTTP_TIMEOUT_S)
    return answer.status, decoded(answer), answer.headers


def unique(prefix: str) -> str:
    unique.n = getattr(unique, "n", 0) + 1       # type: ignore[attr-defined]
    return f"{prefix}-{os.getpid()}-{unique.n}"  # type: ignore[attr-defined]


def bundle_holding(boundaries: list[str], topic: str) -> str:
    """The bundle of `topic`, computed here: CRC32 of the full name over [lo, hi) (last: closed)."""
    h = zlib.crc32(topic.encode()) & 0xFFFFFFFF
    values = [int(b, 16) for b in boundaries]
    for lo, hi in itertools.pairwise(values):
        if lo <= h < hi or (hi == 0xFFFFFFFF and h == hi):
            return f"0x{lo:08x}_0x{hi:08x}"
    raise AssertionError("boundaries do not cover the hash")


def quiet_client(service_url: str) -> pulsar.Client:
    return pulsar.Client(service_url, operation_timeout_seconds=20,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def receive_all(consumer: pulsar.Consumer, want: set[int]) -> set[int]:
    """Receive (and ack) until every payload in `want` came; what came. Unacked messages may come
    again after a reconnect (at least once); each receive is bounded."""
    seen: set[int] = set()
    while not want <= seen:
        msg = consumer.receive(20_000)
        consumer.acknowledge(msg)
        seen.add(int(msg.data()))
    return seen


# --- one broker ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("admin-cluster") / "data") as sa:
        yield sa


@pytest.mark.parametrize("count", [1, 8, 128])
def test_namespace_create_stores_equal_bundles(standalone: StandaloneProcess, count: int) -> None:
    ns = f"public/{unique('ns')}"
    base = f"{standalone.admin_url}/admin/v2/namespaces/{ns}"
    assert http(base, "PUT", {"bundles": {"numBundles": count}})[:2] == (204, None)
    status, bundles, _ = http(base + "/bundles")
    assert status == 200 and bundles["numBundles"] == count
    step = 2**32 // count
    assert bundles["boundaries"] == [f"0x{i * step:08x}" for i in range(count)] + ["0xffffffff"]
    status, answer, _ = http(base, "PUT", {"bundles": {"numBundles": count}})
    assert status == 409 and "already exists" in answer["reason"]


def test_namespace_create_without_a_count_gets_the_default_and_pulsars_policies_are_accepted(
        standalone: StandaloneProcess) -> None:
    for body in (None, {"bundles": None, "retention_policies": None, "deduplicationEnabled": None}):
        base = f"{standalone.admin_url}/admin/v2/namespaces/public/{unique('dflt')}"
        assert http(base, "PUT", body)[0] == 204
        assert http(base + "/bundles")[1] == {"numBundles": 4, "boundaries": [
            "0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]}


def test_namespace_create_with_boundaries(standalone: StandaloneProcess) -> None:
    base = f"{standalone.admin_url}/admin/v2/namespaces/public/{unique('bounds')}"
    boundaries = ["0x00000000", "0x10000000", "0x90000000", "0xffffffff"]
    assert http(base, "PUT", {"bundles": {"boundaries": boundaries, "numBundles": 3}})[0] == 204
    assert http(base + "/bundles")[1] == {"boundaries": boundaries, "numBundles": 3}


@pytest.mark.parametrize(("body", "status"), [
    ({"bundles": {"numBundles": 0}}, 412),
    ({"bundles": {"numBundles": -1}}, 412),
    ({"bundles": {"numBundles": 129}}, 412),
    ({"bundles": {"numBundles": "8"}}, 412),
    ({"bundles": {"numBundles": True}}, 412),
    ({"bundles": {"boundaries": ["0x00000000", "0x80000000"]}}, 412),          # does not reach 0xffffffff
    ({"bundles": {"boundaries": ["0x10000000", "0xffffffff"]}}, 412),          # does not start at 0
    ({"bundles": {"boundaries": ["0x00000000", "0x90000000", "0x80000000", "0xffffffff"]}}, 412),
    ({"bundles": {"boundaries": ["0x00000000", "0xzz", "0xffffffff"]}}, 412),
    ({"bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 2}}, 412),
    ({"bundles": {"boundaries": [0, 4294967295]}}, 400),
    ({"bundles": 8}, 400),
    ([1, 2], 400),
])
def test_bad_bundles_are_refused_and_store_nothing(standalone: StandaloneProcess, body: object, status: int) -> None:
    base = f"{standalone.admin_url}/admin/v2/namespaces/public/{unique('bad')}"
    code, answer, _ = http(base, "PUT", body)
    assert code == status, (body, answer)
    assert answer["reason"]
    assert http(base + "/bundles")[0] == 404                 # nothing was created
    assert http(base, "PUT", raw=b"{not json")[0] == 400
    assert http(base, "PUT", {"bundles": {"numBundles": 2}})[0] == 204   # and it can still be created


def test_bundles_of_an_unknown_namespace_is_404_but_public_default_exists(standalone: StandaloneProcess) -> None:
    status, answer, _ = http(f"{standalone.admin_url}/admin/v2/namespaces/public/{unique('none')}/bundles")
    assert status == 404 and answer["reason"]
    status, answer, _ = http(f"{standalone.admin_url}/admin/v2/namespaces/public/default/bundles")
    assert status == 200 and answer["numBundles"] >= 1


def test_bundle_of_a_topic_and_lookup_data(standalone: StandaloneProcess) -> None:
    ns = f"public/{unique('lk')}"
    assert http(f"{standalone.admin_url}/admin/v2/namespaces/{ns}", "PUT", {"bundles": {"numBundles": 16}})[0] == 204
    boundaries = http(f"{standalone.admin_url}/admin/v2/namespaces/{ns}/bundles")[1]["boundaries"]
    seen = set()
    for i in range(40):
        topic = f"persistent://{ns}/t{i}"
        status, bundle, _ = http(f"{standalone.admin_url}/lookup/v2/topic/persistent/{ns}/t{i}/bundle")
        assert status == 200 and bundle == bundle_holding(boundaries, topic)
        seen.add(bundle)
    partition = f"persistent://{ns}/p-partition-3"     # each partition is placed on its own hash
    assert http(f"{standalone.admin_url}/lookup/v2/topic/persistent/{ns}/p-partition-3/bundle")[1] == \
        bundle_holding(boundaries, partition)
    assert len(seen) > 4                               # 40 names spread over the 16 bundles
    status, data, _ = http(f"{standalone.admin_url}/lookup/v2/topic/persistent/{ns}/t0")
    assert status == 200
    assert data == {"brokerUrl": standalone.service_url, "brokerUrlTls": "", "httpUrl": standalone.admin_url,
                    "httpUrlTls": "", "nativeUrl": standalone.service_url}


def test_malformed_names_are_refused(standalone: StandaloneProcess) -> None:
    for path in ("/lookup/v2/topic/persistent/public/default/bad%20name",
                 "/lookup/v2/topic/persistent/public/bad%20ns/t/bundle",
                 "/admin/v2/namespaces/public/bad%20ns/bundles"):
        status, answer, _ = http(standalone.admin_url + path)
        assert status == 400 and answer["reason"], (path, status, answer)


def test_bundle_unload_and_split(standalone: StandaloneProcess) -> None:
    ns = f"public/{unique('split')}"
    base = f"{standalone.admin_url}/admin/v2/namespaces/{ns}"
    assert http(base, "PUT", {"bundles": {"numBundles": 2}})[0] == 204
    first, second = "0x00000000_0x80000000", "0x80000000_0xffffffff"
    assert http(base + "/bundles")[1]["boundaries"] == ["0x00000000", "0x80000000", "0xffffffff"]
    for bad in ("garbage", "0x00000000_0x00000010", "0x7fffffff_0x00000000"):
        for action in ("unload", "split"):
            status, answer, _ = http(f"{base}/{bad}/{action}", "PUT")
            assert status == 412 and answer["reason"], (bad, action, status, answer)
    assert http(f"{base}/{first}/unload", "PUT")[0] == 204          # nobody owns it: nothing to do
    status, answer, _ = http(f"{base}/{first}/split", "PUT")
    assert status == 412 and "not owned" in answer["reason"]
    # own the first bundle (a lookup of one of its topics), then split it
    topic = next(f"t{i}" for i in range(100) if bundle_holding(
        ["0x00000000", "0x80000000", "0xffffffff"], f"persistent://{ns}/t{i}") == first)
    assert http(f"{standalone.admin_url}/lookup/v2/topic/persistent/{ns}/{topic}")[0] == 200
    status, answer, _ = http(f"{base}/{first}/split?splitAlgorithmName=topic_count_equally_divide", "PUT")
    assert status == 412 and "algorithm" in answer["reason"]
    assert http(f"{base}/{first}/split?unload=false", "PUT")[0] == 204
    after = http(base + "/bundles")[1]
    assert after == {"boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xffffffff"], "numBundles": 3}
    assert http(f"{standalone.admin_url}/lookup/v2/topic/persistent/{ns}/{topic}/bundle")[1] == \
        bundle_holding(after["boundaries"], f"persistent://{ns}/{topic}")
    half = bundle_holding(after["boundaries"], f"persistent://{ns}/{topic}")
    assert http(f"{base}/{half}/unload", "PUT")[0] == 204           # owned after the split
    assert http(f"{base}/{second}/unload?destinationBroker=nobody:1", "PUT")[0] == 412
    assert http(base + "/unload", "PUT")[0] == 204


def test_unloads_keep_clients_working(standalone: StandaloneProcess) -> None:
    """Topic, partitioned topic and namespace unloads close topics; the official client looks up
    again and every send succeeds."""
    ns = f"public/{unique('unl')}"
    admin = standalone.admin_url
    assert http(f"{admin}/admin/v2/namespaces/{ns}", "PUT")[0] == 204
    assert http(f"{admin}/admin/v2/persistent/{ns}/parted/partitions", "PUT", 3)[0] == 204
    client = quiet_client(standalone.service_url)
    try:
        plain = client.create_producer(f"persistent://{ns}/plain", batching_enabled=False)
        parted = client.create_producer(f"persistent://{ns}/parted", batching_enabled=False)
        consumers = [client.subscribe(f"persistent://{ns}/{t}", "s") for t in ("plain", "parted")]
        sent = 0
        for path in (f"/admin/v2/persistent/{ns}/plain/unload", f"/admin/v2/persistent/{ns}/parted/unload",
                     f"/admin/v2/namespaces/{ns}/unload"):
            for producer in (plain, parted):
                producer.send(b"%d" % sent)
                sent += 1
            assert http(admin + path, "PUT")[:2] == (204, None), path
            for producer in (plain, parted):
                producer.send(b"%d" % sent)
                sent += 1
        for consumer, first in zip(consumers, (0, 1)):
            assert receive_all(consumer, set(range(first, sent, 2))) == set(range(first, sent, 2))
    finally:
        client.close()


def test_create_cluster_as_pulsar_answers(standalone: StandaloneProcess) -> None:
    """PUT /clusters/{c} with ClusterData: this cluster exists (409, as Pulsar's standalone); another 412."""
    admin = standalone.admin_url
    body = {"serviceUrl": admin, "brokerServiceUrl": standalone.service_url}
    status, answer, _ = http(f"{admin}/admin/v2/clusters/standalone", "PUT", body)
    assert (status, answer["reason"]) == (409, "Cluster already exists")
    status, answer, _ = http(f"{admin}/admin/v2/clusters/elsewhere", "PUT", body)
    assert status == 412 and "does not replicate" in answer["reason"]
    assert http(f"{admin}/admin/v2/clusters/elsewhere", "PUT", ["not", "ClusterData"])[0] == 400
    assert http(f"{admin}/admin/v2/clusters")[:2] == (200, ["standalone"])


def test_brokers_health_leader_clusters_and_load_report(standalone: StandaloneProcess) -> None:
    admin = standalone.admin_url
    me = urllib.parse.urlparse(admin).netloc
    assert http(f"{admin}/admin/v2/clusters")[:2] == (200, ["standalone"])
    assert http(f"{admin}/admin/v2/brokers/standalone")[:2] == (200, [me])
    assert http(f"{admin}/admin/v2/brokers")[:2] == (200, [me])
    status, answer, _ = http(f"{admin}/admin/v2/brokers/elsewhere")
    assert status == 404 and answer["reason"]
    assert http(f"{admin}/admin/v2/brokers/health")[:2] == (200, "ok")
    leader = wait_until(lambda: http(f"{admin}/admin/v2/brokers/leaderBroker")[1], 15, what="a leader")
    assert leader["serviceUrl"] == admin and leader["brokerId"]
    status, report, _ = http(f"{admin}/admin/v2/broker-stats/load-report")
    assert status == 200
    assert report["webServiceUrl"] == admin and report["pulsarServiceUrl"] == standalone.service_url
    # one identity everywhere (Pulsar 3.x brokerId = advertisedAddress:webPort): the load report,
    # `brokers list` and the leader name the broker alike, never by its binary port
    assert report["brokerId"] == me == leader["brokerId"], (report["brokerId"], me, leader)
    assert report["loadReportType"] == "LocalBrokerData" and report["persistentTopicsEnabled"] is True
    for field in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "numTopics",
                  "numBundles", "numConsumers", "numProducers", "cpu", "lastUpdate", "bundles"):
        assert field in report, field


def test_topic_routes_are_served_by_the_single_owner(standalone: StandaloneProcess) -> None:
    topic = f"public/{unique('own')}/t"
    ensure_namespace(standalone.admin_url, topic.rsplit("/", 1)[0])
    retention = {"retentionTimeInMinutes": 30, "retentionSizeInMB": -1}
    base = f"{standalone.admin_url}/admin/v2/persistent/{topic}"
    assert http(base + "/retention", "POST", retention)[0] == 204
    assert http(base + "/retention")[:2] == (200, retention)
    assert http(base + "/stats")[0] == 404              # known to nobody yet: not found, not redirected


def test_strata_admin_cluster_commands(standalone: StandaloneProcess, capsys: pytest.CaptureFixture) -> None:
    url = ["--admin-url", standalone.admin_url]
    ns = f"public/{unique('cli')}"

    def out(*argv: str) -> object:
        assert run_admin(url + list(argv)) == 0, argv
        text = capsys.readouterr().out
        return json.loads(text) if text.strip() else None

    assert out("namespaces", "create", ns, "-b", "2") is None
    assert run_admin(url + ["namespaces", "create", ns, "-b", "2"]) == 1
    assert "HTTP 409" in capsys.readouterr().err
    assert run_admin(url + ["namespaces", "create", f"public/{unique('cli')}", "-b", "200"]) == 1
    assert "HTTP 412" in capsys.readouterr().err
    bundles = out("namespaces", "bundles", ns)
    assert bundles["numBundles"] == 2
    topic = f"persistent://{ns}/t"
    assert out("topics", "bundle-range", topic) == bundle_holding(bundles["boundaries"], topic)
    assert out("topics", "lookup", topic) == standalone.service_url
    assert out("topics", "unload", topic) is None
    bundle = out("topics", "bundle-range", topic)
    assert out("namespaces", "split-bundle", ns, "-b", bundle, "--unload") is None
    assert out("namespaces", "bundles", ns)["numBundles"] == 3
    assert out("namespaces", "unload", ns) is None
    me = urllib.parse.urlparse(standalone.admin_url).netloc
    assert out("brokers", "list") == [me] == out("brokers", "list", "standalone")
    assert out("brokers", "healthcheck") == "ok"
    assert out("clusters", "list") == ["standalone"]
    assert run_admin(url + ["clusters", "create", "standalone", "--url", standalone.admin_url]) == 1
    assert "HTTP 409: Cluster already exists" in capsys.readouterr().err
    assert out("broker-stats", "load-report")["webServiceUrl"] == standalone.admin_url
    assert run_admin(url + ["namespaces", "unload", ns, "-b", "0x1_0x2"]) == 1
    assert "HTTP 412" in capsys.readouterr().err


# --- two brokers ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {"STRATA_BROKER_LOAD_REPORT_INTERVAL_MS": "500", "STRATA_BROKER_LOOKUP_OWNER_WAIT_MS": "500"}
    with LocalCluster.start(tmp_path_factory.mktemp("admin-two") / "c", brokers=2, bookies=2, e=2, qw=2, qa=2,
                            lease_ms=LEASE_MS, env=env) as cluster:
        yield cluster
        logs = {b.name: b.log_path.read_text(errors="replace") for b in cluster.brokers if b.log_path.exists()}
    assert not [name for name, text in logs.items() if "Traceback" in text], \
        "a broker logged a traceback:\n" + "\n".join(t[t.find("Traceback") - 300:][:3000] for t in logs.values()
                                                        if "Traceback" in t)


def owner_of(cluster: LocalCluster, topic_path: str) -> tuple[BrokerProcess, BrokerProcess]:
    """(owner, the other broker) of `t/ns/topic`, after a lookup assigned it."""
    data = request_json("GET", f"{cluster.brokers[0].admin_url}/lookup/v2/topic/persistent/{topic_path}")
    assert isinstance(data, dict)
    owner = next(b for b in cluster.brokers if b.service_url == data["brokerUrl"])
    other = next(b for b in cluster.brokers if b is not owner)
    assert data["httpUrl"] == owner.admin_url
    return owner, other


def topics_on_each_broker(cluster: LocalCluster, ns: str, wanted: int = 1) -> dict[str, list[str]]:
    """Topic paths of `ns` looked up until each broker owns at least `wanted` of them."""
    found: dict[str, list[str]] = {b.service_url: [] for b in cluster.brokers}
    for i in range(64):
        owner, _ = owner_of(cluster, f"{ns}/t{i}")
        found[owner.service_url].append(f"{ns}/t{i}")
        if all(len(v) >= wanted for v in found.values()):
            return found
    raise AssertionError(f"placement put every topic on one broker: {found}")


def test_a_call_on_the_wrong_broker_is_redirected_with_its_body(two: LocalCluster) -> None:
    ns = f"public/{unique('redir')}"
    assert request_json("PUT", f"{two.brokers[1].admin_url}/admin/v2/namespaces/{ns}",
                        {"bundles": {"numBundles": 8}}) is None
    on = topics_on_each_broker(two, ns)
    retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    for broker in two.brokers:
        owner = broker
        other = next(b for b in two.brokers if b is not owner)
        path = f"/admin/v2/persistent/{on[owner.service_url][0]}/retention"
        status, _, headers = http(other.admin_url + path, "POST", retention)
        assert status == 307
        location = urllib.parse.urlparse(headers["Location"])
        assert f"{location.scheme}://{location.netloc}" == owner.admin_url and location.path == path
        assert urllib.parse.parse_qs(location.query) == {"authoritative": ["true"]}
        assert http(owner.admin_url + path, "POST", retention)[0] == 204            # the owner serves it
        assert request_json("POST", other.admin_url + path, {**retention, "retentionSizeInMB": 20}) is None
        assert http(owner.admin_url + path)[1] == {**retention, "retentionSizeInMB": 20}
        assert http(other.admin_url + path)[0] == 307
        assert request_json("DELETE", other.admin_url + path) is None             # DELETE follows too
        assert http(owner.admin_url + path)[:2] == (200, None)
        # a topic-level query keeps its parameters through the redirect
        status, _, headers = http(other.admin_url + path + "?applied=true")
        assert status == 307 and urllib.parse.parse_qs(urllib.parse.urlparse(headers["Location"]).query) == {
            "applied": ["true"], "authoritative": ["true"]}


def test_partitioned_and_namespace_routes_are_not_redirected(two: LocalCluster) -> None:
    ns = f"public/{unique('fan')}"
    ensure_namespace(two.brokers[0].admin_url, ns)
    for broker in two.brokers:
        topic = unique("parted")
        base = f"{broker.admin_url}/admin/v2/persistent/{ns}/{topic}"
        assert http(base + "/partitions", "PUT", 4)[0] == 204
        assert http(base + "/partitions")[:2] == (200, {"partitions": 4})
        assert http(base + "/retention", "POST", {"retentionTimeInMinutes": 5, "retentionSizeInMB": 5})[0] == 204
        assert http(f"{broker.admin_url}/admin/v2/persistent/{ns}")[0] == 200
        assert http(f"{broker.admin_url}/admin/v2/namespaces/{ns}/retention")[0] == 200


def test_bundle_unload_on_the_wrong_broker_is_redirected(two: LocalCluster) -> None:
    ns = f"public/{unique('bunl')}"
    assert request_json("PUT", f"{two.brokers[0].admin_url}/admin/v2/namespaces/{ns}",
                        {"bundles": {"numBundles": 8}}) is None
    on = topics_on_each_broker(two, ns)
    for owner in two.brokers:
        other = next(b for b in two.brokers if b is not owner)
        topic = on[owner.service_url][0]
        bundle = request_json("GET", f"{other.admin_url}/lookup/v2/topic/persistent/{topic}/bundle")
        path = f"/admin/v2/namespaces/{ns}/{bundle}/unload"
        status, _, headers = http(other.admin_url + path, "PUT")
        assert status == 307 and headers["Location"].startswith(owner.admin_url + path)
        assert request_json("PUT", other.admin_url + path) is None
        assert bundle_owner(two, ns, str(bundle)) is None
        owner_of(two, topic)        # assigned again (to either broker)


def bundle_owner(cluster: LocalCluster, ns: str, bundle: str) -> str | None:
    store = open_store(cluster.metadata_url)
    try:
        found = store.get(f"/namespace/{ns}/{bundle}")
    finally:
        store.close()
    return None if found is None else json.loads(found.value)["nativeUrl"]


def owned_bundles(cluster: LocalCluster, ns: str) -> list[str]:
    store = open_store(cluster.metadata_url)
    try:
        return sorted(path for path, _ in store.list_prefix(f"/namespace/{ns}"))
    finally:
        store.close()


def test_namespace_and_partitioned_unloads_reach_every_owner(two: LocalCluster) -> None:
    ns = f"public/{unique('nsunl')}"
    a = two.brokers[0]
    assert request_json("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": 16}}) is None
    topics_on_each_broker(two, ns, wanted=2)
    assert len(owned_bundles(two, ns)) >= 2
    assert http(f"{a.admin_url}/admin/v2/namespaces/{ns}/unload", "PUT")[:2] == (204, None)
    assert owned_bundles(two, ns) == []
    # a partitioned topic whose partitions live on both brokers, produced to through one broker's URL
    assert http(f"{a.admin_url}/admin/v2/persistent/{ns}/p/partitions", "PUT", 8)[0] == 204
    client = quiet_client(a.service_url)
    try:
        producer = client.create_producer(f"persistent://{ns}/p", batching_enabled=False)
        spread_partitions(two, ns, "p", 8)
        consumer = client.subscribe(f"persistent://{ns}/p", "s")
        for i in range(8):
            producer.send(b"%d" % i, partition_key=str(i))
        for broker in two.brokers:
            assert http(f"{broker.admin_url}/admin/v2/persistent/{ns}/p/unload", "PUT")[:2] == (204, None)
        for i in range(8, 16):
            producer.send(b"%d" % i, partition_key=str(i))
        assert receive_all(consumer, set(range(16))) == set(range(16))
    finally:
        client.close()


def spread_partitions(cluster: LocalCluster, ns: str, topic: str, count: int) -> None:
    """Look every partition up, then move partition 0's bundle if they all landed on one broker."""
    a = cluster.brokers[0]
    owners = {owner_of(cluster, f"{ns}/{topic}-partition-{i}")[0].service_url for i in range(count)}
    if len(owners) == 1:
        _, other = owner_of(cluster, f"{ns}/{topic}-partition-0")
        bundle = request_json("GET", f"{a.admin_url}/lookup/v2/topic/persistent/{ns}/{topic}-partition-0/bundle")
        assert request_json("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}/{bundle}/unload"
                            f"?destinationBroker={other.web_id}") is None
        owners = {owner_of(cluster, f"{ns}/{topic}-partition-{i}")[0].service_url for i in range(count)}
    assert len(owners) == 2, "the partitions all live on one broker"


def test_partitioned_stats_and_delete_reach_every_partitions_owner(two: LocalCluster) -> None:
    ns = f"public/{unique('pstats')}"
    a, b = two.brokers
    assert request_json("PUT", f"{a.admin_url}/admin/v2/namespaces/{ns}", {"bundles": {"numBundles": 16}}) is None
    assert http(f"{a.admin_url}/admin/v2/persistent/{ns}/p/partitions", "PUT", 6)[0] == 204
    spread_partitions(two, ns, "p", 6)
    client = quiet_client(a.service_url)
    try:
        producer = client.create_producer(f"persistent://{ns}/p", batching_enabled=False)
        for i in range(12):
            producer.send(b"%d" % i, partition_key=str(i))
        for broker in two.brokers:
            status, stats, _ = http(f"{broker.admin_url}/admin/v2/persistent/{ns}/p/partitioned-stats")
            assert status == 200, stats
            assert stats["metadata"] == {"partitions": 6} and len(stats["partitions"]) == 6
            assert stats["msgInCounter"] == 12
            assert sum(p["msgInCounter"] for p in stats["partitions"].values()) == 12
        # refused while a producer is attached, whichever broker is asked and wherever it is
        for broker in two.brokers:
            status, answer, _ = http(f"{broker.admin_url}/admin/v2/persistent/{ns}/p/partitions", "DELETE")
            assert status == 412 and answer["reason"], answer
    finally:
        client.close()
    assert http(f"{b.admin_url}/admin/v2/persistent/{ns}/p/partitions", "DELETE")[:2] == (204, None)
    assert http(f"{a.admin_url}/admin/v2/persistent/{ns}/p/partitions")[1] == {"partitions": 0}
    for broker in two.brokers:   # every partition was deleted, on whichever broker served it
        assert request_json("GET", f"{broker.admin_url}/admin/v2/persistent/{ns}") == []


def test_cli_gives_the_same_answers_against_either_broker(two: LocalCluster, capsys: pytest.CaptureFixture) -> None:
    ns = f"public/{unique('same')}"
    assert run_admin(["--admin-url", two.brokers[1].admin_url, "namespaces", "create", ns, "-b", "8"]) == 0
    on = topics_on_each_broker(two, ns)
    client = quiet_client(two.service_url)
    try:
        for topics in on.values():     # the topics exist (stats answer 404 for a topic nobody made)
            client.create_producer(f"persistent://{topics[0]}").send(b"x")
    finally:
        client.close()
    questions = [["namespaces", "bundles", ns], ["brokers", "list"], ["brokers", "leader-broker"],
                 ["clusters", "list"], ["topics", "list", ns]]
    for topics in on.values():
        questions += [["topics", "lookup", topics[0]], ["topics", "bundle-range", topics[0]],
                      ["topics", "get-retention", topics[0]], ["topics", "stats", topics[0]]]
    for question in questions:
        answers = []
        for broker in two.brokers:
            assert run_admin(["--admin-url", broker.admin_url, *question]) == 0, question
            text = capsys.readouterr().out
            answer = json.loads(text) if text.strip() else None       # None: nothing printed
            if question[1] == "stats":      # rates and times move between two calls
                answer = {k: answer[k] for k in ("publishers", "subscriptions", "msgInCounter")}
            answers.append(answer)
        assert answers[0] == answers[1], question
    assert sorted(json.loads(json.dumps(request_json("GET", f"{two.brokers[0].admin_url}/admin/v2/brokers")))) == \
        sorted(b.web_id for b in two.brokers)


def test_with_the_owner_dead_a_call_finds_no_owner(two: LocalCluster) -> None:
    """Last in the module: it kills a broker. Until its lease runs out, its bundles are neither its
    (it is gone) nor anyone else's: a topic call is answered 412 with Pulsar's reason."""
    ns = f"public/{unique('dead')}"
    assert request_json("PUT", f"{two.brokers[0].admin_url}/admin/v2/namespaces/{ns}",
                        {"bundles": {"numBundles": 8}}) is None
    on = topics_on_each_broker(two, ns)
    victim, survivor = two.brokers[1], two.brokers[0]
    topic = on[victim.service_url][0]
    victim.kill9()
    # (307 to the victim for as long as the survivor's last probe of it, half a second, is fresh)
    status, answer, _ = wait_until(lambda: (lambda got: got if got[0] != 307 else None)(
        http(f"{survivor.admin_url}/admin/v2/persistent/{topic}/retention")), 3, what="an answer but a 307")
    assert status == 412, (status, answer)
    assert answer == {"reason": f"Can't find owner for topic persistent://{topic}"}
    # once the lease has run out, the survivor takes the bundle
    wait_until(lambda: http(f"{survivor.admin_url}/admin/v2/persistent/{topic}/retention")[0] == 200,
               LEASE_MS / 1000 + 10, what="the survivor owning the dead broker's bundle")
