"""Create the tenant and namespace a test uses before it uses them (a namespace is an entity: a
topic of one that was never created is refused, as in Pulsar).

    ensure_namespace(admin_url, "acme/orders")                     # tenant and namespace, if absent
    ensure_namespace(admin_url, ns, {"bundles": {"numBundles": 16}})
    ensure_topic_namespace(admin_url, "persistent://acme/orders/paid")

Both are idempotent (an existing tenant or namespace is left as it is) and bounded by
HTTP_TIMEOUT_S per call (tests.support.admin_http, on admin_client); any other answer than
204/409 fails the test with the broker's reason.
"""

from __future__ import annotations

from tests.support.admin_http import call

HTTP_TIMEOUT_S = 30.0


def ensure_namespace(admin_url: str, namespace: str, body: object = None) -> None:
    """The tenant (allowed on this cluster) and `tenant/ns` exist (created with `body` if absent)."""
    base = admin_url.rstrip("/") + "/admin/v2"
    tenant = namespace.split("/", 1)[0]
    status, clusters = call("GET", f"{base}/clusters", timeout_s=HTTP_TIMEOUT_S)
    assert status == 200 and isinstance(clusters, list), (status, clusters)
    status, answer = call("PUT", f"{base}/tenants/{tenant}", {"adminRoles": [], "allowedClusters": clusters},
                          timeout_s=HTTP_TIMEOUT_S)
    assert status in (204, 409), (status, answer)
    status, answer = call("PUT", f"{base}/namespaces/{namespace}", body, timeout_s=HTTP_TIMEOUT_S)
    assert status in (204, 409), (status, answer)


def ensure_topic_namespace(admin_url: str, topic: str, body: object = None) -> None:
    """`ensure_namespace` for the namespace of `persistent://tenant/ns/local`."""
    tenant, ns = topic.split("://", 1)[-1].split("/")[:2]
    ensure_namespace(admin_url, f"{tenant}/{ns}", body)
