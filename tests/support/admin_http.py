"""The admin REST API as tests call it, on the product's own client (admin_client): an error status
is an answer to assert on, not an exception.

    status, body = admin_call(sa.admin_url, "POST", "/admin/v2/namespaces/t/ns/messageTTL", 60)
    status, body = call("GET", url, token=jwt)             # a whole URL; the body decoded
    answer = exchange("PUT", url, {"x": 1}, follow=False)  # status, headers, body, url (a 307 as it came)
    stats = topic_get(sa.admin_url, "persistent://public/default/t", "stats")
    text = metrics(sa.admin_url)                           # GET /metrics, which must answer 200

Redirects are followed as `strata admin` follows them (307/308, every method) unless `follow=False`;
`token=` sends `Authorization: Bearer`, `credentials=` anything admin_client.Credentials holds (a
client certificate, the CA of an https:// broker). A broker that cannot be reached raises
AdminUnreachable: a test that expects an answer has failed.

What must hold: every call is bounded by HTTP_TIMEOUT_S; an error status comes back with the
broker's body (`{"reason"}`), never raised; `topic_get` and `metrics` fail the test (naming what
was asked) on anything but 200.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from admin_client import NO_CREDENTIALS, Answer, Credentials, request
from common.errors import AdminHttpError

HTTP_TIMEOUT_S = 20.0


def exchange(method: str, url: str, body: object = None, *, raw: bytes | None = None, token: str | None = None,
             credentials: Credentials = NO_CREDENTIALS, headers: Mapping[str, str] | None = None,
             follow: bool = True, timeout_s: float = HTTP_TIMEOUT_S) -> Answer:
    """One call (`body` as JSON, or `raw` bytes as given); the Answer, an error status included."""
    if token is not None:
        credentials = Credentials({"Authorization": f"Bearer {token}"}, credentials.ssl_context)
    try:
        return request(method, url, body, raw_body=raw, credentials=credentials, headers=headers,
                       timeout_s=timeout_s, follow_redirects=follow)
    except AdminHttpError as exc:
        return Answer(exc.status, exc.headers, exc.body, exc.url)


def decoded(answer: Answer) -> Any:
    """The body as JSON, else as text; None when empty."""
    if not answer.body:
        return None
    try:
        return json.loads(answer.body)
    except ValueError:
        return answer.text()


def call(method: str, url: str, body: object = None, **kwargs: Any) -> tuple[int, Any]:
    """(status, decoded body) of one call to a whole URL; keyword arguments as `exchange`'s."""
    answer = exchange(method, url, body, **kwargs)
    return answer.status, decoded(answer)


def admin_call(admin_url: str, method: str, path: str, body: object = None, **kwargs: Any) -> tuple[int, Any]:
    """(status, decoded body) of one admin call to `admin_url` + `path`."""
    return call(method, admin_url.rstrip("/") + path, body, **kwargs)


def topic_get(admin_url: str, topic: str, what: str, **kwargs: Any) -> dict:
    """GET `/admin/v2/persistent/<topic>/<what>` (stats, internalStats, ...), which must answer 200."""
    code, body = admin_call(admin_url, "GET", "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/" + what,
                            **kwargs)
    assert code == 200, (what, code, body)
    return body


def metrics(url: str, **kwargs: Any) -> str:
    """The Prometheus text of `url` + /metrics (a broker's admin URL or a bookie's http://host:port)."""
    answer = exchange("GET", url.rstrip("/") + "/metrics", **kwargs)
    assert answer.status == 200, (url, answer.status, answer.body[:500])
    return answer.text()
