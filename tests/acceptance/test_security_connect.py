"""Authentication on the binary protocol, plain and TLS, with the official client (pulsar-client 3.13).

One standalone (tests/support/security.py's kit: token, tls and basic providers, authorization off so
only authentication is tested here) serves `pulsar://` and `pulsar+ssl://`:
- token, TLS (hostname validated), mTLS and basic clients each produce and consume;
- a wrong token, one signed with another key, an expired one, a wrong password and no credentials get
  pulsar.AuthenticationError at once (well inside the operation timeout, never a Timeout); a client
  certificate from another CA is refused by the TLS handshake itself (as Pulsar's), never connected;
- a raw client (not C++-based) refused at CONNECT gets Pulsar's ERROR{request_id -1, AuthenticationError,
  "Failed to authenticate"} and the connection closes; a frame sent while CONNECT is being
  authenticated closes it too;
- a token that expires while connected is refreshed through AUTH_CHALLENGE (the client's token
  supplier is asked again) and the producer keeps its connection; a client that cannot refresh is
  disconnected once its token expires; an AUTH_RESPONSE with another role's token closes the connection;
- LOOKUP (binary and HTTP) answers the broker's pulsar+ssl:// URL beside its plain one, and its
  registry entry and ownership records carry it (what a lookup on another broker answers from);
- 50 sockets on the TLS port, half silent and half sending garbage, do not keep a real client from
  connecting and producing within a few seconds, and the silent ones are dropped by the handshake
  timeout (the plain port's by authentication_connect_timeout_ms).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pulsar
import pytest

from admin_client import Credentials, request_json
from auth import certs
from metadata import open_store
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client, receive_all
from tests.support.raw_client import RawClient
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port
from wire.pulsar import CommandType as T
from wire.pulsar import encode_command

REFRESH_CHECK_MS = 200           # how often the broker looks for expired credentials (test setting)
CONNECT_TIMEOUT_MS = 2000        # accept -> CONNECTED, and an AUTH_CHALLENGE's answer (test setting)
HANDSHAKE_TIMEOUT_MS = 2000      # TLS handshake (test setting)
FAST_FAILURE_S = 5.0             # a refused client fails well inside its operation timeout (a loaded machine)
OPERATION_TIMEOUT_S = 10
SLOW_LORIS_CLIENT_S = 5.0        # a real client connects and produces within this beside 50 bad sockets
TOKEN_LIFETIME_S = 2             # short-lived tokens of the refresh tests (JWT exp is whole seconds)


class Secured:
    """The secured standalone, its kit and its TLS port."""

    def __init__(self, sa: StandaloneProcess, kit: SecurityKit, tls_port: int) -> None:
        self.sa, self.kit, self.tls_port = sa, kit, tls_port

    @property
    def plain_url(self) -> str:
        return self.sa.service_url

    @property
    def tls_url(self) -> str:
        return f"pulsar+ssl://localhost:{self.tls_port}"

    def client(self, url: str | None = None, **kwargs) -> pulsar.Client:
        if (url or self.plain_url).startswith("pulsar+ssl://"):
            kwargs.setdefault("tls_trust_certs_file_path", str(self.kit.ca_file))
            kwargs.setdefault("tls_validate_hostname", True)
        kwargs.setdefault("operation_timeout_seconds", OPERATION_TIMEOUT_S)
        return make_client(url or self.plain_url, **kwargs)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("security-connect")
    kit = SecurityKit.create(root / "security")
    tls_port = free_port()
    env = kit.standalone_env(tls_port=tls_port, authorization=False, extra={
        "STRATA_AUTHENTICATION_REFRESH_CHECK_INTERVAL_MS": str(REFRESH_CHECK_MS),
        "STRATA_AUTHENTICATION_CONNECT_TIMEOUT_MS": str(CONNECT_TIMEOUT_MS),
        "STRATA_TLS_HANDSHAKE_TIMEOUT_MS": str(HANDSHAKE_TIMEOUT_MS)})
    with StandaloneProcess.start(root / "data", env=env) as sa:
        yield Secured(sa, kit, tls_port)


def roundtrip(client: pulsar.Client, topic: str) -> None:
    """Produce two messages and consume them (the connection authenticated and serving)."""
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(2):
        producer.send(f"m{i}".encode())
    assert [m.data() for m in receive_all(consumer, 2)] == [b"m0", b"m1"]


def test_token_tls_mtls_and_basic_clients_produce_and_consume(secured: Secured, topic: str) -> None:
    kit = secured.kit
    cert, key = kit.client_cert("carol")
    ways = {
        "token": secured.client(authentication=pulsar.AuthenticationToken(kit.token("alice"))),
        "tls+token": secured.client(secured.tls_url, authentication=pulsar.AuthenticationToken(kit.token("alice"))),
        "mtls": secured.client(secured.tls_url, authentication=pulsar.AuthenticationTLS(cert, key)),
        "basic": secured.client(authentication=pulsar.AuthenticationBasic("basic-user", "basic-pass")),
    }
    try:
        for way, client in ways.items():
            roundtrip(client, f"{topic}-{way.replace('+', '-')}")
    finally:
        for client in ways.values():
            client.close()


def _other_key_token(kit: SecurityKit) -> str:
    return kit.token("alice", key=b"another-key-entirely-32-bytes-long!!")


@pytest.mark.parametrize("credentials", ["wrong-token", "other-key", "expired", "wrong-password", "none"])
def test_bad_credentials_get_authentication_error_at_once(secured: Secured, topic: str, credentials: str) -> None:
    kit = secured.kit
    authentication = {
        "wrong-token": lambda: pulsar.AuthenticationToken("not-a-jwt"),
        "other-key": lambda: pulsar.AuthenticationToken(_other_key_token(kit)),
        "expired": lambda: pulsar.AuthenticationToken(kit.token("alice", expires_in_s=-60)),
        "wrong-password": lambda: pulsar.AuthenticationBasic("basic-user", "not-the-password"),
        "none": lambda: None,
    }[credentials]()
    for url in (secured.plain_url, secured.tls_url):
        client = secured.client(url, **({"authentication": authentication} if authentication else {}))
        started = time.monotonic()
        try:
            with pytest.raises(pulsar.AuthenticationError):
                client.create_producer(topic)
        finally:
            client.close()
        assert time.monotonic() - started < FAST_FAILURE_S, url


def test_a_client_certificate_of_another_ca_is_refused_by_the_handshake(secured: Secured, topic: str,
                                                                        tmp_path: Path) -> None:
    other_ca = certs.make_ca("someone else's CA")
    cert, key = tmp_path / "mallory.cert.pem", tmp_path / "mallory.key.pem"
    certs.write_pem(certs.issue(other_ca, "admin", client=True), cert, key)   # a superuser's CN, even
    context = ssl.create_default_context(cafile=str(secured.kit.ca_file))
    context.load_cert_chain(cert, key)
    with pytest.raises((ssl.SSLError, ConnectionError)):   # TLS 1.3: the alert arrives on the first read
        with socket.create_connection(("localhost", secured.tls_port), timeout=FAST_FAILURE_S) as raw, \
                context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"\0\0\0\x01")
            if not tls.recv(1):
                raise ConnectionError("closed by the broker")
    client = secured.client(secured.tls_url, authentication=pulsar.AuthenticationTLS(str(cert), str(key)),
                            operation_timeout_seconds=3)
    try:   # the C++ client sees a dropped connection (ConnectError or, retrying, Timeout): never a producer
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout, pulsar.AuthenticationError)):
            client.create_producer(topic)
    finally:
        client.close()


def test_lookups_and_records_carry_the_tls_url(secured: Secured, topic: str) -> None:
    tls_url = f"pulsar+ssl://127.0.0.1:{secured.tls_port}"
    raw = _raw_connect(secured.sa.port, secured.kit.token("alice"), refresh=False)
    try:
        raw.send(pb.BaseCommand(type=T.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=topic, request_id=1)))
        answer = raw.next_command().lookupTopicResponse
    finally:
        raw.close()
    assert (answer.response, answer.brokerServiceUrl, answer.brokerServiceUrlTls) == (
        pb.CommandLookupTopicResponse.Connect, secured.sa.service_url, tls_url)
    superuser = Credentials.build(token=secured.kit.token(SUPERUSER))
    lookup = request_json("GET", secured.sa.admin_url + "/lookup/v2/topic/" + topic.replace("://", "/"),
                          credentials=superuser, timeout_s=10)
    assert lookup["brokerUrlTls"] == tls_url
    store = open_store(secured.sa.metadata_url)
    try:
        brokers = [json.loads(v.value) for _, v in store.list_prefix("/loadbalance/brokers")]
        owners = [json.loads(v.value) for _, v in store.list_prefix("/namespace/public/default")]
    finally:
        store.close()
    assert [b["pulsarServiceUrlTls"] for b in brokers] == [tls_url]
    assert owners and all(o["nativeUrlTls"] == tls_url for o in owners), owners


def test_a_refused_connect_gets_pulsars_error_and_is_closed(secured: Secured) -> None:
    raw = RawClient(secured.sa.port, timeout_s=5)
    try:
        raw.send(pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
            client_version="raw-test", protocol_version=20, auth_method_name="token", auth_data=b"not-a-jwt")))
        error = raw.next_command()
        assert error.type == T.ERROR
        assert (error.error.request_id, error.error.error, error.error.message) == (
            2**64 - 1, pb.AuthenticationError, "Failed to authenticate")
        assert raw.is_closed_by_broker()
    finally:
        raw.close()
    raw = RawClient(secured.sa.port, timeout_s=5)
    try:   # pipelined: the PRODUCER arrives while the (valid) credentials are being checked
        connect = pb.CommandConnect(client_version="raw-test", protocol_version=20, auth_method_name="basic",
                                    auth_data=b"basic-user:basic-pass")
        raw.send_bytes(encode_command(pb.BaseCommand(type=T.CONNECT, connect=connect)) + encode_command(
            pb.BaseCommand(type=T.PRODUCER, producer=pb.CommandProducer(topic="t", producer_id=1, request_id=1))))
        assert raw.is_closed_by_broker()
    finally:
        raw.close()


def _publisher_address(secured: Secured, topic: str) -> str:
    path = "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/stats"
    superuser = Credentials.build(token=secured.kit.token(SUPERUSER))
    publishers = request_json("GET", secured.sa.admin_url + path, credentials=superuser, timeout_s=10)["publishers"]
    assert len(publishers) == 1, publishers
    return publishers[0]["address"]


def test_an_expiring_token_is_refreshed_and_the_connection_kept(secured: Secured, topic: str) -> None:
    issued: list[float] = []

    def fresh_token() -> str:
        issued.append(time.monotonic())
        return secured.kit.token("alice", expires_in_s=TOKEN_LIFETIME_S)

    client = secured.client(authentication=pulsar.AuthenticationToken(fresh_token))
    try:
        producer = client.create_producer(topic)
        address = _publisher_address(secured, topic)
        deadline = time.monotonic() + 2.5 * TOKEN_LIFETIME_S       # two expiries at least
        sent = 0
        while time.monotonic() < deadline:
            producer.send(b"x")
            sent += 1
            time.sleep(0.1)
        assert len(issued) >= 3, f"the token supplier was asked {len(issued)} time(s): no refresh"
        assert _publisher_address(secured, topic) == address, "the producer reconnected: not refreshed"
    finally:
        client.close()


def _raw_connect(port: int, token: str, *, refresh: bool) -> RawClient:
    raw = RawClient(port, timeout_s=4 * TOKEN_LIFETIME_S)
    connect = pb.CommandConnect(client_version="raw-test", protocol_version=20, auth_method_name="token",
                                auth_data=token.encode())
    if refresh:
        connect.feature_flags.supports_auth_refresh = True
    raw.send(pb.BaseCommand(type=T.CONNECT, connect=connect))
    assert raw.next_command().type == T.CONNECTED
    return raw


def test_a_client_that_cannot_refresh_is_disconnected_when_its_token_expires(secured: Secured) -> None:
    token = secured.kit.token("alice", expires_in_s=1)
    expires_at = jwt.decode(token, options={"verify_signature": False})["exp"]  # whole seconds
    raw = _raw_connect(secured.sa.port, token, refresh=False)
    try:
        assert raw.is_closed_by_broker()
        # Timed from the token's expiry (not from the connect: `exp` is rounded down to a whole
        # second): the broker looks every REFRESH_CHECK_MS. Measured 0.10-0.17 s past `exp`;
        # the bound is that check plus 1.5 s for a loaded machine.
        late_s = time.time() - expires_at
        print(f"disconnected {late_s:.2f} s after the token expired")
        assert late_s < REFRESH_CHECK_MS / 1000 + 1.5, late_s
    finally:
        raw.close()


@pytest.mark.parametrize("answer", ["other-role", "expired"])
def test_a_refresh_with_bad_credentials_closes_the_connection(secured: Secured, answer: str) -> None:
    kit = secured.kit
    raw = _raw_connect(secured.sa.port, kit.token("alice", expires_in_s=1), refresh=True)
    try:
        challenge = raw.next_command()
        assert challenge.type == T.AUTH_CHALLENGE
        assert challenge.authChallenge.challenge.auth_method_name == "token"
        token = kit.token("bob", expires_in_s=60) if answer == "other-role" else kit.token("alice", expires_in_s=-5)
        raw.send(pb.BaseCommand(type=T.AUTH_RESPONSE, authResponse=pb.CommandAuthResponse(
            response=pb.AuthData(auth_method_name="token", auth_data=token.encode()))))
        assert raw.is_closed_by_broker()
    finally:
        raw.close()


def test_slow_loris_and_garbage_handshakes_do_not_block_a_real_client(secured: Secured, topic: str) -> None:
    silent: list[socket.socket] = []
    garbage: list[socket.socket] = []
    plain_silent = socket.create_connection(("127.0.0.1", secured.sa.port), timeout=5)
    try:
        for i in range(50):
            sock = socket.create_connection(("127.0.0.1", secured.tls_port), timeout=5)
            (silent if i % 2 else garbage).append(sock)
        for sock in garbage:
            sock.sendall(b"\x16\x03\x01\xff\xff" + b"\xab" * 512)   # a TLS record header promising 64 KiB
        started = time.monotonic()
        client = secured.client(secured.tls_url, authentication=pulsar.AuthenticationToken(secured.kit.token("alice")))
        try:
            client.create_producer(topic).send(b"through")
        finally:
            client.close()
        assert time.monotonic() - started < SLOW_LORIS_CLIENT_S
        for sock in [*silent, plain_silent]:    # dropped by the handshake timeout / the connect deadline
            assert _closed_by_peer(sock, HANDSHAKE_TIMEOUT_MS / 1000 + 3.0)
    finally:
        for sock in [*silent, *garbage, plain_silent]:
            sock.close()


def _closed_by_peer(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
