"""Credentials and TLS for the admin CLIs (`strata admin`, `strata top`): options, environment, headers.

    strata admin --auth-token file:///etc/strata/admin.token tenants list
    strata admin --admin-url https://broker-1:8443 --tls-trust-cert ca.cert.pem --auth-basic user:pass ...
    strata admin --admin-url https://broker-1:8443 --tls-trust-cert ca.pem --tls-cert me.pem --tls-key me.key ...

Options (each falls back to an environment variable, for scripts and shells that should not show a
secret in `ps`):
- `--auth-token TOKEN|file:///path|env:VAR` ($STRATA_ADMIN_AUTH_TOKEN): a JWT, sent as
  `Authorization: Bearer <jwt>`;
- `--auth-params` ($STRATA_ADMIN_AUTH_PARAMS), Pulsar's authParams: `token:<jwt>`, `file:///path`
  (a token file), `{"userId": "u", "password": "p"}` (basic) or `tlsCertFile:/c.pem,tlsKeyFile:/k.pem`;
- `--auth-basic user:password` ($STRATA_ADMIN_AUTH_BASIC): `Authorization: Basic ...`;
- `--tls-trust-cert PATH` ($STRATA_ADMIN_TLS_TRUST_CERT): the CA an https:// broker is verified
  against (hostname checked); without it, the system's CAs;
- `--tls-cert PATH --tls-key PATH` ($STRATA_ADMIN_TLS_CERT, $STRATA_ADMIN_TLS_KEY): a client
  certificate (mTLS; the broker's role is its CN).

What must hold: a secret is only ever sent in the Authorization header (and re-sent on the
cluster's own 307s, which name another broker of the same cluster); it is never printed; a
credential that cannot be read is a StrataError naming where it was looked for, not a traceback.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class HttpAuth:
    """What every admin request carries: headers (Authorization) and the https context."""

    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None

    def __repr__(self) -> str:   # never the secret
        return f"HttpAuth(headers={sorted(self.headers)}, tls={self.ssl_context is not None})"


NO_AUTH = HttpAuth()


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


def from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> HttpAuth:
    """The HttpAuth the options (else the environment) ask for; InvalidArgument / KeyMaterialError
    when one cannot be used."""
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
        user, sep, _password = value("auth_basic").partition(":")
        if not sep or not user:
            raise InvalidArgument("--auth-basic is user:password")
        headers = {"Authorization": "Basic " + base64.b64encode(value("auth_basic").encode()).decode()}
    if bool(cert) != bool(key):
        raise InvalidArgument("--tls-cert and --tls-key go together")
    trust = value("tls_trust_cert")
    return HttpAuth(headers, _context(trust, cert, key) if (trust or cert) else None)


def _token(spec: str) -> str:
    token = read_source(spec, what="admin token").decode().strip()
    if not token:
        raise InvalidArgument("the admin token is empty")
    return token


def _from_params(params: str, cert: str, key: str) -> tuple[dict[str, str], str, str]:
    """(headers, cert, key) from Pulsar-style authParams."""
    if params.startswith("{"):
        try:
            data = json.loads(params)
            user, password = str(data["userId"]), str(data["password"])
        except (ValueError, KeyError, TypeError):
            raise InvalidArgument('--auth-params JSON is {"userId": "...", "password": "..."}') from None
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}, cert, key
    if params.startswith("tlsCertFile:") or params.startswith("tlsKeyFile:"):
        parts = dict(item.split(":", 1) for item in params.split(",") if ":" in item)
        return {}, parts.get("tlsCertFile", cert), parts.get("tlsKeyFile", key)
    if params.startswith("token:"):
        params = params[len("token:"):]
    return {"Authorization": "Bearer " + _token(params)}, cert, key


def _context(trust: str, cert: str, key: str) -> ssl.SSLContext:
    if trust:
        from auth.tls import client_context
        return client_context(trust, cert_file=cert, key_file=key)
    ctx = ssl.create_default_context()     # the system's CAs, a client certificate on top
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"client certificate cannot be loaded: {exc}", cert=cert, key=key) from None
    return ctx


def tls_hint(exc: BaseException) -> str:
    """What to try after an https:// broker's certificate failed the check ('' for other errors)."""
    if isinstance(getattr(exc, "reason", exc), ssl.SSLCertVerificationError):
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
