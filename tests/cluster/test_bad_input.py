"""Bad input to a real 2-broker cluster (issue 14, item 8): each case gets a clear error, and the
cluster keeps serving.

- a bundle count out of range (namespace create with 0, -1, 129 or 1000 bundles) → 412 with a
  reason, and the refused count is not stored;
- unloading a bundle the namespace does not have → 404/412 with a reason;
- a split on a bundle no broker owns → 412 with a reason (and one owned by the other broker
  → 307 to it);
- a broker started with another live broker's advertised address exits non-zero with a one-line
  error naming the address, and the live broker keeps its registration;
- a malformed lookup: over HTTP → 400/412 with a reason; over the binary protocol → a Failed
  LOOKUP_RESPONSE with InvalidTopicName (the connection stays usable).
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse

import pytest

from proto import pulsar_api_pb2 as pb
from tests.cluster.conftest import LEASE_MS, unique
from tests.cluster.helpers import MetadataView, http, lookup
from tests.support.cluster_proc import LocalCluster
from tests.support.raw_client import RawClient
from wire.pulsar import CommandType as T

IMPOSTER_EXIT_TIMEOUT_S = 30.0
IMPOSTER_BIND_HOST = "127.0.0.2"   # its own address, so only the advertised one clashes


def _create_namespace(admin_url: str, namespace: str, policies: object = None) -> object:
    return http("PUT", f"{admin_url}/admin/v2/namespaces/{namespace}", policies, follow=True)


@pytest.mark.parametrize("count", [0, 1000, 129, -1])
def test_bundle_count_out_of_range_is_refused(cluster: LocalCluster, count: int) -> None:
    a = cluster.brokers[0]
    namespace = f"public/{unique('badcount')}"
    answer = http("PUT", f"{a.admin_url}/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": count}})
    assert answer.status == 412, (answer.status, answer.body)
    assert answer.reason, f"412 without a reason: {answer.body!r}"
    # a refused create leaves no namespace (nothing else creates one)
    bundles = http("GET", f"{a.admin_url}/admin/v2/namespaces/{namespace}/bundles")
    assert bundles.status == 404, ("a refused create left bundles behind", bundles.status, bundles.body)


def test_namespace_create_in_range_and_twice(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    namespace = f"public/{unique('goodcount')}"
    created = http("PUT", f"{a.admin_url}/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": 128}})
    assert created.status == 204, (created.status, created.body)
    again = http("PUT", f"{b.admin_url}/admin/v2/namespaces/{namespace}", {"bundles": {"numBundles": 4}})
    assert again.status == 409, (again.status, again.body)
    bundles = http("GET", f"{b.admin_url}/admin/v2/namespaces/{namespace}/bundles")
    assert bundles.status == 200 and bundles.json()["numBundles"] == 128, (bundles.status, bundles.body)


@pytest.mark.parametrize("bundle", ["0x00000000_0x00000001", "0x40000000_0x80000001", "not-a-bundle",
                                    "0x80000000_0x40000000"])
def test_unloading_an_unknown_bundle_is_refused(cluster: LocalCluster, bundle: str) -> None:
    a = cluster.brokers[0]
    namespace = f"public/{unique('unknownb')}"
    assert _create_namespace(a.admin_url, namespace, {"bundles": {"numBundles": 4}}).status == 204
    answer = http("PUT", f"{a.admin_url}/admin/v2/namespaces/{namespace}/{bundle}/unload")
    assert answer.status in (400, 404, 412), (answer.status, answer.body)
    assert answer.reason, f"{answer.status} without a reason: {answer.body!r}"


def test_split_of_a_bundle_nobody_owns_is_refused(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    namespace = f"public/{unique('split')}"
    assert _create_namespace(a.admin_url, namespace, {"bundles": {"numBundles": 4}}).status == 204
    boundaries = http("GET", f"{a.admin_url}/admin/v2/namespaces/{namespace}/bundles").json()["boundaries"]
    bundle = f"{boundaries[0]}_{boundaries[1]}"
    for broker in (a, b):
        answer = http("PUT", f"{broker.admin_url}/admin/v2/namespaces/{namespace}/{bundle}/split")
        assert answer.status == 412, (broker.name, answer.status, answer.body)
        assert answer.reason, f"412 without a reason: {answer.body!r}"
    after = http("GET", f"{b.admin_url}/admin/v2/namespaces/{namespace}/bundles").json()
    assert after["numBundles"] == 4, ("a refused split changed the bundles", after)


def test_split_on_the_broker_that_does_not_own_the_bundle_is_redirected(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    namespace = f"public/{unique('split2')}"
    assert _create_namespace(a.admin_url, namespace, {"bundles": {"numBundles": 4}}).status == 204
    topic = f"persistent://{namespace}/{unique('t')}"
    owner_url = lookup(a.admin_url, topic)["brokerUrl"]
    owner, other = (a, b) if owner_url == a.service_url else (b, a)
    bundle = http("GET", f"{a.admin_url}/lookup/v2/topic/persistent/{namespace}/{topic.rsplit('/', 1)[1]}/bundle",
                  follow=True).json()
    path = f"/admin/v2/namespaces/{namespace}/{bundle}/split?unload=false"
    wrong = http("PUT", other.admin_url + path)
    assert wrong.status == 307 and wrong.location.startswith(owner.admin_url), (wrong.status, wrong.location,
                                                                                 wrong.body)
    done = http("PUT", other.admin_url + path, follow=True)
    assert done.status == 204, (done.status, done.body)
    after = http("GET", f"{a.admin_url}/admin/v2/namespaces/{namespace}/bundles").json()
    assert after["numBundles"] == 5, after


def test_broker_with_another_live_brokers_address_exits(cluster: LocalCluster, metadata: MetadataView) -> None:
    a = cluster.brokers[0]
    before = metadata.brokers()[a.web_id]
    env = {**os.environ, "STRATA_METADATA_SESSION_LEASE_MS": str(LEASE_MS), "PYTHONUNBUFFERED": "1",
           "STRATA_BROKER_BIND_HOST": IMPOSTER_BIND_HOST, "STRATA_BROKER_ADMIN_BIND_HOST": IMPOSTER_BIND_HOST,
           "STRATA_BROKER_ADVERTISED_HOST": "127.0.0.1"}
    cmd = [sys.executable, "-m", "cli.main", "broker", "--metadata-url", cluster.metadata_url,
           "--port", str(a.port), "--admin-port", str(a.admin_port), "--advertised-host", "127.0.0.1"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=IMPOSTER_EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"a broker with {a.web_id}'s address was still running after "
                             f"{IMPOSTER_EXIT_TIMEOUT_S} s:\n{exc.stdout!r}\n{exc.stderr!r}") from None
    output = done.stdout + done.stderr
    assert done.returncode != 0, f"the imposter exited 0:\n{output}"
    assert a.web_id in output or a.broker_id in output, f"the error does not name the address:\n{output}"
    assert "Traceback" not in output, f"a stack trace instead of a clear error:\n{output}"
    # (found here, fixed in d15a5bd: the refused broker's unregister() deleted the live one's key)
    after = metadata.brokers().get(a.web_id)
    assert after is not None, f"the refused broker deleted {a.web_id}'s registration on its way out"
    assert after[1] == before[1], "the live broker's registration changed hands"
    assert lookup(a.admin_url, f"persistent://public/default/{unique('alive')}")["brokerUrl"]


@pytest.mark.parametrize("local", ["bad*name", "a b", "x?y=1"])
def test_malformed_lookup_over_http(cluster: LocalCluster, local: str) -> None:
    a = cluster.brokers[0]
    path = f"/lookup/v2/topic/persistent/public/default/{urllib.parse.quote(local, safe='')}"
    answer = http("GET", a.admin_url + path)
    assert answer.status in (400, 412), (answer.status, answer.body)
    assert answer.reason, f"{answer.status} without a reason: {answer.body!r}"


@pytest.mark.parametrize("topic", ["persistent://public/default/bad*name", "persistent://public",
                                   "persistent://public/default/", "nonsense://public/default/t",
                                   "persistent://pub lic/default/t"])
def test_malformed_lookup_over_the_binary_protocol(cluster: LocalCluster, topic: str) -> None:
    for broker in cluster.brokers:
        client = RawClient(broker.port)
        try:
            client.connect()
            client.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(
                topic=topic, request_id=11, authoritative=False)))
            reply = client.next_command()
            assert reply.type == T.LOOKUP_RESPONSE, reply
            r = reply.lookupTopicResponse
            assert r.request_id == 11
            assert r.response == pb.CommandLookupTopicResponse.Failed, r
            assert r.error == pb.InvalidTopicName, r
            assert r.message, r
            # the connection is still usable: a good lookup on it is answered
            good = f"persistent://public/default/{unique('good')}"
            client.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(
                topic=good, request_id=12, authoritative=False)))
            reply = client.next_command()
            assert reply.type == T.LOOKUP_RESPONSE and reply.lookupTopicResponse.response in (
                pb.CommandLookupTopicResponse.Connect, pb.CommandLookupTopicResponse.Redirect), reply
        finally:
            client.close()
