"""Who may talk to a bookie: the cluster secret, client certificates, TLS on both bookie ports.

    guard = LinkGuard(config)                # bookie side, built once at start
    server = grpc.aio.server(interceptors=[guard.interceptor()])
    guard.add_port(server, "127.0.0.1:3181")  # TLS when bookie_tls_enabled
    guard.check_hello(body, peer_cn)         # the data port's first frame; AuthenticationFailed if not
    creds = LinkCredentials(config)          # client side (BookieClient, DataLink)
    config = link_config()                   # defaults + the link settings of the environment (Spark executors)
    channel = creds.channel(address, options); creds.metadata; creds.hello_body; creds.ssl_context()

A client proves itself by either of:
- the secret `bookie_auth_secret` (read with auth.keys.read_source, surrounding whitespace stripped,
  the same on brokers and bookies): on every gRPC call as `authorization: Bearer <base64(secret)>`,
  and as the body of the data link's first frame (HELLO);
- with `bookie_tls_enabled` and `bookie_tls_client_roles` set: a client certificate the TLS handshake
  verified against `tls_trust_certs_file` whose CN is one of those roles (the certificate is then
  required on both ports).
With neither set the bookie accepts anyone (dev mode; `LinkGuard.required` is False and the server
logs one WARNING at start).

Every control call is guarded, GetInfo included: it tells the data port and the bookie's disk and
ledger counts, and every caller of it (data-link discovery, the quarantine probe, tools) is a
client that holds the credentials anyway; a liveness check needs no rpc (the process, its port,
or the metrics port).

What must hold: a secret is compared with hmac.compare_digest only, never logged, never echoed in an
error; a refused gRPC call ends UNAUTHENTICATED before the servicer runs, which the client turns into
AuthenticationFailed (901, not retriable); a refused data connection gets one ERROR frame
(AuthenticationFailed) and is closed before any frame of it reaches storage. A call carrying the
right secret costs one string comparison (no handler wrapping); the data path pays once per
connection (one HELLO frame, no round trip).
"""

from __future__ import annotations

import base64
import hmac
import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path

import grpc
import grpc.aio

from auth import tls
from auth.keys import read_source
from common.config import Config, csv_setting, load_config
from common.errors import AuthenticationFailed, KeyMaterialError
from common.ratelimited_log import RateLimitedLog

log = logging.getLogger(__name__)
_REFUSED = RateLimitedLog(log, interval_s=10.0)

METADATA_KEY = "authorization"
_BEARER = "Bearer "
# The HELLO frame's body is the secret; longer than this is refused before it is buffered.
HELLO_BYTES_MAX = 4096


# What a client of bookies needs from the settings (link_config takes only these from the environment).
_LINK_SETTINGS = ("bookie_auth_secret", "bookie_tls_enabled", "tls_cert_file", "tls_key_file", "tls_trust_certs_file",
                  "tls_min_version", "bookie_client_tls_cert_file", "bookie_client_tls_key_file")


def link_config(env: Mapping[str, str] | None = None) -> Config:
    """The defaults plus the bookie-link settings of the environment (STRATA_BOOKIE_AUTH_SECRET, the TLS
    files): for ledger readers that run apart from a broker's settings, like the Spark source's executors."""
    names = {"STRATA_" + name.upper() for name in _LINK_SETTINGS}
    return load_config(env={k: v for k, v in (os.environ if env is None else env).items() if k in names})


def read_secret(config: Config) -> bytes:
    """The cluster secret bookie_auth_secret names (b"" when unset); KeyMaterialError if unreadable."""
    if not config.bookie_auth_secret:
        return b""
    secret = read_source(config.bookie_auth_secret, what="bookie_auth_secret").strip()
    if not secret:
        raise KeyMaterialError("bookie_auth_secret names an empty secret")
    if len(secret) > HELLO_BYTES_MAX:
        raise KeyMaterialError("bookie_auth_secret is longer than the HELLO frame allows",
                               bytes_max=HELLO_BYTES_MAX)
    return secret


def _bearer(secret: bytes) -> str:
    return _BEARER + base64.b64encode(secret).decode("ascii")


