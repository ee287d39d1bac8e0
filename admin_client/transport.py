"""One exchange with the admin REST API: redirects, credentials, a size cap, bounded waits, typed errors.

    answer = request("PUT", url, {"bundles": {"numBundles": 8}}, credentials=creds)
    answer.status, answer.headers, answer.body, answer.json()

How: urllib with one redirect handler. A 307/308 (another broker owns the topic or bundle) is sent
again, same method, body and headers, to its Location, at most REDIRECTS_MAX hops, for every
method (urllib alone follows only GET and HEAD); 301-303 are followed as urllib does. A redirect
from https:// to a plain http:// Location is refused (AdminRedirectRefused) when the request
carries an Authorization header, so a secret never travels in clear; the cluster's own
https-to-https hops keep it (they name brokers of the same cluster). With
`follow_redirects=False` a 3xx is returned as it came.

Errors: a 2xx (or an unfollowed 3xx) is an Answer; every failure is an AdminError
(common/errors.py):
- an error status: the class of its status (`error_class`: AdminNotFound for 404, ...), with the
  status, Pulsar's `reason`, the body (up to ERROR_BODY_BYTES_MAX), the headers and the URL;
- no answer (refused connection, TLS failure, a broken or silent connection): AdminUnreachable,
  AdminTimedOut when a wait ran out; `cause` is urllib's underlying exception;
- a body larger than `answer_bytes_max`: AdminAnswerTooLarge.
A URL that is not one (no scheme) is a ValueError, as urllib raises it: an argument error.

What must hold: every socket wait (connect, headers, each read) is bounded by `timeout_s`, and
reading a body stops at the call's deadline (`timeout_s` after it started), however slowly the
broker sends it; at most `answer_bytes_max` bytes are read (a Content-Length above it is refused
before reading); the caller's headers override the defaults but never drop the credentials.
"""

from __future__ import annotations

import functools
import http.client
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from admin_client.credentials import NO_CREDENTIALS, Credentials
from common.errors import (
    AdminAnswerTooLarge,
    AdminBadAnswer,
    AdminBadRequest,
    AdminConflict,
    AdminForbidden,
    AdminHttpError,
    AdminNotFound,
    AdminPreconditionFailed,
    AdminRedirectError,
    AdminRedirectRefused,
    AdminServerError,
    AdminTimedOut,
    AdminUnauthorized,
    AdminUnreachable,
)
from common.redact import redact_url

TIMEOUT_S = 30.0                       # each socket wait, and the body's read, of one call
REDIRECTS_MAX = 5                      # hops followed before AdminRedirectError
ANSWER_BYTES_MAX = 256 * 1024 * 1024   # the largest answer read (broker-stats of a big cluster fit)
ERROR_BODY_BYTES_MAX = 64 * 1024       # what is kept of an error answer's body (Pulsar's {"reason"})
_CHUNK_BYTES = 64 * 1024               # a body is read in pieces this large, the deadline checked between
_ERROR_CLASSES: dict[int, type[AdminHttpError]] = {
    400: AdminBadRequest, 401: AdminUnauthorized, 403: AdminForbidden, 404: AdminNotFound,
    409: AdminConflict, 412: AdminPreconditionFailed}


