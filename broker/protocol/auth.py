"""Authentication on the binary protocol: CONNECT's credentials and their refresh (Pulsar's ServerCnx).

The connection's states (`broker.protocol.ConnState`) up to READY are driven from here:

    AWAIT_CONNECT ──CONNECT──▶ AUTHENTICATING ──verified──▶ READY ──▶ CLOSED
          │                          │   └──refused (C++)──▶ REFUSED ──first request──▶ CLOSED
          └─ other frame, deadline ──┴─ refused, any frame, deadline ──▶ CLOSED

AWAIT_CONNECT   TCP (and, on the TLS port, the handshake) is done; the first frame must be CONNECT.
AUTHENTICATING  CONNECT's credentials, Credentials(auth_method_name or "none", auth_data, the CN of
                a client certificate the TLS handshake verified), are with
                `front.authentication.authenticate_async` (a task; bcrypt runs off the loop). Any
                frame meanwhile, a second CONNECT too, closes the connection (clients wait for
                CONNECTED). A method no provider is configured for is the anonymous role when
                `anonymous_user_role` is set (Pulsar's ServerCnx): the client connects and
                authorization decides each request. Verified: `conn.identity` is set, CONNECTED sent, READY. Refused:
                ERROR{request_id=-1 (2^64-1 on the wire), AuthenticationError, "Failed to
                authenticate"}, then close, as Pulsar answers (the Java client raises
                AuthenticationException). The reason is logged, never the credentials.
REFUSED         ...except to a client whose client_version is "Pulsar-CPP-..." (the official Python,
                C++, Node clients): that client treats any frame before CONNECTED as a dropped
                connection and retries until its operation timeout, so a wrong token surfaced as
                Timeout (pulsar-client-cpp#227, measured with pulsar-client 3.13). It is sent
                CONNECTED with no identity; its first request is answered with its failure form
                (PARTITIONED_METADATA_RESPONSE / LOOKUP_RESPONSE Failed, else ERROR) carrying
                AuthenticationError "Failed to authenticate", which the client does not retry,
                and the connection closes. Nothing is served in REFUSED: a frame without a
                request id closes it, and so does the deadline.
                With authentication off the service answers the anonymous identity at once and no
                task is made: CONNECTED goes out in the same turn (a client may pipeline commands
                after CONNECT, as before authentication existed).
Deadline        `authentication_connect_timeout_ms` from the connection being made to CONNECTED;
                past it the connection is closed: a client that sends nothing, or half a frame,
                holds its socket no longer (slow loris).

Refresh (READY, an identity with an expiry; Pulsar's authenticationRefreshCheckSeconds): every
`authentication_refresh_check_interval_ms` the connection's timer asks `identity.expired(now)`.
Expired: a client that did not set feature_flags.supports_auth_refresh is closed; otherwise it gets
AUTH_CHALLENGE(auth_method_name=the identity's method, auth_data=b"refresh") and must answer
AUTH_RESPONSE within `authentication_connect_timeout_ms`. Credentials the service verifies for the
SAME role replace the identity; anything else (refused, expired, another role, no answer in time)
closes the connection, and so does an AUTH_RESPONSE no challenge asked for. Commands keep being
served while a challenge is out. A connection whose identity never expires has no timer.

What must hold: no command but CONNECT is served without an identity from the authentication
service (REFUSED answers every request with AuthenticationError and closes); the hot path (SEND,
MESSAGE, FLOW, ACK) never enters this module; a connection holds at most two timers here (the
deadline or refresh check, and a challenge's).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from auth.api import NO_METHOD, Credentials, Identity
from auth.tls import peer_common_name
from broker import SERVER_VERSION
from broker.protocol.state import ConnState
from common.errors import AuthenticationFailed, PulsarServerError, StrataError
from proto import pulsar_api_pb2 as pb
from wire.pulsar import (
    REQUEST_ID_NONE,
    encode_auth_challenge,
    encode_error,
    encode_lookup_response,
    encode_partitioned_metadata_response,
)
from wire.pulsar import CommandType as T

if TYPE_CHECKING:
    from broker.protocol.connection import ServerConnection

log = logging.getLogger(__name__)

FAILED_MESSAGE = "Failed to authenticate"      # Pulsar's ERROR message on a refused CONNECT
CPP_CLIENT_PREFIX = "Pulsar-CPP"               # client_version of clients built on pulsar-client-cpp
METHOD_LOGGED_CHARS_MAX = 32                   # a client's auth_method_name is logged this far at most
REFRESH_CHALLENGE = b"refresh"                 # Pulsar's AuthData.REFRESH_AUTH_DATA


class WireAuth:
    """One connection's authentication: the CONNECT deadline, then the refresh checks."""

    def __init__(self, conn: ServerConnection) -> None:
        self._conn = conn
        config = conn.config
        self._timeout_s = config.authentication_connect_timeout_ms / 1000
        self._check_s = config.authentication_refresh_check_interval_ms / 1000
        self.supports_refresh = False                       # CONNECT's feature_flags.supports_auth_refresh
        self._protocol_version = 0                          # negotiated at CONNECT (AUTH_CHALLENGE carries it)
        self._timer: asyncio.TimerHandle | None = None      # the CONNECT deadline, then the refresh check
        self._challenge: asyncio.TimerHandle | None = None  # an AUTH_CHALLENGE's answer deadline (None: none out)

    # --- CONNECT -------------------------------------------------------------------------------------

    def start(self) -> None:
        """The connection is made: CONNECTED must go out within the deadline."""
        self._timer = asyncio.get_running_loop().call_later(self._timeout_s, self._connect_deadline)

    def stop(self) -> None:
        """The connection is closed: no timer of ours fires again."""
        for handle in (self._timer, self._challenge):
            if handle is not None:
                handle.cancel()
        self._timer = self._challenge = None

    def before_ready(self, cmd: pb.BaseCommand) -> None:
        """A frame before READY: the first CONNECT starts authenticating; REFUSED answers a request
        with AuthenticationError; anything else closes."""
        conn = self._conn
        if conn.state is ConnState.REFUSED:
            self._refused_request(cmd)
            return
        if conn.state is not ConnState.AWAIT_CONNECT or cmd.type != T.CONNECT:
            log.info("closing %s: %s before CONNECTED", conn.peer, pb.BaseCommand.Type.Name(cmd.type))
            conn.close()
            return
        connect = cmd.connect
        self.supports_refresh = connect.feature_flags.supports_auth_refresh
        credentials = self._credentials(connect.auth_method_name, connect.auth_data)
        authentication = conn.front.authentication
        if not authentication.enabled:            # anonymous at once: no task, no turn lost
            self._ready(connect, authentication.authenticate(credentials))
            return
        conn.set_state(ConnState.AUTHENTICATING)
        conn.spawn(self._authenticate(connect, credentials))

    async def _authenticate(self, connect: pb.CommandConnect, credentials: Credentials) -> None:
        conn = self._conn
        try:
            identity = await conn.front.authentication.authenticate_async(credentials, unknown_method_anonymous=True)
        except StrataError as exc:
            if conn.state is ConnState.AUTHENTICATING:
                self._refuse(connect, credentials, exc)
            return
        if conn.state is ConnState.AUTHENTICATING:   # not closed meanwhile
            self._ready(connect, identity)

    def _ready(self, connect: pb.CommandConnect, identity: Identity) -> None:
        self._protocol_version = self._conn.complete_connect(connect, identity)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if identity.expires_at_s is not None:
            self._timer = asyncio.get_running_loop().call_later(self._check_s, self._check_expiry)

    def _refuse(self, connect: pb.CommandConnect, credentials: Credentials, exc: StrataError) -> None:
        """ERROR, then close: AuthenticationError "Failed to authenticate", or the error's own code
        when it is not a refusal (AuthenticationBusy: ServiceNotReady, which clients retry). A C++
        client is refused after CONNECTED instead (REFUSED, the module docstring)."""
        conn = self._conn
        refusal = isinstance(exc, AuthenticationFailed) or exc.server_error is None
        log.info("%s %s: authentication (%s) refused: %s", "refusing" if refusal else "closing", conn.peer,
                 credentials.method[:METHOD_LOGGED_CHARS_MAX], exc)
        if refusal and connect.client_version.startswith(CPP_CLIENT_PREFIX):
            conn.complete_connect(connect, None)
            return
        if refusal:
            conn.write(encode_error(REQUEST_ID_NONE, PulsarServerError.AuthenticationError, FAILED_MESSAGE))
        else:
            conn.write(encode_error(REQUEST_ID_NONE, exc.server_error, str(exc)))   # type: ignore[arg-type]
        conn.close()

    def _refused_request(self, cmd: pb.BaseCommand) -> None:
        """REFUSED: the request's failure form with AuthenticationError, then close."""
        conn = self._conn
        code = PulsarServerError.AuthenticationError
        if cmd.type == T.PARTITIONED_METADATA:
            conn.write(encode_partitioned_metadata_response(cmd.partitionMetadata.request_id, server_error=code,
                                                            message=FAILED_MESSAGE))
        elif cmd.type == T.LOOKUP:
            conn.write(encode_lookup_response(cmd.lookupTopic.request_id, server_error=code, message=FAILED_MESSAGE))
        else:
            request_id = next((value.request_id for field, value in cmd.ListFields()
                               if field.name != "type" and hasattr(value, "request_id")), None)
            if request_id is not None:
                conn.write(encode_error(request_id, code, FAILED_MESSAGE))
        conn.close()

    def _connect_deadline(self) -> None:
        self._timer = None
        state = self._conn.state
        if state is not ConnState.READY and state is not ConnState.CLOSED:
            log.info("closing %s: not connected within authentication_connect_timeout_ms (%d)",
                     self._conn.peer, self._conn.config.authentication_connect_timeout_ms)
            self._conn.close()

    def _credentials(self, method: str, data: bytes) -> Credentials:
        return Credentials(method or NO_METHOD, data, peer_common_name(self._conn.transport))

    # --- refresh -------------------------------------------------------------------------------------

    def _check_expiry(self) -> None:
        conn = self._conn
        self._timer = None
        identity = conn.identity
        if conn.state is not ConnState.READY or identity is None:
            return
        self._timer = asyncio.get_running_loop().call_later(self._check_s, self._check_expiry)
        if self._challenge is not None or not identity.expired(conn.front.ctx.clock.wall_ms() / 1000):
            return
        if not self.supports_refresh:
            log.info("closing %s: the credentials of role %r expired and the client cannot refresh them",
                     conn.peer, identity.role)
            conn.close()
            return
        conn.write(encode_auth_challenge(identity.method, REFRESH_CHALLENGE, self._protocol_version,
                                         SERVER_VERSION))
        self._challenge = asyncio.get_running_loop().call_later(self._timeout_s, self._no_answer)

    def _no_answer(self) -> None:
        self._challenge = None
        log.info("closing %s: no AUTH_RESPONSE within authentication_connect_timeout_ms", self._conn.peer)
        self._conn.close()

    def on_auth_response(self, cmd: pb.CommandAuthResponse) -> None:
        """AUTH_RESPONSE (READY): the answer to our challenge, verified in a task."""
        if self._challenge is None:
            log.info("closing %s: AUTH_RESPONSE without a challenge", self._conn.peer)
            self._conn.close()
            return
        credentials = self._credentials(cmd.response.auth_method_name, cmd.response.auth_data)
        self._conn.spawn(self._refresh(credentials))

    async def _refresh(self, credentials: Credentials) -> None:
        conn = self._conn
        old = conn.identity
        try:
            identity = await conn.front.authentication.authenticate_async(credentials)
            if old is None or identity.role != old.role:
                raise AuthenticationFailed("the refreshed credentials are another role's")
        except StrataError as exc:
            log.info("closing %s: refreshing the credentials of %r failed: %s", conn.peer,
                     old.role if old else None, exc)
            conn.close()
            return
        if self._challenge is not None:
            self._challenge.cancel()
            self._challenge = None
        conn.identity = identity
