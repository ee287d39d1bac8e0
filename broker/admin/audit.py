"""The admin audit log: who changed what, who looked at messages, and who was refused.

What is recorded, for every admin request whose route exists:
- "change": any method but GET/HEAD (creating, deleting, policies, resets, skips, ...);
- "view": a GET (or HEAD) of a route that shows message contents (VIEW_SUFFIXES on a topic: peek,
  examinemessage, get-message-by-id, and the console's messages and tail);
- "denied": either of those refused with 401 or 403.
Plain reads (stats, lists, policies), `/metrics` and the console's static files are not recorded,
nor 3xx answers (a call redirected to a topic's owner is recorded by the owner, where it runs),
nor a console call another broker forwarded to this one (`broker.admin.forward`: marked, and made
with the cluster's own broker credentials): the broker that received it recorded it under the
caller's role.

A record: `{"time": ms, "role": str|null, "method", "path", "query", "status", "remote", "kind",
"broker": this broker's id (host:webPort)}`; `role` is null for a caller without an identity (401)
or the anonymous role "" (authentication off).

Where it is hooked: `on_response_prepare`, the application's signal sent as an answer's headers
go out, after every middleware ran. So the identity `broker.admin.access.access` put on the
request is known, refusals (raised in `access`, answered by `broker.admin.http.errors`) carry the
status the caller got, and a streamed view (a tail) is recorded when it starts, not when it ends.

Where it goes: a bounded ring on the broker (`console_audit_entries_max` records; the oldest go
first) that `GET /admin/v2/console/audit` reads, and one JSON line per record on the logger
`strata.audit` (INFO), for operators to ship elsewhere.

`GET /admin/v2/console/audit?limit=200&role=&kind=&local=true` (SUPERUSER): `{"entries": [records,
newest first, at most limit (1..AUDIT_LIMIT_MAX)], "unreachable": [ids of brokers that did not
answer]}`, filtered by `role` and `kind` when given (400 for an unknown kind or a bad limit).
Without `local=true` every live broker's records are gathered (`peer_call` with `local=true`, in
parallel, each bounded by PEER_TIMEOUT_S) and merged by time.

What must hold: the ring never holds more than `console_audit_entries_max` records; recording
never fails a request (it does no I/O but the log line); the gather never waits longer than
PEER_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from auth.api import Identity
from broker.admin import access, forward, lookup
from broker.admin.http import flag
from broker.cluster import peers
from broker.security.peer_auth import peer_headers
from common.config import Config
from common.errors import InvalidArgument

if TYPE_CHECKING:
    from broker.service import BrokerService

audit_log = logging.getLogger("strata.audit")

KINDS = ("view", "change", "denied")
AUDIT_LIMIT_DEFAULT = 200
AUDIT_LIMIT_MAX = 10_000
PEER_TIMEOUT_S = 2.0
# routes showing message contents, after a topic route `/admin/v2/{domain}/{tenant}/{ns}/{topic}`
VIEW_SUFFIXES = ("/subscription/{sub}/position/{count}", "/subscription/{sub}/position/{n}", "/examinemessage",
                 "/ledger/{ledger}/entry/{entry}", "/messages", "/tail")
VIEW_ROUTES = frozenset(f"/admin/v2/{domain}/{{tenant}}/{{ns}}/{{topic}}{suffix}"
                        for domain in lookup.LOOKUP_DOMAINS for suffix in VIEW_SUFFIXES)


@dataclass(frozen=True)
class AuditRecord:
    time_ms: int
    role: str | None        # None: no identity (a 401) or the anonymous role ""
    method: str
    path: str
    query: str              # the raw query string ('' : none)
    status: int
    remote: str | None      # the peer's address as aiohttp saw it
    kind: str               # one of KINDS
    broker: str             # the recording broker's id (host:webPort)

    def to_json(self) -> dict[str, object]:
        return {"time": self.time_ms, "role": self.role, "method": self.method, "path": self.path,
                "query": self.query, "status": self.status, "remote": self.remote, "kind": self.kind,
                "broker": self.broker}


class AuditLog:
    """The broker's last `entries_max` records, oldest first."""

    def __init__(self, entries_max: int) -> None:
        self._records: collections.deque[AuditRecord] = collections.deque(maxlen=entries_max)

    def add(self, record: AuditRecord) -> None:
        self._records.append(record)
        audit_log.info("%s", json.dumps(record.to_json(), separators=(",", ":")))

    def newest(self, limit: int, role: str = "", kind: str = "") -> list[AuditRecord]:
        """At most `limit` records, newest first, of `role` and `kind` when given."""
        out: list[AuditRecord] = []
        for record in reversed(self._records):
            if (not role or record.role == role) and (not kind or record.kind == kind):
                out.append(record)
                if len(out) >= limit:
                    break
        return out


