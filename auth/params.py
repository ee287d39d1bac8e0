"""Pulsar's `authParams` string, parsed by one rule: the Java client's.

    parse("org.apache.pulsar.client.impl.auth.AuthenticationToken", "file:///etc/strata/admin.token")
    parse("basic", '{"userId": "app", "password": "secret"}')
    parse("tls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem")
    parse(None, params)        # no plugin named (`strata admin --auth-params`): the shape decides
    params.read_token()        # the token itself, or the content of its file

Which rule, and why that one: Apache Pulsar's Java client. `AuthenticationUtil.create(plugin,
authParamsString)` is what pulsar-admin's `--auth-params`, the Java client's
`authentication(plugin, params)` and StreamNative's pulsar-spark connector (whose option names the
Spark source takes) go through; each built-in plugin parses the string itself
(`EncodedAuthenticationParameterSupport.configure(String)`):
- AuthenticationToken: `token:<jwt>` is the token as written; `file:<uri>` names a file that holds
  it (a `file:///absolute/path` URI, read whole, whitespace trimmed); else a JSON object's
  "token"; else (not a JSON object) the whole string is the token.
- AuthenticationBasic: a JSON object with "userId" and "password", nothing else. (The C++ and
  Python clients read `{"username": ...}` instead; that is not Java's, and is refused here.)
- AuthenticationTls: a JSON object of strings, else Pulsar 1's `key:value,key:value`
  (`AuthenticationUtil.configureFromPulsar1AuthParamString`: split at commas, each part at its first
  colon, a part with an empty value dropped, keys case-sensitive, nothing trimmed); then
  "tlsCertFile" and "tlsKeyFile".
Plugin names: the Java class names, or the short "token" / "basic" / "tls" of the C++ and Python
clients, compared case-insensitively as the C++ client compares them.

Where Strata is stricter than Java, which would fail later, at the first use: a missing or empty
key is refused here, with the key named; a basic userId with a colon too (HTTP basic cannot carry
it, RFC 7617). The whole string is stripped of surrounding whitespace first (a trailing newline
from a file or an environment variable).

No plugin named: a JSON object with "userId" is basic, one with "tlsCertFile" or "tlsKeyFile"
(JSON or key:value) is tls; anything else is a token, read as AuthenticationToken reads it, except
a string that opens with `{` and is no JSON object (a typo, refused rather than sent as a token).

What must hold: `parse` does no I/O (a token file is read by `read_token`); an error is an
InvalidArgument that names the key or the shape expected, never the string itself (it may be a
secret).
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field

from auth.keys import read_source
from common.errors import InvalidArgument, KeyMaterialError

TOKEN, BASIC, TLS = "token", "basic", "tls"
_JAVA = "org.apache.pulsar.client.impl.auth."
# plugin name (lower case) -> method
PLUGINS = {"token": TOKEN, _JAVA + "authenticationtoken": TOKEN,
           "basic": BASIC, _JAVA + "authenticationbasic": BASIC,
           "tls": TLS, _JAVA + "authenticationtls": TLS}
_TLS_KEYS = frozenset({"tlsCertFile", "tlsKeyFile"})
KNOWN_PLUGINS = "AuthenticationToken, AuthenticationBasic, AuthenticationTls (or token, basic, tls)"


@dataclass(frozen=True)
class AuthParams:
    """One parsed authParams string. Only the fields of `method` are set; the others stay ""."""

    method: str                                    # TOKEN, BASIC or TLS
    token: str = field(default="", repr=False)     # token: the token itself ("" when it is in token_file)
    token_file: str = ""                           # token: the file that holds it ("" when given inline)
    user: str = ""                                 # basic: the userId
    password: str = field(default="", repr=False)  # basic
    cert_file: str = ""                            # tls: the client certificate (PEM)
    key_file: str = ""                             # tls: its private key (PEM)

    def read_token(self, what: str = "token") -> str:
        """The token: as given, or its file's content with surrounding whitespace trimmed (as Java's
        file supplier trims). KeyMaterialError (naming `what`) when the file cannot be read or
        holds no token."""
        if not self.token_file:
            return self.token
        try:
            token = read_source(self.file_uri, what=what).decode().strip()
        except UnicodeDecodeError:
            raise KeyMaterialError(f"{what}: the file is not text", path=self.token_file) from None
        if not token:
            raise KeyMaterialError(f"{what}: the file holds no token", path=self.token_file)
        return token

    @property
    def file_uri(self) -> str:
        """token_file as a file:/// URI (`auth.keys.read_source` reads it), "" when there is none."""
        return "file://" + urllib.parse.quote(self.token_file) if self.token_file else ""


