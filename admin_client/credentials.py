"""What an admin request carries to prove who sends it, and whom it trusts over https.

    creds = Credentials.build(token=jwt)                              # Authorization: Bearer <jwt>
    creds = Credentials.build(basic=("app", "secret"))                # Authorization: Basic ...
    creds = Credentials.build(cert_file="me.pem", key_file="me.key", trust_file="ca.pem")   # mTLS
    creds = Credentials.from_auth_params(auth.params.parse(plugin, params), trust_file="ca.pem")

A token or basic pair becomes the Authorization header; a client certificate and the CA an
https:// broker is verified against become the SSL context (hostname checked). Without a CA
file, https:// is verified against the system's CAs.

What must hold: a secret lives only in `headers` and is never in a repr; a credential that cannot
be used (an unreadable certificate, a key without its certificate) is a StrataError
(InvalidArgument / KeyMaterialError) when the Credentials are built, not at the first request.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from auth.params import BASIC, TLS, TOKEN, AuthParams
from common.errors import InvalidArgument


@dataclass(frozen=True)
class Credentials:
    """The Authorization header (token, basic) and the https context (trust, client certificate)."""

    headers: Mapping[str, str] = field(default_factory=dict)   # {} = no Authorization header
    ssl_context: ssl.SSLContext | None = None                  # None = the system's CAs, no client certificate

    def __repr__(self) -> str:   # never the secret
        return f"Credentials(headers={sorted(self.headers)}, tls={self.ssl_context is not None})"

    @property
    def sends_secret(self) -> bool:
        """Whether requests carry an Authorization header (what must not travel over plain http)."""
        return any(name.lower() == "authorization" for name in self.headers)

    @classmethod
    def build(cls, *, token: str = "", basic: tuple[str, str] | None = None, cert_file: str = "",
              key_file: str = "", trust_file: str = "") -> Credentials:
        """At most one of `token` and `basic`; a client certificate (`cert_file` with `key_file`)
        and `trust_file` (the CA that signs the broker's certificate) in any combination."""
        if token and basic:
            raise InvalidArgument("a token or basic credentials, not both")
        headers = {}
        if token:
            headers["Authorization"] = "Bearer " + token
        elif basic is not None:
            headers["Authorization"] = basic_header(*basic)
        return cls(headers, tls_context(trust_file=trust_file, cert_file=cert_file, key_file=key_file))

    @classmethod
    def from_auth_params(cls, params: AuthParams, *, trust_file: str = "") -> Credentials:
        """The Credentials of Pulsar-style authParams (`auth.params.parse`); a token file is read now."""
        if params.method == TOKEN:
            return cls.build(token=params.read_token(), trust_file=trust_file)
        if params.method == BASIC:
            return cls.build(basic=(params.user, params.password), trust_file=trust_file)
        if params.method == TLS:
            return cls.build(cert_file=params.cert_file, key_file=params.key_file, trust_file=trust_file)
        raise InvalidArgument("unknown authentication method", method=params.method)


NO_CREDENTIALS = Credentials()


def basic_header(user: str, password: str) -> str:
    """`Basic base64(user:password)` (RFC 7617)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def tls_context(*, trust_file: str = "", cert_file: str = "", key_file: str = "") -> ssl.SSLContext | None:
    """The https context: verified against `trust_file` (else the system's CAs), presenting the
    client certificate when one is given; None when neither is (urllib's default context)."""
    if bool(cert_file) != bool(key_file):
        raise InvalidArgument("a client certificate and its key go together")
    if trust_file:
        from auth.tls import client_context
        return client_context(trust_file, cert_file=cert_file, key_file=key_file)
    if not cert_file:
        return None
    ctx = ssl.create_default_context()     # the system's CAs, a client certificate on top
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"client certificate cannot be loaded: {exc}", cert=cert_file, key=key_file) from None
    return ctx
