"""pulsar+ssl:// on a real 2-broker cluster: lookups answer the owner's TLS URL, official client.

Both brokers serve a TLS port (`broker_tls_port` 0: any free port; the kit's certificate names
localhost and 127.0.0.1). A client given broker A's pulsar+ssl:// URL, hostname validation on,
produces to and consumes from topics owned by A and by B: the LOOKUP answers (Connect for A's own
bundles, Redirect or Connect for B's) carry B's TLS URL from B's registry entry or ownership
record, and the C++ client, which connects only to `brokerServiceUrlTls` over TLS, follows them.
Both serve admin https:// too: a topic's admin call sent to A over https:// is redirected to B's
https:// URL (its registry entry's `webServiceUrlTls`), never to its plain http:// one, and lookups
answer `httpUrlTls`.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator

import pulsar
import pytest

from admin_client import Credentials, request_json
from proto import pulsar_api_pb2 as pb
from tests.cluster.conftest import broker_tracebacks, start_cluster, unique
from tests.cluster.helpers import lookup, make_client
from tests.support.admin_http import exchange
from tests.support.cluster_proc import BrokerProcess, LocalCluster
from tests.support.raw_client import RawClient
from tests.support.security import SecurityKit
from wire.pulsar import CommandType as T

PLACEMENT_TRIES = 40
TLS_URL = re.compile(r"TLS service URL (pulsar\+ssl://\S+)")
ADMIN_TLS_URL = re.compile(r"admin TLS URL (https://\S+)")


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> SecurityKit:
    return SecurityKit.create(tmp_path_factory.mktemp("tls-kit"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, kit: SecurityKit) -> Iterator[LocalCluster]:
    env = {"STRATA_BROKER_TLS_PORT": "0", "STRATA_BROKER_ADMIN_TLS_PORT": "0",
           "STRATA_TLS_CERT_FILE": str(kit.server_cert), "STRATA_TLS_KEY_FILE": str(kit.server_key)}
    c = start_cluster(tmp_path_factory.mktemp("tls") / "c", env=env)
    try:
        yield c
        problems = broker_tracebacks(c)
    finally:
        c.stop()
    assert not problems, "a broker logged a traceback:\n" + "\n".join(problems)


def tls_url(broker: BrokerProcess) -> str:
    found = TLS_URL.findall(broker.log_path.read_text(errors="replace"))
    assert found, f"{broker.name} printed no TLS service URL"
    return found[-1]


def _topic_owned_by(cluster: LocalCluster, owner: BrokerProcess) -> str:
    for _ in range(PLACEMENT_TRIES):
        topic = f"persistent://public/default/{unique('tls')}"
        if lookup(cluster.brokers[0].admin_url, topic)["brokerUrl"] == owner.service_url:
            return topic
    raise AssertionError(f"no topic landed on {owner.name} in {PLACEMENT_TRIES} lookups")


def test_lookups_on_one_broker_answer_the_owners_tls_url(cluster: LocalCluster) -> None:
    a, b = cluster.brokers
    topic = _topic_owned_by(cluster, b)
    raw = RawClient(a.port)
    try:
        raw.connect()
        raw.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=topic, request_id=1)))
        answer = raw.next_command().lookupTopicResponse
    finally:
        raw.close()
    assert (answer.brokerServiceUrl, answer.brokerServiceUrlTls) == (b.service_url, tls_url(b))
    assert lookup(a.admin_url, topic)["brokerUrlTls"] == tls_url(b)


def test_a_tls_client_of_one_broker_reaches_topics_owned_by_both(cluster: LocalCluster, kit: SecurityKit) -> None:
    a, b = cluster.brokers
    client = make_client(tls_url(a).replace("127.0.0.1", "localhost"), tls_trust_certs_file_path=str(kit.ca_file),
                         tls_validate_hostname=True)
    try:
        for owner in (a, b):
            topic = _topic_owned_by(cluster, owner)
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = client.create_producer(topic)
            producer.send(owner.name.encode())
            assert consumer.receive(timeout_millis=10_000).data() == owner.name.encode()
    finally:
        client.close()


def _get_no_redirect(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    answer = exchange("GET", url, credentials=Credentials(ssl_context=context), follow=False)
    return answer.status, answer.header("Location")


def test_a_topic_admin_call_over_https_is_redirected_to_the_owners_https_url(cluster: LocalCluster,
                                                                              kit: SecurityKit) -> None:
    a, b = cluster.brokers
    https_a, https_b = (ADMIN_TLS_URL.findall(x.log_path.read_text(errors="replace"))[-1] for x in (a, b))
    topic = _topic_owned_by(cluster, b)
    path = "/admin/v2/persistent/" + topic.removeprefix("persistent://") + "/stats"
    context = ssl.create_default_context(cafile=str(kit.ca_file))
    status, location = _get_no_redirect(https_a + path, context)
    assert status == 307 and location.startswith(https_b + path), (status, location)
    status, location = _get_no_redirect(a.admin_url + path)           # plain stays plain
    assert status == 307 and location.startswith(b.admin_url + path), (status, location)
    assert lookup(a.admin_url, topic)["httpUrlTls"] == https_b
    cluster_data = request_json("GET", f"{a.admin_url}/admin/v2/clusters/standalone")
    assert cluster_data["serviceUrlTls"] == https_a     # ClusterData, as `clusters get` shows
