"""The configured authentication providers behind one service: what every port asks.

    service = AuthenticationService.from_config(config)
    identity = await service.authenticate_async(Credentials("token", jwt_bytes))   # binary CONNECT
    identity = await service.authenticate_async(service.credentials_from_http(header, peer_cn))

OWNER: helper H1 (issue 17) implements this module; the signatures below are the contract the
binary protocol, the admin HTTP API and the tests code against.

Rules:
- authentication off (`authentication_enabled` false): every peer is `anonymous_user_role`
  (possibly ""), whatever it presents; method NO_METHOD.
- on: the provider named by `credentials.method` decides; a method not configured, or NO_METHOD
  without an `anonymous_user_role`, is AuthenticationFailed. NO_METHOD with an anonymous role is
  that role. A TLS client certificate with method "tls" is the tls provider's.
- blocking providers (bcrypt) run off the event loop in `authenticate_async`.

What must hold: no Identity without a provider's verification (or the anonymous rule above); the
service is built once per process at start and raises KeyMaterialError/ConfigError there.
"""

from __future__ import annotations

from auth.api import Credentials, Identity
from common.config import Config


class AuthenticationService:
    enabled: bool
    methods: tuple[str, ...]          # configured provider names, e.g. ("token", "tls")

    @classmethod
    def from_config(cls, config: Config) -> AuthenticationService:
        raise NotImplementedError

    def authenticate(self, credentials: Credentials) -> Identity:
        """Identity, or AuthenticationFailed (TokenExpired for an expired token)."""
        raise NotImplementedError

    async def authenticate_async(self, credentials: Credentials) -> Identity:
        raise NotImplementedError

    def credentials_from_http(self, authorization: str | None, peer_cert_cn: str | None) -> Credentials:
        """An HTTP request's credentials: `Authorization: Bearer <jwt>` → token, `Basic <b64>` → basic
        ("user:password"), none with a verified client certificate → tls, else NO_METHOD."""
        raise NotImplementedError
