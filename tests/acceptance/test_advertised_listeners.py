"""Advertised listeners on a real standalone, with the official client (pulsar-client 3.13.0).

The standalone advertises `internal:pulsar://127.0.0.1:<port>` and
`external:pulsar://localhost:<port>` (two names for its one `broker_port`, so a client sent to
either can really connect, and which one a lookup answered is visible in the URL),
`direct:pulsar://127.0.0.1:<another port>` (a local address on a port of its own, which the broker
listens on too) and `nat:pulsar://192.0.2.10:6650` (not an address of this machine: advertised only).
- LOOKUP without a listener name answers the internal URL; with `listener_name='external'` the
  client is answered (and connects to) the external URL, and produces and consumes through it.
- An unknown listener name is refused at once (NotAllowedError, Pulsar's message naming the
  listener), not retried until the operation timeout, and not accepted silently.
- The HTTP lookup takes `?listenerName=` or the `X-Pulsar-ListenerName` header (the query wins).
- The registry entry and the ownership record carry the listeners (Pulsar's JSON shape).
- A client with `listener_name='direct'` is sent to, and works through, the listener's own port.
- A malformed setting stops the standalone at start with a message naming the entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from metadata import open_store
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client, receive_all
from tests.support.admin_http import admin_call, exchange
from tests.support.raw_client import RawClient
from tests.support.standalone_proc import REPO_ROOT, StandaloneProcess, free_port
from wire.pulsar import CommandType as T

FAST_FAILURE_S = 5.0     # an unknown listener fails well inside the client's operation timeout
NAT_URL = "pulsar://192.0.2.10:6650"    # TEST-NET-1: never an address of this machine
KNOWN = "direct, external, internal, nat"


@pytest.fixture(scope="module")
def direct_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory, direct_port: int) -> Iterator[StandaloneProcess]:
    sa = StandaloneProcess(tmp_path_factory.mktemp("listeners") / "data", False)
    sa.env["STRATA_ADVERTISED_LISTENERS"] = (f"internal:pulsar://127.0.0.1:{sa.port},"
                                             f"external:pulsar://localhost:{sa.port},"
                                             f"direct:pulsar://127.0.0.1:{direct_port},nat:{NAT_URL}")
    with sa:
        sa.launch()
        yield sa


def _external(sa: StandaloneProcess) -> str:
    return f"pulsar://localhost:{sa.port}"


def _raw_lookup(sa: StandaloneProcess, topic: str, listener: str) -> pb.CommandLookupTopicResponse:
    raw = RawClient(sa.port)
    try:
        raw.connect()
        raw.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(
            topic=topic, request_id=7, advertised_listener_name=listener)))
        reply = raw.next_command()
        assert reply.type == T.LOOKUP_RESPONSE, reply
        return reply.lookupTopicResponse
    finally:
        raw.close()


def test_lookup_answers_the_named_listener(standalone: StandaloneProcess, topic: str) -> None:
    plain = _raw_lookup(standalone, topic, "")
    assert (plain.response, plain.brokerServiceUrl) == (pb.CommandLookupTopicResponse.Connect, standalone.service_url)
    external = _raw_lookup(standalone, topic, "external")
    assert (external.response, external.brokerServiceUrl) == (pb.CommandLookupTopicResponse.Connect,
                                                              _external(standalone))
    assert _raw_lookup(standalone, topic, "internal").brokerServiceUrl == standalone.service_url
    unknown = _raw_lookup(standalone, topic, "nope")
    assert unknown.response == pb.CommandLookupTopicResponse.Failed
    assert unknown.error == pb.NotAllowedError
    assert unknown.message == f"the broker do not have nope listener (its advertised listeners: {KNOWN})"


def test_official_client_with_a_listener_name_produces_and_consumes(standalone: StandaloneProcess, topic: str) -> None:
    client = make_client(standalone.service_url, listener_name="external")
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for i in range(10):
            producer.send(f"m{i}".encode())
        assert [m.data() for m in receive_all(consumer, 10)] == [f"m{i}".encode() for i in range(10)]
        stats = admin_call(standalone.admin_url, "GET", f"/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")[1]
        assert stats["publishers"][0]["address"].startswith("/127.0.0.1:")   # connected, via localhost
    finally:
        client.close()


def test_official_client_with_an_unknown_listener_is_refused_at_once(standalone: StandaloneProcess, topic: str) -> None:
    client = make_client(standalone.service_url, listener_name="nope", operation_timeout_seconds=30)
    try:
        started = time.monotonic()
        with pytest.raises(pulsar.NotAllowedError):
            client.create_producer(topic)
        assert time.monotonic() - started < FAST_FAILURE_S
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe(topic, "sub")
    finally:
        client.close()
    assert admin_call(standalone.admin_url, "GET", "/admin/v2/persistent/public/default")[1].count(topic) == 0


def _http_lookup(sa: StandaloneProcess, topic: str, query: str = "", header: str | None = None) -> tuple[int, dict]:
    url = f"{sa.admin_url}/lookup/v2/topic/persistent/{topic.split('://', 1)[1]}{query}"
    answer = exchange("GET", url, headers={"X-Pulsar-ListenerName": header} if header else None)
    return answer.status, answer.json()


def test_http_lookup_takes_the_listener_from_the_query_or_the_header(standalone: StandaloneProcess, topic: str) -> None:
    assert _http_lookup(standalone, topic)[1]["brokerUrl"] == standalone.service_url
    status, data = _http_lookup(standalone, topic, "?listenerName=external")
    assert status == 200 and data["brokerUrl"] == data["nativeUrl"] == _external(standalone), data
    assert data["httpUrl"] == standalone.admin_url
    assert _http_lookup(standalone, topic, header="external")[1]["brokerUrl"] == _external(standalone)
    assert _http_lookup(standalone, topic, "?listenerName=internal", header="external")[1]["brokerUrl"] == \
        standalone.service_url
    status, body = _http_lookup(standalone, topic, "?listenerName=nope")
    assert status == 404
    assert body == {"reason": f"the broker do not have nope listener (its advertised listeners: {KNOWN})"}


def test_records_carry_the_listeners(standalone: StandaloneProcess, topic: str) -> None:
    _http_lookup(standalone, topic)   # the bundle is owned now
    expected = {"internal": {"brokerServiceUrl": standalone.service_url, "brokerServiceUrlTls": "",
                             "brokerHttpUrl": "", "brokerHttpsUrl": ""},
                "external": {"brokerServiceUrl": _external(standalone), "brokerServiceUrlTls": "",
                             "brokerHttpUrl": "", "brokerHttpsUrl": ""}}
    store = open_store(standalone.metadata_url)
    try:
        brokers = [json.loads(v.value) for _, v in store.list_prefix("/loadbalance/brokers")]
        owners = [json.loads(v.value) for _, v in store.list_prefix("/namespace/public/default")]
    finally:
        store.close()
    assert [{n: b["advertisedListeners"][n] for n in expected} for b in brokers] == [expected]
    assert [sorted(b["advertisedListeners"]) for b in brokers] == [KNOWN.split(", ")]
    assert owners and all(o["advertisedListeners"] == brokers[0]["advertisedListeners"] for o in owners), owners


def test_a_malformed_setting_stops_the_broker_at_start(tmp_path: Path) -> None:
    env = {**os.environ, "STRATA_ADVERTISED_LISTENERS": "external:pulsar://localhost"}
    done = subprocess.run([sys.executable, "-m", "cli.main", "standalone", "--data-dir", str(tmp_path / "d"),
                           "--no-s3", "--port", "0", "--admin-port", "0"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "advertised_listeners entry 'external:pulsar://localhost': the URL needs a host and a port" in \
        done.stdout + done.stderr, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_listener_on_a_port_of_its_own_is_served_there(standalone: StandaloneProcess, direct_port: int,
                                                          topic: str) -> None:
    direct = f"pulsar://127.0.0.1:{direct_port}"
    assert _raw_lookup(standalone, topic, "direct").brokerServiceUrl == direct
    assert _raw_lookup(standalone, topic, "nat").brokerServiceUrl == NAT_URL    # advertised, not bound
    client = make_client(direct, listener_name="direct")     # lookups and data, all through that port
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        producer.send(b"via-direct")
        assert receive_all(consumer, 1)[0].data() == b"via-direct"
    finally:
        client.close()
