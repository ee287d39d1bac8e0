"""Making and checking JWTs and their keys: what `strata tokens` (Pulsar's `pulsar tokens`) does.

    secret = create_secret_key("HS256")                          # 32 random bytes (tokenSecretKey)
    pair = create_key_pair("RS256")                              # pair.private_der / pair.public_der
    token = create_token(secret, "alice", algorithm="HS256", expires_in_s=parse_duration_s("30d"))
    claims = validate_token(token, secret)                       # {"sub": "alice", "exp": ...}

Compatibility with Pulsar: secret keys are raw bytes (HS256: 32, HS384: 48, HS512: 64); key pairs
are written as Pulsar writes them, DER (PKCS#8 private, X.509 SubjectPublicKeyInfo public), or PEM
on request; keys are read from either form (auth.providers.token.parse_*_key). RSA keys are 2048
bits; ES256/384/512 use P-256/P-384/P-521. Durations are Pulsar's relative times: a number and a
unit s, m, h, d, w or y (365 days); a bare number is seconds.

What must hold: a token is only called valid after its signature verified with an algorithm of the
key's kind ("none" never); an error names what is wrong, never the key.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from auth.providers.token import EC_ALGORITHMS, HMAC_ALGORITHMS, RSA_ALGORITHMS
from common.errors import AuthenticationFailed, ConfigError, InvalidDuration, KeyMaterialError, TokenExpired

SECRET_KEY_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
RSA_KEY_BITS = 2048
EC_CURVES: dict[str, type[ec.EllipticCurve]] = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}
DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400}
DURATION_S_MAX = 1000 * 365 * 86_400
_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_duration_s(text: str) -> int:
    """Seconds in a relative time such as "30d", "2h", "1y", "90" (InvalidDuration otherwise)."""
    match = _DURATION.match(text)
    if match is None:
        raise InvalidDuration("a duration is <number><unit>, unit one of s, m, h, d, w, y", value=text)
    number, unit = int(match.group(1)), match.group(2) or "s"
    factor = DURATION_UNITS_S.get(unit)
    if factor is None:
        raise InvalidDuration(f"unknown duration unit {unit!r} (s, m, h, d, w, y)", value=text)
    if number * factor > DURATION_S_MAX:
        raise InvalidDuration("duration too long", value=text, max_s=DURATION_S_MAX)
    return number * factor


def create_secret_key(algorithm: str = "HS256") -> bytes:
    """Random bytes for an HMAC algorithm (ConfigError for any other)."""
    size = SECRET_KEY_BYTES.get(algorithm)
    if size is None:
        raise ConfigError("a secret key is for HS256, HS384 or HS512", algorithm=algorithm)
    return secrets.token_bytes(size)


@dataclass(frozen=True)
class KeyPair:
    private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    algorithm: str

    @property
    def private_der(self) -> bytes:
        return self.private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption())

    @property
    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption())

    @property
    def public_der(self) -> bytes:
        return self.private_key.public_key().public_bytes(serialization.Encoding.DER,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo)

    @property
    def public_pem(self) -> bytes:
        return self.private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo)


def create_key_pair(algorithm: str = "RS256") -> KeyPair:
    """A new RSA (RS*/PS*) or EC (ES*) key pair (ConfigError for other algorithms)."""
    if algorithm in RSA_ALGORITHMS:
        return KeyPair(rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS), algorithm)
    curve = EC_CURVES.get(algorithm)
    if curve is None:
        raise ConfigError("a key pair is for RS256..RS512, PS256..PS512 or ES256..ES512", algorithm=algorithm)
    return KeyPair(ec.generate_private_key(curve()), algorithm)


def algorithm_for_key(key: Any) -> str:
    """The default algorithm of a key: HS256 for bytes, RS256 for RSA, ES256/384/512 by curve."""
    if isinstance(key, bytes):
        return "HS256"
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        return "RS256"
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        for alg, curve in EC_CURVES.items():
            if isinstance(key.curve, curve):
                return alg
    raise ConfigError("unsupported key type for tokens", key_type=type(key).__name__)


def algorithms_for_key(key: Any) -> tuple[str, ...]:
    """Every algorithm a token verified with `key` may use (HS* for a secret, the RSA or one EC family)."""
    if isinstance(key, bytes):
        return HMAC_ALGORITHMS
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        return RSA_ALGORITHMS
    alg = algorithm_for_key(key)
    return (alg,) if alg in EC_ALGORITHMS else ()


def create_token(key: Any, subject: str, *, algorithm: str | None = None, expires_in_s: int | None = None,
                 headers: dict[str, str] | None = None, now_s: float | None = None,
                 claims: dict[str, Any] | None = None) -> str:
    """A JWT with `sub` = subject (and `exp` when `expires_in_s` is given), signed with `key`."""
    algorithm = algorithm or algorithm_for_key(key)
    if algorithm not in algorithms_for_key(key):
        raise ConfigError("signature algorithm does not fit the key", algorithm=algorithm,
                          fits=",".join(algorithms_for_key(key)))
    if not subject:
        raise ConfigError("a token needs a subject (the role)")
    payload: dict[str, Any] = {**(claims or {}), "sub": subject}
    if expires_in_s is not None:
        payload["exp"] = int((time.time() if now_s is None else now_s) + expires_in_s)
    try:
        return jwt.encode(payload, key, algorithm=algorithm, headers=headers or None)
    except jwt.InvalidKeyError:
        raise KeyMaterialError("the key cannot sign tokens", algorithm=algorithm) from None


def validate_token(token: str, key: Any, *, algorithms: tuple[str, ...] | None = None,
                   leeway_s: int = 0) -> dict[str, Any]:
    """The claims of `token` once its signature verified with `key` (a secret's bytes or a public key);
    AuthenticationFailed (TokenExpired) otherwise."""
    allowed = list(algorithms or algorithms_for_key(key))
    try:
        header = jwt.get_unverified_header(token.strip())
        if header.get("alg") not in allowed:
            raise AuthenticationFailed("token algorithm not accepted for this key",
                                       alg=str(header.get("alg"))[:16], accepted=",".join(allowed))
        claims: dict[str, Any] = jwt.decode(token.strip(), key, algorithms=allowed, leeway=leeway_s,
                                            options={"verify_aud": False})
        return claims
    except jwt.ExpiredSignatureError:
        raise TokenExpired("token expired") from None
    except jwt.InvalidSignatureError:
        raise AuthenticationFailed("token signature does not verify with this key") from None
    except jwt.InvalidKeyError:
        raise KeyMaterialError("the key cannot verify tokens") from None
    except jwt.InvalidTokenError as exc:
        raise AuthenticationFailed("token invalid", reason=type(exc).__name__) from None


def show_token(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) of `token` WITHOUT verifying it (AuthenticationFailed if it is no JWT)."""
    try:
        header = jwt.get_unverified_header(token.strip())
        claims = jwt.decode(token.strip(), options={"verify_signature": False})
    except jwt.InvalidTokenError:
        raise AuthenticationFailed("not a well-formed JWT") from None
    return header, claims