def method_of(plugin: str) -> str:
    """TOKEN, BASIC or TLS for a plugin name (see the module docstring); InvalidArgument otherwise."""
    method = PLUGINS.get(plugin.strip().lower())
    if method is None:
        raise InvalidArgument("unsupported authentication plugin", plugin=plugin, known=KNOWN_PLUGINS)
    return method


def parse(plugin: str | None, params: str) -> AuthParams:
    """The AuthParams `params` says for `plugin` (None or "": inferred from the shape of `params`)."""
    text = params.strip()
    method = method_of(plugin) if plugin else _inferred(text)
    if method == TOKEN:
        return _token(text)
    if method == BASIC:
        return _basic(text)
    return _tls(text)


def pulsar1_params(text: str) -> dict[str, str]:
    """Pulsar 1's `k1:v1,k2:v2` (AuthenticationUtil.configureFromPulsar1AuthParamString): each part
    split at its first colon, a part without a colon or with an empty value dropped."""
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition(":")
        if sep and value:
            out[key] = value
    return out


def json_object(text: str) -> dict[str, object] | None:
    """`text` as a JSON object, None when it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _inferred(text: str) -> str:
    doc = json_object(text)
    if doc is None and text.startswith("{"):
        raise InvalidArgument("authParams that open with { must be a JSON object")
    if doc is not None:
        return BASIC if "userId" in doc else TLS if _TLS_KEYS & doc.keys() else TOKEN
    if text.startswith(("token:", "file:")):
        return TOKEN
    return TLS if _TLS_KEYS & pulsar1_params(text).keys() else TOKEN


def _token(text: str) -> AuthParams:
    if text.startswith("token:"):
        token = text[len("token:"):]
    elif text.startswith("file:"):
        return AuthParams(TOKEN, token_file=_file_uri_path(text))
    elif (doc := json_object(text)) is not None:
        value = doc.get("token")
        if not isinstance(value, str):
            raise InvalidArgument('token authParams JSON is {"token": "<jwt>"}')
        token = value
    else:
        token = text
    if not token:
        raise InvalidArgument("the token in authParams is empty")
    return AuthParams(TOKEN, token=token)


def _file_uri_path(uri: str) -> str:
    """The path of a `file:///absolute/path` URI (Java: Paths.get(URI.create(uri)), which refuses a
    host, a relative path, a query and a fragment)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
        raise InvalidArgument("a token file in authParams is a file:///absolute/path URI")
    return urllib.parse.unquote(parts.path)


def _basic(text: str) -> AuthParams:
    doc = json_object(text)
    user = doc.get("userId") if doc is not None else None
    password = doc.get("password") if doc is not None else None
    if not isinstance(user, str) or not isinstance(password, str):
        raise InvalidArgument('basic authParams are {"userId": "...", "password": "..."}')
    if not user or ":" in user:
        raise InvalidArgument("the basic userId in authParams is empty or has a colon")
    return AuthParams(BASIC, user=user, password=password)


def _tls(text: str) -> AuthParams:
    doc = json_object(text)
    pairs = {k: v for k, v in doc.items() if isinstance(v, str)} if doc else pulsar1_params(text)
    missing = [key for key in ("tlsCertFile", "tlsKeyFile") if not pairs.get(key)]
    if missing:
        raise InvalidArgument("tls authParams name tlsCertFile and tlsKeyFile "
                              '(tlsCertFile:/c.pem,tlsKeyFile:/k.pem or {"tlsCertFile": ..., "tlsKeyFile": ...})',
                              missing=",".join(missing))
    return AuthParams(TLS, cert_file=pairs["tlsCertFile"], key_file=pairs["tlsKeyFile"])