@dataclass(frozen=True)
class Answer:
    """A 2xx answer (or a 3xx, when redirects are not followed)."""

    status: int
    headers: dict[str, str]     # names as the broker sent them (`header` looks one up by any case)
    body: bytes                 # b"" when the call did not read it (read_body=False)
    url: str                    # the URL that answered, after redirects

    def header(self, name: str, default: str = "") -> str:
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), default)

    def json(self) -> Any:
        """The body's JSON (None for an empty body); AdminBadAnswer when it is not JSON. The
        message is the decoder's (what `strata admin` prints)."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise AdminBadAnswer(str(exc), url=redact_url(self.url), status=self.status) from None

    def text(self) -> str:
        """The body as UTF-8 text (/metrics, plain answers); undecodable bytes replaced."""
        return self.body.decode(errors="replace")


def error_class(status: int) -> type[AdminHttpError]:
    """The AdminHttpError subclass of an HTTP status."""
    if status in _ERROR_CLASSES:
        return _ERROR_CLASSES[status]
    if status >= 500:
        return AdminServerError
    if 300 <= status < 400:
        return AdminRedirectError
    return AdminHttpError


def request(method: str, url: str, body: object = None, *, raw_body: bytes | None = None,
            credentials: Credentials = NO_CREDENTIALS, headers: Mapping[str, str] | None = None,
            timeout_s: float = TIMEOUT_S, answer_bytes_max: int = ANSWER_BYTES_MAX,
            follow_redirects: bool = True, read_body: bool = True) -> Answer:
    """One call: `body` sent as JSON (or `raw_body` as given), Content-Type application/json unless
    `headers` say otherwise; the credentials' Authorization header and https context. The Answer,
    or an AdminError (see the module docstring)."""
    data = raw_body if raw_body is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json", **(headers or {}), **credentials.headers}
    req = urllib.request.Request(url, data=data, method=method, headers=sent)
    deadline = time.monotonic() + timeout_s
    try:
        with _opener(credentials.ssl_context, follow_redirects).open(req, timeout=timeout_s) as resp:
            reads = read_body and method.upper() != "HEAD"    # a HEAD's Content-Length is the GET's
            raw = _read(resp, answer_bytes_max, deadline, url) if reads else b""
            return Answer(resp.status, dict(resp.headers.items()), raw, resp.geturl())
    except urllib.error.HTTPError as exc:
        if not follow_redirects and 300 <= exc.code < 400 and not isinstance(exc, _DowngradeRefused):
            return Answer(exc.code, dict(exc.headers.items()), _error_body(exc), exc.geturl() or url)
        raise _http_error(exc, url) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise _unreachable(exc, url) from None


def request_json(method: str, url: str, body: object = None, **kwargs: Any) -> Any:
    """`request(...)`'s JSON answer (None for an empty one); keyword arguments as `request`'s."""
    return request(method, url, body, **kwargs).json()


class _DowngradeRefused(urllib.error.HTTPError):
    """Raised inside urllib by the redirect handler: becomes AdminRedirectRefused."""


class _FollowEveryMethod(urllib.request.HTTPRedirectHandler):
    """307/308 followed for every method with the same body and headers; 301-303 as urllib does;
    never https -> http with an Authorization header."""

    max_redirections = REDIRECTS_MAX
    max_repeats = REDIRECTS_MAX

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if _scheme(req.full_url) == "https" and _scheme(newurl) != "https" and req.has_header("Authorization"):
            raise _DowngradeRefused(newurl, code, "refusing to follow a redirect from https to plain http "
                                    f"with credentials ({newurl})", headers, fp)
        if code not in (307, 308):
            return super().redirect_request(req, fp, code, msg, headers, newurl)
        return urllib.request.Request(newurl, data=req.data, method=req.get_method(),
                                      headers=dict(req.headers), origin_req_host=req.origin_req_host,
                                      unverifiable=True)


class _FollowNone(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None     # the 3xx reaches `request` as an HTTPError, and is returned as an Answer


def _scheme(url: str) -> str:
    return urllib.parse.urlsplit(url).scheme.lower()


@functools.lru_cache(maxsize=64)
def _opener(context: ssl.SSLContext | None, follow_redirects: bool) -> urllib.request.OpenerDirector:
    """One opener per (https context, redirect rule): built once, shared by every call."""
    handlers: list[urllib.request.BaseHandler] = [_FollowEveryMethod() if follow_redirects else _FollowNone()]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def _read(resp: Any, bytes_max: int, deadline: float, url: str) -> bytes:
    """The body, at most `bytes_max` bytes, read before `deadline`."""
    declared = resp.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > bytes_max:
        raise AdminAnswerTooLarge("answer larger than the client reads", url=redact_url(url),
                                  bytes_max=bytes_max, content_length=int(declared))
    chunks: list[bytes] = []
    size = 0
    while chunk := resp.read(min(_CHUNK_BYTES, bytes_max + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > bytes_max:
            raise AdminAnswerTooLarge("answer larger than the client reads", url=redact_url(url),
                                      bytes_max=bytes_max)
        if time.monotonic() > deadline:
            raise AdminTimedOut("the answer did not arrive in time", url=redact_url(url), read_bytes=size)
    return b"".join(chunks)


def _error_body(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read(ERROR_BODY_BYTES_MAX) or b""
    except (OSError, http.client.HTTPException):
        return b""


def _http_error(exc: urllib.error.HTTPError, url: str) -> AdminHttpError:
    """The typed error of an error status; `reason` is Pulsar's `{"reason"}` when the body has one."""
    body = _error_body(exc)
    if isinstance(exc, _DowngradeRefused):
        return AdminRedirectRefused(status=exc.code, reason=str(exc.reason), body=body,
                                    headers=dict((exc.headers or {}).items()), url=redact_url(exc.geturl() or url))
    reason = str(exc.reason)
    try:
        doc = json.loads(body or b"{}")
        if isinstance(doc, dict) and "reason" in doc:
            reason = str(doc["reason"])
    except ValueError:
        pass
    return error_class(exc.code)(status=exc.code, reason=reason, body=body,
                                 headers=dict((exc.headers or {}).items()), url=redact_url(exc.geturl() or url))


def _unreachable(exc: BaseException, url: str) -> AdminUnreachable:
    """No answer: AdminTimedOut when a wait ran out, else AdminUnreachable. The message is urllib's
    (what `strata admin` prints), the URL a detail."""
    cause = exc.reason if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException) else exc
    kind = AdminTimedOut if isinstance(cause, TimeoutError) else AdminUnreachable
    return kind(str(exc), cause=cause, url=redact_url(url))
