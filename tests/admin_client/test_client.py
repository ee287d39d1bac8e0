"""admin_client against a real secured standalone: every kind of credential is what the broker
accepts, Pulsar's authParams as auth.params reads them, error statuses as typed errors with the
broker's reason, the size cap, and no answer (a closed port, a silent one, an untrusted
certificate) as AdminUnreachable. One standalone for the package (conftest.py)."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

from admin_client import AdminClient, Credentials
from auth import params as auth_params
from common.errors import (
    AdminAnswerTooLarge,
    AdminConflict,
    AdminForbidden,
    AdminNotFound,
    AdminTimedOut,
    AdminUnauthorized,
    AdminUnreachable,
    InvalidArgument,
)
from tests.admin_client.conftest import Secured
from tests.support.security import SUPERUSER

TENANTS = "/admin/v2/tenants"


def client(secured: Secured, credentials: Credentials, *, https: bool = False, **kwargs: object) -> AdminClient:
    return AdminClient(secured.tls_url if https else secured.sa.admin_url, credentials=credentials,
                       **kwargs)  # type: ignore[arg-type]


def test_a_superuser_token_is_accepted_and_none_is_a_typed_401(secured: Secured) -> None:
    admin = client(secured, Credentials.build(token=secured.kit.token(SUPERUSER)))
    assert "public" in admin.call("GET", TENANTS)
    with pytest.raises(AdminUnauthorized) as raised:
        client(secured, Credentials()).call("GET", TENANTS)
    assert raised.value.status == 401 and raised.value.reason and raised.value.url.endswith(TENANTS)


def test_a_role_without_the_permission_is_a_typed_403_with_the_broker_s_reason(secured: Secured) -> None:
    alice = client(secured, Credentials.build(token=secured.kit.token("alice")))
    with pytest.raises(AdminForbidden) as raised:
        alice.call("GET", TENANTS)                       # Pulsar: superusers only
    assert raised.value.status == 403 and "super-user" in raised.value.reason
    assert alice.call("GET", "/admin/v2/clusters") == ["standalone"]     # any authenticated role


def test_basic_and_a_client_certificate_over_https(secured: Secured) -> None:
    kit = secured.kit
    basic = Credentials.build(basic=("basic-user", "basic-pass"))
    assert client(secured, basic).call("GET", "/admin/v2/clusters") == ["standalone"]
    with pytest.raises(AdminUnauthorized):
        client(secured, Credentials.build(basic=("basic-user", "wrong"))).call("GET", "/admin/v2/clusters")
    cert, key = kit.client_cert(SUPERUSER)
    mtls = Credentials.build(cert_file=cert, key_file=key, trust_file=str(kit.ca_file))
    assert "public" in client(secured, mtls, https=True).call("GET", TENANTS)      # the CN is the role
    trusting = Credentials.build(trust_file=str(kit.ca_file))
    with pytest.raises(AdminUnauthorized):
        client(secured, trusting, https=True).call("GET", TENANTS)


def test_pulsar_auth_params_of_each_plugin_reach_the_broker(secured: Secured, tmp_path) -> None:
    kit = secured.kit
    token_file = tmp_path / "admin.token"
    token_file.write_text(kit.token(SUPERUSER) + "\n")
    cert, key = kit.client_cert(SUPERUSER)
    for plugin, text, https in (
            ("org.apache.pulsar.client.impl.auth.AuthenticationToken", f"file://{token_file}", False),
            ("token", f'{{"token": "{kit.token(SUPERUSER)}"}}', False),
            ("org.apache.pulsar.client.impl.auth.AuthenticationTls", f"tlsCertFile:{cert},tlsKeyFile:{key}", True)):
        credentials = Credentials.from_auth_params(auth_params.parse(plugin, text), trust_file=str(kit.ca_file))
        assert "public" in client(secured, credentials, https=https).call("GET", TENANTS), plugin
    basic_params = auth_params.parse("basic", '{"userId": "basic-user", "password": "basic-pass"}')
    basic = Credentials.from_auth_params(basic_params)
    assert client(secured, basic).call("GET", "/admin/v2/clusters") == ["standalone"]


def test_credentials_that_cannot_be_used_fail_when_built(secured: Secured, tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="go together"):
        Credentials.build(cert_file=str(tmp_path / "c.pem"))
    with pytest.raises(InvalidArgument, match="client certificate cannot be loaded"):
        Credentials.build(cert_file=str(tmp_path / "c.pem"), key_file=str(tmp_path / "k.pem"))
    with pytest.raises(InvalidArgument, match="not both"):
        Credentials.build(token="t", basic=("u", "p"))
    secret = Credentials.build(token="s3cret-token")
    assert "s3cret" not in repr(secret) and secret.sends_secret


def test_404_and_409_are_typed_with_the_broker_s_reason(secured: Secured) -> None:
    admin = client(secured, Credentials.build(token=secured.kit.token(SUPERUSER)))
    with pytest.raises(AdminNotFound) as missing:
        admin.call("GET", "/admin/v2/namespaces/no-such-tenant")
    assert missing.value.status == 404 and missing.value.reason == "Tenant does not exist"
    body = {"adminRoles": [], "allowedClusters": ["standalone"]}
    with pytest.raises(AdminConflict) as taken:
        admin.call("PUT", "/admin/v2/tenants/public", body)
    assert taken.value.status == 409 and "exists" in taken.value.reason
    assert taken.value.body and str(taken.value) == f"HTTP 409: {taken.value.reason}"


def test_the_size_cap_refuses_a_larger_answer(secured: Secured) -> None:
    token = Credentials.build(token=secured.kit.token(SUPERUSER))
    full = client(secured, token).request("GET", "/metrics")
    assert len(full.body) > 1000 and "pulsar_" in full.text()
    with pytest.raises(AdminAnswerTooLarge) as raised:
        client(secured, token, answer_bytes_max=1000).request("GET", "/metrics")
    assert raised.value.details["bytes_max"] == 1000
    assert client(secured, token, answer_bytes_max=len(full.body) * 2).get_text("/metrics").startswith("#")


def test_an_untrusted_certificate_and_a_closed_port_are_unreachable(secured: Secured) -> None:
    token = Credentials.build(token=secured.kit.token(SUPERUSER))
    with pytest.raises(AdminUnreachable, match="CERTIFICATE_VERIFY_FAILED") as raised:
        client(secured, token, https=True).call("GET", TENANTS)          # the system's CAs: not the kit's
    assert isinstance(raised.value.cause, ssl.SSLCertVerificationError) and raised.value.retriable
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(AdminUnreachable) as refused:
        AdminClient(f"http://127.0.0.1:{closed}").call("GET", TENANTS)
    assert isinstance(refused.value.cause, ConnectionRefusedError)


def test_a_broker_that_never_answers_is_a_timeout_within_the_bound() -> None:
    with socket.socket() as silent:                 # accepts (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        started = time.monotonic()
        with pytest.raises(AdminTimedOut):
            AdminClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.5).call("GET", TENANTS)
        assert time.monotonic() - started < 5


def test_an_answer_without_a_length_is_cut_at_the_cap_too() -> None:
    """A peer that streams a body of no declared length (HTTP/1.0, close-delimited): the client
    stops reading at the cap instead of filling memory."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
                try:
                    for _ in range(64):
                        conn.sendall(b"[" * 16384)
                except OSError:
                    pass                      # the client closed after the cap: expected

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        with pytest.raises(AdminAnswerTooLarge) as raised:
            AdminClient(f"http://127.0.0.1:{server.getsockname()[1]}", answer_bytes_max=100_000,
                        timeout_s=10).call("GET", TENANTS)
        assert "content_length" not in raised.value.details        # found by reading, not declared
        thread.join(10)
