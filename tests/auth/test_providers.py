"""One suite every authentication provider passes (token with HS256/RS256-DER/ES256-PEM keys, tls,
basic with bcrypt and apr1), then what is particular to each: token claims, audience, skew,
algorithms; key sources and key material refused at construction.

Each case gives the provider, credentials that prove a role, and credentials that must not, with
the error each must raise; no error text may contain a token, a password or a key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jwt
import pytest

from auth.api import AuthenticationProvider, Credentials
from auth.providers import PROVIDERS, build
from auth.providers.basic import BasicProvider
from auth.providers.tls import TlsProvider
from auth.providers.token import TokenProvider
from auth.tokens import create_secret_key, create_token
from common.errors import AuthenticationFailed, ConfigError, KeyMaterialError, TokenExpired

from .conftest import Keys, data_source


@dataclass
class Case:
    provider: AuthenticationProvider
    valid: Credentials
    role: str
    bad: list[tuple[str, Credentials, type[Exception]]]
    secrets: list[bytes] = field(default_factory=list)   # must never appear in an error


def _token_bad(sign: Callable[..., str], alg: str, secret: bytes) -> list[tuple[str, Credentials, type[Exception]]]:
    other_secret = create_secret_key()
    unsigned = jwt.encode({"sub": "alice"}, None, algorithm="none")
    return [
        ("missing", Credentials("token"), AuthenticationFailed),
        ("garbage", Credentials("token", b"not-a-jwt"), AuthenticationFailed),
        ("three garbage parts", Credentials("token", b"a.b.c"), AuthenticationFailed),
        ("binary", Credentials("token", b"\xff\xfe\x00"), AuthenticationFailed),
        ("expired", Credentials("token", sign("alice", expires_in_s=-60).encode()), TokenExpired),
        ("alg none", Credentials("token", unsigned.encode()), AuthenticationFailed),
        ("other key", Credentials("token", create_token(other_secret, "alice").encode()), AuthenticationFailed),
        ("no role claim", Credentials("token", jwt.encode({"exp": 2**40}, secret, "HS256").encode()),
         AuthenticationFailed),
        ("tampered", Credentials("token", _tamper(sign("alice")).encode()), AuthenticationFailed),
    ] if alg == "HS256" else [
        ("missing", Credentials("token"), AuthenticationFailed),
        ("garbage", Credentials("token", b"not-a-jwt"), AuthenticationFailed),
        ("expired", Credentials("token", sign("alice", expires_in_s=-60).encode()), TokenExpired),
        ("alg none", Credentials("token", unsigned.encode()), AuthenticationFailed),
        ("HS256 not configured", Credentials("token", create_token(other_secret, "alice").encode()),
         AuthenticationFailed),
        ("tampered", Credentials("token", _tamper(sign("alice")).encode()), AuthenticationFailed),
    ]


def _tamper(token: str) -> str:
    """The same signature over a payload naming another role."""
    header, _payload, signature = token.split(".")
    forged = jwt.utils.base64url_encode(b'{"sub":"admin"}').decode()
    return f"{header}.{forged}.{signature}"


def _token_case(keys: Keys, kind: str) -> Case:
    if kind == "HS256":
        provider = TokenProvider.from_config(keys.config())
        key, secrets = keys.secret, [keys.secret]
    elif kind == "RS256":
        path = keys.dir / "rsa.pub.der"
        path.write_bytes(keys.rsa.public_der)
        provider = TokenProvider.from_config(keys.config(token_secret_key="", token_public_key=f"file://{path}",
                                                         token_public_alg="RS256"))
        key, secrets = keys.rsa.private_key, [keys.rsa.private_der]
    else:
        provider = TokenProvider.from_config(keys.config(token_secret_key="", token_public_alg="ES256",
                                                         token_public_key=data_source(keys.ec.public_pem)))
        key, secrets = keys.ec.private_key, [keys.ec.private_der]

    def sign(role: str, **kwargs: object) -> str:
        return create_token(key, role, algorithm=kind, **kwargs)  # type: ignore[arg-type]

    valid = sign("alice", expires_in_s=600)
    return Case(provider, Credentials("token", valid.encode()), "alice", _token_bad(sign, kind, keys.secret),
                secrets + [valid.encode(), valid.split(".")[1].encode()])


def _basic_case(keys: Keys, user: str, password: str) -> Case:
    provider = BasicProvider.from_config(keys.config(authentication_providers="basic",
                                                     basic_auth_conf=data_source(keys.htpasswd)))
    bad = [
        ("wrong password", Credentials("basic", f"{user}:wrong-pass".encode()), AuthenticationFailed),
        ("unknown user", Credentials("basic", f"nobody:{password}".encode()), AuthenticationFailed),
        ("missing", Credentials("basic"), AuthenticationFailed),
        ("no colon", Credentials("basic", user.encode()), AuthenticationFailed),
        ("no user", Credentials("basic", f":{password}".encode()), AuthenticationFailed),
        ("binary", Credentials("basic", b"\xff\xfe:\x00"), AuthenticationFailed),
        ("empty password", Credentials("basic", f"{user}:".encode()), AuthenticationFailed),
        ("too long", Credentials("basic", f"{user}:".encode() + b"x" * 10_000), AuthenticationFailed),
    ]
    return Case(provider, Credentials("basic", f"{user}:{password}".encode()), user, bad,
                [password.encode(), b"wrong-pass"])


def _tls_case(keys: Keys) -> Case:
    bad = [("no certificate", Credentials("tls"), AuthenticationFailed),
           ("empty common name", Credentials("tls", b"", ""), AuthenticationFailed)]
    return Case(TlsProvider(), Credentials("tls", b"ignored", "carol"), "carol", bad)


CASES: dict[str, Callable[[Keys], Case]] = {
    "token-hs256": lambda keys: _token_case(keys, "HS256"),
    "token-rs256-der": lambda keys: _token_case(keys, "RS256"),
    "token-es256-pem": lambda keys: _token_case(keys, "ES256"),
    "tls": _tls_case,
    "basic-bcrypt": lambda keys: _basic_case(keys, "bcrypt-user", "bcrypt-pass"),
    "basic-apr1": lambda keys: _basic_case(keys, "apr-user", "apr-pass"),
}


@pytest.mark.parametrize("name", CASES)
def test_provider_proves_the_role_and_refuses_everything_else(name: str, keys: Keys) -> None:
    case = CASES[name](keys)
    identity = case.provider.authenticate(case.valid)
    assert identity.role == case.role
    assert identity.method == case.provider.method_name == case.valid.method
    for label, credentials, expected in case.bad:
        with pytest.raises(AuthenticationFailed) as info:
            case.provider.authenticate(credentials)
            pytest.fail(f"{label}: accepted")
        assert type(info.value) is expected, label
        text = f"{info.value} {info.value!r} {info.value.details!r}"
        for secret in case.secrets + [credentials.data]:
            if len(secret) >= 8:
                assert secret.decode("latin-1") not in text, f"{label}: error text holds a secret"


def test_registry_names_every_provider(keys: Keys) -> None:
    assert set(PROVIDERS) == {"token", "tls", "basic"}
    assert isinstance(build("token", keys.config()), TokenProvider)
    with pytest.raises(ConfigError):
        build("kerberos", keys.config())


# --- token specifics -----------------------------------------------------------------------------

def test_token_expiry_is_the_identity_deadline_and_skew_is_leeway(keys: Keys) -> None:
    provider = TokenProvider.from_config(keys.config())
    now = time.time()
    token = create_token(keys.secret, "alice", expires_in_s=600, now_s=now)
    assert provider.authenticate(Credentials("token", token.encode())).expires_at_s == int(now + 600)
    assert provider.authenticate(Credentials("token", create_token(keys.secret, "a").encode())).expires_at_s is None
    stale = create_token(keys.secret, "alice", expires_in_s=-5).encode()
    with pytest.raises(TokenExpired):
        provider.authenticate(Credentials("token", stale))
    lenient = TokenProvider.from_config(keys.config(token_allowed_clock_skew_seconds=60))
    assert lenient.authenticate(Credentials("token", stale)).role == "alice"
    early = create_token(keys.secret, "alice", claims={"nbf": int(now) + 30}).encode()
    with pytest.raises(AuthenticationFailed):
        provider.authenticate(Credentials("token", early))
    assert lenient.authenticate(Credentials("token", early)).role == "alice"


def test_token_role_claim_and_audience(keys: Keys) -> None:
    provider = TokenProvider.from_config(keys.config(token_auth_claim="role", token_audience="strata",
                                                     token_audience_claim="aud"))

    def creds(**claims: object) -> Credentials:
        return Credentials("token", create_token(keys.secret, "ignored-sub", claims=claims).encode())

    assert provider.authenticate(creds(role="bob", aud="strata")).role == "bob"
    assert provider.authenticate(creds(role="bob", aud=["other", "strata"])).role == "bob"
    for bad in (creds(role="bob"), creds(role="bob", aud="other"), creds(role="bob", aud=["x"]),
                creds(aud="strata"), creds(role=7, aud="strata")):
        with pytest.raises(AuthenticationFailed):
            provider.authenticate(bad)
    custom = TokenProvider.from_config(keys.config(token_audience="strata", token_audience_claim="scope"))
    assert custom.authenticate(creds(scope="strata")).role == "ignored-sub"
    with pytest.raises(AuthenticationFailed):
        custom.authenticate(creds(aud="strata"))


def test_token_refuses_algorithms_other_than_the_configured_ones(keys: Keys) -> None:
    rs_only = TokenProvider.from_config(keys.config(token_secret_key="", token_public_alg="RS256",
                                                    token_public_key=data_source(keys.rsa.public_der)))
    # the classic confusion: HS256 "signed" with the public key's bytes as the secret
    confused = _hs256_by_hand({"sub": "admin"}, keys.rsa.public_der)
    ps256 = create_token(keys.rsa.private_key, "alice", algorithm="PS256")
    es256 = create_token(keys.ec.private_key, "alice")
    for token in (confused, ps256, es256):
        with pytest.raises(AuthenticationFailed) as info:
            rs_only.authenticate(Credentials("token", token.encode()))
        assert "algorithm" in str(info.value)
    both = TokenProvider.from_config(keys.config(token_public_alg="ES256",
                                                 token_public_key=data_source(keys.ec.public_der)))
    assert both.algorithms == ("HS256", "HS384", "HS512", "ES256")
    assert both.authenticate(Credentials("token", es256.encode())).role == "alice"
    assert both.authenticate(Credentials("token", create_token(keys.secret, "h").encode())).role == "h"
    with pytest.raises(AuthenticationFailed):
        both.authenticate(Credentials("token", b"x" * 20_000))


def _hs256_by_hand(claims: dict, secret: bytes, header: bytes = b'{"alg":"HS256","typ":"JWT"}') -> str:
    """An HS256 JWT made without PyJWT (which refuses an asymmetric key as an HMAC secret)."""
    b64 = jwt.utils.base64url_encode
    signing_input = b64(header) + b"." + b64(json.dumps(claims, separators=(",", ":")).encode())
    return (signing_input + b"." + b64(hmac.new(secret, signing_input, hashlib.sha256).digest())).decode()


def test_token_in_the_form_pulsar_mints_verifies(keys: Keys) -> None:
    """Pulsar's `tokens create` (jjwt) writes the header {"alg":"HS256"}, no typ, and a bare sub; such a
    token (checked by hand against one Pulsar minted) is accepted with the key given as data:;base64."""
    token = _hs256_by_hand({"sub": "test-user"}, keys.secret, header=b'{"alg":"HS256"}')
    provider = TokenProvider.from_config(keys.config(token_secret_key=data_source(keys.secret)))
    assert provider.authenticate(Credentials("token", token.encode())).role == "test-user"


# --- key material at construction ------------------------------------------------------------------

def test_key_sources(keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    path = keys.dir / "secret.key"
    path.write_bytes(keys.secret)
    monkeypatch.setenv("STRATA_TEST_TOKEN_KEY", keys.secret.hex())
    token = create_token(keys.secret, "alice").encode()
    bare_base64 = data_source(keys.secret).removeprefix("data:;base64,")    # Pulsar takes a bare base64 key
    sources = [f"file://{path}", str(path), data_source(keys.secret)]
    if not bare_base64.startswith("/"):      # one random key in 64 reads as an absolute path: not bare then
        sources.append(bare_base64)
    for source in sources:
        provider = TokenProvider.from_config(keys.config(token_secret_key=source))
        assert provider.authenticate(Credentials("token", token)).role == "alice"
    from_env = TokenProvider.from_config(keys.config(token_secret_key="env:STRATA_TEST_TOKEN_KEY"))
    hex_token = create_token(keys.secret.hex().encode(), "eve").encode()
    assert from_env.authenticate(Credentials("token", hex_token)).role == "eve"
    ht_path = keys.dir / "htpasswd"
    ht_path.write_bytes(keys.htpasswd)
    for source in (str(ht_path), f"file://{ht_path}", data_source(keys.htpasswd)):
        provider = BasicProvider.from_config(keys.config(authentication_providers="basic", basic_auth_conf=source))
        assert provider.users == ("bcrypt-user", "apr-user")


@pytest.mark.parametrize("overrides, error", [
    ({"token_secret_key": "file:///nonexistent/secret.key"}, KeyMaterialError),
    ({"token_secret_key": "/nonexistent/secretkey"}, KeyMaterialError),   # never the path's text as the key
    ({"token_secret_key": "secret.key"}, KeyMaterialError),               # neither a path nor base64
    ({"token_secret_key": "env:STRATA_TEST_UNSET_VARIABLE"}, KeyMaterialError),
    ({"token_secret_key": data_source(b"short")}, KeyMaterialError),
    ({"token_secret_key": "", "token_public_key": data_source(b"garbage" * 10)}, KeyMaterialError),
    ({"token_secret_key": "", "token_public_key": "PUBLIC", "token_public_alg": "HS256"}, ConfigError),
])
def test_bad_token_key_material_is_refused_at_construction(keys: Keys, overrides: dict, error: type) -> None:
    with pytest.raises(error):
        TokenProvider.from_config(keys.config(**overrides))


def test_public_key_must_fit_its_algorithm(keys: Keys) -> None:
    for alg, public in (("RS256", keys.ec.public_der), ("ES256", keys.rsa.public_pem)):
        with pytest.raises(KeyMaterialError):
            TokenProvider.from_config(keys.config(token_public_alg=alg, token_public_key=data_source(public)))


@pytest.mark.parametrize("content", [
    b"plain-user:plaintext-password\n",            # plaintext: never accepted
    b"sha-user:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n",  # unsalted SHA-1
    b"",                                             # nobody
])
def test_htpasswd_with_weak_or_no_entries_is_refused(keys: Keys, content: bytes) -> None:
    with pytest.raises(KeyMaterialError) as info:
        BasicProvider(content)
    assert b"plaintext-password".decode() not in str(info.value)
    assert "W6ph5" not in str(info.value)