AUDIT_LOG: web.AppKey[AuditLog] = web.AppKey("audit_log", AuditLog)


def kind_of(method: str, canonical: str, status: int) -> str | None:
    """The record kind of an answer (see the module docstring), or None: not recorded."""
    if 300 <= status < 400:
        return None
    reading = method in ("GET", "HEAD")
    if reading and canonical not in VIEW_ROUTES:
        return None
    if status in (401, 403):
        return "denied"
    return "view" if reading else "change"


def install(app: web.Application, config: Config) -> None:
    """Keep an audit log on `app` and record its answers (call before the app starts)."""
    app[AUDIT_LOG] = AuditLog(config.console_audit_entries_max)
    app.on_response_prepare.append(_on_response_prepare)


async def _on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    resource = request.match_info.route.resource
    if resource is None or access.SERVICE not in request.app:
        return                                   # no such route: nothing was done
    kind = kind_of(request.method, resource.canonical, response.status)
    if kind is None:
        return
    service = request.app[access.SERVICE]
    if request.headers.get(forward.FORWARDED_HEADER) and _from_a_broker(request, service.config):
        return
    identity: Identity | None = request.get(access.IDENTITY)
    request.app[AUDIT_LOG].add(AuditRecord(
        time_ms=service.clock.wall_ms(), role=(identity.role or None) if identity is not None else None,
        method=request.method, path=request.path, query=request.query_string, status=response.status,
        remote=request.remote, kind=kind, broker=service.registry.key))


def _from_a_broker(request: web.Request, config: Config) -> bool:
    """The call carries this cluster's broker credentials (or the cluster has none)."""
    expected = peer_headers(config).get("Authorization")
    return expected is None or request.headers.get("Authorization") == expected


def register(app: web.Application, service: BrokerService) -> None:
    if service.config.console_enabled:
        app.router.add_get("/admin/v2/console/audit", _AuditRoutes(service).audit)


def _query(request: web.Request) -> tuple[int, str, str]:
    """(limit, role, kind) of an audit query; InvalidArgument (400) when malformed."""
    raw = request.query.get("limit", str(AUDIT_LIMIT_DEFAULT))
    try:
        limit = int(raw)
    except ValueError:
        raise InvalidArgument(f"limit must be an integer, not {raw!r}") from None
    if not 1 <= limit <= AUDIT_LIMIT_MAX:
        raise InvalidArgument(f"limit must be 1..{AUDIT_LIMIT_MAX}, not {limit}")
    kind = request.query.get("kind", "")
    if kind and kind not in KINDS:
        raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return limit, request.query.get("role", ""), kind


class _AuditRoutes:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def audit(self, request: web.Request) -> web.Response:
        limit, role, kind = _query(request)
        mine = [r.to_json() for r in request.app[AUDIT_LOG].newest(limit, role, kind)]
        if flag(request, "local"):
            return web.json_response({"entries": mine, "unreachable": []})
        query = {"local": "true", "limit": str(limit), "role": role, "kind": kind}
        others = [b for key, b in self.service.registry.live().items() if key != self.service.registry.key]
        answers = await asyncio.gather(*(self._peer_entries(b.web_url, query) for b in others))
        unreachable = sorted(b.key for b, got in zip(others, answers) if got is None)
        merged = merge_newest([mine, *(got for got in answers if got is not None)], limit)
        return web.json_response({"entries": merged, "unreachable": unreachable})

    async def _peer_entries(self, web_url: str, query: dict[str, str]) -> list[dict] | None:
        """Another broker's local records; None when it did not answer in PEER_TIMEOUT_S."""
        try:
            status, body = await asyncio.wait_for(
                peers.peer_call(web_url, "GET", "/admin/v2/console/audit", query, config=self.service.config),
                PEER_TIMEOUT_S)
        except TimeoutError:
            return None
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("entries"), list):
            return None
        return [e for e in body["entries"] if isinstance(e, dict)]


def merge_newest(lists: Iterable[list[dict]], limit: int) -> list[dict]:
    """Records of several brokers, newest first, at most `limit`."""
    merged = [record for records in lists for record in records]
    merged.sort(key=_time_of, reverse=True)
    return merged[:limit]


def _time_of(record: dict) -> int:
    time_ms = record.get("time")
    return time_ms if isinstance(time_ms, int) else 0
