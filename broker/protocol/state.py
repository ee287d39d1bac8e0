"""The states of one binary-protocol connection, and the one check of a move between them.

AWAIT_CONNECT → [AUTHENTICATING →] READY (or REFUSED) → CLOSED; `transition` refuses any other move
with IllegalTransition. `broker.protocol.connection` holds the state; `broker.protocol.auth`
drives it up to READY.
"""

from __future__ import annotations

import enum

from common.errors import IllegalTransition


class ConnState(enum.Enum):
    AWAIT_CONNECT = "await_connect"  # TCP is open; only CONNECT is accepted
    AUTHENTICATING = "authenticating"  # CONNECT's credentials are being verified; any frame closes
    REFUSED = "refused"              # credentials refused, CONNECTED sent anyway (a C++ client, see
                                     # broker.protocol.auth): its first request gets AuthenticationError, then close
    READY = "ready"                  # CONNECTED was sent; every command is served
    CLOSED = "closed"                # transport gone; producers and consumers released


_TRANSITIONS = {
    ConnState.AWAIT_CONNECT: {ConnState.AUTHENTICATING, ConnState.READY, ConnState.CLOSED},
    ConnState.AUTHENTICATING: {ConnState.READY, ConnState.REFUSED, ConnState.CLOSED},
    ConnState.REFUSED: {ConnState.CLOSED},
    ConnState.READY: {ConnState.CLOSED},
    ConnState.CLOSED: set(),
}


def transition(old: ConnState, new: ConnState) -> ConnState:
    """`new`, if a connection may move there from `old`; else IllegalTransition."""
    if new not in _TRANSITIONS[old]:
        raise IllegalTransition("connection state", old=old.value, new=new.value)
    return new
