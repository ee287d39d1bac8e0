"""SASL/PLAIN on a Kafka listener: SaslHandshake (17) and SaslAuthenticate (36), over Strata's tokens.

Order (Kafka's, and what all four clients do): ApiVersions, SaslHandshake v1 `PLAIN`, then one
SaslAuthenticate carrying the RFC 4616 PLAIN message `[authzid] NUL username NUL password`;
until it succeeds the connection serves nothing else (`broker.kafka.handlers.dispatch`).

Credentials, as KoP mapped them onto Pulsar's: the password is `<method>:<credential>`, the text
before the first ':' naming the authentication provider (`token`) and the rest its credential
(the JWT): `token:eyJ...`. The provider's role is the connection's identity, which authorization
checks. The username is a tenant or `tenant/namespace`; that tenant (or namespace) must exist.
A `tenant/namespace` becomes the connection's namespace (`conn.namespace`, as KoP's multi-tenant
mode): its bare topic names resolve there instead of in `kafka_default_namespace`. The authzid may
be empty (librdkafka, kafkajs) or the username (kafka-python, aiokafka); another is refused, as
Kafka refuses it.

Decisions:
- SaslHandshake v0 means raw SASL tokens follow outside Kafka frames; Strata reads only Kafka
  frames, so v0 is answered UNSUPPORTED_SASL_MECHANISM with no mechanisms and the connection
  closed (every current client uses v1). A listener without SASL answers the same way.
- A mechanism other than PLAIN: UNSUPPORTED_SASL_MECHANISM listing ["PLAIN"], then close.
- Failure: SASL_AUTHENTICATION_FAILED "Authentication failed", then close; the reason is logged
  (never the password or token).
- Success: session_lifetime_ms (v1+) is the token's remaining lifetime when it has an expiry
  (0 otherwise); clients that know KIP-368 then authenticate again on the same connection
  (SaslHandshake + SaslAuthenticate while READY), which must prove the same role. Strata does not
  close a connection whose session lapsed; the token was checked at its start.

What must hold: no request but ApiVersions/SASL is served before success; a failed
authentication always closes; nothing logged or answered contains the credential.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auth.api import Credentials
from broker.kafka.connection import KafkaConnState
from broker.records import policies, tenancy
from common.errors import AuthenticationBusy, AuthenticationFailed
from wire.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from broker.kafka.connection import KafkaConnection
    from wire.kafka.codec import Request

log = logging.getLogger(__name__)
PLAIN = "PLAIN"
PLAIN_BYTES_MAX = 64 * 1024      # a PLAIN message (a JWT is a few KiB); longer is refused unread
FAILED = "Authentication failed"


@dataclass(frozen=True)
class PlainCredentials:
    username: str
    password: str

    def __repr__(self) -> str:     # never the password
        return f"PlainCredentials(username={self.username!r}, password=<{len(self.password)} chars>)"


def parse_plain(message: bytes) -> PlainCredentials:
    """RFC 4616 `[authzid] NUL authcid NUL passwd`; ValueError (never quoting the password) when
    malformed, an empty username or password, or an authzid other than the username."""
    if len(message) > PLAIN_BYTES_MAX:
        raise ValueError(f"PLAIN message of {len(message)} bytes (limit {PLAIN_BYTES_MAX})")
    parts = message.split(b"\0")
    if len(parts) != 3:
        raise ValueError("PLAIN message must be [authzid] NUL username NUL password")
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise ValueError("PLAIN message is not UTF-8") from None
    if not username or not password:
        raise ValueError("PLAIN username and password must not be empty")
    if authzid and authzid != username:
        raise ValueError("PLAIN authorization id differs from the username")
    return PlainCredentials(username, password)


def split_password(password: str) -> tuple[str, bytes]:
    """`<method>:<credential>` -> (method, credential bytes); ValueError otherwise."""
    method, colon, credential = password.partition(":")
    if not colon or not method or not credential:
        raise ValueError("PLAIN password must be <method>:<credential>, e.g. token:<jwt>")
    return method, credential.encode("utf-8")


def split_username(username: str) -> tuple[str, str | None]:
    """`tenant` or `tenant/namespace` -> (tenant, namespace or None); ValueError otherwise."""
    parts = username.split("/")
    if len(parts) > 2 or not all(parts):
        raise ValueError("PLAIN username must be a tenant or tenant/namespace")
    return parts[0], parts[1] if len(parts) == 2 else None


async def handshake(conn: KafkaConnection, req: Request) -> dict:
    mechanism = req.body.get("mechanism") or ""
    if req.api_version == 0 or not conn.listener.sasl:
        conn.close_after_reply = True
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}
    if conn.sasl_mechanism is not None and conn.state is KafkaConnState.AWAIT_SASL:
        conn.close_after_reply = True          # a second handshake before authenticating
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": [PLAIN]}
    if mechanism != PLAIN:
        conn.close_after_reply = True
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": [PLAIN]}
    conn.sasl_mechanism = PLAIN
    return {"error_code": ErrorCode.NONE, "mechanisms": [PLAIN]}


async def _namespace_exists(conn: KafkaConnection, tenant: str, namespace: str | None) -> bool:
    astore = conn.front.service.astore
    path = policies.namespace_path(tenant, namespace) if namespace is not None else tenancy.tenant_path(tenant)
    return await astore.get(path) is not None


def _refused(conn: KafkaConnection, reason: str) -> dict:
    log.info("kafka %s: SASL/PLAIN authentication failed: %s", conn.peer, reason)
    conn.close_after_reply = True
    return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": FAILED, "auth_bytes": b"",
            "session_lifetime_ms": 0}


async def authenticate(conn: KafkaConnection, req: Request) -> dict:
    if conn.sasl_mechanism != PLAIN or not conn.listener.sasl:
        conn.close_after_reply = True
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "SaslHandshake PLAIN must come first",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    try:
        plain = parse_plain(bytes(req.body.get("auth_bytes") or b""))
        tenant, namespace = split_username(plain.username)
        method, credential = split_password(plain.password)
    except ValueError as exc:
        return _refused(conn, str(exc))
    try:
        identity = await conn.front.authentication.authenticate_async(Credentials(method, credential, None))
    except (AuthenticationFailed, AuthenticationBusy) as exc:
        return _refused(conn, f"user {plain.username!r}: {exc}")
    if conn.identity is not None and identity.role != conn.identity.role:
        return _refused(conn, f"re-authentication as role {identity.role!r}, not {conn.identity.role!r}")
    if not await _namespace_exists(conn, tenant, namespace):
        return _refused(conn, f"user {plain.username!r}: no such tenant or namespace")
    conn.identity = identity
    conn.namespace = f"{tenant}/{namespace}" if namespace is not None else None
    conn.state = KafkaConnState.READY
    lifetime_ms = 0
    if identity.expires_at_s is not None:
        lifetime_ms = max(1, int(identity.expires_at_s * 1000) - conn.front.ctx.clock.wall_ms())
    return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": b"",
            "session_lifetime_ms": lifetime_ms}
