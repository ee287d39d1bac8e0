"""`AdminClient`: one cluster's admin REST API, reached through any of its brokers.

    admin = AdminClient("https://broker-1:8443", credentials=Credentials.build(token=jwt, trust_file="ca.pem"))
    admin.call("PUT", "/admin/v2/tenants/acme", {"adminRoles": [], "allowedClusters": ["standalone"]})
    stats = admin.call("GET", "/admin/v2/persistent/acme/orders/paid/stats")
    payload, headers = admin.call_raw("GET", ".../subscription/s/position/1")   # not JSON: peek
    text = admin.get_text("/metrics")

Paths are the broker's (`/admin/v2/...`, `/lookup/v2/...`, `/metrics`), appended to the admin
URL; `query` is URL-encoded onto them. Every call goes through `admin_client.transport.request`:
the broker a topic or bundle belongs to answers through a 307, credentials go with every hop
(never from https to plain http), and a failure is a typed AdminError (AdminNotFound,
AdminConflict, AdminUnauthorized, AdminUnreachable, ...).

What must hold: a client holds no connection and no mutable state after construction, so one
instance may be shared by threads (`strata top` asks every broker at once).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from admin_client.credentials import NO_CREDENTIALS, Credentials
from admin_client.transport import ANSWER_BYTES_MAX, TIMEOUT_S, Answer, request


class AdminClient:
    """The admin API at `admin_url`, called with `credentials`; each call bounded by `timeout_s`
    and `answer_bytes_max` (admin_client.transport)."""

    def __init__(self, admin_url: str, *, credentials: Credentials = NO_CREDENTIALS,
                 timeout_s: float = TIMEOUT_S, answer_bytes_max: int = ANSWER_BYTES_MAX) -> None:
        self.base_url = admin_url.rstrip("/")
        self.credentials = credentials
        self.timeout_s = timeout_s
        self.answer_bytes_max = answer_bytes_max

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        """The full URL of `path` (with `query` encoded; appended with & when the path has a ?)."""
        if not query:
            return self.base_url + path
        return self.base_url + path + ("&" if "?" in path else "?") + urllib.parse.urlencode(query)

    def request(self, method: str, path: str, body: object = None, *, query: Mapping[str, str] | None = None,
                raw_body: bytes | None = None, headers: Mapping[str, str] | None = None,
                follow_redirects: bool = True, read_body: bool = True) -> Answer:
        """One call, the whole Answer (status, headers, body); AdminError on a failure."""
        return request(method, self.url(path, query), body, raw_body=raw_body, credentials=self.credentials,
                       headers=headers, timeout_s=self.timeout_s, answer_bytes_max=self.answer_bytes_max,
                       follow_redirects=follow_redirects, read_body=read_body)

    def call(self, method: str, path: str, body: object = None, query: Mapping[str, str] | None = None) -> Any:
        """One call; its decoded JSON answer, None for an empty one (AdminBadAnswer if not JSON)."""
        return self.request(method, path, body, query=query).json()

    def call_raw(self, method: str, path: str, body: object = None,
                 query: Mapping[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
        """One call whose answer is not JSON (a message's payload): (body, headers as sent)."""
        answer = self.request(method, path, body, query=query)
        return answer.body, answer.headers

    def get_text(self, path: str, query: Mapping[str, str] | None = None) -> str:
        """A GET answered in plain text (`/metrics`)."""
        return self.request("GET", path, query=query).text()
