"""What every admin resource module shares: reading a request, and answering errors as Pulsar does.

Handlers raise typed errors (`common.errors`); `errors` (the outermost middleware) turns them into
`{"reason": ...}` with Pulsar's status codes:
- 400 a malformed name, body, unit or position (BadRequestBody, InvalidTopicName, InvalidArgument);
- 404 something that does not exist (NotFound, TopicNotFound, SubscriptionNotFound, CursorNotFound);
- 409 a conflict (AlreadyExists, OffloadInProgress "Offload already running", NotEmpty);
- 412 a precondition (NotAllowed, InvalidRetention, InvalidBundle, NoOwner, OffloadNotConfigured,
  and an InvalidArgument about a partition count);
- 401 no or wrong credentials (AuthenticationFailed), 403 a role without the permission
  (AuthorizationDenied), both answered before anything is looked up;
- 503 not ready (ServiceNotReady, ShuttingDown, LeaseLost, ManagedLedgerClosed,
  AuthenticationBusy: retry shortly);
- 500 any other StrataError, logged.
A handler that needs another status for one case raises `Refused(status, reason)`. aiohttp's
own refusals (no such route 404, method not allowed 405, body too large 413) get a reason too.

What must hold: a request body is read at most `broker_admin_body_bytes_max` (+1) bytes; a body
that is not JSON is a 400 and nothing is changed; every error answer is `{"reason": str}`.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from common.errors import (
    AlreadyExists,
    AuthenticationBusy,
    AuthenticationFailed,
    AuthorizationDenied,
    BadRequestBody,
    CursorNotFound,
    InvalidArgument,
    InvalidBundle,
    InvalidRetention,
    InvalidTopicName,
    LeaseLost,
    ManagedLedgerClosed,
    NoOwner,
    NotAllowed,
    NotEmpty,
    NotFound,
    OffloadInProgress,
    OffloadNotConfigured,
    ServiceNotReady,
    ShuttingDown,
    StrataError,
    SubscriptionNotFound,
    TopicNotFound,
)
from common.topic_names import TopicName, parse_namespace, parse_topic

log = logging.getLogger(__name__)

# The largest request body (`broker_admin_body_bytes_max`), kept on the application.
BODY_BYTES_MAX = web.AppKey("body_bytes_max", int)

# (error class, status), most specific first: the first match answers.
_STATUS_OF: tuple[tuple[type[StrataError], int], ...] = (
    (AuthenticationFailed, 401),
    (AuthorizationDenied, 403),
    (AuthenticationBusy, 503),      # too many slow (bcrypt) checks queued: retry shortly
    (InvalidTopicName, 400),
    (BadRequestBody, 400),
    (OffloadInProgress, 409),
    (AlreadyExists, 409),
    (NotEmpty, 409),
    (NotFound, 404),
    (TopicNotFound, 404),
    (SubscriptionNotFound, 404),
    (CursorNotFound, 404),
    (NotAllowed, 412),
    (InvalidRetention, 412),
    (InvalidBundle, 412),
    (NoOwner, 412),
    (OffloadNotConfigured, 412),
    (ServiceNotReady, 503),
    (ShuttingDown, 503),
    (LeaseLost, 503),
    (ManagedLedgerClosed, 503),
)


class Refused(Exception):
    """A refusal with a status of its own, for the few cases where Pulsar answers one the error
    classes do not map to (405 on a partitioned topic, 406 a partition count out of range, 422 a
    count not larger than the current one)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


def status_of(exc: StrataError) -> int:
    """The HTTP status Pulsar answers for `exc`."""
    for kind, status in _STATUS_OF:
        if isinstance(exc, kind):
            return status
    if isinstance(exc, InvalidArgument):
        return 412 if "partition" in str(exc) else 400
    return 500


def reason_of(exc: StrataError) -> str:
    if isinstance(exc, OffloadInProgress):
        return "Offload already running"
    rest_reason = getattr(exc, "rest_reason", None)   # the admin API's words for it (NamespaceNotFound)
    return rest_reason if isinstance(rest_reason, str) else str(exc)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:     # aiohttp's own: no such route (404), method (405), body size (413)
        if exc.status < 400:
            raise
        return error(exc.status, f"{exc.reason}: {request.method} {request.path}")
    except Refused as exc:
        return error(exc.status, exc.reason)
    except StrataError as exc:
        status = status_of(exc)
        if status == 500:
            log.warning("admin %s %s failed: %s", request.method, request.path, exc)
        return error(status, reason_of(exc))


async def body_json(request: web.Request) -> object:
    """The request body as JSON (None when empty); BadRequestBody (400) if it is not JSON or
    larger than the limit."""
    body_bytes_max = request.app[BODY_BYTES_MAX]
    raw = await request.content.read(body_bytes_max + 1)
    if len(raw) > body_bytes_max:
        raise BadRequestBody("request body too large", bytes_max=body_bytes_max)
    try:
        return json.loads(raw.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadRequestBody("request body is not JSON") from None


async def body_bool(request: web.Request, what: str) -> bool:
    value = await body_json(request)
    if not isinstance(value, bool):
        raise BadRequestBody(f"{what} body must be true or false")
    return value


def flag(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter (`?force=true`)."""
    return request.query.get(name, "true" if default else "false").lower() == "true"


def topic_of(request: web.Request) -> TopicName:
    """The topic of a `/admin/v2/persistent/{tenant}/{ns}/{topic}` route; InvalidTopicName (400)."""
    m = request.match_info
    return parse_topic(f"persistent://{m['tenant']}/{m['ns']}/{m['topic']}")


def namespace_of(request: web.Request) -> tuple[str, str]:
    """(tenant, namespace) of a `.../{tenant}/{ns}` route; InvalidTopicName (400) if malformed."""
    return parse_namespace(f"{request.match_info['tenant']}/{request.match_info['ns']}")
