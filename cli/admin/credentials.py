"""Credentials and TLS for the admin CLIs (`strata admin`, `strata top`): options, environment, headers.

    strata admin --auth-token file:///etc/strata/admin.token tenants list
    strata admin --admin-url https://broker-1:8443 --tls-trust-cert ca.cert.pem --auth-basic user:pass ...
    strata admin --admin-url https://broker-1:8443 --tls-trust-cert ca.pem --tls-cert me.pem --tls-key me.key ...

Options (each falls back to an environment variable, for scripts and shells that should not show a
secret in `ps`):
- `--auth-token TOKEN|file:///path|env:VAR` ($STRATA_ADMIN_AUTH_TOKEN): a JWT, sent as
  `Authorization: Bearer <jwt>`;
- `--auth-params` ($STRATA_ADMIN_AUTH_PARAMS), Pulsar's authParams, read by `auth.params` (the Java
  client's rule; no plugin is named, so the shape decides): `token:<jwt>`, `file:///path` (a token
  file), `{"userId": "u", "password": "p"}` (basic) or `tlsCertFile:/c.pem,tlsKeyFile:/k.pem`;
- `--auth-basic user:password` ($STRATA_ADMIN_AUTH_BASIC): `Authorization: Basic ...`;
- `--tls-trust-cert PATH` ($STRATA_ADMIN_TLS_TRUST_CERT): the CA an https:// broker is verified
  against (hostname checked); without it, the system's CAs;
- `--tls-cert PATH --tls-key PATH` ($STRATA_ADMIN_TLS_CERT, $STRATA_ADMIN_TLS_KEY): a client
  certificate (mTLS; the broker's role is its CN).

The result is an `admin_client.Credentials`; this module owns only the command-line side (options,
environment, the hints printed after a refusal).

What must hold: a secret is only ever sent in the Authorization header (and re-sent on the
cluster's own 307s, which name another broker of the same cluster); it is never printed; a
credential that cannot be read is a StrataError naming where it was looked for, not a traceback.
"""

from __future__ import annotations

import argparse
import os
import ssl
from collections.abc import Mapping

from admin_client import Credentials
from admin_client.credentials import basic_header, tls_context
from auth import params as auth_params
from auth.keys import read_source
from common.errors import InvalidArgument

ENV = {
    "auth_token": "STRATA_ADMIN_AUTH_TOKEN",
    "auth_params": "STRATA_ADMIN_AUTH_PARAMS",
    "auth_basic": "STRATA_ADMIN_AUTH_BASIC",
    "tls_trust_cert": "STRATA_ADMIN_TLS_TRUST_CERT",
    "tls_cert": "STRATA_ADMIN_TLS_CERT",
    "tls_key": "STRATA_ADMIN_TLS_KEY",
}


def add_options(p: argparse.ArgumentParser) -> None:
    """The credential and TLS options (see the module docstring)."""
    g = p.add_argument_group("authentication and TLS")
    g.add_argument("--auth-token", default=None, metavar="TOKEN|file:///PATH",
                   help=f"a JWT, or where to read it (default: ${ENV['auth_token']})")
    g.add_argument("--auth-params", default=None, metavar="PARAMS",
                   help="Pulsar-style authParams: token:<jwt>, file:///path, {\"userId\":..,\"password\":..}, "
                        f"tlsCertFile:..,tlsKeyFile:.. (default: ${ENV['auth_params']})")
    g.add_argument("--auth-basic", default=None, metavar="USER:PASSWORD",
                   help=f"HTTP basic credentials (default: ${ENV['auth_basic']})")
    g.add_argument("--tls-trust-cert", default=None, metavar="PATH",
                   help=f"CA certificate(s) to verify an https:// broker (default: ${ENV['tls_trust_cert']})")
    g.add_argument("--tls-cert", default=None, metavar="PATH",
                   help=f"client certificate for mTLS (default: ${ENV['tls_cert']})")
    g.add_argument("--tls-key", default=None, metavar="PATH",
                   help=f"client certificate's key (default: ${ENV['tls_key']})")


def from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Credentials:
    """The Credentials the options (else the environment) ask for; InvalidArgument / KeyMaterialError
    when one cannot be used. --auth-token, then --auth-basic, win over --auth-params."""
    env = os.environ if env is None else env

    def value(name: str) -> str:
        given = getattr(args, name, None)
        return given if given is not None else env.get(ENV[name], "")

    headers: dict[str, str] = {}
    cert, key = value("tls_cert"), value("tls_key")
    params = value("auth_params").strip()
    if params:
        headers, cert, key = _from_params(params, cert, key)
    if value("auth_token"):
        headers = {"Authorization": "Bearer " + _token(value("auth_token"))}
    if value("auth_basic"):
        user, sep, password = value("auth_basic").partition(":")
        if not sep or not user:
            raise InvalidArgument("--auth-basic is user:password")
        headers = {"Authorization": basic_header(user, password)}
    if bool(cert) != bool(key):
        raise InvalidArgument("--tls-cert and --tls-key go together")
    return Credentials(headers, tls_context(trust_file=value("tls_trust_cert"), cert_file=cert, key_file=key))


def _token(spec: str) -> str:
    token = read_source(spec, what="admin token").decode().strip()
    if not token:
        raise InvalidArgument("the admin token is empty")
    return token


def _from_params(params: str, cert: str, key: str) -> tuple[dict[str, str], str, str]:
    """(headers, cert, key) from Pulsar-style authParams (`auth.params`, no plugin named)."""
    try:
        parsed = auth_params.parse(None, params)
    except InvalidArgument:
        doc = auth_params.json_object(params)
        if params.startswith("{") and (doc is None or "userId" in doc or "password" in doc):
            raise InvalidArgument('--auth-params JSON is {"userId": "...", "password": "..."}') from None
        raise
    if parsed.method == auth_params.TLS:
        return {}, parsed.cert_file, parsed.key_file
    if parsed.method == auth_params.BASIC:
        return {"Authorization": basic_header(parsed.user, parsed.password)}, cert, key
    token = _token(parsed.file_uri) if parsed.token_file else parsed.token
    return {"Authorization": "Bearer " + token}, cert, key


def tls_hint(exc: BaseException) -> str:
    """What to try after an https:// broker's certificate failed the check ('' for other errors)."""
    cause = getattr(exc, "cause", None) or getattr(exc, "reason", exc)
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (" (--tls-trust-cert names the CA that signed the broker's certificate; the URL's host must be"
                " one the certificate names)")
    return ""


def hint(status: int) -> str:
    """What to try after a 401/403 ('' for other statuses)."""
    if status == 401:
        return " (the broker needs credentials: --auth-token, --auth-basic or --tls-cert/--tls-key)"
    if status == 403:
        return " (the role these credentials prove may not do this)"
    return ""
