"""Tenants and namespaces as entities (broker.admin.tenants, broker.admin.namespaces, broker.records.tenancy)
against a real `strata standalone`: Pulsar's statuses and `{"reason"}` bodies, Policies JSON,
policy get/set/remove round trips (a getter answers the namespace's own value, null when unset),
`namespaces/{t}/{ns}/topics`, tenant-name errors of their own, plain and forced deletes, and a
topic in a namespace that does not exist refused over REST and with the official client
(pulsar-client 3.13 raises BrokerMetadataError for the broker's MetadataError "Policies not found
for <t>/<ns> namespace").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing

import pulsar
import pytest

from admin_client import request_json
from common.errors import PulsarServerError
from ledger.ml_metadata import ml_path
from metadata import open_store
from proto import pulsar_api_pb2 as pb
from tests.support.admin_http import call
from tests.support.cluster_proc import LocalCluster
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import StandaloneProcess
from tests.support.waiting import wait_until
from wire.pulsar import CommandType as T

HTTP_TIMEOUT_S = 30
CLUSTER = "standalone"


def http(url: str, method: str = "GET", body: object = None, raw: bytes | None = None) -> tuple[int, object]:
    """(status, decoded body); redirects are not expected from a standalone."""
    return call(method, url, body, raw=raw, timeout_s=HTTP_TIMEOUT_S)


def unique(prefix: str) -> str:
    unique.n = getattr(unique, "n", 0) + 1       # type: ignore[attr-defined]
    return f"{prefix}-{os.getpid()}-{unique.n}"  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    with StandaloneProcess.start(tmp_path_factory.mktemp("tenancy") / "data") as sa:
        yield sa


@pytest.fixture
def admin(standalone: StandaloneProcess) -> str:
    return standalone.admin_url + "/admin/v2"


def quiet_client(standalone: StandaloneProcess) -> pulsar.Client:
    return pulsar.Client(standalone.service_url, operation_timeout_seconds=10,
                         logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))


def new_tenant(admin: str) -> str:
    tenant = unique("tn")
    assert http(f"{admin}/tenants/{tenant}", "PUT", {"adminRoles": ["ops"], "allowedClusters": [CLUSTER]}) \
        == (204, None)
    return tenant


def new_namespace(admin: str, body: object = None) -> str:
    ns = f"{new_tenant(admin)}/{unique('ns')}"
    assert http(f"{admin}/namespaces/{ns}", "PUT", body) == (204, None)
    return ns


# --- tenants -------------------------------------------------------------------------------------

def test_public_and_public_default_exist_from_the_start(admin: str) -> None:
    assert "public" in http(f"{admin}/tenants")[1]
    assert http(f"{admin}/tenants/public") == (200, {"adminRoles": [], "allowedClusters": [CLUSTER]})
    assert "public/default" in http(f"{admin}/namespaces/public")[1]
    status, policies = http(f"{admin}/namespaces/public/default")
    assert status == 200 and policies["bundles"]["numBundles"] == 4


def test_tenant_create_get_update_list_delete(admin: str) -> None:
    tenant = unique("t")
    url = f"{admin}/tenants/{tenant}"
    assert http(url) == (404, {"reason": "Tenant does not exist"})
    assert http(url, "PUT", {"adminRoles": ["b", "a"], "allowedClusters": [CLUSTER]}) == (204, None)
    assert http(url) == (200, {"adminRoles": ["a", "b"], "allowedClusters": [CLUSTER]})
    assert tenant in http(f"{admin}/tenants")[1]
    assert http(url, "PUT", {"adminRoles": [], "allowedClusters": [CLUSTER]}) \
        == (409, {"reason": "Tenant already exists"})
    assert http(url, "POST", {"adminRoles": ["c"], "allowedClusters": [CLUSTER]}) == (204, None)
    assert http(url)[1] == {"adminRoles": ["c"], "allowedClusters": [CLUSTER]}
    assert http(url, "DELETE") == (204, None)
    assert http(url) == (404, {"reason": "Tenant does not exist"})
    assert tenant not in http(f"{admin}/tenants")[1]
    assert http(url, "DELETE")[0] == 404
    assert http(url, "POST", {"adminRoles": [], "allowedClusters": [CLUSTER]})[0] == 404


@pytest.mark.parametrize(("body", "status", "reason"), [
    ({"adminRoles": [], "allowedClusters": ["elsewhere"]}, 412, "Clusters do not exist"),
    ({"adminRoles": [], "allowedClusters": [CLUSTER, "elsewhere"]}, 412, "Clusters do not exist"),
    ({"adminRoles": [], "allowedClusters": []}, 412, "Clusters can not be empty"),
    (None, 400, "a tenant is"),
    ({"adminRoles": "ops", "allowedClusters": [CLUSTER]}, 400, "adminRoles must be"),
    ([CLUSTER], 400, "a tenant is"),
])
def test_tenant_bad_bodies_are_refused_and_store_nothing(admin: str, body: object, status: int,
                                                         reason: str) -> None:
    tenant = unique("bad")
    got_status, answer = http(f"{admin}/tenants/{tenant}", "PUT", body)
    assert got_status == status and answer["reason"].startswith(reason), answer
    assert http(f"{admin}/tenants/{tenant}")[0] == 404


def test_tenant_bad_name_is_400(admin: str) -> None:
    for raw_name in ("sp%20ace", "a%3Fb", "%C3%A9", "bad%2Fname"):
        status, answer = http(f"{admin}/tenants/{raw_name}", "PUT", {"adminRoles": [], "allowedClusters": [CLUSTER]})
        assert status == 400, raw_name
        assert answer["reason"].startswith("Tenant name is not valid: "), answer   # not a namespace's words
        assert "namespace" not in answer["reason"], answer
    status, answer = http(f"{admin}/namespaces/bad%2Fname")
    assert status == 400 and answer["reason"].startswith("Tenant name is not valid: 'bad/name'"), answer


def test_tenant_with_namespaces_is_deleted_only_by_force(admin: str, standalone: StandaloneProcess) -> None:
    ns = new_namespace(admin)
    tenant = ns.split("/")[0]
    assert http(f"{admin}/persistent/{ns}/t/partitions", "PUT", 2) == (204, None)
    with closing(quiet_client(standalone)) as client:
        client.create_producer(f"persistent://{ns}/plain").send(b"x")
    assert http(f"{admin}/tenants/{tenant}", "DELETE") == (409, {"reason": "The tenant still has active namespaces"})
    assert http(f"{admin}/namespaces/{ns}")[0] == 200
    assert http(f"{admin}/tenants/{tenant}?force=true", "DELETE") == (204, None)
    assert http(f"{admin}/tenants/{tenant}")[0] == 404
    assert http(f"{admin}/namespaces/{ns}") == (404, {"reason": "Namespace does not exist"})
    # everything can be made again under the same names, empty
    new = http(f"{admin}/tenants/{tenant}", "PUT", {"adminRoles": [], "allowedClusters": [CLUSTER]})
    assert new == (204, None)
    assert http(f"{admin}/namespaces/{ns}", "PUT") == (204, None)
    assert http(f"{admin}/persistent/{ns}") == (200, [])
    assert http(f"{admin}/persistent/{ns}/partitioned") == (200, [])


# --- namespaces ----------------------------------------------------------------------------------

def test_namespace_create_list_policies_delete(admin: str) -> None:
    tenant = new_tenant(admin)
    ns = f"{tenant}/{unique('ns')}"
    assert http(f"{admin}/namespaces/{tenant}") == (200, [])
    assert http(f"{admin}/namespaces/{ns}", "PUT", {"bundles": {"numBundles": 2}}) == (204, None)
    assert http(f"{admin}/namespaces/{tenant}") == (200, [ns])
    assert http(f"{admin}/namespaces/{ns}", "PUT") == (409, {"reason": "Namespace already exists"})
    status, policies = http(f"{admin}/namespaces/{ns}")
    assert status == 200
    assert policies["bundles"] == {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2}
    assert policies["auth_policies"] == {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}}
    assert policies["replication_clusters"] == [CLUSTER]
    assert policies["schema_compatibility_strategy"] == "UNDEFINED"
    assert policies["deleted"] is False
    assert policies["retention_policies"] is None and policies["message_ttl_in_seconds"] is None
    assert policies["deduplicationEnabled"] is None
    assert policies["offload_threshold"] == -1 and policies["offload_threshold_in_seconds"] == -1
    assert policies["offload_deletion_lag_ms"] is None and policies["offload_policies"] is None
    assert http(f"{admin}/namespaces/{ns}", "DELETE") == (204, None)
    assert http(f"{admin}/namespaces/{ns}") == (404, {"reason": "Namespace does not exist"})
    assert http(f"{admin}/namespaces/{tenant}") == (200, [])
    assert http(f"{admin}/namespaces/{ns}", "DELETE") == (404, {"reason": "Namespace does not exist"})


def test_namespace_of_unknown_tenant_is_404(admin: str) -> None:
    tenant = unique("nobody")
    assert http(f"{admin}/namespaces/{tenant}/ns", "PUT") == (404, {"reason": "Tenant does not exist"})
    assert http(f"{admin}/namespaces/{tenant}") == (404, {"reason": "Tenant does not exist"})


def test_namespace_created_from_a_whole_policies_body(admin: str) -> None:
    body = {"bundles": {"numBundles": 8}, "retention_policies": {"retentionTimeInMinutes": 60,
                                                                   "retentionSizeInMB": 100},
            "message_ttl_in_seconds": 3600, "deduplicationEnabled": True, "offload_threshold": 1 << 20,
            "offload_deletion_lag_ms": 60_000, "replication_clusters": [CLUSTER],
            "auth_policies": {"namespace_auth": {}}, "schema_compatibility_strategy": "UNDEFINED",
            "a_field_pulsar_does_not_know": 1}
    ns = new_namespace(admin, body)
    policies = http(f"{admin}/namespaces/{ns}")[1]
    assert policies["bundles"]["numBundles"] == 8
    assert policies["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert policies["message_ttl_in_seconds"] == 3600 and policies["deduplicationEnabled"] is True
    assert policies["offload_threshold"] == 1 << 20 and policies["offload_deletion_lag_ms"] == 60_000
    assert "a_field_pulsar_does_not_know" not in policies
    assert http(f"{admin}/namespaces/{ns}/retention")[1] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert http(f"{admin}/namespaces/{ns}/messageTTL")[1] == 3600
    assert http(f"{admin}/namespaces/{ns}/deduplication")[1] is True
    # what GET answers is a valid create body
    tenant = ns.split("/")[0]
    copy = f"{tenant}/{unique('copy')}"
    assert http(f"{admin}/namespaces/{copy}", "PUT", policies) == (204, None)
    again = http(f"{admin}/namespaces/{copy}")[1]
    assert again == policies


@pytest.mark.parametrize(("body", "status", "reason"), [
    ({"bundles": {"numBundles": 0}}, 412, "a namespace has 1..128 bundles"),
    ({"bundles": {"numBundles": 129}}, 412, "a namespace has 1..128 bundles"),
    ({"bundles": {"boundaries": ["0x00000000", "0x10000000"]}}, 412, "bundle boundaries must run"),
    ({"bundles": 4}, 400, "bundles must be"),
    ({"retention_policies": {"retentionTimeInMinutes": -2, "retentionSizeInMB": 1}}, 412, ""),
    ({"retention_policies": {"retentionTimeInMinutes": "1h", "retentionSizeInMB": 1}}, 400, ""),
    ({"message_ttl_in_seconds": -1}, 412, "invalid messageTTL"),
    ({"message_ttl_in_seconds": "1h"}, 400, "messageTTL must be"),
    ({"deduplicationEnabled": "yes"}, 400, "deduplicationEnabled must be"),
    ({"offload_threshold": 2**63}, 412, "invalid offload_threshold"),
    ({"replication_clusters": ["elsewhere"]}, 412, "Clusters do not exist"),
    ({"backlog_quota_map": {"destination_storage": {"limitSize": 10}}}, 400, "backlog quota policy must be"),
    ({"deleted": True}, 412, "the namespace policy deleted"),
    ([1, 2], 400, "a namespace's policies are a JSON object"),
])
def test_namespace_bad_bodies_are_refused_and_store_nothing(admin: str, body: object, status: int,
                                                            reason: str) -> None:
    ns = f"{new_tenant(admin)}/{unique('bad')}"
    got_status, answer = http(f"{admin}/namespaces/{ns}", "PUT", body)
    assert got_status == status and answer["reason"].startswith(reason), answer
    assert http(f"{admin}/namespaces/{ns}")[0] == 404


def test_namespace_bad_body_bytes_are_400(admin: str) -> None:
    ns = f"{new_tenant(admin)}/{unique('bad')}"
    status, answer = http(f"{admin}/namespaces/{ns}", "PUT", raw=b"{not json")
    assert status == 400 and answer["reason"] == "request body is not JSON"
    assert http(f"{admin}/namespaces/{ns}")[0] == 404


@pytest.mark.parametrize(("suffix", "method", "value", "unset"), [
    # unset: what Pulsar's Namespaces v2 answers for a namespace without its own value
    ("retention", "POST", {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5}, None),
    ("retention", "POST", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}, None),
    ("messageTTL", "POST", 120, None),
    ("messageTTL", "POST", 0, None),
    ("deduplication", "POST", True, None),
    ("deduplication", "POST", False, None),
    ("offloadThreshold", "PUT", 4096, -1),
    ("offloadThresholdInSeconds", "PUT", 60, -1),
    ("offloadDeletionLagMs", "PUT", 1000, None),
    ("offloadPolicies", "POST", {"managedLedgerOffloadThresholdInBytes": 10,
                                 "managedLedgerOffloadThresholdInSeconds": None,
                                 "managedLedgerOffloadDeletionLagInMillis": 5}, None),
])
def test_namespace_policy_get_set_remove(admin: str, suffix: str, method: str, value: object,
                                         unset: object) -> None:
    ns = new_namespace(admin)
    url = f"{admin}/namespaces/{ns}/{suffix}"
    before = http(url)
    assert before == (200, unset)
    assert http(url, method, value) == (204, None)
    assert http(url) == (200, value)
    assert http(url, "DELETE") == (204, None)
    assert http(url) == before
    # a namespace that does not exist: 404 for get, set and remove, and nothing is created
    missing = f"{admin}/namespaces/{ns}-missing/{suffix}"
    for verb, body in (("GET", None), (method, value), ("DELETE", None)):
        assert http(missing, verb, body) == (404, {"reason": "Namespace does not exist"}), verb
    assert http(f"{admin}/namespaces/{ns}-missing")[0] == 404


def test_namespace_getters_answer_its_own_value_not_the_effective_one(admin: str) -> None:
    """`public/default` has no policy of its own: Pulsar answers null for each (pulsar-admin prints
    null), not the broker's defaults (0, {0, 0}, false); the topic getters' `?applied=true` is
    where the effective value is. A value equal to the default is still the namespace's own."""
    base = f"{admin}/namespaces/public/default"
    for suffix in ("messageTTL", "retention", "deduplication"):
        assert http(f"{base}/{suffix}") == (200, None), suffix
    ns = new_namespace(admin)
    topic = f"{admin}/persistent/{ns}/t"
    assert http(f"{topic}/messageTTL?applied=true") == (200, 0)
    assert http(f"{topic}/retention?applied=true") == (200, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    assert http(f"{topic}/deduplicationEnabled?applied=true") == (200, False)
    assert http(f"{admin}/namespaces/{ns}/messageTTL", "POST", 0) == (204, None)
    assert http(f"{admin}/namespaces/{ns}/messageTTL") == (200, 0)
    assert http(f"{admin}/namespaces/{ns}")[1]["message_ttl_in_seconds"] == 0


def test_namespace_topics_lists_every_topic_and_partition(admin: str, standalone: StandaloneProcess) -> None:
    """Pulsar's `GET .../namespaces/{t}/{ns}/topics`: the namespace's topics as managed ledgers,
    so a partitioned topic is its partitions (created or not yet used), never its own name."""
    ns = new_namespace(admin)
    url = f"{admin}/namespaces/{ns}/topics"
    assert http(url) == (200, [])
    assert http(f"{admin}/persistent/{ns}/parted/partitions", "PUT", 3) == (204, None)
    with closing(quiet_client(standalone)) as client:
        client.create_producer(f"persistent://{ns}/plain").send(b"x")
        client.create_producer(f"persistent://{ns}/parted").send(b"y")
    expected = sorted([f"persistent://{ns}/plain"] + [f"persistent://{ns}/parted-partition-{i}" for i in range(3)])
    assert http(url) == (200, expected)
    assert http(url + "?mode=PERSISTENT") == (200, expected)
    assert http(url + "?mode=ALL&includeSystemTopic=true") == (200, expected)
    assert http(url + "?mode=NON_PERSISTENT") == (200, [])       # Strata has no non-persistent topics
    status, answer = http(url + "?mode=SOME")
    assert status == 400 and answer["reason"].startswith("mode must be one of PERSISTENT"), answer
    # partitions added later are listed at once; an unknown namespace is 404
    assert http(f"{admin}/persistent/{ns}/parted/partitions", "POST", 4) == (204, None)
    assert f"persistent://{ns}/parted-partition-3" in http(url)[1]
    assert http(f"{admin}/namespaces/{ns}-missing/topics") == (404, {"reason": "Namespace does not exist"})
    assert http(f"{admin}/namespaces/{ns}-missing")[0] == 404
    assert http(f"{admin}/namespaces/{ns}?force=true", "DELETE") == (204, None)
    assert http(url) == (404, {"reason": "Namespace does not exist"})


def test_namespace_with_topics_is_deleted_only_by_force(admin: str, standalone: StandaloneProcess) -> None:
    ns = new_namespace(admin, {"bundles": {"numBundles": 2}})
    assert http(f"{admin}/persistent/{ns}/parted/partitions", "PUT", 3) == (204, None)
    with closing(quiet_client(standalone)) as client:
        producer = client.create_producer(f"persistent://{ns}/live", send_timeout_millis=3000)
        consumer = client.subscribe(f"persistent://{ns}/parted", "s")
        producer.send(b"one")
        status, answer = http(f"{admin}/namespaces/{ns}", "DELETE")
        assert (status, answer) == (409, {"reason": "Cannot delete non empty namespace"})
        assert http(f"{admin}/namespaces/{ns}")[0] == 200
        assert f"persistent://{ns}/live" in http(f"{admin}/persistent/{ns}")[1]
        assert http(f"{admin}/namespaces/{ns}?force=true", "DELETE") == (204, None)
        assert http(f"{admin}/namespaces/{ns}") == (404, {"reason": "Namespace does not exist"})
        with pytest.raises(pulsar.exceptions.PulsarException):
            producer.send(b"two")     # told to go; its lookup is refused now
        consumer.close()
    # made again: empty, no topic and no partitioned topic left behind
    assert http(f"{admin}/namespaces/{ns}", "PUT") == (204, None)
    assert http(f"{admin}/persistent/{ns}") == (200, [])
    assert http(f"{admin}/persistent/{ns}/partitioned") == (200, [])
    with closing(quiet_client(standalone)) as client:
        reader = client.create_reader(f"persistent://{ns}/live", pulsar.MessageId.earliest)
        assert not reader.has_message_available()


# --- a topic in a namespace that does not exist --------------------------------------------------

def test_topic_of_unknown_namespace_is_refused_over_rest(admin: str) -> None:
    ns = f"public/{unique('typo')}"
    not_found = (404, {"reason": "Namespace does not exist"})
    assert http(f"{admin}/persistent/{ns}/t/partitions", "PUT", 2) == not_found
    assert http(f"{admin}/persistent/{ns}/t", "PUT") == not_found
    assert http(f"{admin}/persistent/{ns}/t/stats") == not_found
    assert http(f"{admin}/persistent/{ns}/t/retention", "POST",
                {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}) == not_found
    assert http(f"{admin}/persistent/{ns}") == not_found
    assert http(f"{standalone_lookup(admin)}/{ns}/t") == not_found
    assert http(f"{admin}/namespaces/{ns}") == not_found
    assert http(f"{admin}/namespaces/{ns}/bundles") == not_found


def standalone_lookup(admin: str) -> str:
    return admin.replace("/admin/v2", "/lookup/v2/topic/persistent")


def test_topic_of_unknown_namespace_is_refused_by_the_official_client(admin: str,
                                                                       standalone: StandaloneProcess) -> None:
    """pulsar-client 3.13 takes the broker's MetadataError ("Policies not found for <t>/<ns>
    namespace", logged as BrokerMetadataError) as retriable: it asks again until its operation
    timeout and then raises Timeout. Nothing is created meanwhile."""
    ns = f"public/{unique('typo')}"
    client = pulsar.Client(standalone.service_url, operation_timeout_seconds=2,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    with closing(client):
        with pytest.raises(pulsar.exceptions.Timeout):
            client.create_producer(f"persistent://{ns}/t")
        with pytest.raises(pulsar.exceptions.Timeout):
            client.subscribe(f"persistent://{ns}/t", "s")
    assert http(f"{admin}/namespaces/{ns}")[0] == 404
    assert http(f"{admin}/namespaces/{ns}/bundles")[0] == 404
    # created, it works at once
    assert http(f"{admin}/namespaces/{ns}", "PUT") == (204, None)
    with closing(quiet_client(standalone)) as client:
        client.create_producer(f"persistent://{ns}/t").send(b"ok")
    assert http(f"{admin}/persistent/{ns}") == (200, [f"persistent://{ns}/t"])


def test_unknown_namespace_over_the_binary_protocol_is_pulsars_metadata_error(standalone: StandaloneProcess) -> None:
    """LOOKUP, PARTITIONED_METADATA, PRODUCER and SUBSCRIBE answered MetadataError with Pulsar's
    message (raw frames)."""
    ns = f"public/{unique('typo')}"
    topic = f"persistent://{ns}/t"
    reason = f"Policies not found for {ns} namespace"
    client = RawClient(standalone.port)
    try:
        client.connect()
        client.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=topic, request_id=1)))
        lookup = client.next_command().lookupTopicResponse
        assert lookup.response == pb.CommandLookupTopicResponse.Failed
        assert (lookup.error, lookup.message) == (PulsarServerError.MetadataError, reason)
        client.send(pb.BaseCommand(type=T.PARTITIONED_METADATA, partitionMetadata=pb.CommandPartitionedTopicMetadata(
            topic=topic, request_id=2)))
        meta = client.next_command().partitionMetadataResponse
        assert meta.response == pb.CommandPartitionedTopicMetadataResponse.Failed
        assert (meta.error, meta.message) == (PulsarServerError.MetadataError, reason)
        reply = client.producer(topic, producer_id=1, request_id=3)
        assert reply.type == T.ERROR
        assert (reply.error.error, reply.error.message) == (PulsarServerError.MetadataError, reason)
        client.send(pb.BaseCommand(type=T.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="s", subType=pb.CommandSubscribe.Exclusive, consumer_id=1, request_id=4)))
        reply = client.next_command()
        assert reply.type == T.ERROR
        assert (reply.error.error, reply.error.message) == (PulsarServerError.MetadataError, reason)
    finally:
        client.close()


