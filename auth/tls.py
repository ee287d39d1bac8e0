"""SSL contexts from settings, for every TLS port and link, and who the verified peer is.

    ctx = server_context(config)                     # the broker's pulsar+ssl:// and https:// ports
    ctx = client_context(trust_file, cert_file=..., key_file=...)   # a broker connecting to a bookie
    role = peer_common_name(transport)               # CN of a client certificate the handshake verified

Server side: the certificate and key are `tls_cert_file`/`tls_key_file`. With `tls_trust_certs_file`
set, a client certificate is asked for and, if presented, verified against it (CERT_OPTIONAL), so
token and basic clients still connect over TLS; `tls_require_trusted_client_cert_on_connect` makes it
required (CERT_REQUIRED). The oldest version served is `tls_min_version`.
Client side: the server's certificate is verified against the trust file, with hostname checking.

What must hold: a context is built once per port at start; a file that cannot be read or parsed is
a KeyMaterialError naming the setting and path (at start, before any port is bound), and so is an
expired certificate or a trust file with no CA (nor self-signed) certificate in it; a peer
certificate's CN is only ever read from a certificate the handshake verified.
"""

from __future__ import annotations

import datetime
import ssl
from typing import TYPE_CHECKING, Any

from common.config import Config
from common.errors import KeyMaterialError

if TYPE_CHECKING:   # cryptography (~8 MB) loads where a certificate is parsed: a broker without TLS never does
    from cryptography import x509

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_context(config: Config, *, cert_file: str | None = None, key_file: str | None = None,
                   require_client_cert: bool | None = None) -> ssl.SSLContext:
    """The context a TLS port serves with (see the module docstring)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[config.tls_min_version]
    _load_chain(ctx, cert_file or config.tls_cert_file, key_file or config.tls_key_file)
    require = config.tls_require_trusted_client_cert_on_connect if require_client_cert is None else require_client_cert
    if config.tls_trust_certs_file:
        _load_trust(ctx, config.tls_trust_certs_file)
        ctx.verify_mode = ssl.CERT_REQUIRED if require else ssl.CERT_OPTIONAL
    elif require:
        raise KeyMaterialError("client certificates are required but tls_trust_certs_file is not set")
    return ctx


def client_context(trust_file: str, *, cert_file: str = "", key_file: str = "",
                   check_hostname: bool = True, min_version: str = "TLSv1.2") -> ssl.SSLContext:
    """A context for connecting out: the server verified against `trust_file` (hostname checked unless
    told not to), presenting `cert_file`/`key_file` when given (mTLS)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = _VERSIONS[min_version]
    _load_trust(ctx, trust_file)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if cert_file:
        _load_chain(ctx, cert_file, key_file)
    return ctx


def peer_common_name(source: Any) -> str | None:
    """The subject CN of the peer certificate the handshake verified, or None (no TLS, no certificate,
    or one not verified). `source` is an asyncio transport, an ssl.SSLObject or an ssl.SSLSocket."""
    ssl_object = source
    if hasattr(source, "get_extra_info"):
        ssl_object = source.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    try:
        cert = ssl_object.getpeercert()    # {} or None unless verified against the trust store
    except (ValueError, ssl.SSLError):
        return None
    return common_name_of(cert)


def common_name_of(cert: dict | None) -> str | None:
    """The CN of a certificate as `getpeercert()` returns it (the last CN when there are several)."""
    if not cert:
        return None
    cn = None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
    return cn


def _load_chain(ctx: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    if not cert_file or not key_file:
        raise KeyMaterialError("a TLS port needs tls_cert_file and tls_key_file")
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except FileNotFoundError as exc:   # ssl leaves exc.filename None: name both files
        raise KeyMaterialError("TLS certificate or key file not found",
                               path=exc.filename or f"{cert_file}, {key_file}") from None
    except (OSError, ssl.SSLError) as exc:
        raise KeyMaterialError(f"TLS certificate or key cannot be loaded: {exc}",
                               cert=cert_file, key=key_file) from None
    chain = _pem_certificates(cert_file)
    if chain and chain[0].not_valid_after_utc < datetime.datetime.now(datetime.UTC):
        raise KeyMaterialError("TLS certificate has expired (every client would refuse it)", path=cert_file,
                               not_after=chain[0].not_valid_after_utc.isoformat())


def _load_trust(ctx: ssl.SSLContext, trust_file: str) -> None:
    try:
        ctx.load_verify_locations(cafile=trust_file)
    except FileNotFoundError:
        raise KeyMaterialError("TLS trust file not found", path=trust_file) from None
    except (OSError, ssl.SSLError) as exc:
        raise KeyMaterialError(f"TLS trust file cannot be loaded: {exc}", path=trust_file) from None
    anchors = _pem_certificates(trust_file)
    if anchors and not any(_may_anchor(cert) for cert in anchors):
        raise KeyMaterialError("TLS trust file holds no CA certificate (none has CA:TRUE or is self-signed), "
                               "so no peer could be verified", path=trust_file)


def _pem_certificates(path: str) -> list[x509.Certificate]:
    """The PEM certificates of a file ssl has already loaded (empty if cryptography cannot parse it:
    then ssl's verdict stands)."""
    from cryptography import x509
    try:
        with open(path, "rb") as source:
            return x509.load_pem_x509_certificates(source.read())
    except (OSError, ValueError):
        return []


def _may_anchor(cert: x509.Certificate) -> bool:
    """A certificate that can verify others: a CA, or a self-signed one (pinned, or a v1 root)."""
    from cryptography import x509
    if cert.issuer == cert.subject:
        return True
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False
