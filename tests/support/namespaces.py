"""Create the tenant and namespace a test uses before it uses them (a namespace is an entity: a
topic of one that was never created is refused, as in Pulsar).

    ensure_namespace(admin_url, "acme/orders")                     # tenant and namespace, if absent
    ensure_namespace(admin_url, ns, {"bundles": {"numBundles": 16}})
    ensure_topic_namespace(admin_url, "persistent://acme/orders/paid")

Both are idempotent (an existing tenant or namespace is left as it is) and bounded by
HTTP_TIMEOUT_S per call; any other answer than 204/409 fails the test with the broker's reason.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

HTTP_TIMEOUT_S = 30.0


def _call(url: str, method: str, body: object = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, (json.loads(raw) if raw else None)


def ensure_namespace(admin_url: str, namespace: str, body: object = None) -> None:
    """The tenant (allowed on this cluster) and `tenant/ns` exist (created with `body` if absent)."""
    base = admin_url.rstrip("/") + "/admin/v2"
    tenant = namespace.split("/", 1)[0]
    status, clusters = _call(f"{base}/clusters", "GET")
    assert status == 200 and isinstance(clusters, list), (status, clusters)
    status, answer = _call(f"{base}/tenants/{tenant}", "PUT", {"adminRoles": [], "allowedClusters": clusters})
    assert status in (204, 409), (status, answer)
    status, answer = _call(f"{base}/namespaces/{namespace}", "PUT", body)
    assert status in (204, 409), (status, answer)


def ensure_topic_namespace(admin_url: str, topic: str, body: object = None) -> None:
    """`ensure_namespace` for the namespace of `persistent://tenant/ns/local`."""
    tenant, ns = topic.split("://", 1)[-1].split("/")[:2]
    ensure_namespace(admin_url, f"{tenant}/{ns}", body)
