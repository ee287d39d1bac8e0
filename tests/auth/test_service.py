"""AuthenticationService: the rules around the providers (off, anonymous, unknown methods and their
fallback to the anonymous role), HTTP credentials (X-Pulsar-Auth-Method-Name included), and the
bounded pool the slow basic checks run on, off the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import time

import pytest
from passlib.hash import bcrypt

import auth.service
from auth.api import NO_METHOD, Credentials, Identity
from auth.providers.basic import BasicProvider
from auth.service import AuthenticationService
from auth.tokens import create_token
from common.errors import AuthenticationBusy, AuthenticationFailed, ConfigError, KeyMaterialError, TokenExpired

from .conftest import Keys, data_source


def _service(keys: Keys, **overrides: object) -> AuthenticationService:
    values: dict[str, object] = {"authentication_providers": "token,basic",
                                 "basic_auth_conf": data_source(keys.htpasswd)}
    values.update(overrides)
    return AuthenticationService.from_config(keys.config(**values))


def test_off_everyone_is_the_anonymous_role_whatever_they_present(keys: Keys) -> None:
    for anonymous in ("", "guest"):
        service = _service(keys, authentication_enabled=False, anonymous_user_role=anonymous)
        assert not service.enabled and service.methods == ()
        for credentials in (Credentials(NO_METHOD), Credentials("token", b"garbage"), Credentials("kerberos"),
                            Credentials("tls", b"", "carol")):
            assert service.authenticate(credentials) == Identity(anonymous, NO_METHOD)


def test_off_reads_no_key_material(keys: Keys) -> None:
    service = AuthenticationService.from_config(keys.config(authentication_enabled=False,
                                                            token_secret_key="file:///nonexistent/key"))
    assert service.authenticate(Credentials("token", b"x")).role == ""


def test_on_no_credentials_is_the_anonymous_role_only_if_there_is_one(keys: Keys) -> None:
    refusing = _service(keys)
    assert refusing.enabled and refusing.methods == ("token", "basic")
    for method in (NO_METHOD, ""):
        with pytest.raises(AuthenticationFailed):
            refusing.authenticate(Credentials(method))
    welcoming = _service(keys, anonymous_user_role="guest")
    assert welcoming.authenticate(Credentials(NO_METHOD)) == Identity("guest", NO_METHOD)
    # presenting credentials that fail never falls back to the anonymous role
    with pytest.raises(AuthenticationFailed):
        welcoming.authenticate(Credentials("token", b"garbage"))


def test_on_a_method_not_configured_is_refused_unless_the_caller_lets_it_be_anonymous(keys: Keys) -> None:
    welcoming = _service(keys, authentication_providers="token", anonymous_user_role="guest")
    refusing = _service(keys, authentication_providers="token")
    for method in ("basic", "tls", "kerberos", "x" * 500):
        credentials = Credentials(method, b"bcrypt-user:bcrypt-pass", "carol")
        for service in (welcoming, refusing):       # the default (Kafka SASL, credential refresh): refused
            with pytest.raises(AuthenticationFailed) as info:
                service.authenticate(credentials)
            assert len(str(info.value)) < 300
        # Pulsar's ServerCnx and HTTP authentication: the anonymous role, and authorization decides
        assert welcoming.authenticate(credentials, unknown_method_anonymous=True) == Identity("guest", NO_METHOD)
        assert asyncio.run(welcoming.authenticate_async(credentials, unknown_method_anonymous=True)).role == "guest"
        with pytest.raises(AuthenticationFailed) as info:
            refusing.authenticate(credentials, unknown_method_anonymous=True)
        assert str(info.value).startswith("No anonymous role, and no authentication provider configured")
        assert len(str(info.value)) < 300


def test_credentials_a_configured_provider_refuses_never_become_anonymous(keys: Keys) -> None:
    service = _service(keys, anonymous_user_role="guest")
    for credentials in (Credentials("token", b"garbage"), Credentials("basic", b"apr-user:wrong"),
                        Credentials("token", create_token(keys.secret, "a", expires_in_s=-9).encode())):
        with pytest.raises(AuthenticationFailed):
            service.authenticate(credentials, unknown_method_anonymous=True)


def test_on_each_provider_decides_its_method(keys: Keys) -> None:
    service = _service(keys, authentication_providers="token,tls,basic", broker_tls_port=0,
                       tls_cert_file="unused.pem", tls_key_file="unused.key")
    token = create_token(keys.secret, "alice", expires_in_s=60)
    assert service.authenticate(Credentials("token", token.encode())).role == "alice"
    assert service.authenticate(Credentials("tls", b"", "carol")) == Identity("carol", "tls")
    assert service.authenticate(Credentials("basic", b"apr-user:apr-pass")) == Identity("apr-user", "basic")
    with pytest.raises(TokenExpired):
        service.authenticate(Credentials("token", create_token(keys.secret, "a", expires_in_s=-9).encode()))


def test_bad_key_material_fails_at_construction(keys: Keys) -> None:
    with pytest.raises(KeyMaterialError):
        _service(keys, basic_auth_conf="file:///nonexistent/htpasswd")
    with pytest.raises(KeyMaterialError):
        _service(keys, basic_auth_conf="/nonexistent/htpasswd")
    with pytest.raises(ConfigError):
        _service(keys, token_secret_key="", token_public_key="x", token_public_alg="none")


def test_http_credentials(keys: Keys) -> None:
    service = _service(keys, anonymous_user_role="guest")
    token = create_token(keys.secret, "alice")
    basic = "Basic " + base64.b64encode(b"apr-user:apr-pass").decode()
    assert service.credentials_from_http(f"Bearer {token}", None) == Credentials("token", token.encode())
    assert service.credentials_from_http(f"bearer  {token} ", "cn") == Credentials("token", token.encode(), "cn")
    assert service.credentials_from_http(basic, None) == Credentials("basic", b"apr-user:apr-pass")
    assert service.credentials_from_http(None, "carol") == Credentials("tls", b"", "carol")
    assert service.credentials_from_http("", None) == Credentials(NO_METHOD)
    assert service.authenticate(service.credentials_from_http(basic, None)).role == "apr-user"
    assert service.authenticate(service.credentials_from_http(None, None)).role == "guest"
    for header in ("Basic !!!not-base64!!!", "Digest username=x", "Bearer", "Negotiate abc", "x" * 20_000):
        with pytest.raises(AuthenticationFailed):
            service.authenticate(service.credentials_from_http(header, None))
    # a scheme no configured provider takes is an unknown method: anonymous where the caller allows it
    for header in ("Digest username=x", "Negotiate abc"):
        credentials = service.credentials_from_http(header, None)
        assert service.authenticate(credentials, unknown_method_anonymous=True).role == "guest"
    for header in ("Basic !!!not-base64!!!", "Bearer", "x" * 20_000):     # basic and token are configured
        with pytest.raises(AuthenticationFailed):
            service.authenticate(service.credentials_from_http(header, None), unknown_method_anonymous=True)


def test_http_method_header_names_the_provider(keys: Keys) -> None:
    service = _service(keys, anonymous_user_role="guest")
    token = create_token(keys.secret, "alice")
    bearer = f"Bearer {token}"
    assert service.credentials_from_http(bearer, None, "token") == Credentials("token", token.encode())
    assert service.authenticate(service.credentials_from_http(bearer, None, "token")).role == "alice"
    with pytest.raises(AuthenticationFailed):     # the named provider finds no credentials of its kind
        service.authenticate(service.credentials_from_http(bearer, None, "basic"), unknown_method_anonymous=True)
    # Pulsar: a named method without a provider is refused, even with an anonymous role
    for name in ("kerberos", "tls", "x" * 500):
        with pytest.raises(AuthenticationFailed) as info:
            service.credentials_from_http(bearer, None, name)
        assert str(info.value).startswith(f"Unsupported authentication method: [{name[:32]}].")
    off = _service(keys, authentication_enabled=False)
    assert off.authenticate(off.credentials_from_http(None, None, "kerberos")) == Identity("", NO_METHOD)


def test_async_runs_basic_off_the_loop_and_tokens_on_it(keys: Keys) -> None:
    slow_hash = bcrypt.using(rounds=10).hash("slow-pass")      # ~50-100 ms of CPU
    service = AuthenticationService({"basic": BasicProvider(f"slow:{slow_hash}\n".encode())})

    async def scenario() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.002)
                ticks += 1

        task = asyncio.create_task(ticker())
        identity = await service.authenticate_async(Credentials("basic", b"slow:slow-pass"))
        task.cancel()
        assert identity == Identity("slow", "basic")
        with pytest.raises(AuthenticationFailed):
            await service.authenticate_async(Credentials("basic", b"slow:wrong"))
        return ticks

    try:
        assert asyncio.run(scenario()) >= 1     # the loop ran while bcrypt did
    finally:
        service.close()


def test_async_slow_checks_are_bounded(keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth.service, "BLOCKING_PENDING_MAX", 2)
    slow_hash = bcrypt.using(rounds=10).hash("slow-pass")
    service = AuthenticationService({"basic": BasicProvider(f"u1:{slow_hash}\nu2:{slow_hash}\n".encode())})
    distinct = [Credentials("basic", f"u{i}:slow-pass".encode()) for i in (1, 2, 3, 4, 5)]

    async def flood(batch: list[Credentials]) -> list[object]:
        return await asyncio.gather(*(service.authenticate_async(c) for c in batch), return_exceptions=True)

    try:
        outcomes = asyncio.run(flood(distinct))
        assert outcomes[:2] == [Identity("u1", "basic"), Identity("u2", "basic")]
        assert all(isinstance(o, AuthenticationBusy) and o.retriable for o in outcomes[2:])
        assert service._pending == 0 and not service._in_flight    # every slot was given back
        # identical credentials pending together share one check, so the bound does not refuse them
        same = [Credentials("basic", b"u1:wrong")] * 6
        assert all(type(o) is AuthenticationFailed for o in asyncio.run(flood(same)))
        assert asyncio.run(service.authenticate_async(distinct[0])).role == "u1"
    finally:
        service.close()


def test_basic_remembers_verified_credentials_only() -> None:
    provider = BasicProvider(f"u:{bcrypt.using(rounds=10).hash('pw')}\n".encode())   # ~0.07 s a check
    started = time.perf_counter()
    provider.authenticate(Credentials("basic", b"u:pw"))
    one_bcrypt_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(20):
        assert provider.authenticate(Credentials("basic", b"u:pw")).role == "u"
    assert time.perf_counter() - started < one_bcrypt_s     # remembered: 20 connections cost less than one bcrypt
    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            provider.authenticate(Credentials("basic", b"u:pw-wrong"))
    assert len(provider._verified) == 1


def test_a_waiter_cancelled_does_not_cancel_the_check_it_shares() -> None:
    slow_hash = bcrypt.using(rounds=10).hash("pw")
    service = AuthenticationService({"basic": BasicProvider(f"u:{slow_hash}\n".encode())})
    credentials = Credentials("basic", b"u:pw")

    async def scenario() -> Identity:
        blocker = asyncio.create_task(service.authenticate_async(Credentials("basic", b"u:x")))
        blocker2 = asyncio.create_task(service.authenticate_async(Credentials("basic", b"u:y")))
        leaving = asyncio.create_task(service.authenticate_async(credentials))   # queued behind both
        staying = asyncio.create_task(service.authenticate_async(credentials))
        await asyncio.sleep(0)
        leaving.cancel()
        await asyncio.gather(blocker, blocker2, return_exceptions=True)
        return await staying

    try:
        assert asyncio.run(scenario()) == Identity("u", "basic")
    finally:
        service.close()
