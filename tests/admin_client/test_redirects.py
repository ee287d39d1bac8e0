"""admin_client's redirect rule, with a real redirecting server in front of the real secured
standalone (conftest.py): a 307 is followed for every method with the body and the credentials
(the broker would answer 401 without them), https to https keeps them, https to plain http with
credentials is refused before anything is sent there, and `follow_redirects=False` returns the 307.
(The bound on hops is checked in tests/cli/test_admin_cluster_cmd.py.)"""

from __future__ import annotations

import pytest

from admin_client import AdminClient, Credentials
from common.errors import AdminRedirectError, AdminRedirectRefused, AdminUnauthorized
from tests.admin_client.conftest import Secured
from tests.support.security import SUPERUSER


def _unique(name: str) -> str:
    _unique.n = getattr(_unique, "n", 0) + 1          # type: ignore[attr-defined]
    return f"{name}-{_unique.n}"                       # type: ignore[attr-defined]


def test_a_307_is_followed_for_every_method_with_body_and_credentials(secured: Secured, redirector) -> None:
    hop = redirector(secured.sa.admin_url)
    token = secured.kit.token(SUPERUSER)
    via = AdminClient(hop.url, credentials=Credentials.build(token=token))
    ns = f"public/{_unique('redirected')}"
    retention = {"retentionTimeInMinutes": 5, "retentionSizeInMB": 7}
    assert via.call("PUT", f"/admin/v2/namespaces/{ns}") is None
    assert via.call("POST", f"/admin/v2/namespaces/{ns}/retention", retention) is None
    direct = AdminClient(secured.sa.admin_url, credentials=Credentials.build(token=token))
    assert direct.call("GET", f"/admin/v2/namespaces/{ns}/retention") == retention     # the body arrived
    assert via.call("DELETE", f"/admin/v2/namespaces/{ns}") is None
    assert ns not in direct.call("GET", "/admin/v2/namespaces/public")
    assert [(m, auth) for m, _, auth in hop.hits] == [(m, f"Bearer {token}") for m in ("PUT", "POST", "DELETE")]


def test_without_following_the_307_itself_is_the_answer(secured: Secured, redirector) -> None:
    hop = redirector(secured.sa.admin_url)
    answer = AdminClient(hop.url).request("GET", "/admin/v2/clusters", follow_redirects=False)
    assert answer.status == 307
    assert answer.header("location") == secured.sa.admin_url + "/admin/v2/clusters"


def test_https_to_https_keeps_the_credentials(secured: Secured, redirector) -> None:
    hop = redirector(secured.tls_url, tls=True)
    trust = str(secured.kit.ca_file)
    admin = AdminClient(hop.url, credentials=Credentials.build(token=secured.kit.token(SUPERUSER), trust_file=trust))
    assert "public" in admin.call("GET", "/admin/v2/tenants")
    with pytest.raises(AdminUnauthorized):            # the same hop without credentials: the broker refuses
        AdminClient(hop.url, credentials=Credentials.build(trust_file=trust)).call("GET", "/admin/v2/tenants")


def test_https_to_plain_http_with_credentials_is_refused(secured: Secured, redirector) -> None:
    hop = redirector(secured.sa.admin_url, tls=True)            # an https server sending to http://
    trust = str(secured.kit.ca_file)
    with_token = AdminClient(hop.url, credentials=Credentials.build(token=secured.kit.token(SUPERUSER),
                                                                   trust_file=trust))
    with pytest.raises(AdminRedirectRefused) as raised:
        with_token.call("PUT", "/admin/v2/tenants/never-created", {"adminRoles": [], "allowedClusters": []})
    assert raised.value.status == 307
    assert raised.value.reason == ("refusing to follow a redirect from https to plain http with credentials "
                                   f"({secured.sa.admin_url}/admin/v2/tenants/never-created)")
    assert isinstance(raised.value, AdminRedirectError)
    superuser = AdminClient(secured.sa.admin_url, credentials=Credentials.build(token=secured.kit.token(SUPERUSER)))
    assert "never-created" not in superuser.call("GET", "/admin/v2/tenants")      # nothing reached the broker
    # with nothing secret to carry, the hop is followed: the broker itself then asks for credentials
    with pytest.raises(AdminUnauthorized):
        AdminClient(hop.url, credentials=Credentials.build(trust_file=trust)).call("GET", "/admin/v2/tenants")

