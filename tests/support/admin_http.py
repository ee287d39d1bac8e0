"""The admin REST API as tests call it: one JSON call, and a topic's GET that must answer 200.

    status, body = admin_call(sa.admin_url, "POST", "/admin/v2/namespaces/t/ns/messageTTL", 60)
    stats = topic_get(sa.admin_url, "persistent://public/default/t", "stats")

What must hold: every call is bounded by HTTP_TIMEOUT_S; an error status is returned with its
decoded `{"reason"}` body, never raised; `topic_get` fails the test (naming what was asked) on
anything but 200.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

HTTP_TIMEOUT_S = 20.0


def admin_call(admin_url: str, method: str, path: str, body: object = None) -> tuple[int, Any]:
    """(status, decoded JSON body or None) of one admin call."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(admin_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def topic_get(admin_url: str, topic: str, what: str) -> dict:
    """GET `/admin/v2/persistent/<topic>/<what>` (stats, internalStats, ...), which must answer 200."""
    code, body = admin_call(admin_url, "GET", "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/" + what)
    assert code == 200, (what, code, body)
    return body
