"""The configured authentication providers behind one service: what every port asks.

    service = AuthenticationService.from_config(config)
    identity = await service.authenticate_async(Credentials("token", jwt_bytes))   # binary CONNECT
    identity = await service.authenticate_async(service.credentials_from_http(header, peer_cn))

Rules:
- authentication off (`authentication_enabled` false): every peer is `anonymous_user_role`
  (possibly ""), whatever it presents; method NO_METHOD.
- on: the provider named by `credentials.method` decides; NO_METHOD (or an empty method) without an
  `anonymous_user_role` is AuthenticationFailed, with one it is that role. A TLS client certificate
  with method "tls" is the tls provider's.
- a method no provider is configured for: with `unknown_method_anonymous` (the binary protocol's
  CONNECT and the admin HTTP API, as Pulsar's ServerCnx and AuthenticationService) it is the
  anonymous role when one is set, and authorization decides what that role may do; otherwise, and
  always without an anonymous role, AuthenticationFailed. The default (the Kafka SASL port, the
  binary protocol's credential refresh) refuses it, as KoP does. Credentials a configured provider
  refuses never fall back to the anonymous role.
- HTTP: a request naming its method in `X-Pulsar-Auth-Method-Name` (Pulsar's Java clients send it)
  is refused when no provider has that name, anonymous role or not ("Unsupported authentication
  method: [name].", as Pulsar's AuthenticationService); a request without it is routed by its
  `Authorization` scheme, and a scheme no configured provider takes is an unknown method (above).
- blocking providers (basic: bcrypt) run off the event loop in `authenticate_async`, on at most
  BLOCKING_THREADS threads of the service's own pool, with at most BLOCKING_PENDING_MAX checks queued
  or running; past that a check is refused at once with AuthenticationBusy (retriable; clients
  reconnect), so a flood of basic CONNECTs holds a bounded amount of memory and no loop time.
  Identical credentials arriving while their check is pending share it (single flight), and the
  basic provider remembers credentials it verified, so many connections of one user cost one bcrypt.

Wire facts (pulsar-client 3.13 `import pulsar`, measured by tests/auth/test_client_wire.py, which
decodes the first frame the official client sends to a listener, and the HTTP request of an
http:// service URL lookup):
- no authentication: CONNECT auth_method_name "none" (NO_METHOD) and no auth_data field; HTTP: no
  Authorization header. (An absent method, "", is treated as NO_METHOD.)
- AuthenticationToken(t): auth_method_name "token", auth_data the JWT; HTTP `Authorization: Bearer <jwt>`.
- AuthenticationBasic(u, p): auth_method_name "basic", auth_data b"u:p"; HTTP `Authorization: Basic
  base64(u:p)`.
- AuthenticationTLS(cert, key): auth_method_name "tls", empty auth_data (the certificate is in the TLS
  handshake); HTTP: no Authorization header, the client certificate.

What must hold: no Identity without a provider's verification (or the anonymous rule above); the
service is built once per process at start and raises KeyMaterialError/ConfigError there; no
error message contains a token or password.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import functools
import hashlib
import hmac
import logging
import secrets
import threading

from auth.api import NO_METHOD, AuthenticationProvider, Credentials, Identity
from auth.providers import build, is_blocking
from common.config import Config, auth_providers
from common.errors import AuthenticationBusy, AuthenticationFailed

BLOCKING_THREADS = 2            # threads running slow checks (bcrypt); the machine's cores are the limit anyway
BLOCKING_PENDING_MAX = 64       # slow checks queued or running; one more is AuthenticationBusy
HTTP_AUTHORIZATION_CHARS_MAX = 16 * 1024
HTTP_METHOD_HEADER = "X-Pulsar-Auth-Method-Name"    # Pulsar's header naming a request's method (Java clients)
METHOD_CHARS_MAX = 32           # a client's method name is quoted (errors, logs) this far at most
# Pulsar's words when a method has no provider and there is no anonymous role to fall back to
NO_PROVIDER_NO_ANONYMOUS = "No anonymous role, and no authentication provider configured"

log = logging.getLogger(__name__)


class AuthenticationService:
    enabled: bool
    methods: tuple[str, ...]          # configured provider names, e.g. ("token", "tls"); () when off

    def __init__(self, providers: dict[str, AuthenticationProvider], *, enabled: bool = True,
                 anonymous_role: str = "") -> None:
        self.enabled = enabled
        self.anonymous_role = anonymous_role     # "": a peer without credentials is refused (when enabled)
        self._providers = dict(providers) if enabled else {}
        self.methods = tuple(self._providers)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None   # made at the first slow check
        self._lock = threading.Lock()
        self._pending = 0                        # slow checks submitted and not finished
        # credentials' keyed hash -> their pending slow check: a reconnect storm of one user costs one bcrypt
        self._in_flight: dict[bytes, concurrent.futures.Future[Identity]] = {}   # at most BLOCKING_PENDING_MAX
        self._flight_secret = secrets.token_bytes(32)

    @classmethod
    def from_config(cls, config: Config) -> AuthenticationService:
        providers: dict[str, AuthenticationProvider] = {}
        if config.authentication_enabled:
            providers = {name: build(name, config) for name in auth_providers(config)}
        return cls(providers, enabled=config.authentication_enabled, anonymous_role=config.anonymous_user_role)

    def authenticate(self, credentials: Credentials, *, unknown_method_anonymous: bool = False) -> Identity:
        """Identity, or AuthenticationFailed (TokenExpired for an expired token). With
        `unknown_method_anonymous`, a method no provider is configured for is the anonymous role
        when one is set (Pulsar's ServerCnx and HTTP authentication)."""
        decided = self._route(credentials, unknown_method_anonymous)
        if isinstance(decided, Identity):
            return decided
        return decided.authenticate(credentials)

    async def authenticate_async(self, credentials: Credentials, *,
                                 unknown_method_anonymous: bool = False) -> Identity:
        """As `authenticate`; a blocking provider runs on the service's bounded pool (AuthenticationBusy
        when BLOCKING_PENDING_MAX checks are already pending)."""
        decided = self._route(credentials, unknown_method_anonymous)
        if isinstance(decided, Identity):
            return decided
        if not is_blocking(decided):
            return decided.authenticate(credentials)
        # shielded: a waiter that goes away (its connection closed) must not cancel a check others share
        return await asyncio.shield(asyncio.wrap_future(self._submit(decided, credentials)))

    def credentials_from_http(self, authorization: str | None, peer_cert_cn: str | None,
                              method_name: str | None = None) -> Credentials:
        """An HTTP request's credentials: `Authorization: Bearer <jwt>` → token, `Basic <b64>` → basic
        ("user:password"), none with a verified client certificate → tls, else NO_METHOD. `method_name`
        is the request's X-Pulsar-Auth-Method-Name: that provider decides, and a name no provider has is
        AuthenticationFailed at once (authentication on). An oversized header is AuthenticationFailed."""
        derived = self._credentials_of_header(authorization, peer_cert_cn)
        if method_name is None or not self.enabled:
            return derived
        if method_name not in self._providers:
            raise AuthenticationFailed(f"Unsupported authentication method: [{method_name[:METHOD_CHARS_MAX]}].",
                                       methods=",".join(self.methods))
        if derived.method == method_name:
            return derived
        return Credentials(method_name, b"", peer_cert_cn)   # the named provider finds no credentials of its kind

    def _credentials_of_header(self, authorization: str | None, peer_cert_cn: str | None) -> Credentials:
        header = (authorization or "").strip()
        if not header:
            return Credentials("tls", b"", peer_cert_cn) if peer_cert_cn else Credentials(NO_METHOD)
        if len(header) > HTTP_AUTHORIZATION_CHARS_MAX:
            raise AuthenticationFailed("Authorization header too long", chars_max=HTTP_AUTHORIZATION_CHARS_MAX)
        scheme, _, value = header.partition(" ")
        scheme, value = scheme.lower(), value.strip()
        if scheme == "bearer":
            return Credentials("token", value.encode("utf-8", "replace"), peer_cert_cn)
        if scheme == "basic":
            try:
                return Credentials("basic", base64.b64decode(value, validate=True), peer_cert_cn)
            except (binascii.Error, ValueError):
                return Credentials("basic", b"", peer_cert_cn)         # refused by the provider: not user:password
        return Credentials(f"http:{scheme[:32]}", b"", peer_cert_cn)   # an unknown scheme is no configured method

    def close(self) -> None:
        """Stop the slow-check threads (pending checks finish first)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    # --- internals ---

    def _route(self, credentials: Credentials, unknown_method_anonymous: bool) -> Identity | AuthenticationProvider:
        """The identity the rules give without a provider, or the provider that must decide."""
        if not self.enabled:
            return Identity(self.anonymous_role, NO_METHOD)
        method = credentials.method or NO_METHOD
        if method == NO_METHOD:
            if self.anonymous_role:
                return Identity(self.anonymous_role, NO_METHOD)
            raise AuthenticationFailed("authentication required: no credentials presented",
                                       methods=",".join(self.methods))
        provider = self._providers.get(method)
        if provider is not None:
            return provider
        if not unknown_method_anonymous:
            raise AuthenticationFailed("authentication method not configured", method=method[:METHOD_CHARS_MAX],
                                       methods=",".join(self.methods))
        if not self.anonymous_role:
            raise AuthenticationFailed(NO_PROVIDER_NO_ANONYMOUS, method=method[:METHOD_CHARS_MAX],
                                       methods=",".join(self.methods))
        # Pulsar says nothing above debug here either: authorization decides what the role may do
        log.debug("authentication method %r has no provider: the anonymous role %r",
                  method[:METHOD_CHARS_MAX], self.anonymous_role)
        return Identity(self.anonymous_role, NO_METHOD)

    def _submit(self, provider: AuthenticationProvider,
                credentials: Credentials) -> concurrent.futures.Future[Identity]:
        """The pending check of these very credentials, or a new one (AuthenticationBusy past the bound)."""
        key = self._flight_key(provider, credentials)
        with self._lock:
            shared = self._in_flight.get(key)
            if shared is not None:
                return shared
            if self._pending >= BLOCKING_PENDING_MAX:
                raise AuthenticationBusy("too many authentications in progress", pending=self._pending)
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(BLOCKING_THREADS, "auth-verify")
            future = self._executor.submit(provider.authenticate, credentials)
            self._pending += 1
            self._in_flight[key] = future
        future.add_done_callback(functools.partial(self._finished, key))
        return future

    def _flight_key(self, provider: AuthenticationProvider, credentials: Credentials) -> bytes:
        """Identifies identical credentials without keeping them: a keyed hash (the key never leaves)."""
        mac = hmac.new(self._flight_secret, provider.method_name.encode(), hashlib.sha256)
        mac.update(b"\0" + credentials.data + b"\0" + (credentials.peer_cert_cn or "").encode())
        return mac.digest()

    def _finished(self, key: bytes, _future: concurrent.futures.Future[Identity]) -> None:
        with self._lock:
            self._pending -= 1
            self._in_flight.pop(key, None)