def _read_pem(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KeyMaterialError(f"{setting}: cannot read file ({exc.strerror})", path=path) from None


# --- bookie side ------------------------------------------------------------------------------

class LinkGuard:
    """The bookie's checks of its clients (see the module docstring). Built once at start."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._secret = read_secret(config)
        self._bearer = _bearer(self._secret).encode() if self._secret else b""
        self.roles = frozenset(csv_setting(config.bookie_tls_client_roles)) if config.bookie_tls_enabled \
            else frozenset()
        self.required = bool(self._secret or self.roles)
        self.tls = bool(config.bookie_tls_enabled)
        # Both ports' TLS material, read now (a bad file fails the start before a port is bound).
        self._grpc_credentials = self._server_credentials() if self.tls else None
        # as gRPC: a client certificate required with roles, else optional (the broker's own
        # tls_require_trusted_client_cert_on_connect is about its Pulsar port, not this one)
        self._data_ssl = (tls.server_context(config, require_client_cert=bool(self.roles))
                          if self.tls else None)

    # --- checks ---

    def secret_ok(self, presented: bytes) -> bool:
        return bool(self._secret) and hmac.compare_digest(presented, self._secret)

    def role_ok(self, common_name: str | None) -> bool:
        return common_name is not None and common_name in self.roles

    def _bearer_ok(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> bool:
        if not self._bearer:
            return False
        for key, value in metadata or ():
            if key == METADATA_KEY:
                raw = value.encode("utf-8", "replace") if isinstance(value, str) else value
                return hmac.compare_digest(raw, self._bearer)
        return False

    def check_hello(self, body: bytes | memoryview, peer_cn: str | None, peer: object) -> None:
        """The data link's HELLO (its body is the secret, or empty with a client certificate)."""
        if self.secret_ok(bytes(body)) or self.role_ok(peer_cn):
            return
        raise self.refuse("data", peer, "wrong or missing bookie secret" if body else "no bookie secret")

    def refuse(self, port: str, peer: object, reason: str) -> AuthenticationFailed:
        """The error for a refused client, logged (rate-limited; the secret never is)."""
        _REFUSED.warning((port, reason), "bookie refused a client on its %s port (%s): %s", port, peer, reason)
        return AuthenticationFailed(f"bookie refused the client: {reason}")

    # --- gRPC ---

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _GuardInterceptor(self)

    def add_port(self, server: grpc.aio.Server, address: str) -> int:
        """Bind the gRPC port (TLS with bookie_tls_enabled); 0 when it cannot be bound."""
        if self._grpc_credentials is None:
            return server.add_insecure_port(address)
        return server.add_secure_port(address, self._grpc_credentials)

    def _server_credentials(self) -> grpc.ServerCredentials:
        cfg = self._config
        key = _read_pem(cfg.tls_key_file, "tls_key_file")
        cert = _read_pem(cfg.tls_cert_file, "tls_cert_file")
        trust = _read_pem(cfg.tls_trust_certs_file, "tls_trust_certs_file") if cfg.tls_trust_certs_file else None
        # grpc asks for a client certificate only when it requires one: so it does with roles.
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=trust,
                                           require_client_auth=bool(self.roles))

    # --- data port ---

    def data_ssl_context(self) -> ssl.SSLContext | None:
        return self._data_ssl


class _GuardInterceptor(grpc.aio.ServerInterceptor):
    """Every rpc passes only with the secret in its metadata or a verified certificate of a role."""

    def __init__(self, guard: LinkGuard) -> None:
        self._guard = guard

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        guard = self._guard
        if handler is None or not guard.required or guard._bearer_ok(handler_call_details.invocation_metadata):
            return handler
        inner = handler.unary_unary
        method = handler_call_details.method

        async def checked(request, context):
            if not guard.role_ok(_grpc_peer_cn(context)):
                reason = "wrong bookie secret" if _has_authorization(context) else "no bookie secret"
                exc = guard.refuse("gRPC", f"{context.peer()} {method}", reason)
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, exc.message)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def _grpc_peer_cn(context) -> str | None:
    """The CN of the client certificate gRPC verified (it only reports verified ones), or None."""
    names = (context.auth_context() or {}).get("x509_common_name") or ()
    return names[-1].decode("utf-8", "replace") if names else None


def _has_authorization(context) -> bool:
    return any(key == METADATA_KEY for key, _ in context.invocation_metadata() or ())


# --- client side ------------------------------------------------------------------------------

class LinkCredentials:
    """What a client of bookies presents, read once (a pool shares one) from the same settings; an
    unreadable secret or TLS file is a KeyMaterialError here, not at the first add."""

    def __init__(self, config: Config) -> None:
        self.secret = read_secret(config)
        self.hello_body = self.secret        # the data link's first frame
        self.metadata: tuple[tuple[str, str], ...] | None = (
            ((METADATA_KEY, _bearer(self.secret)),) if self.secret else None)
        self.tls = bool(config.bookie_tls_enabled)
        self._grpc_credentials = _channel_credentials(config) if self.tls else None
        self._ssl_context = (tls.client_context(config.tls_trust_certs_file,
                                                cert_file=config.bookie_client_tls_cert_file,
                                                key_file=config.bookie_client_tls_key_file,
                                                min_version=config.tls_min_version) if self.tls else None)

    def channel(self, address: str, options: list) -> grpc.aio.Channel:
        if self._grpc_credentials is None:
            return grpc.aio.insecure_channel(address, options=options)
        return grpc.aio.secure_channel(address, self._grpc_credentials, options=options)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The data link's client context (server checked against the trust file and its host), or None."""
        return self._ssl_context


def _channel_credentials(config: Config) -> grpc.ChannelCredentials:
    key = cert = None
    if config.bookie_client_tls_cert_file:
        cert = _read_pem(config.bookie_client_tls_cert_file, "bookie_client_tls_cert_file")
        key = _read_pem(config.bookie_client_tls_key_file, "bookie_client_tls_key_file")
    trust = _read_pem(config.tls_trust_certs_file, "tls_trust_certs_file")
    return grpc.ssl_channel_credentials(root_certificates=trust, private_key=key, certificate_chain=cert)


def refused_call(address: str, exc: grpc.aio.AioRpcError) -> AuthenticationFailed:
    """A gRPC call the bookie refused (UNAUTHENTICATED) as the client's typed, non-retriable error."""
    return AuthenticationFailed(f"bookie {address} refused the call: check bookie_auth_secret and the "
                                f"client certificate ({exc.details()})", address=address)
