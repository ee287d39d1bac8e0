"""The token provider: a JWT proves the role in its `token_auth_claim` (Pulsar's AuthenticationProviderToken).

    provider = TokenProvider.from_config(config)           # keys read and parsed once, here
    provider.authenticate(Credentials("token", b"eyJ..."))  # Identity("alice", "token", expires_at_s=...)

Keys (Pulsar's tokenSecretKey / tokenPublicKey, read as Pulsar reads them: file:///path, data:,
env:VAR, an existing path, or a bare base64 value; auth.providers.sources):
- `token_secret_key`: the raw HMAC key bytes (what `strata tokens create-secret-key` and Pulsar's
  `tokens create-secret-key` write); tokens signed HS256, HS384 or HS512 with it are accepted.
- `token_public_key` with `token_public_alg` (RS256..512, PS256..512, ES256..512): the public key
  as DER (SubjectPublicKeyInfo, what Pulsar's `tokens create-key-pair` writes), PEM, or base64 of
  the DER (Pulsar accepts a bare base64 key too). Only tokens signed with exactly that algorithm
  are accepted.
Both may be set; a token's `alg` header picks the key. Any other `alg`, "none" above all, is refused
before any signature work.

Claims: the role is the string claim `token_auth_claim` (default "sub"). With `token_audience`
set, the claim `token_audience_claim` (default "aud", a string or a list) must name it. `exp` and
`nbf` are checked with `token_allowed_clock_skew_seconds` of leeway; a passed `exp` is
TokenExpired; the identity's `expires_at_s` is `exp` itself (no leeway), None without one.

Wire facts (pulsar-client 3.13, measured with tests/auth's listener decoding the first frame):
the official client's `AuthenticationToken(t)` sends CONNECT auth_method_name="token" and
auth_data=the JWT's ASCII bytes, exactly (no "Bearer "); an HTTP lookup sends
`Authorization: Bearer <jwt>`.

What must hold: nothing but a verified signature with an accepted algorithm yields an Identity;
error messages never contain the token or any part of its payload; `authenticate` does no I/O
and is fast enough (one HMAC or one public-key verify) to run on the event loop.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from auth.api import Credentials, Identity
from auth.providers.sources import read_pulsar_source
from common.config import Config
from common.errors import AuthenticationFailed, ConfigError, KeyMaterialError, TokenExpired

METHOD = "token"
HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
PUBLIC_ALGORITHMS = RSA_ALGORITHMS + EC_ALGORITHMS
# a JWT longer than this is refused unparsed (Pulsar's tokens are a few hundred bytes)
TOKEN_BYTES_MAX = 16 * 1024
HMAC_KEY_BYTES_MIN = 32   # 256 bits, as Pulsar (jjwt) requires for HS256; its create-secret-key makes 32


@dataclass(frozen=True)
class TokenSettings:
    """What the provider checks beyond the signature (the token_* settings)."""

    role_claim: str = "sub"
    audience_claim: str = "aud"
    audience: str = ""               # "": not checked
    clock_skew_s: int = 0            # leeway on exp and nbf

    @classmethod
    def from_config(cls, config: Config) -> TokenSettings:
        return cls(config.token_auth_claim, config.token_audience_claim, config.token_audience,
                   config.token_allowed_clock_skew_seconds)


class TokenProvider:
    """Verifies JWTs against keys parsed once at construction (see the module docstring)."""

    method_name = METHOD
    blocking = False   # one HMAC or one signature check: runs on the event loop

    def __init__(self, keys: dict[str, Any], settings: TokenSettings | None = None) -> None:
        """`keys`: accepted algorithm -> the key PyJWT verifies it with (bytes for HS*, a public key)."""
        if not keys:
            raise ConfigError("the token provider needs token_secret_key or token_public_key")
        self._keys = dict(keys)
        self.algorithms: tuple[str, ...] = tuple(keys)
        self.settings = settings or TokenSettings()

    @classmethod
    def from_config(cls, config: Config) -> TokenProvider:
        keys: dict[str, Any] = {}
        if config.token_secret_key:
            secret = load_secret_key(config.token_secret_key)
            keys.update(dict.fromkeys(HMAC_ALGORITHMS, secret))
        if config.token_public_key:
            alg = config.token_public_alg
            keys[alg] = load_public_key(config.token_public_key, alg)
        return cls(keys, TokenSettings.from_config(config))

    def authenticate(self, credentials: Credentials) -> Identity:
        token = _token_text(credentials.data)
        alg = _header_alg(token)
        key = self._keys.get(alg)
        if key is None:
            raise AuthenticationFailed("token signed with an algorithm this broker does not accept",
                                       alg=alg[:16], accepted=",".join(self.algorithms))
        claims = self._verified_claims(token, key, alg)
        role = claims.get(self.settings.role_claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationFailed("token has no role claim", claim=self.settings.role_claim)
        exp = claims.get("exp")
        return Identity(role, METHOD, float(exp) if isinstance(exp, (int, float)) else None)

    def _verified_claims(self, token: str, key: Any, alg: str) -> dict[str, Any]:
        try:
            claims = jwt.decode(token, key, algorithms=[alg], leeway=self.settings.clock_skew_s,
                                options={"verify_aud": False, "verify_iss": False, "verify_sub": False,
                                         "verify_jti": False})
        except jwt.ExpiredSignatureError:
            raise TokenExpired("token expired") from None
        except jwt.ImmatureSignatureError:
            raise AuthenticationFailed("token not valid yet (nbf/iat in the future)") from None
        except jwt.InvalidSignatureError:
            raise AuthenticationFailed("token signature does not verify") from None
        except jwt.DecodeError:
            raise AuthenticationFailed("token is not a well-formed JWT") from None
        except jwt.InvalidTokenError as exc:   # a claim of the wrong type (exp not a number, ...)
            raise AuthenticationFailed("token claims invalid", reason=type(exc).__name__) from None
        if self.settings.audience:
            self._check_audience(claims)
        return claims

    def _check_audience(self, claims: dict[str, Any]) -> None:
        named = claims.get(self.settings.audience_claim)
        audiences = [named] if isinstance(named, str) else named if isinstance(named, list) else []
        if self.settings.audience not in audiences:
            raise AuthenticationFailed("token is not for this audience", claim=self.settings.audience_claim)


def _token_text(data: bytes) -> str:
    if not data.strip():
        raise AuthenticationFailed("no token presented")
    if len(data) > TOKEN_BYTES_MAX:
        raise AuthenticationFailed("token too long", bytes=len(data), max_bytes=TOKEN_BYTES_MAX)
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise AuthenticationFailed("token is not a well-formed JWT") from None


def _header_alg(token: str) -> str:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:
        raise AuthenticationFailed("token is not a well-formed JWT") from None
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise AuthenticationFailed("token header names no algorithm")
    return alg


# --- keys -------------------------------------------------------------------------------------------

def load_secret_key(spec: str) -> bytes:
    """The HMAC key `spec` names (raw bytes); KeyMaterialError when unreadable or too short."""
    secret = read_pulsar_source(spec, what="token secret key")
    if secret.lstrip().startswith(b"-----BEGIN"):
        raise KeyMaterialError("token secret key is a PEM key; an RS/ES public key goes in token_public_key")
    if len(secret) < HMAC_KEY_BYTES_MIN:
        raise KeyMaterialError("token secret key too short", bytes=len(secret), min_bytes=HMAC_KEY_BYTES_MIN)
    return secret


def load_public_key(spec: str, alg: str) -> rsa.RSAPublicKey | ec.EllipticCurvePublicKey:
    """The public key `spec` names (DER, PEM or base64 DER) checked against `alg`."""
    if alg not in PUBLIC_ALGORITHMS:
        raise ConfigError("token_public_alg must be one of " + ", ".join(PUBLIC_ALGORITHMS), alg=alg)
    key = parse_public_key(read_pulsar_source(spec, what="token public key"))
    want = rsa.RSAPublicKey if alg in RSA_ALGORITHMS else ec.EllipticCurvePublicKey
    if not isinstance(key, want):
        raise KeyMaterialError("token public key does not match token_public_alg", alg=alg,
                               key_type=type(key).__name__)
    return key


def parse_public_key(raw: bytes) -> Any:
    """A public key from PEM, DER or base64-of-DER bytes (KeyMaterialError otherwise)."""
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_public_key(raw)
        try:
            return serialization.load_der_public_key(raw)
        except ValueError:
            return serialization.load_der_public_key(base64.b64decode(raw.strip(), validate=True))
    except (ValueError, TypeError, binascii.Error):
        raise KeyMaterialError("token public key is not a PEM or DER public key") from None


def parse_private_key(raw: bytes) -> Any:
    """A private key from PEM, DER (PKCS#8, what Pulsar writes) or base64-of-DER bytes."""
    try:
        if raw.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_private_key(raw, password=None)
        try:
            return serialization.load_der_private_key(raw, password=None)
        except ValueError:
            return serialization.load_der_private_key(base64.b64decode(raw.strip(), validate=True), password=None)
    except (ValueError, TypeError, binascii.Error):
        raise KeyMaterialError("private key is not an unencrypted PEM or DER private key") from None
