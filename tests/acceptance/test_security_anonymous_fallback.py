"""A client naming an authentication method the broker has no provider for, as Pulsar treats it.

Two secured standalones (tests/support/security.py's kit), each with only the basic provider and
authorization on; superuser `admin` (basic). `welcoming` sets anonymous_user_role `guest`, granted
produce on `anon/open` and nothing on `anon/closed`; `refusing` sets none.
- welcoming: the official client with a token (a method this broker has not enabled) connects as
  `guest`: it produces to `anon/open` and gets AuthorizationError at once on `anon/closed`; a raw
  CONNECT naming a made-up method ("kerberos-x") is CONNECTED, and its PRODUCER is allowed on
  `anon/open` and refused with AuthorizationError on `anon/closed`. Over HTTP a Bearer token or a
  Digest header (no provider takes either) is `guest`: 200 on `anon/open`, 403 on `anon/closed`;
  a request naming "kerberos-x" in X-Pulsar-Auth-Method-Name is 401, and so is a wrong password.
- refusing: the same client gets AuthenticationError, the raw CONNECT Pulsar's ERROR{-1,
  AuthenticationError, "Failed to authenticate"} and a closed connection; HTTP answers 401.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pulsar
import pytest

from admin_client import Credentials
from proto import pulsar_api_pb2 as pb
from tests.acceptance.conftest import make_client
from tests.support.admin_http import call
from tests.support.raw_client import RawClient
from tests.support.security import SUPERUSER, SecurityKit
from tests.support.standalone_proc import StandaloneProcess, free_port
from wire.pulsar import CommandType as T

ANONYMOUS = "guest"
SUPERUSER_PASSWORD = "admin-pass"
UNKNOWN_METHOD = "kerberos-x"      # no broker has a provider of this name
REFUSAL_S_MAX = 5.0                # a refused create fails this fast (the client does not retry it)


def basic_header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass
class Secured:
    sa: StandaloneProcess
    kit: SecurityKit

    def http(self, method: str, path: str, body: object = None, **headers: str) -> int:
        status, _ = call(method, self.sa.admin_url + path, body, credentials=Credentials(headers))
        return status

    def as_superuser(self, method: str, path: str, body: object = None) -> int:
        return self.http(method, path, body, Authorization=basic_header(SUPERUSER, SUPERUSER_PASSWORD))

    def token_client(self) -> pulsar.Client:
        """The official client with a token: a method these brokers have not enabled."""
        return make_client(self.sa.service_url, authentication=pulsar.AuthenticationToken(self.kit.token("alice")),
                           operation_timeout_seconds=10)


def _secured(tmp_path_factory: pytest.TempPathFactory, name: str, anonymous_role: str) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp(name)
    kit = SecurityKit.create(root / "security", basic_users={SUPERUSER: SUPERUSER_PASSWORD})
    env = kit.standalone_env(tls_port=free_port(), providers="basic", anonymous_role=anonymous_role)
    with StandaloneProcess.start(root / "data", env=env) as sa:
        secured = Secured(sa, kit)
        assert secured.as_superuser("PUT", "/admin/v2/tenants/anon",
                                    {"adminRoles": [], "allowedClusters": ["standalone"]}) == 204
        for namespace in ("open", "closed"):
            assert secured.as_superuser("PUT", f"/admin/v2/namespaces/anon/{namespace}") == 204
        if anonymous_role:
            assert secured.as_superuser("POST", f"/admin/v2/namespaces/anon/open/permissions/{anonymous_role}",
                                        ["produce"]) == 204
        yield secured


@pytest.fixture(scope="module")
def welcoming(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    yield from _secured(tmp_path_factory, "anon-welcoming", ANONYMOUS)


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    yield from _secured(tmp_path_factory, "anon-refusing", "")


@contextlib.contextmanager
def raw_connect(secured: Secured, method: str) -> Iterator[tuple[RawClient, pb.BaseCommand]]:
    """A raw connection whose CONNECT names `method`, and the broker's first answer."""
    raw = RawClient(secured.sa.port, timeout_s=10)
    try:
        raw.send(pb.BaseCommand(type=T.CONNECT, connect=pb.CommandConnect(
            client_version="raw-test", protocol_version=20, auth_method_name=method, auth_data=b"opaque")))
        yield raw, raw.next_command()
    finally:
        raw.close()


# --- anonymous_user_role set ----------------------------------------------------------------------------

def test_official_client_with_a_method_not_enabled_is_the_anonymous_role(welcoming: Secured) -> None:
    client = welcoming.token_client()
    try:
        producer = client.create_producer("persistent://anon/open/fallback")
        producer.send(b"as the anonymous role")
        started = time.monotonic()
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer("persistent://anon/closed/fallback")
        assert time.monotonic() - started < REFUSAL_S_MAX
    finally:
        client.close()


def test_a_made_up_method_connects_as_the_anonymous_role_and_authorization_decides(welcoming: Secured) -> None:
    with raw_connect(welcoming, UNKNOWN_METHOD) as (raw, first):
        assert first.type == T.CONNECTED
        assert raw.producer("persistent://anon/open/raw", producer_id=1, request_id=1).type == T.PRODUCER_SUCCESS
        refused = raw.producer("persistent://anon/closed/raw", producer_id=2, request_id=2)
        assert refused.type == T.ERROR and refused.error.error == pb.AuthorizationError


def test_http_with_no_provider_for_its_credentials_is_the_anonymous_role(welcoming: Secured) -> None:
    for authorization in (f"Bearer {welcoming.kit.token('alice')}", "Digest username=alice"):
        assert welcoming.http("GET", "/admin/v2/namespaces/anon/open/topics", Authorization=authorization) == 200
        assert welcoming.http("GET", "/admin/v2/namespaces/anon/closed/topics", Authorization=authorization) == 403


def test_http_naming_an_unknown_method_or_failing_a_provider_is_still_401(welcoming: Secured) -> None:
    named = {"X-Pulsar-Auth-Method-Name": UNKNOWN_METHOD, "Authorization": "Digest username=alice"}
    assert welcoming.http("GET", "/admin/v2/namespaces/anon/open/topics", **named) == 401
    wrong_password = basic_header(SUPERUSER, "not-the-password")
    assert welcoming.http("GET", "/admin/v2/namespaces/anon/open/topics", Authorization=wrong_password) == 401


# --- no anonymous_user_role -----------------------------------------------------------------------------

def test_without_an_anonymous_role_a_method_not_enabled_is_refused(refusing: Secured) -> None:
    client = refusing.token_client()
    try:
        started = time.monotonic()
        with pytest.raises(pulsar.AuthenticationError):
            client.create_producer("persistent://anon/open/refused")
        assert time.monotonic() - started < REFUSAL_S_MAX
    finally:
        client.close()
    with raw_connect(refusing, UNKNOWN_METHOD) as (raw, first):
        assert first.type == T.ERROR
        assert (first.error.error, first.error.message) == (pb.AuthenticationError, "Failed to authenticate")
        assert raw.is_closed_by_broker()


def test_without_an_anonymous_role_http_is_401(refusing: Secured) -> None:
    for authorization in (f"Bearer {refusing.kit.token('alice')}", "Digest username=alice"):
        assert refusing.http("GET", "/admin/v2/namespaces/anon/open/topics", Authorization=authorization) == 401