# --- two brokers ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster.start(tmp_path_factory.mktemp("tenancy-two") / "c", brokers=2, bookies=2, e=2, qw=2, qa=2,
                            lease_ms=4000) as cluster:
        yield cluster


def _owner(cluster: LocalCluster, topic: str) -> str:
    data = request_json("GET", f"{cluster.brokers[0].admin_url}/lookup/v2/topic/persistent/{topic}")
    assert isinstance(data, dict)
    return str(data["brokerUrl"])


def test_force_delete_reaches_every_owner_and_every_broker_refuses_after(two: LocalCluster) -> None:
    """A namespace created through one broker is used through the other at once; a forced delete
    through the first deletes the topics the second serves; then both refuse its topics (the
    other broker's cached "it exists" dropped by the store's watch within a second or so)."""
    a, b = two.brokers
    ns = f"public/{unique('two')}"
    assert http(f"{a.admin_url}/admin/v2/namespaces/{ns}", "PUT", {"bundles": {"numBundles": 8}}) == (204, None)
    owners: dict[str, list[str]] = {a.service_url: [], b.service_url: []}
    for i in range(64):
        owners[_owner(two, f"{ns}/t{i}")].append(f"{ns}/t{i}")
        if all(owners.values()):
            break
    assert all(owners.values()), owners
    topics = [names[0] for names in owners.values()]
    client = pulsar.Client(b.service_url, operation_timeout_seconds=10,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    with closing(client):
        for topic in topics:
            client.create_producer(f"persistent://{topic}").send(b"x")
    listed = http(f"{b.admin_url}/admin/v2/persistent/{ns}")[1]
    assert sorted(listed) == sorted(f"persistent://{t}" for t in topics)
    assert http(f"{a.admin_url}/admin/v2/namespaces/{ns}", "DELETE")[0] == 409
    assert http(f"{a.admin_url}/admin/v2/namespaces/{ns}?force=true", "DELETE") == (204, None)
    for broker in (a, b):
        wait_until(lambda broker=broker: http(f"{broker.admin_url}/lookup/v2/topic/persistent/{topics[0]}")[0] == 404,
                   10, what=f"{broker.name} to refuse the deleted namespace's topics")
        assert http(f"{broker.admin_url}/admin/v2/namespaces/{ns}") == (404, {"reason": "Namespace does not exist"})
    view = open_store(two.metadata_url)
    try:
        left = [path for root in ("/admin/policies", "/admin/local-policies", "/admin/partitioned-topics",
                                  "/admin/topic-policies", "/topics", "/namespace")
                for path, _ in view.list_prefix(f"{root}/{ns}")]
        left += [path for t in topics for path, _ in view.list_prefix(ml_path(f"{t.rsplit('/', 1)[0]}/persistent/"
                                                                             f"{t.rsplit('/', 1)[1]}"))]
    finally:
        view.close()
    assert left == [], left
