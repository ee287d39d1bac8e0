"""The authentication interface: credentials in, an identity out, or `AuthenticationFailed`.

Every provider (token, tls, basic, and any added later) implements `AuthenticationProvider`, and
every caller (the binary protocol's CONNECT and AUTH_RESPONSE, the admin HTTP API, the bookie
ports) goes through `auth.service.AuthenticationService`, never a provider directly.

    credentials = Credentials(method="token", data=b"eyJ...")           # CONNECT's auth_method_name/auth_data
    identity = service.authenticate(credentials)                       # Identity(role="alice", ...)

What must hold: a provider never returns an Identity for credentials it did not verify; its
errors never contain the secret it was given (a token, a password); `authenticate` does no I/O
beyond what was loaded at construction, except where the provider's docstring says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# CONNECT's auth_method_name of a client with no credentials (the official client sends "none")
NO_METHOD = "none"


@dataclass(frozen=True)
class Credentials:
    """What a peer presented. `method` is the provider's name ("token", "tls", "basic") or NO_METHOD;
    `data` its bytes (a JWT; for basic "user:password"); `peer_cert_cn` the common name of a client
    certificate the TLS layer verified against the trust store (None: no TLS or no certificate)."""

    method: str
    data: bytes = b""
    peer_cert_cn: str | None = None

    def __repr__(self) -> str:   # never the secret
        return f"Credentials(method={self.method!r}, data=<{len(self.data)} bytes>, peer_cert_cn={self.peer_cert_cn!r})"


@dataclass(frozen=True)
class Identity:
    """Who the peer is: `role` (what authorization checks), the `method` that proved it, and when that
    proof expires (`expires_at_s`, seconds since the epoch; None: never)."""

    role: str
    method: str
    expires_at_s: float | None = None

    def expired(self, now_s: float) -> bool:
        return self.expires_at_s is not None and now_s >= self.expires_at_s


class AuthenticationProvider(Protocol):
    """One way of proving a role. `method_name` is what clients send as auth_method_name."""

    method_name: str

    def authenticate(self, credentials: Credentials) -> Identity:
        """The identity `credentials` prove; AuthenticationFailed (TokenExpired, ...) otherwise."""
        ...
