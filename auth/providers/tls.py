"""The tls provider: a client certificate the TLS layer verified proves the role in its common name
(Pulsar's AuthenticationProviderTls).

    provider = TlsProvider()
    provider.authenticate(Credentials("tls", b"", peer_cert_cn="alice"))   # Identity("alice", "tls")

The certificate check itself (chain to `tls_trust_certs_file`, validity dates) is the TLS
handshake's (auth.tls.server_context); the server passes the verified certificate's CN as
`Credentials.peer_cert_cn` (auth.tls.peer_common_name). No certificate, or one without a CN, is
AuthenticationFailed.

Wire facts (pulsar-client 3.13, measured with tests/auth's listener decoding the first frame):
`AuthenticationTLS(cert, key)` sends CONNECT auth_method_name="tls" and no auth_data (empty); the
certificate travels only in the TLS handshake. Over HTTP it sends no Authorization header.

What must hold: only a CN the handshake verified makes an identity; data in the CONNECT is ignored.
"""

from __future__ import annotations

from auth.api import Credentials, Identity
from common.config import Config
from common.errors import AuthenticationFailed

METHOD = "tls"
COMMON_NAME_CHARS_MAX = 1024


class TlsProvider:
    """The verified client certificate's CN is the role."""

    method_name = METHOD
    blocking = False

    @classmethod
    def from_config(cls, config: Config) -> TlsProvider:
        return cls()

    def authenticate(self, credentials: Credentials) -> Identity:
        cn = credentials.peer_cert_cn
        if cn is None:
            raise AuthenticationFailed("tls authentication needs a client certificate the broker trusts")
        if not cn or len(cn) > COMMON_NAME_CHARS_MAX:
            raise AuthenticationFailed("client certificate has no usable common name")
        return Identity(cn, METHOD)
