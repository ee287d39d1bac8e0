"""How this broker calls another broker's admin HTTP API: its own credentials and the CA it trusts.

    headers = peer_headers(config)      # {"Authorization": "Bearer <broker_client_auth_token>"} or {}
    ssl_ctx = peer_ssl(config)          # verifies an https:// peer against tls_trust_certs_file, or None

Every broker-to-broker HTTP call (`broker.admin.lookup.peer_call` and the 307s it follows, the load
manager's bundle unloads) sends these. The token is `broker_client_auth_token` read with
`auth.keys.read_source` (file:///..., data:, env:VAR, or the token itself) on every call, so a
rotated token file is picked up without a restart (a few bytes read; calls between brokers are
rare). The broker's role (the token's subject) must be in `super_user_roles`: a forwarded call was
already authorized where the client asked, and the broker acts for it.

What must hold: the token is only ever sent in the Authorization header, never logged; an
https:// peer is verified against `tls_trust_certs_file` (hostname checked) when it is set, else
against the system's CAs (None lets aiohttp use its default verification, never none).
"""

from __future__ import annotations

import functools
import ssl

from auth.keys import read_source
from auth.tls import client_context
from common.config import Config


def peer_headers(config: Config) -> dict[str, str]:
    """The Authorization header for another broker (empty when no broker_client_auth_token);
    KeyMaterialError when the token's source cannot be read."""
    source = config.broker_client_auth_token
    if not source:
        return {}
    token = read_source(source, what="broker_client_auth_token").decode().strip()
    return {"Authorization": f"Bearer {token}"}


def peer_ssl(config: Config) -> ssl.SSLContext | None:
    """The context an https:// peer is verified with (None: aiohttp's default, the system's CAs)."""
    if not config.tls_trust_certs_file:
        return None
    return _trusting(config.tls_trust_certs_file, config.tls_min_version)


@functools.lru_cache(maxsize=8)
def _trusting(trust_file: str, min_version: str) -> ssl.SSLContext:
    return client_context(trust_file, min_version=min_version)
